import { InferenceServer } from '@triode/core';
import { OnnxRuntimeBackend } from '@triode/backends';
const s = await InferenceServer.create({ modelRepositories: ['bench/out/repo'], backends: [new OnnxRuntimeBackend()] });
const src = new Float32Array(3 * 48 * 192).fill(0.1);
const mk = () => ({ modelName: 'ppocr_cls', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], data: src.slice() }] });
const mks = () => ({ modelName: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }] });
for (const [m, f] of [['cls', mk], ['simple', mks]]) for (const conc of [1, 16]) {
  let n = 0; const end = performance.now() + 3000; const lat = [];
  await Promise.all(Array.from({ length: conc }, async () => { while (performance.now() < end) { const t = performance.now(); await s.infer(f()); lat.push(performance.now() - t); n++; } }));
  lat.sort((a, b) => a - b);
  console.log(m, conc, (n / 3).toFixed(0), 'req/s p50', lat[lat.length >> 1].toFixed(3));
}
await s.stop();
