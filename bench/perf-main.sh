#!/usr/bin/env bash
# Where a server's main thread spends a request: `perf record -g` of it (or of all its threads)
# under wrk load (with --grpc: `triode perf -i grpc`, zero inputs, to GRPC_PORT), then bench/perf-tree.mjs's tree of its JS functions in µs of CPU a request. The
# server runs with --perf-basic-prof (node writes /tmp/perf-PID.map so perf names JIT code), on cpu
# 1 and wrk on cpu 0 (override: --server-cpus, --wrk-cpus). Needs perf, wrk and 2 cpus. Run by hand:
#   bash bench/perf-main.sh [-c 64] [--json] [--model M --body FILE [--header-len N]] [--seconds 5]
#     [--all-threads] [--grpc] [--out bench/out/perf/NAME] -- 'node [node flags] SCRIPT ARGS with PORT [and GRPC_PORT]'
# Example (simple, binary tensors, c=64):
#   bash bench/perf-main.sh -c 64 -- 'node --initial-old-space-size=128 packages/cli/bin/triode.js serve
#     --model-repository model_repository --model-control-mode explicit --load-model simple
#     --http-port PORT --http-address 127.0.0.1 --allow-grpc=false --allow-metrics=false --log-info=false'
# Then, for one function's leaves: node bench/perf-tree.mjs OUT.script "$(cat OUT.requests)" --under parseInferRequest --self
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/simple-load.sh
C=64 JSON=0 GRPC=0 MODEL=simple BODY='' HL='' SECONDS_=5 ALL=0 OUT=bench/out/perf/main SERVER_CPUS=1 WRK_CPUS=0
while [ $# -gt 0 ]; do
  case $1 in
    -c) C=$2; shift 2 ;;
    --json) JSON=1; shift ;;
    --grpc) GRPC=1; shift ;;
    --model) MODEL=$2; shift 2 ;;
    --body) BODY=$2; shift 2 ;;
    --header-len) HL=$2; shift 2 ;;
    --seconds) SECONDS_=$2; shift 2 ;;
    --all-threads) ALL=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    --server-cpus) SERVER_CPUS=$2; shift 2 ;;
    --wrk-cpus) WRK_CPUS=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ $# -eq 1 ] || { echo "usage: $0 [options] -- 'SERVER COMMAND with PORT'" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf" >&2; exit 2; }
load_setup
if [ "$JSON" = 1 ]; then
  simple_json_body "$work"
fi
if [ -n "$BODY" ]; then export BODY_FILE=$BODY HEADER_LEN=$HL; fi
mkdir -p "$(dirname "$OUT")"
PORT=$(free_port); GRPC_PORT=$(free_port)
CMD=${1//GRPC_PORT/$GRPC_PORT}
CMD=${CMD//PORT/$PORT}
# shellcheck disable=SC2086 # a word list; the flags go right after `node`. --perf-basic-prof also
# has V8 write a log per isolate: into $work (removed on exit), not the working directory.
taskset -c "$SERVER_CPUS" node --perf-basic-prof --logfile="$work/v8.log" ${CMD#node } > "$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.2; done
url="http://127.0.0.1:$PORT/v2/models/$MODEL/infer"
if [ "$ALL" = 1 ]; then target=(-p "$pid"); else target=(-t "$pid"); fi
if [ "$GRPC" = 1 ]; then
  # triode perf: three windows (the fewest it takes; any three "agree" within 1000%) over the
  # warm-up (3 s), the recording and 2 s after it; its rate is theirs.
  taskset -c "$WRK_CPUS" node packages/cli/bin/triode.js perf -m "$MODEL" -i grpc -u "127.0.0.1:$GRPC_PORT" --concurrency-range "$C" \
    -p "$(( (SECONDS_ + 5) * 1000 / 3 ))" -r 3 -s 1000 --warmup-request-count 200 --input-data zero --json "$work/perf.json" > /dev/null 2>&1 &
  load_pid=$!
  sleep 3
else
  # Warm-up (JIT; `execution_thread: auto` settling), then wrk for the recording and 2 s around it.
  taskset -c "$WRK_CPUS" wrk -t1 -c "$C" -d3s -s bench/post.lua "$url" > /dev/null
  taskset -c "$WRK_CPUS" wrk -t1 -c "$C" -d "$((SECONDS_ + 2))s" -s bench/post.lua "$url" > "$work/wrk.txt" &
  load_pid=$!
  sleep 1
fi
perf record -F 2999 -g "${target[@]}" -o "$OUT.perf" -- sleep "$SECONDS_" > /dev/null 2>&1
wait "$load_pid"
if [ "$GRPC" = 1 ]; then
  rps=$(node -e "console.log(JSON.parse(require('fs').readFileSync(process.argv[1], 'utf8'))[0].throughput)" "$work/perf.json")
  echo "triode perf (gRPC): $rps infer/s"
else
  rps=$(awk '/^Requests\/sec/ { print $2 }' "$work/wrk.txt")
  grep -E 'Requests/sec|Non-2xx' "$work/wrk.txt"
fi
requests=$(node -e "console.log(Math.round(Number(process.argv[1]) * Number(process.argv[2])))" "$rps" "$SECONDS_")
# JIT code is named by node's symbol map of this server (/tmp/perf-PID.map, written by
# --perf-basic-prof): the stacks are kept as text, named, and the map removed.
perf script -i "$OUT.perf" > "$OUT.script" 2>/dev/null
rm -f "/tmp/perf-$pid.map"
echo "recorded $SECONDS_ s: ~$requests requests (the load generator's rate); stacks: $OUT.script"
echo "$requests" > "$OUT.requests"
node bench/perf-tree.mjs "$OUT.script" "$requests"
