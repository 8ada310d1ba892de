# Shell helpers shared by bench/busy-handoff.sh, bench/settle.sh, bench/pair-windows.sh and bench/perf-main.sh (sourced,
# not run): `simple`'s binary and JSON requests for wrk (and its gRPC message for h2load), a thread split for the `split` layout, and a process's CPU per thread, a free port.

# simple_body DIR: writes DIR/simple.bin (the request bench/http.mjs sends) and exports BODY_FILE and
# HEADER_LEN for bench/post.lua.
simple_body() {
  node -e '
const fs = require("fs");
const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: ["INPUT0", "INPUT1"].map((name) => ({ name, datatype: "INT32", shape: [1, 16], parameters: { binary_data_size: 64 } })) }));
const in0 = new Int32Array(16).map((_, i) => i), in1 = new Int32Array(16).fill(1);
fs.writeFileSync(process.argv[1] + "/simple.bin", Buffer.concat([header, Buffer.from(in0.buffer), Buffer.from(in1.buffer)]));
fs.writeFileSync(process.argv[1] + "/header-len", String(header.length));
' "$1"
  export BODY_FILE=$1/simple.bin HEADER_LEN
  HEADER_LEN=$(cat "$1/header-len")
}

# simple_json_body DIR: writes DIR/simple.json (simple's request with JSON tensors, as the naive
# server takes it) and exports BODY_FILE and HEADER_LEN (empty) for bench/post.lua.
simple_json_body() {
  node -e 'require("fs").writeFileSync(process.argv[1], JSON.stringify({ inputs: [["INPUT0", Array.from({ length: 16 }, (_, i) => i)], ["INPUT1", new Array(16).fill(1)]].map(([name, data]) => ({ name, datatype: "INT32", shape: [1, 16], data })) }))' "$1/simple.json"
  export BODY_FILE=$1/simple.json HEADER_LEN=
}

# simple_grpc_body DIR: writes DIR/simple.grpc, simple's ModelInferRequest (the tensors of
# simple.bin, in raw_input_contents) with gRPC's 5-byte prefix, for h2load's -d (needs `npm run build`).
simple_grpc_body() {
  node --input-type=module -e '
import { messageType } from "./packages/core/dist/index.js";
import { writeFileSync } from "node:fs";
const T = messageType("ModelInferRequest");
const raw = (a) => Buffer.from(a.buffer);
const msg = T.encode(T.fromObject({ model_name: "simple", inputs: ["INPUT0", "INPUT1"].map((name) => ({ name, datatype: "INT32", shape: [1, 16] })),
  raw_input_contents: [raw(new Int32Array(16).map((_, i) => i)), raw(new Int32Array(16).fill(1))] })).finish();
const frame = Buffer.alloc(5 + msg.byteLength);
frame.writeUInt32BE(msg.byteLength, 1);
frame.set(msg, 5);
writeFileSync(process.argv[1] + "/simple.grpc", frame);
' "$1"
}

# split_threads PID: its main thread alone on cpu 1, its other threads on cpu 0 (a thread made
# later takes the affinity of the thread that made it: call it again before measuring). A thread
# that ends meanwhile is skipped.
split_threads() {
  local t
  for t in /proc/"$1"/task/*; do
    t=$(basename "$t")
    if [ "$t" = "$1" ]; then taskset -p -c 1 "$t" >/dev/null 2>&1 || true; else taskset -p -c 0 "$t" >/dev/null 2>&1 || true; fi
  done
}

# cpu_ms PID: "main_ms other_ms", the CPU its main thread and its other threads have taken so far
# (/proc/PID/task/*/schedstat; a thread that has ended no longer counts).
cpu_ms() {
  local main=0 other=0 t ns
  for t in /proc/"$1"/task/*; do
    ns=$(cut -d' ' -f1 "$t/schedstat" 2>/dev/null || echo 0)
    if [ "$(basename "$t")" = "$1" ]; then main=$((main + ns)); else other=$((other + ns)); fi
  done
  echo "$((main / 1000000)) $((other / 1000000))"
}

# free_port: a TCP port free on 127.0.0.1 now.
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close();})"; }

# load_setup [TOOL [HOW TO INSTALL IT]]: checks for the load generator (wrk by default) and two
# cpus, makes $work (removed on exit, with the server $pid when set: the only process a script
# ends) and simple's request in it.
load_setup() {
  command -v "${1:-wrk}" >/dev/null || { echo "needs ${1:-wrk}${2:+ ($2)}" >&2; exit 2; }
  [ "$(nproc)" -ge 2 ] || { echo "needs 2 cpus" >&2; exit 2; }
  work=$(mktemp -d)
  pid=''
  trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$work"' EXIT
  simple_body "$work"
}
