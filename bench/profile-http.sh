#!/usr/bin/env bash
# Issue #18: a CPU profile of `triode serve`'s main thread under HTTP load on `simple` (binary
# tensors), and its top functions by self time. Needs wrk. Run by hand:
#   bash bench/profile-http.sh [connections, default 16] [seconds, default 6]
# Pinned: SERVER_PREFIX="taskset -c 1" WRK_PREFIX="taskset -c 0" bash bench/profile-http.sh 1 6
# Writes the profiles (main thread and each instance thread) to bench/out/prof/.
set -euo pipefail
cd "$(dirname "$0")/.."
C=${1:-16}
D=${2:-6}
OUT=bench/out/prof
rm -rf "$OUT" && mkdir -p "$OUT"
# bench/run.mjs writes bench/out/simple.bin (and runs its whole benchmark: only when the body is missing).
[ -s bench/out/simple.bin ] || node bench/run.mjs --seconds 1 --warmup 0 --concurrency 1 --models simple > /dev/null 2>&1 || true
HL=$(node -e "const s=require('fs').readFileSync('bench/out/simple.bin','latin1');let d=0;for(let i=0;i<s.length;i++){if(s[i]==='{')d++;else if(s[i]==='}'&&--d===0){console.log(i+1);break;}}")
PORT=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close();})")
${SERVER_PREFIX:-} node --cpu-prof --cpu-prof-dir="$OUT" --initial-old-space-size=128 packages/cli/bin/triode.js serve --model-repository model_repository \
  --model-control-mode explicit --load-model simple --http-port "$PORT" --http-address 127.0.0.1 --allow-grpc=false --allow-metrics=false --log-info=false > "$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill -INT $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -s -o /dev/null -w '%{http_code}' "127.0.0.1:$PORT/v2/health/ready" | grep -q 200 && break; sleep 0.2; done
BODY_FILE=bench/out/simple.bin HEADER_LEN=$HL ${WRK_PREFIX:-} wrk -t "$(( C < 2 ? 1 : 2 ))" -c "$C" -d "${D}s" -s bench/post.lua "http://127.0.0.1:$PORT/v2/models/simple/infer" | grep -E 'Requests/sec|Latency'
kill -INT $SERVER
wait $SERVER || true
trap - EXIT
MAIN=$(ls "$OUT"/*.cpuprofile | sort | head -1)
echo "main thread: $MAIN"
node bench/cpuprofile-top.mjs "$MAIN" 25
