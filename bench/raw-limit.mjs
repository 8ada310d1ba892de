// The raw onnxruntime limit: N worker threads, each with its own session (1 intra-op thread),
// calling session.run back to back on pre-built b1 inputs. No server, no serialization: what a
// perfect server could reach on this machine.
// Usage: node bench/raw-limit.mjs <model_repository> <model> <threads> <seconds>
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { join } from 'node:path';

const INPUTS = {
  simple: (ort) => ({
    INPUT0: new ort.Tensor('int32', new Int32Array(16).fill(1), [1, 16]),
    INPUT1: new ort.Tensor('int32', new Int32Array(16).fill(2), [1, 16]),
  }),
  ppocr_cls: (ort) => ({ x: new ort.Tensor('float32', new Float32Array(3 * 48 * 192).fill(0.1), [1, 3, 48, 192]) }),
};

if (isMainThread) {
  const [repo = 'model_repository', model = 'simple', threads = '2', seconds = '10'] = process.argv.slice(2);
  const workers = Array.from({ length: Number(threads) }, () => new Worker(new URL(import.meta.url), { workerData: { repo, model, seconds: Number(seconds) } }));
  const counts = await Promise.all(workers.map((w) => new Promise((res) => w.once('message', res))));
  const total = counts.reduce((a, b) => a + b, 0);
  console.log(JSON.stringify({ model, threads: Number(threads), seconds: Number(seconds), inferencesPerSec: total / Number(seconds) }));
} else {
  const ort = await import('onnxruntime-node');
  const { repo, model, seconds } = workerData;
  const s = await ort.InferenceSession.create(join(repo, model, '1', 'model.onnx'), { intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = INPUTS[model](ort);
  for (let i = 0; i < 200; i++) await s.run(feeds);
  const end = performance.now() + seconds * 1000;
  let n = 0;
  while (performance.now() < end) {
    await s.run(feeds);
    n++;
  }
  parentPort.postMessage(n);
}
