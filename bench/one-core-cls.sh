#!/usr/bin/env bash
# Issue #18: ppocr_cls on a server with one core. ppocr_cls as shipped (2 instances,
# execution_thread auto, ~0.7 ms a run) on cpu 1, wrk (c=16, binary tensors) on cpu 0, 3 s a phase.
# Per phase: req/s and the CPU a request cost the server's main thread and its other threads (exact,
# from /proc/<pid>/task/*/schedstat): on the main-thread path the other threads stay near 0.
#   hog (default): between quiet phases, two busy loops share cpu 1 for 4 s: does the instance come
#     back to the main thread afterwards?
#   split: three phases, each with the statistics extension's compute time a request and, right
#     after it, raw onnxruntime on cpu 1 (bench/raw-limit.mjs, 1 thread): where a request's CPU goes.
# Needs 2+ cores, wrk, taskset and `npm run build`. Run by hand: bash bench/one-core-cls.sh [hog|split] [port]
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-hog}
PORT=${2:-$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close();})")}
DIR=$(mktemp -d)
SERVER=''
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null; rm -rf "$DIR"' EXIT
mkdir "$DIR/repo" && cp -r model_repository/ppocr_cls "$DIR/repo/"
HL=$(node -e "
const fs = require('fs');
const h = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], parameters: { binary_data_size: 110592 } }] }));
const x = new Float32Array(3 * 48 * 192).map((_, i) => Math.sin(i));
fs.writeFileSync('$DIR/body', Buffer.concat([h, Buffer.from(x.buffer)]));
console.log(h.length);")
taskset -c 1 packages/cli/bin/triode.js serve --model-repository "$DIR/repo" --http-port "$PORT" --http-address 127.0.0.1 \
  --allow-grpc=false --allow-metrics=false --log-info=false > "$DIR/log" 2>&1 &
SERVER=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/v2/models/ppocr_cls/ready" > /dev/null && break; sleep 0.2; done

cpu() { for t in /proc/$SERVER/task/*; do echo "$(basename "$t") $(cut -d' ' -f1 "$t/schedstat")"; done; }
phase() {
  local a b out
  a=$(cpu)
  out=$(BODY_FILE="$DIR/body" HEADER_LEN="$HL" taskset -c 0 wrk -t1 -c16 -d3s -s bench/post.lua "http://127.0.0.1:$PORT/v2/models/ppocr_cls/infer")
  b=$(cpu)
  node -e "
const p = (s) => new Map(s.trim().split('\n').map((l) => l.split(' ')).map(([t, n]) => [t, Number(n)]));
const a = p(process.argv[1]), b = p(process.argv[2]), req = Number(process.argv[3]), main = '$SERVER';
let other = 0; for (const [t, n] of b) if (t !== main) other += n - (a.get(t) ?? 0);
const us = (ns) => (ns / req / 1e3).toFixed(0).padStart(5);
console.log('$1'.padEnd(10), String(Math.round(req / 3)).padStart(5), 'req/s   main', us(b.get(main) - a.get(main)), 'µs/req   other threads', us(other), 'µs/req');
" "$a" "$b" "$(echo "$out" | awk '/requests in/{print $1}')"
}
stats() { curl -sf "http://127.0.0.1:$PORT/v2/models/ppocr_cls/stats"; }
phase warm-up
if [ "$MODE" = split ]; then
  phase warm-up  # the instances settle on the main thread (their first runs are on their threads)
  for r in 1 2 3; do
    a=$(stats)
    phase "round $r"
    b=$(stats)
    node -e "
const s = (j) => JSON.parse(j).model_stats[0], a = s(process.argv[1]), b = s(process.argv[2]);
const n = b.inference_count - a.inference_count, d = (k) => ((b.inference_stats[k].ns - a.inference_stats[k].ns) / n / 1e3).toFixed(1);
console.log('  compute a request (statistics extension): input', d('compute_input'), 'infer', d('compute_infer'), 'output', d('compute_output'), 'µs');
" "$a" "$b"
    echo "  raw: $(taskset -c 1 node bench/raw-limit.mjs model_repository ppocr_cls 1 3)"
  done
  exit 0
fi
phase before
taskset -c 1 timeout 4 node -e 'for (;;);' & taskset -c 1 timeout 4 node -e 'for (;;);' &
phase hog
wait %2 %3 2>/dev/null || true
sleep 1
phase after-1
phase after-2
phase after-3
