#!/usr/bin/env bash
# Issue #18: how soon `execution_thread: auto` settles when load starts. A fresh `triode serve`
# with model_repository/simple, in bench/busy-handoff.sh's split layout (started on cpus 0-1, then
# its main thread alone on cpu 1 and its other threads on cpu 0, with wrk): 4 s of lone requests
# (wrk -c1), then wrk -c16 for 4 s, printing each second the CPU the main thread and the other
# threads took (/proc/<pid>/task/*/schedstat). Settled, the other threads take V8's share only
# (~30-80 ms a second here); batches on the instance threads show as hundreds of ms.
#
#   npm run build && bash bench/settle.sh [TRIALS] [BIN]     (default 3 trials, packages/cli/bin/triode.js)
set -euo pipefail
cd "$(dirname "$0")/.."
trials=${1:-3}; bin=${2:-packages/cli/bin/triode.js}
command -v wrk >/dev/null || { echo "needs wrk" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "needs 2 cpus" >&2; exit 2; }
work=$(mktemp -d)
pid=''
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
node -e '
const fs = require("fs");
const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: ["INPUT0", "INPUT1"].map((name) => ({ name, datatype: "INT32", shape: [1, 16], parameters: { binary_data_size: 64 } })) }));
const in0 = new Int32Array(16).map((_, i) => i), in1 = new Int32Array(16).fill(1);
fs.writeFileSync(process.argv[1] + "/simple.bin", Buffer.concat([header, Buffer.from(in0.buffer), Buffer.from(in1.buffer)]));
fs.writeFileSync(process.argv[1] + "/header-len", String(header.length));
' "$work"
export BODY_FILE=$work/simple.bin HEADER_LEN
HEADER_LEN=$(cat "$work/header-len")
mkdir -p "$work/repo" && cp -r model_repository/simple "$work/repo/"

pin_split() {
  local t
  for t in /proc/"$pid"/task/*; do
    t=$(basename "$t")
    if [ "$t" = "$pid" ]; then taskset -p -c 1 "$t" >/dev/null 2>&1 || true; else taskset -p -c 0 "$t" >/dev/null 2>&1 || true; fi
  done
}
cpu_ms() { # -> "main_ms other_ms"
  local main=0 other=0 t ns
  for t in /proc/"$pid"/task/*; do
    ns=$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0)
    if [ "$(basename "$t")" = "$pid" ]; then main=$((main + ns)); else other=$((other + ns)); fi
  done
  echo "$((main / 1000000)) $((other / 1000000))"
}

port=$((20000 + RANDOM % 20000))
echo "$(nproc) cpus ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)); split layout; c=1 for 4 s, then c=16 for 4 s"
for trial in $(seq 1 "$trials"); do
  port=$((port + 1))
  taskset -c 0-1 "$bin" serve --model-repository "$work/repo" --http-port "$port" --http-address 127.0.0.1 \
    --allow-grpc=false --allow-metrics=false --log-info=false > "$work/server.log" 2>&1 &
  pid=$!
  ready=''
  for _ in $(seq 1 150); do curl -sf -o /dev/null "http://127.0.0.1:$port/v2/health/ready" && { ready=1; break; }; sleep 0.2; done
  [ -n "$ready" ] || { echo "the server did not get ready:" >&2; tail -20 "$work/server.log" >&2; exit 1; }
  url=http://127.0.0.1:$port/v2/models/simple/infer
  pin_split
  taskset -c 0 wrk -t1 -c1 -d4s -s bench/post.lua "$url" > /dev/null
  pin_split
  read -r m0 o0 < <(cpu_ms)
  taskset -c 0 wrk -t1 -c16 -d4s -s bench/post.lua "$url" > "$work/wrk.txt" &
  load=$!
  line="trial $trial, each second of c=16 (main / other threads, ms):"
  for _ in 1 2 3 4; do
    sleep 1
    read -r m1 o1 < <(cpu_ms)
    line="$line $((m1 - m0)) / $((o1 - o0)),"
    m0=$m1; o0=$o1
  done
  wait "$load" || true
  echo "$line $(grep -o 'Requests/sec: *[0-9.]*' "$work/wrk.txt" | tr -s ' ') over the 4 s"
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=''
done
