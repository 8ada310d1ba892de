// Issue #18: ns per normalizeRequest call on `simple`'s request (two INT32 [1,16] inputs), the
// core's per-request check of a request against its model config. Pure CPU, no I/O.
//   npm run build && node bench/normalize-request.mjs [calls per window, default 1e6] [windows, default 5]
// Prints the median of the windows (ns per call).
import { normalizeRequest } from '@triode/core';

const [calls = '1000000', windows = '5'] = process.argv.slice(2);
const config = {
  name: 'simple', max_batch_size: 8,
  input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] }],
  output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] }],
};
const a = new Int32Array(16);
const b = new Int32Array(16);
const request = () => ({ modelName: 'simple', inputs: [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: b }] });
const n = Number(calls);
const reqs = Array.from({ length: 1024 }, request);
let sink = 0;
const window = () => {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) sink += normalizeRequest(reqs[i & 1023], config);
  return Number(process.hrtime.bigint() - t) / n;
};
window(); // warm-up (JIT)
const ns = Array.from({ length: Number(windows) }, window).sort((x, y) => x - y);
console.log(JSON.stringify({ nsPerCall: Number(ns[ns.length >> 1].toFixed(1)), min: Number(ns[0].toFixed(1)), max: Number(ns[ns.length - 1].toFixed(1)), sink }));
