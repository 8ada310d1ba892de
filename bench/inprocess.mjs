// Triode without HTTP: the in-process API (InferenceServer.infer) driven by N concurrent callers
// for S seconds on b1 requests. Shows what the core + instance threads reach on their own.
// Usage: node bench/inprocess.mjs <model_repository> <model> <concurrency> <seconds>
import { InferenceServer } from '@triode/core';
import { OnnxRuntimeBackend } from '@triode/backends';

const [repo = 'model_repository', model = 'simple', conc = '16', seconds = '10'] = process.argv.slice(2);
const server = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()] });
const request = model === 'simple'
  ? () => ({ modelName: model, inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) }] })
  : () => ({ modelName: model, inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], data: new Float32Array(3 * 48 * 192).fill(0.1) }] });
const run = async (ms) => {
  let n = 0;
  const lat = [];
  const end = performance.now() + ms;
  await Promise.all(Array.from({ length: Number(conc) }, async () => {
    while (performance.now() < end) {
      const t = performance.now();
      await server.infer(request());
      lat.push(performance.now() - t);
      n++;
    }
  }));
  lat.sort((a, b) => a - b);
  return { rps: n / (ms / 1000), p50: lat[Math.floor(lat.length * 0.5)], p99: lat[Math.floor(lat.length * 0.99)] };
};
await run(2000);
const r = await run(Number(seconds) * 1000);
console.log(JSON.stringify({ model, c: Number(conc), ...r }));
await server.stop();
