#!/usr/bin/env bash
# Issue #18: where `simple`'s batches should run in a busy server with more than one core: on the
# main thread, or handed to the instance threads. Compares Triode builds or `execution_thread`
# settings on the same load, and prints per run: req/s, the CPU a request cost the main thread and
# the other threads (exact: /proc/<pid>/task/*/schedstat over the measured window; a thread that
# ends within it drops out), requests per execution and compute_infer per execution (statistics
# extension; Triton adds a batch's compute to each of its requests, so this is the mean over
# requests of their batch's run, which leans to the larger batches).
#
#   bash bench/busy-handoff.sh LAYOUT CONCURRENCY ROUNDS NAME=BIN@MODE [NAME=BIN@MODE ...]
#
#   LAYOUT   shared: the server on cpus 0-1, wrk on the same cpus (a 2-core server sharing with its
#                    load generator);
#            split:  the server started on cpus 0-1, then its main thread moved to cpu 1 alone and
#                    every other thread of it (instance threads, V8's) to cpu 0 with wrk: the main
#                    thread has a core to itself and is the bottleneck, as on the issue's 16-core
#                    layout (server on 2 cores, wrk on others), which a 2-core machine cannot give;
#            pair:   the issue's layout itself, >= 6 cpus: the server on cpus 0-1, wrk (4 threads)
#                    on cpus 2-5 (bench/device.sh runs it on the GPU machine).
#   CONCURRENCY  e.g. 16,64 (wrk -t1, or -t4 for pair; binary tensors, 3 s warm-up then 6 s measured)
#   ROUNDS   rounds; each runs every variant at every concurrency, in the order given
#   BIN      a triode bin (packages/cli/bin/triode.js of a built tree)
#   MODE     the `execution_thread` given to a copy of model_repository/simple (auto, main, instance)
#
# Example (the build before a change in /tmp/old: git worktree add /tmp/old <rev>, npm ci, npm run build):
#   npm run build && bash bench/busy-handoff.sh split 16,64 3 before=/tmp/old/packages/cli/bin/triode.js@auto after=packages/cli/bin/triode.js@auto
set -euo pipefail
cd "$(dirname "$0")/.."
layout=$1; concurrency=$2; rounds=$3; shift 3
[ "$layout" = shared ] || [ "$layout" = split ] || [ "$layout" = pair ] || { echo "LAYOUT must be shared, split or pair" >&2; exit 2; }
[ "$layout" != pair ] || [ "$(nproc)" -ge 6 ] || { echo "the pair layout needs 6 cpus" >&2; exit 2; }
# shellcheck source=bench/simple-load.sh
. bench/simple-load.sh
load_setup

repo_for() { # MODE -> a copy of simple with that execution_thread
  local dir=$work/repo-$1
  if [ ! -d "$dir" ]; then
    mkdir -p "$dir" && cp -r model_repository/simple "$dir/"
    printf '\nparameters { key: "execution_thread" value: { string_value: "%s" } }\n' "$1" >> "$dir/simple/config.pbtxt"
  fi
  echo "$dir"
}

pin_split() { [ "$layout" != split ] || split_threads "$pid"; }

port=$((20000 + RANDOM % 20000))
wrk_cpus=0-1; wrk_threads=1
[ "$layout" = split ] && wrk_cpus=0
[ "$layout" = pair ] && { wrk_cpus=2-5; wrk_threads=4; }
echo "layout $layout, $(nproc) cpus ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), the server started on cpus 0-1, wrk -t$wrk_threads on cpus $wrk_cpus, binary tensors, 6 s a run"
echo "| round | variant | c | req/s | main thread µs/req | other threads µs/req | requests/execution | compute_infer µs/execution |"
echo "|---|---|---|---|---|---|---|---|"
for round in $(seq 1 "$rounds"); do
  for spec in "$@"; do
    name=${spec%%=*}; rest=${spec#*=}; bin=${rest%@*}; mode=${rest##*@}
    for c in ${concurrency//,/ }; do
      port=$((port + 1))
      taskset -c 0-1 "$bin" serve --model-repository "$(repo_for "$mode")" --http-port "$port" --http-address 127.0.0.1 \
        --allow-grpc=false --allow-metrics=false --log-info=false > "$work/server.log" 2>&1 &
      pid=$!
      ready=''
      for _ in $(seq 1 150); do curl -sf -o /dev/null "http://127.0.0.1:$port/v2/health/ready" && { ready=1; break; }; sleep 0.2; done
      if [ -z "$ready" ]; then echo "$name: the server did not get ready:" >&2; tail -20 "$work/server.log" >&2; exit 1; fi
      url=http://127.0.0.1:$port/v2/models/simple/infer
      pin_split
      taskset -c "$wrk_cpus" wrk -t"$wrk_threads" -c"$c" -d3s -s bench/post.lua "$url" > /dev/null
      pin_split # again: threads made since take the affinity of the thread that made them
      read -r m0 o0 < <(cpu_ms "$pid")
      s0=$(curl -sf "http://127.0.0.1:$port/v2/models/simple/stats")
      taskset -c "$wrk_cpus" wrk -t"$wrk_threads" -c"$c" -d6s -s bench/post.lua "$url" > "$work/wrk.txt"
      read -r m1 o1 < <(cpu_ms "$pid")
      s1=$(curl -sf "http://127.0.0.1:$port/v2/models/simple/stats")
      kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; pid=''
      node -e '
        const [wrk, s0, s1, m, o, round, name, c] = process.argv.slice(1);
        const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(wrk)[1]);
        const reqs = Number(/(\d+) requests in/.exec(wrk)[1]);
        const st = (s) => JSON.parse(s).model_stats[0];
        const a = st(s0), b = st(s1);
        const exec = b.execution_count - a.execution_count, inf = b.inference_count - a.inference_count;
        const infer = (b.inference_stats.compute_infer.ns - a.inference_stats.compute_infer.ns) / 1000;
        // compute_infer counts each request of a batch (Triton), so per execution it is divided by the batch.
        const f = (x) => x.toFixed(1);
        const non2xx = /Non-2xx or 3xx responses: (\d+)/.exec(wrk);
        console.log(`| ${round} | ${name} | ${c} | ${Math.round(rps)}${non2xx ? ` (${non2xx[1]} non-2xx)` : ""} | ${f(m * 1000 / reqs)} | ${f(o * 1000 / reqs)} | ${f(inf / exec)} | ${f(infer / inf)} |`);
      ' "$(cat "$work/wrk.txt")" "$s0" "$s1" "$((m1 - m0))" "$((o1 - o0))" "$round" "$name" "$c"
    done
  done
done
