#!/usr/bin/env bash
# Two builds of triode (A, B: their bin paths) serving `simple` with --allow-client-shm=true, both up
# at once, measured in alternating wrk windows with the same JSON body: both inputs and both outputs
# in one system shared memory region. Each window's req/s and the main thread's CPU a request (its
# schedstat). Servers on cpu 1, wrk (one thread) on cpu 0: the project's 2-core VM layout. Needs wrk,
# taskset, curl and /dev/shm. Run by hand (CS: the concurrencies, default "1 16"):
#   bash bench/shared-memory-ab.sh /tmp/base-tree/packages/cli/bin/triode.js packages/cli/bin/triode.js
set -u
cd "$(dirname "$0")/.."
ABIN=${1:?usage: $0 A_BIN B_BIN}; BBIN=${2:?usage: $0 A_BIN B_BIN}
S='serve --model-repository model_repository --model-control-mode explicit --load-model simple --http-address 127.0.0.1 --allow-grpc=false --allow-metrics=false --allow-client-shm=true'
taskset -c 1 node --initial-old-space-size=128 $ABIN $S --http-port 18971 > /dev/null 2>&1 & A=$!
taskset -c 1 node --initial-old-space-size=128 $BBIN $S --http-port 18972 > /dev/null 2>&1 & B=$!
KEY=/triode-ab-$$
BODY=$(mktemp)
trap 'kill $A $B 2>/dev/null; rm -f /dev/shm$KEY $BODY' EXIT
head -c 4096 /dev/zero > /dev/shm$KEY
for i in $(seq 1 60); do curl -sf 127.0.0.1:18971/v2/health/ready && curl -sf 127.0.0.1:18972/v2/health/ready && break; sleep 0.5; done
for p in 18971 18972; do curl -sf -X POST 127.0.0.1:$p/v2/systemsharedmemory/region/io/register -d "{\"key\":\"$KEY\",\"offset\":0,\"byte_size\":4096}"; done
W() { echo "{\"shared_memory_region\":\"io\",\"shared_memory_offset\":$1,\"shared_memory_byte_size\":64}"; }
echo "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"INT32\",\"shape\":[1,16],\"parameters\":$(W 0)},{\"name\":\"INPUT1\",\"datatype\":\"INT32\",\"shape\":[1,16],\"parameters\":$(W 64)}],\"outputs\":[{\"name\":\"OUTPUT0\",\"parameters\":$(W 128)},{\"name\":\"OUTPUT1\",\"parameters\":$(W 192)}]}" > $BODY
curl -s -X POST 127.0.0.1:18972/v2/models/simple/infer --data-binary @$BODY; echo
main_ns() { awk '{print $1}' /proc/$1/task/$1/schedstat; }
for c in ${CS:-1 16}; do
  for p in 18971 18972; do BODY_FILE=$BODY HEADER_LEN= taskset -c 0 wrk -t1 -c$c -d2s -s bench/post.lua http://127.0.0.1:$p/v2/models/simple/infer > /dev/null; done
  for round in 1 2 3 4 5 6; do
    line="c=$c round $round"
    for p in 18971 18972; do
      pid=$([ $p = 18971 ] && echo $A || echo $B)
      n0=$(main_ns $pid)
      out=$(BODY_FILE=$BODY HEADER_LEN= taskset -c 0 wrk -t1 -c$c -d3s -s bench/post.lua http://127.0.0.1:$p/v2/models/simple/infer)
      n1=$(main_ns $pid)
      rps=$(echo "$out" | awk '/Requests\/sec/{print $2}'); reqs=$(echo "$out" | awk '/requests in/{print $1}')
      line="$line | $([ $p = 18971 ] && echo A || echo B) $rps req/s $(( (n1 - n0) / reqs / 1000 )) us-main"
    done
    echo "$line"
  done
done
