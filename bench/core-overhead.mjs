// Issue #18: what the core itself costs per request. InferenceServer.infer on a copy of
// `simple`'s config (two INT32 [1,16] inputs, dynamic batching) served by a backend that adds and
// subtracts in JS on the calling thread, so nearly all the CPU measured is the core's.
//   npm run build && node bench/core-overhead.mjs [concurrency, default 1] [windows, default 5] [ms per window, default 1000]
// Prints the median window: requests/s and process CPU µs per request.
import { mkdtempSync, mkdirSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { InferenceServer } from '@triode/core';

const [conc = '1', windows = '5', ms = '1000'] = process.argv.slice(2);
const repo = mkdtempSync(join(tmpdir(), 'core-overhead-'));
mkdirSync(join(repo, 'simple', '1'), { recursive: true });
writeFileSync(join(repo, 'simple', 'config.pbtxt'), `name: "simple"
backend: "addsub"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
dynamic_batching { }
instance_group [ { count: 1 kind: KIND_CPU } ]
`);
const addsub = {
  name: 'addsub',
  async modelInitialize() {
    return {
      async instanceInitialize() {
        return {
          async execute(requests) {
            return { responses: requests.map((r) => {
              const a = r.inputs[0].data;
              const b = r.inputs[1].data;
              const sum = new Int32Array(a.length);
              const diff = new Int32Array(a.length);
              for (let i = 0; i < a.length; i++) { sum[i] = a[i] + b[i]; diff[i] = a[i] - b[i]; }
              return { outputs: [
                { name: 'OUTPUT0', datatype: 'INT32', shape: r.inputs[0].shape, data: sum },
                { name: 'OUTPUT1', datatype: 'INT32', shape: r.inputs[0].shape, data: diff }] };
            }) };
          },
          async finalize() {},
        };
      },
      async finalize() {},
    };
  },
};
const server = await InferenceServer.create({ modelRepositories: [repo], backends: [addsub] });
const request = () => ({ modelName: 'simple', inputs: [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) }] });
const window = async (length) => {
  let n = 0;
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const end = t0 + length;
  await Promise.all(Array.from({ length: Number(conc) }, async () => {
    while (performance.now() < end) {
      await server.infer(request());
      n++;
    }
  }));
  const c = process.cpuUsage(cpu);
  return { rps: n / ((performance.now() - t0) / 1000), cpuUsPerReq: (c.user + c.system) / n };
};
await window(1000); // warm-up (JIT)
const rs = [];
for (let i = 0; i < Number(windows); i++) rs.push(await window(Number(ms)));
rs.sort((x, y) => x.cpuUsPerReq - y.cpuUsPerReq);
const mid = rs[rs.length >> 1];
console.log(JSON.stringify({ c: Number(conc), rps: Math.round(mid.rps), cpuUsPerReq: Number(mid.cpuUsPerReq.toFixed(2)), cpuMin: Number(rs[0].cpuUsPerReq.toFixed(2)), cpuMax: Number(rs[rs.length - 1].cpuUsPerReq.toFixed(2)) }));
await server.stop();
rmSync(repo, { recursive: true, force: true });
