#!/bin/bash
# What a request costs one gateway in CPU, on a 2-core machine (issue #16: one gateway's cost
# against its frontend floor's). Redis and the gateway on cpu 0, one worker and wrk on cpu 1;
# `simple` binary (bench/post.lua), wrk -t1 -c64, a 2 s warm-up and then SECONDS s measured. Prints
# the gateway's rate and its CPU (all threads, /proc ticks) a request, then the same for
# bench/floor-server.mjs alone on cpu 0. The rate is bounded by the shared cpu 1; the CPU a
# request is the figure (the worker's and Redis's are printed too). To compare two builds, alternate: ROOT=<other checkout> bash bench/gateway-cost.sh
#   bash bench/gateway-cost.sh [SECONDS=8]        (ROOT: the checkout whose triode runs; default this one)
#   (GATEWAY_NODE_FLAGS, WORKER_NODE_FLAGS: node flags for each, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof";
#   WORKERS=n: n workers, all on cpu 1, to see what more workers cost the gateway a request;
#   MODEL=ppocr_cls: its 110 KB binary request, one instance a worker, instead of `simple`)
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd)
ROOT=${ROOT:-$HERE}
SECONDS_MEASURED=${1:-8}
BIN=$ROOT/packages/cli/bin/triode.js
D=$(mktemp -d /tmp/triode-gwcost-XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$D"; }
trap cleanup EXIT
free_port() { node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
# System calls that read and that write (all threads), from /proc/PID/io.
syscalls() { awk '/^syscr/ {r=$2} /^syscw/ {w=$2} END {print r, w}' "/proc/$1/io"; }
MODEL=${MODEL:-simple}
mkdir -p "$D/repo" && cp -r "$HERE/model_repository/$MODEL" "$D/repo/"
# ppocr_cls: one instance a worker (a copy of its config without instance_group), as bench/cluster.mjs's scale-out.
[ "$MODEL" = ppocr_cls ] && sed -i '/^instance_group/d' "$D/repo/ppocr_cls/config.pbtxt"
node -e "
const model='$MODEL';
const ins=model==='simple'?['INPUT0','INPUT1'].map((name,i)=>({name,datatype:'INT32',shape:[1,16],data:Buffer.from(new Int32Array(16).fill(i+1).buffer)})):[{name:'x',datatype:'FP32',shape:[1,3,48,192],data:Buffer.from(new Float32Array(3*48*192).fill(0.5).buffer)}];
const h=Buffer.from(JSON.stringify({parameters:{binary_data_output:true},inputs:ins.map(({name,datatype,shape,data})=>({name,datatype,shape,parameters:{binary_data_size:data.length}}))}));
require('fs').writeFileSync('$D/body.bin',Buffer.concat([h,...ins.map((t)=>t.data)]));
require('fs').writeFileSync('$D/hl',String(h.length));"
export BODY_FILE=$D/body.bin HEADER_LEN=$(cat "$D/hl")
# measure PID PORT LABEL [OTHER_LABEL:PID ...]: the CPU a request of PID, and of each other process named
measure() {
  taskset -c 1 wrk -t1 -c64 -d2s -s "$HERE/bench/post.lua" "http://127.0.0.1:$2/v2/models/$MODEL/infer" > /dev/null
  local c0 c1 req o others=() o0=() s0 s1
  for o in "${@:4}"; do others+=("$o"); o0+=("$(ticks "${o#*:}")"); done
  c0=$(ticks "$1")
  s0=$(syscalls "$1")
  taskset -c 1 wrk -t1 -c64 -d"${SECONDS_MEASURED}s" -s "$HERE/bench/post.lua" "http://127.0.0.1:$2/v2/models/$MODEL/infer" > "$D/wrk.txt"
  c1=$(ticks "$1")
  s1=$(syscalls "$1")
  req=$(awk '/requests in/ {print $1}' "$D/wrk.txt")
  echo "$3: $(awk '/Requests\/sec/ {print $2}' "$D/wrk.txt") req/s, $(awk -v t=$((c1 - c0)) -v r="$req" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t * 1e6 / hz / r}') µs of CPU a request, non-2xx: $(awk '/Non-2xx/ {print $NF}' "$D/wrk.txt" | grep . || echo 0)"
  echo "  system calls a request: $(awk -v a="$s0" -v b="$s1" -v r="$req" 'BEGIN {split(a, x, " "); split(b, y, " "); printf "%.2f reads, %.2f writes", (y[1] - x[1]) / r, (y[2] - x[2]) / r}')"
  local i
  for i in "${!others[@]}"; do
    echo "  ${others[$i]%%:*}: $(awk -v t=$(($(ticks "${others[$i]#*:}") - o0[i])) -v r="$req" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", t * 1e6 / hz / r}') µs of CPU a request"
  done
}
RP=$(free_port); GP=$(free_port)
taskset -c 0 redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no > "$D/redis.log" 2>&1 & REDIS=$!; PIDS+=($REDIS)
sleep 0.5
WORKER_PIDS=()
for w in $(seq 1 "${WORKERS:-1}"); do
  taskset -c 1 node --initial-old-space-size=128 ${WORKER_NODE_FLAGS:-} "$BIN" worker --metrics-port 0 --redis "redis://127.0.0.1:$RP" --model-repository "$D/repo" --worker-id "w$w" --log-info=false > "$D/worker$w.log" 2>&1 & WORKER_PIDS+=("worker$w:$!"); PIDS+=($!)
done
taskset -c 0 node --initial-old-space-size=128 ${GATEWAY_NODE_FLAGS:-} "$BIN" gateway --metrics-port 0 --redis "redis://127.0.0.1:$RP" --http-port "$GP" --http-address 127.0.0.1 --allow-grpc=false > "$D/gateway.log" 2>&1 & GW=$!; PIDS+=($GW)
for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$GP/v2/models/$MODEL/ready" > /dev/null && break; sleep 0.25; done
measure "$GW" "$GP" "gateway ($ROOT, ${WORKERS:-1} worker(s))" "${WORKER_PIDS[@]}" "redis-server:$REDIS"
FP=$(free_port)
taskset -c 0 node "$HERE/bench/floor-server.mjs" "$FP" > "$D/floor.log" 2>&1 & FLOOR=$!; PIDS+=($FLOOR)
for _ in $(seq 1 40); do grep -q 'floor server on' "$D/floor.log" && break; sleep 0.25; done
measure "$FLOOR" "$FP" "frontend floor"
