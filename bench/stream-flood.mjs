// A gRPC ModelStreamInfer client that sends one repeat_int32 request of N elements (N responses)
// and never reads them; prints the server's RSS each second for 20 s, and after it hangs up.
// Embedded mode holds the model back; a gateway bounds what waits (README, limits). Run by hand
// against a server (or gateway) on GRPC_PORT with repeat_int32 loaded, PID its process:
//   node bench/stream-flood.mjs GRPC_PORT PID [N=300000]
import { connect } from 'node:http2';
import { readFileSync } from 'node:fs';
import { messageType } from '../packages/core/dist/index.js';

const [port, pid, n = 300_000] = process.argv.slice(2).map(Number);
if (!port || !pid) {
  console.error('usage: node bench/stream-flood.mjs GRPC_PORT PID [N]');
  process.exit(2);
}
const raw = (a) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const type = messageType('ModelInferRequest');
const msg = type.encode(type.fromObject({
  model_name: 'repeat_int32',
  inputs: [{ name: 'IN', datatype: 'INT32', shape: [n] }, { name: 'DELAY', datatype: 'UINT32', shape: [n] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
  raw_input_contents: [raw(new Int32Array(n).fill(7)), raw(new Uint32Array(n)), raw(Uint32Array.of(0))],
})).finish();
const frame = Buffer.alloc(5 + msg.byteLength);
frame.writeUInt32BE(msg.byteLength, 1);
frame.set(msg, 5);
const rss = () => Math.round(Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024);
console.log(`start: RSS ${rss()} MiB`);
const session = connect(`http://127.0.0.1:${port}`);
session.on('error', () => {});
const call = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelStreamInfer', 'content-type': 'application/grpc', te: 'trailers' });
call.on('error', () => {});
call.pause(); // never read
call.write(frame);
let max = 0;
for (let t = 1; t <= 20; t++) {
  await new Promise((r) => setTimeout(r, 1000));
  max = Math.max(max, rss());
}
session.destroy();
await new Promise((r) => setTimeout(r, 3000));
console.log(`max over 20 s: RSS ${max} MiB; 3 s after hanging up: ${rss()} MiB`);
