// Two onnxruntime sessions of one model taking turns on one thread, against one session: what an
// instance's caches cost when a model's two instances run on one core's main thread (bench/RESULTS.md,
// issue #18, ppocr_cls on one core). Pin it to one cpu to compare with the server on that cpu.
// Usage: taskset -c 1 node bench/session-turns.mjs [model_repository] [model, ppocr_cls] [seconds a window, 3] [rounds, 3]
import * as ort from 'onnxruntime-node';
import { join } from 'node:path';

const [repo = 'model_repository', model = 'ppocr_cls', seconds = '3', rounds = '3'] = process.argv.slice(2);
const INPUTS = {
  simple: () => ({ INPUT0: new ort.Tensor('int32', new Int32Array(16).fill(1), [1, 16]), INPUT1: new ort.Tensor('int32', new Int32Array(16).fill(2), [1, 16]) }),
  ppocr_cls: () => ({ x: new ort.Tensor('float32', new Float32Array(3 * 48 * 192).fill(0.1), [1, 3, 48, 192]) }),
};
if (!(model in INPUTS)) throw new Error(`model must be one of ${Object.keys(INPUTS).join(', ')}`);
const file = join(repo, model, '1', 'model.onnx');
const options = { intraOpNumThreads: 1, interOpNumThreads: 1 };
const sessions = [await ort.InferenceSession.create(file, options), await ort.InferenceSession.create(file, options)];
const feeds = INPUTS[model]();
for (let i = 0; i < 100; i++) for (const s of sessions) await s.run(feeds);
for (let round = 0; round < Number(rounds); round++) {
  for (const n of [1, 2]) {
    const end = performance.now() + Number(seconds) * 1000;
    let runs = 0;
    while (performance.now() < end) await sessions[runs++ % n].run(feeds);
    console.log(JSON.stringify({ model, round, sessions: n, runsPerSec: Math.round(runs / Number(seconds)) }));
  }
}
