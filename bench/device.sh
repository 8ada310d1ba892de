#!/usr/bin/env bash
# The checks that need the lent GPU machine (16 cores, one NVIDIA GPU), in one call:
#   1. machine facts (cores, CPU model, GPU, driver),
#   2. issue #18 in its layout: bench/http.mjs (simple: Triode vs the naive server vs the frontend
#      floor, servers on cpus 0-1, wrk on 2-5) and bench/cls-raw.mjs (ppocr_cls vs raw onnxruntime),
#   (handoff) bench/busy-handoff.sh pair: `simple` with execution_thread auto, main and instance in
#      that layout, each thread's CPU a request: whether auto puts batches where they cost least
#      (appended to http.log: the device tool brings back 8 files); not in the default parts (about
#      2.5 minutes: `bash bench/device.sh handoff`),
#   (large) bench/large-tensor.mjs: what ppocr_det-sized requests cost Triode outside the model,
#   (shm) bench/shared-memory.mjs: a 1.7 MB tensor in the body against one in a system shared memory
#      region, with ppocr_cls's instant stand-in (appended to large.log); not in the default parts,
#   (cluster) issue #16 scope 7: bench/cluster.mjs --workers 1,2,4,8 --gateways 1,2, pinned (Redis on
#      cpu 0, gateways on two cpus each, one cpu per worker, wrk on the rest), with ppocr_cls (x linear;
#      also embedded vs one worker) and with simple (one gateway vs its frontend floor); about 4.5
#      minutes with the default windows,
#   3. issue #17 on a real GPU: `triode serve` with a KIND_GPU model (startup GPU table, model
#      READY on the GPU, nv_gpu_* metrics from nvidia-smi), where `simple` goes (KIND_AUTO) and
#      what it serves at c=1 there and on WebGPU (wrk, not pinned), and bench/gpu.mjs (answers
#      checked against the CPU, then timed).
# Env: HTTP_C (http's concurrencies, default 1,16,64,256), CLUSTER_WORKERS (default 1,2,4,8),
# CLUSTER_COMPARE=no (skip cluster.mjs's embedded comparison).
# Prepare here: npm install && npm run build && bash ../shared/device/pack.sh; then run it there
# with .device carried:   source .device/setup.sh && bash bench/device.sh [http,handoff,cls,large,shm,gpu] [quick]
# Logs and JSON go to $OUT (or bench/out/device): 8 files, the most the device tool brings back;
# the tables are printed last.
set -uo pipefail
PARTS=${1:-http,cls,large,gpu}
QUICK=${2:-}
SRC=$(cd "$(dirname "$0")/.." && pwd)
cd "${TRIODE_DEVICE_ROOT:-$SRC}"
# The packed project is the built one; the bench scripts come from the tree that travelled (newer).
[ "$(pwd)" != "$SRC" ] && cp "$SRC"/bench/*.mjs "$SRC"/bench/*.sh "$SRC"/bench/*.lua bench/ 2>/dev/null
O=${OUT:-bench/out/device}
mkdir -p "$O"
has() { [[ ",$PARTS," == *",$1,"* ]]; }
S=2; W=1; R=3
[ -n "$QUICK" ] && { S=1; W=0; R=1; }

{
  echo "date: $(date -u +%FT%TZ)"
  echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  lscpu 2>/dev/null | grep -E '^(Thread|Core|Socket|NUMA node\(s\)|CPU MHz|CPU max)' || true
  echo "cpu 0-5 siblings: $(for c in 0 1 2 3 4 5; do printf '%s=%s ' $c "$(cat /sys/devices/system/cpu/cpu$c/topology/thread_siblings_list 2>/dev/null)"; done)"
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,utilization.gpu --format=csv 2>&1 || echo "no nvidia-smi"
  echo "node $(node --version); wrk $(command -v wrk); vulkan ICD: ${VK_DRIVER_FILES:-unset} $( [ -f "${VK_DRIVER_FILES:-/nonexistent}" ] && echo present || echo missing)"
} 2>&1 | tee "$O/machine.txt"

if has http; then
  echo "== bench/http.mjs"
  timeout 200 node bench/http.mjs --seconds $S --warmup $W --rounds $R --concurrency ${HTTP_C:-1,16,64,256} --out "$O/http.json" > "$O/http.log" 2>&1
  echo "rc=$?"; grep -v '^{' "$O/http.log" | tail -30
fi

if has handoff; then
  echo "== bench/busy-handoff.sh pair" | tee -a "$O/http.log"
  B=packages/cli/bin/triode.js
  HR=$(( R > 2 ? 2 : R ))
  timeout 240 bash bench/busy-handoff.sh pair 16,64 $HR auto=$B@auto main=$B@main instance=$B@instance >> "$O/http.log" 2>&1
  echo "rc=$?"; sed -n '/== bench\/busy-handoff.sh pair/,$p' "$O/http.log" | tail -$((3 + 6 * HR))
fi

if has cluster; then
  for m in ppocr_cls simple; do
    echo "== bench/cluster.mjs --scale-model $m"
    cmp=no; [ $m = ppocr_cls ] && cmp=${CLUSTER_COMPARE:-yes}
    timeout 170 node bench/cluster.mjs --seconds $((S + 1)) --workers ${CLUSTER_WORKERS:-1,2,4,8} --gateways 1,2 --scale-model $m --compare $cmp > "$O/cluster-$m.log" 2>&1
    echo "rc=$?"; cat "$O/cluster-$m.log"
  done
fi

if has cls; then
  echo "== bench/cls-raw.mjs"
  timeout 120 node bench/cls-raw.mjs --seconds $S --warmup $W --rounds $R --concurrency 16 --variants shipped,instance,instant --out "$O/cls.json" > "$O/cls.log" 2>&1
  echo "rc=$?"; grep -v '^{' "$O/cls.log" | tail -12
fi

if has large; then
  echo "== bench/large-tensor.mjs"
  timeout 120 node bench/large-tensor.mjs --seconds $S --rounds $R > "$O/large.log" 2>&1
  echo "rc=$?"; grep -v '^{' "$O/large.log" | tail -8
fi

if has shm; then
  echo "== bench/shared-memory.mjs --model instant --batch 16" | tee -a "$O/large.log"
  timeout 150 node bench/shared-memory.mjs --seconds $S --warmup $W --settle 3 --rounds $R --concurrency 1,16 --model instant --batch 16 >> "$O/large.log" 2>&1
  echo "rc=$?"; sed -n '/== bench\/shared-memory.mjs/,$p' "$O/large.log" | tail -8
fi

if has gpu; then
  echo "== triode serve with a KIND_GPU model"
  REPO=$(mktemp -d)
  mkdir -p "$REPO/cls_gpu" && cp -r model_repository/ppocr_cls/1 model_repository/ppocr_cls/*.txt "$REPO/cls_gpu/"
  # simple as shipped (no instance_group: KIND_AUTO, which takes WebGPU only when named), and
  # simple_webgpu: the same model asking for WebGPU, to show what that costs a tiny model.
  cp -r model_repository/simple "$REPO/simple"
  # det_gpu: ppocr_det on WebGPU, timed with wrk (a C client) to split the gap bench/gpu.mjs's
  # fetch client saw (bench/RESULTS.md, 2026-11-27).
  mkdir -p "$REPO/det_gpu" && cp -r model_repository/ppocr_det/1 "$REPO/det_gpu/1"
  printf '%s\n' 'platform: "onnxruntime_onnx"' 'max_batch_size: 4' 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]' \
    'output [ { name: "sigmoid_0.tmp_0" data_type: TYPE_FP32 dims: [ 1, -1, -1 ] } ]' 'instance_group [ { count: 1, kind: KIND_GPU } ]' \
    'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "webgpu" } ] } }' > "$REPO/det_gpu/config.pbtxt"
  DET_HL=$(node -e "
const x = new Float32Array(3 * 960 * 960).map((_, i) => Math.sin(i));
const h = Buffer.from(JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 960, 960], parameters: { binary_data_size: x.byteLength } }], outputs: [{ name: 'sigmoid_0.tmp_0', parameters: { binary_data: true } }] }));
require('fs').writeFileSync('/tmp/det.bin', Buffer.concat([h, Buffer.from(x.buffer)])); console.log(h.length);")
  mkdir -p "$REPO/simple_webgpu" && cp -r model_repository/simple/1 "$REPO/simple_webgpu/1"
  sed -e 's/^name: .*/name: "simple_webgpu"/' model_repository/simple/config.pbtxt > "$REPO/simple_webgpu/config.pbtxt"
  echo 'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "webgpu" } ] } }' >> "$REPO/simple_webgpu/config.pbtxt"
  sed -e 's/^name: .*/name: "cls_gpu"/' -e 's/instance_group.*/instance_group [ { count: 1, kind: KIND_GPU } ]/' \
    -e 's/^parameters.*//' model_repository/ppocr_cls/config.pbtxt > "$REPO/cls_gpu/config.pbtxt"
  echo 'optimization { execution_accelerators { gpu_execution_accelerator [ { name: "webgpu" } ] } }' >> "$REPO/cls_gpu/config.pbtxt"
  timeout 90 packages/cli/bin/triode.js serve --model-repository "$REPO" --http-port 18000 --http-address 127.0.0.1 \
    --allow-grpc=false --metrics-port 18002 --metrics-address 127.0.0.1 --http-max-input-size=1073741824 >> "$O/smoke.log" 2>&1 &
  SP=$!
  for _ in $(seq 150); do curl -sf localhost:18000/v2/health/ready >/dev/null && break; sleep 0.2; done
  {
    echo "-- ready: $(curl -s -o /dev/null -w '%{http_code}' localhost:18000/v2/models/cls_gpu/ready)"
    echo "-- index: $(curl -s -X POST localhost:18000/v2/repository/index -d '{}')"
    echo "-- config instance_group / accelerators: $(curl -s localhost:18000/v2/models/cls_gpu/config | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const c=JSON.parse(s);console.log(JSON.stringify([c.instance_group,c.optimization?.execution_accelerators]))})')"
    for m in simple simple_webgpu; do
      echo "-- $m instance_group: $(curl -s localhost:18000/v2/models/$m/config | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.stringify(JSON.parse(s).instance_group)))')"
      node -e "
const fs = require('fs');
fs.writeFileSync('/tmp/simple.json', JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) })) }));"
      BODY_FILE=/tmp/simple.json HEADER_LEN= wrk -t1 -c1 -d2s --latency -s bench/post.lua "http://127.0.0.1:18000/v2/models/$m/infer" | grep -E 'Requests/sec|50%|Non-2xx' | tr -s ' ' | tr '\n' ' '; echo
    done
    for c in 1 4; do
      echo "-- det_gpu (ppocr_det, WebGPU, 1x3x960x960 binary), wrk -c$c: $(BODY_FILE=/tmp/det.bin HEADER_LEN=$DET_HL wrk -t1 -c$c -d${S}s --latency -s bench/post.lua http://127.0.0.1:18000/v2/models/det_gpu/infer | grep -E 'Requests/sec|50%|Non-2xx' | tr -s ' ' | tr '\n' ' ')"
    done
    echo "-- det_gpu statistics: $(curl -s localhost:18000/v2/models/det_gpu/stats | grep -o '"inference_stats":{.*"cache_hit"' | head -c 600)"
    echo "-- nv_gpu metrics:"; curl -s localhost:18002/metrics | grep -E '^nv_(gpu|energy)' | head -8
  } 2>&1 | tee -a "$O/smoke.log"
  kill $SP 2>/dev/null; wait $SP 2>/dev/null
  grep -E 'GPU|gpu|webgpu' "$O/smoke.log" | grep -v '^--' | head -12

  echo "== bench/gpu.mjs"
  timeout 240 node bench/gpu.mjs --seconds $S --warmup $W --batches 1,4 > "$O/gpu.log" 2>&1
  echo "rc=$?"; grep '^|\|^The GPU\|^node bench' "$O/gpu.log"
fi
echo "== done"
