#!/usr/bin/env bash
# What a `simple` call costs the server over gRPC against over HTTP, with one load generator for
# both: h2load (apt-get install nghttp2-client) drives ModelInfer (gRPC) and the binary-tensor
# HTTP/1.1 infer (`--h1`) on C connections, one call at a time on each, in alternating windows on
# one server. bench/grpc.mjs measures with `triode perf`, whose gRPC client takes more of its core
# than the server does (bench/RESULTS.md), so it tells the client's limit as much as the server's;
# h2load takes a fraction of a core here. Prints, per window, calls a second, the server's
# main-thread and process CPU a call, and requests an execution (from its statistics); then medians.
# Needs `npm run build`, taskset and 2 cpus: the server on cpu 1, h2load on cpu 0 (8 or more cpus:
# server on 0-1, h2load with 4 threads on 2-5).
# Run by hand:
#   bash bench/grpc-server-cost.sh [--pairs 6] [--seconds 3] [-c 16] [-- 'SERVER COMMAND with PORT and GRPC_PORT']
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/simple-load.sh
PAIRS=6 SECONDS_=3 C=16
while [ $# -gt 0 ]; do
  case $1 in
    --pairs) PAIRS=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    -c) C=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
CMD=${1:-node --initial-old-space-size=128 packages/cli/bin/triode.js serve --model-repository model_repository --model-control-mode explicit --load-model simple --http-port PORT --grpc-port GRPC_PORT --http-address 127.0.0.1 --grpc-address 127.0.0.1 --allow-metrics=false --log-info=false}
load_setup h2load 'apt-get install nghttp2-client'
simple_grpc_body "$work"
if [ "$(nproc)" -ge 8 ]; then SERVER_CPUS=0-1 LOAD_CPUS=2-5 THREADS=4; else SERVER_CPUS=1 LOAD_CPUS=0 THREADS=1; fi
[ "$C" -lt "$THREADS" ] && THREADS=$C
PORT=$(free_port); GRPC=$(free_port)
CMD=${CMD//GRPC_PORT/$GRPC}
# shellcheck disable=SC2086 # a word list
taskset -c "$SERVER_CPUS" ${CMD//PORT/$PORT} > "$work/server.log" 2>&1 &
pid=$!
for p in "$PORT" "$GRPC"; do
  for _ in $(seq 1 300); do (echo > "/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.2; done
done
# "calls executions" from simple's statistics.
counts() { node -e 'fetch(`http://127.0.0.1:${process.argv[1]}/v2/models/simple/stats`).then((r) => r.json()).then((j) => { const m = j.model_stats[0]; console.log(m.inference_stats.success.count, m.execution_count); })' "$PORT"; }
# window PROTOCOL SECONDS: "calls/s main-µs/call process-µs/call requests/execution"
window() {
  local url args m0 o0 m1 o1 n0 e0 n1 e1
  if [ "$1" = grpc ]; then
    url="http://127.0.0.1:$GRPC/inference.GRPCInferenceService/ModelInfer"; args=(-d "$work/simple.grpc" -H 'content-type: application/grpc' -H 'te: trailers')
  else
    url="http://127.0.0.1:$PORT/v2/models/simple/infer"; args=(--h1 -d "$work/simple.bin" -H "Inference-Header-Content-Length: $HEADER_LEN" -H 'content-type: application/octet-stream')
  fi
  read -r n0 e0 <<< "$(counts)"; read -r m0 o0 <<< "$(cpu_ms "$pid")"
  taskset -c "$LOAD_CPUS" h2load -t "$THREADS" -c "$C" -m 1 -D "$2" "${args[@]}" "$url" > "$work/h2load.out"
  read -r m1 o1 <<< "$(cpu_ms "$pid")"; read -r n1 e1 <<< "$(counts)"
  grep -q ' 0 failed, 0 errored' "$work/h2load.out" || { echo "h2load saw failures: $(grep '^requests:' "$work/h2load.out")" >&2; exit 1; }
  node -e 'const [n, e, m, o, s] = process.argv.slice(1).map(Number); console.log((n / s).toFixed(0), (m * 1000 / n).toFixed(1), ((m + o) * 1000 / n).toFixed(1), (n / e).toFixed(2))' "$((n1 - n0))" "$((e1 - e0))" "$((m1 - m0))" "$((o1 - o0))" "$2"
}
# Warm-up: JIT, and `execution_thread: auto` settling.
window http 3 > /dev/null; window grpc 3 > /dev/null
echo "Machine: $(nproc) cpus; server on cpus $SERVER_CPUS, h2load ($THREADS threads) on $LOAD_CPUS; simple, c=$C connections, one call at a time on each; $PAIRS pairs of ${SECONDS_} s windows."
echo "| pair | HTTP calls/s | HTTP main-thread CPU µs/call | HTTP process CPU µs/call | HTTP requests/execution | gRPC calls/s | gRPC main-thread CPU µs/call | gRPC process CPU µs/call | gRPC requests/execution | gRPC/HTTP calls/s | gRPC/HTTP main-thread CPU a call |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for i in $(seq 1 "$PAIRS"); do
  read -r hr hm hp he <<< "$(window http "$SECONDS_")"
  read -r gr gm gp ge <<< "$(window grpc "$SECONDS_")"
  echo "| $i | $hr | $hm | $hp | $he | $gr | $gm | $gp | $ge | $(node -e "console.log(($gr / $hr).toFixed(3))") | $(node -e "console.log(($gm / $hm).toFixed(3))") |"
done | tee "$work/rows"
node -e '
const rows = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((r) => r.split("|").map((s) => s.trim()));
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
const col = (i) => med(rows.map((r) => Number(r[i])));
console.log(`\nMedians: HTTP ${col(2).toFixed(0)} calls/s, ${col(3).toFixed(1)} µs main-thread CPU a call, ${col(5).toFixed(2)} requests an execution; gRPC ${col(6).toFixed(0)} calls/s, ${col(7).toFixed(1)} µs, ${col(9).toFixed(2)} requests an execution; gRPC/HTTP calls/s ${col(10).toFixed(3)}, main-thread CPU a call ${col(11).toFixed(3)}`);
' "$work/rows"
