#!/usr/bin/env bash
# Two servers up at once, measured in alternating wrk windows (A, B, A, B, ...) on `simple`: each
# pair's ratio of requests a second and of main-thread CPU a request, and their medians. Both
# servers stay up, so no pair pays a start, a warm-up or a model load, and the machine's drift lands
# on both sides of each pair: on this project's noisy VM it tells apart what back-to-back runs of
# bench/http.mjs cannot (a flag, a build, another server). Needs wrk and 2 cpus; the servers run on
# cpu 1, wrk on cpu 0 (8 or more cpus: the servers on cpus 0-1, wrk on cpus 2-5, the issue's layout).
# Run by hand:
#   bash bench/pair-windows.sh [--pairs 8] [--seconds 2] [-c 1] [--json] [--model M --body FILE [--header-len N]]
#     [--server-cpus LIST] [--wrk-cpus LIST] -- 'COMMAND A' 'COMMAND B'
# Each command is one shell word list with PORT where its port goes, e.g.
#   bash bench/pair-windows.sh -c 1 --json -- \
#     'node --initial-old-space-size=128 packages/cli/bin/triode.js serve --model-repository model_repository
#        --model-control-mode explicit --load-model simple --http-port PORT --http-address 127.0.0.1
#        --allow-grpc=false --allow-metrics=false --log-info=false' \
#     'node bench/naive-server.mjs PORT model_repository'
# --json sends simple's JSON request (the naive server takes JSON only), else its binary one.
# --grpc drives gRPC ModelInfer instead, with h2load (apt-get install nghttp2-client) on C
# connections, one call at a time on each (as C tritonclient gRPC clients); each command then has
# GRPC_PORT where its gRPC port goes (and still PORT, whose HTTP port the script only waits for).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/simple-load.sh
PAIRS=8 SECONDS_=2 C=1 JSON=0 GRPC=0 MODEL=simple BODY='' HL='' SERVER_CPUS='' WRK_CPUS=''
while [ $# -gt 0 ]; do
  case $1 in
    --pairs) PAIRS=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    -c) C=$2; shift 2 ;;
    --json) JSON=1; shift ;;
    --grpc) GRPC=1; shift ;;
    --model) MODEL=$2; shift 2 ;;
    --body) BODY=$2; shift 2 ;;
    --header-len) HL=$2; shift 2 ;;
    --server-cpus) SERVER_CPUS=$2; shift 2 ;;
    --wrk-cpus) WRK_CPUS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 2 ] || { echo "usage: $0 [options] -- 'COMMAND A' 'COMMAND B'" >&2; exit 2; }
if [ "$GRPC" = 1 ]; then load_setup h2load 'apt-get install nghttp2-client'; else load_setup; fi
if [ "$JSON" = 1 ]; then
  simple_json_body "$work"
