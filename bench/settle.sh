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
# shellcheck source=bench/simple-load.sh
. bench/simple-load.sh
load_setup
mkdir -p "$work/repo" && cp -r model_repository/simple "$work/repo/"

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
  split_threads "$pid"
  taskset -c 0 wrk -t1 -c1 -d4s -s bench/post.lua "$url" > /dev/null
  split_threads "$pid"
  read -r m0 o0 < <(cpu_ms "$pid")
  taskset -c 0 wrk -t1 -c16 -d4s -s bench/post.lua "$url" > "$work/wrk.txt" &
  load=$!
  line="trial $trial, each second of c=16 (main / other threads, ms):"
  for _ in 1 2 3 4; do
    sleep 1
    read -r m1 o1 < <(cpu_ms "$pid")
    line="$line $((m1 - m0)) / $((o1 - o0)),"
    m0=$m1; o0=$o1
  done
  wait "$load" || true
  echo "$line $(grep -o 'Requests/sec: *[0-9.]*' "$work/wrk.txt" | tr -s ' ') over the 4 s"
  kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=''
done
