#!/usr/bin/env bash
# Issue #18: instructions a request costs each thread of a server, counted by valgrind's callgrind.
# On a noisy VM (this project's 2-core machine moves +-30% run to run) wall-clock A/B cannot see a
# 5% change; instruction counts repeat to within ~2% on an idle machine (up to ~7% beside other
# heavy work, which shifts when V8's background compiler finishes). They leave out the kernel (syscalls, loopback
# TCP) and what the counts cannot show (cache misses, context switches): pair them with bench/http.mjs.
# Run by hand (needs valgrind, `npm run build`; ~1-2 minutes a server):
#   [CACHE_SIM=1] bash bench/callgrind-http.sh <name> <json|binary> [warm-up requests, 10000] [measured requests, 5000] -- <server argv, port $PORT>
# e.g.
#   bash bench/callgrind-http.sh naive json -- node bench/naive-server.mjs '$PORT' model_repository
#   bash bench/callgrind-http.sh triode json -- node packages/cli/bin/triode.js serve --model-repository REPO \
#     --http-port '$PORT' --http-address 127.0.0.1 --allow-grpc=false --allow-metrics=false --log-info=false
# One client sends sequential keep-alive POSTs of `simple` (c=1). Prints instructions per measured
# request for each thread that ran any (thread 1 is the main thread), and leaves
# bench/out/callgrind/<name>.out* for callgrind_annotate (add --perf-basic-prof to the node command
# and give the perf map to name JIT frames).
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=$1; ENC=$2; shift 2
WARM=10000; N=5000
if [ "${1:-}" != "--" ]; then WARM=$1; shift; fi
if [ "${1:-}" != "--" ]; then N=$1; shift; fi
[ "${1:-}" = "--" ] && shift
PORT=$(node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close();})")
ARGV=(); for a in "$@"; do ARGV+=("${a//\$PORT/$PORT}"); done
OUT=bench/out/callgrind; mkdir -p "$OUT"; rm -f "$OUT/$NAME".out*
BODY=$(mktemp -d)
trap 'rm -rf "$BODY"; [ -n "${VG:-}" ] && kill "$VG" 2>/dev/null || true' EXIT
# The bodies of bench/http.mjs: `simple`, INPUT0 = 0..15, INPUT1 = 1s.
node --input-type=module -e "
import { writeFileSync } from 'node:fs';
const in0 = new Int32Array(16).map((_, i) => i), in1 = new Int32Array(16).fill(1);
writeFileSync('$BODY/json', JSON.stringify({ inputs: [['INPUT0', in0], ['INPUT1', in1]].map(([name, d]) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from(d) })) }));
const h = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })) }));
writeFileSync('$BODY/binary', Buffer.concat([h, Buffer.from(in0.buffer), Buffer.from(in1.buffer)]));
writeFileSync('$BODY/binary.len', String(h.length));
"
HL=''; [ "$ENC" = binary ] && HL=$(cat "$BODY/binary.len")
client() {
  node --input-type=module -e "
import http from 'node:http';
import { readFileSync } from 'node:fs';
const body = readFileSync('$BODY/$ENC');
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const headers = { 'Content-Type': 'application/octet-stream', 'Content-Length': body.length };
if ('$HL') headers['Inference-Header-Content-Length'] = '$HL';
let bad = 0;
for (let i = 0; i < $1; i++) {
  await new Promise((res, rej) => {
    const r = http.request({ host: '127.0.0.1', port: $PORT, path: '/v2/models/simple/infer', method: 'POST', agent, headers }, (s) => {
      if (s.statusCode !== 200) bad++;
      s.resume(); s.on('end', res).on('error', rej);
    });
    r.on('error', rej); r.end(body);
  });
}
agent.destroy();
if (bad) { console.error(bad + ' requests failed'); process.exit(1); }
"
}
CACHE=(); [ -n "${CACHE_SIM:-}" ] && CACHE=(--cache-sim=yes)
valgrind --tool=callgrind --instr-atstart=no --smc-check=all-non-file --separate-threads=yes "${CACHE[@]}" \
  --callgrind-out-file="$OUT/$NAME.out" "${ARGV[@]}" > "$OUT/$NAME.log" 2>&1 &
VG=$!
for _ in $(seq 1 600); do (echo > "/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.5; done
client "$WARM"
callgrind_control -i on "$VG" > /dev/null 2>&1
client "$N"
callgrind_control -i off "$VG" > /dev/null 2>&1
callgrind_control -d "$VG" > /dev/null 2>&1
kill -INT "$VG"; wait "$VG" 2>/dev/null || true; VG=
echo "$NAME $ENC: instructions per request ($N sequential requests after $WARM), by thread"
for f in "$OUT/$NAME".out.1-*; do
  t=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  [[ "$t" =~ ^[0-9]+$ ]] && [ $(( t / N )) -gt 0 ] && printf '  thread %s: %d\n' "${f##*-}" $(( t / N ))
done
# With CACHE_SIM=1: the main thread's simulated cache misses a request (valgrind's model of the
# machine's caches: I1/D1 first level, LL last level; instruction and data reads, data writes).
if [ -n "${CACHE_SIM:-}" ]; then
  callgrind_annotate "$OUT/$NAME.out.1-01" 2>/dev/null | awk -v n="$N" '
    /^Ir +Dr/ && !k { k = NF; for (i = 1; i <= NF; i++) name[i] = $i; next }
    /PROGRAM TOTALS/ { printf "  main thread a request:"; j = 0; for (i = 1; i <= NF; i++) { if ($i ~ /^[0-9,]+$/) { v = $i; gsub(",", "", v); printf " %s %.0f", name[++j], v / n } } print "" }'
fi