fi
if [ "$GRPC" = 1 ]; then simple_grpc_body "$work"; fi
# Another model's request: --body (and --header-len for binary tensors).
if [ -n "$BODY" ]; then export BODY_FILE=$BODY HEADER_LEN=$HL; fi
if [ "$(nproc)" -ge 8 ]; then : "${SERVER_CPUS:=0-1}" "${WRK_CPUS:=2-5}"; WRK_THREADS=4; else : "${SERVER_CPUS:=1}" "${WRK_CPUS:=0}"; WRK_THREADS=1; fi
[ "$C" -lt "$WRK_THREADS" ] && WRK_THREADS=$C
PORT_A=$(free_port); PORT_B=$(free_port); GRPC_A=$(free_port); GRPC_B=$(free_port)
CMD_A=${1//GRPC_PORT/$GRPC_A}; CMD_B=${2//GRPC_PORT/$GRPC_B}
# shellcheck disable=SC2086 # each command is a word list
taskset -c "$SERVER_CPUS" ${CMD_A//PORT/$PORT_A} > "$work/a.log" 2>&1 &
PID_A=$!
# shellcheck disable=SC2086
taskset -c "$SERVER_CPUS" ${CMD_B//PORT/$PORT_B} > "$work/b.log" 2>&1 &
PID_B=$!
pid="$PID_A $PID_B"
trap 'st=$?; kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"; exit $st' EXIT
ready() { for _ in $(seq 1 300); do (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.2; done; echo "a server did not listen on $1: $(tail -3 "$work"/*.log)" >&2; exit 1; }
ready "$PORT_A"; ready "$PORT_B"
if [ "$GRPC" = 1 ]; then ready "$GRPC_A"; ready "$GRPC_B"; fi
window() {
  if [ "$GRPC" = 1 ]; then
    local g=$GRPC_A; [ "$1" = "$PORT_B" ] && g=$GRPC_B
    # h2load reports "finished in 2.00s, 9619.50 req/s, ..." and counts calls by HTTP status: a call that
    # ends with a grpc-status other than 0 still counts (check the servers' statistics when it matters).
    taskset -c "$WRK_CPUS" h2load -t "$WRK_THREADS" -c "$C" -m 1 -D "$2" -d "$work/simple.grpc" -H 'content-type: application/grpc' -H 'te: trailers' \
      "http://127.0.0.1:$g/inference.GRPCInferenceService/ModelInfer" | awk '/^finished in/ { print $4 } /^status codes/ && $5 + $7 + $9 > 0 { print "non-2xx: " $0 > "/dev/stderr" } /^requests:/ && $10 + $12 > 0 { print "failed: " $0 > "/dev/stderr" }'
    return
  fi
  taskset -c "$WRK_CPUS" wrk -t "$WRK_THREADS" -c "$C" -d "$2s" -s bench/post.lua "http://127.0.0.1:$1/v2/models/$MODEL/infer" | awk '/^Requests\/sec/ { print $2 } /Non-2xx/ { print "non-2xx " $4 > "/dev/stderr" }'; }
# Warm-up: JIT, and `execution_thread: auto` settling (bench/settle.sh).
window "$PORT_A" 3 > /dev/null; window "$PORT_B" 3 > /dev/null
echo "Machine: $(nproc) cpus; servers on cpus $SERVER_CPUS, $([ "$GRPC" = 1 ] && echo h2load || echo wrk) ($WRK_THREADS threads) on $WRK_CPUS; c=$C, $([ -n "$BODY" ] && echo "$MODEL, $BODY" || { [ "$GRPC" = 1 ] && echo gRPC ModelInfer simple || { [ "$JSON" = 1 ] && echo JSON simple || echo binary simple; }; }), $PAIRS pairs of ${SECONDS_} s windows."
echo "| pair | A req/s | A main-thread CPU µs/req | A process CPU µs/req | B req/s | B main-thread CPU µs/req | B process CPU µs/req | A/B req/s | A/B main-thread CPU a request | A/B process CPU a request |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for i in $(seq 1 "$PAIRS"); do
  row="| $i"
  for side in A B; do
    if [ $side = A ]; then p=$PID_A port=$PORT_A; else p=$PID_B port=$PORT_B; fi
    read -r m0 o0 <<< "$(cpu_ms "$p")"
    r=$(window "$port" "$SECONDS_")
    read -r m1 o1 <<< "$(cpu_ms "$p")"
    row="$row | $r | $(node -e "const n = $r * $SECONDS_; console.log(((($m1 - $m0) * 1000) / n).toFixed(1) + ' | ' + ((($m1 - $m0 + $o1 - $o0) * 1000) / n).toFixed(1))")"
  done
  echo "$row |"
done | node -e '
const rows = require("fs").readFileSync(0, "utf8").trim().split("\n");
const ratios = [[], [], []];
for (const row of rows) {
  const [, , ra, ma, pa, rb, mb, pb] = row.split("|").map((s) => s.trim());
  const r = [Number(ra) / Number(rb), Number(ma) / Number(mb), Number(pa) / Number(pb)];
  r.forEach((x, i) => ratios[i].push(x));
  console.log(`${row} ${r.map((x) => x.toFixed(3)).join(" | ")} |`);
}
const med = (a) => { const s = [...a].sort((x, y) => x - y); return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
console.log(`\nMedian A/B: req/s ${med(ratios[0]).toFixed(3)}, main-thread CPU a request ${med(ratios[1]).toFixed(3)}, process CPU a request ${med(ratios[2]).toFixed(3)}`);
'
