// Does onnxruntime run ppocr_cls slower on an input it has not seen in cache? bench/raw-limit.mjs
// reuses one input buffer for every run, where Triode hands each run a request's own buffer; this
// times one session (1 intra-op thread) on one thread with four ways of feeding it:
//   same  - one buffer for every run (raw-limit.mjs)
//   pool  - 64 buffers in turn (each run's input cold, as distinct requests)
//   copy  - one buffer, overwritten from one of 64 before each run (a copy into a pooled buffer)
//   fresh - a new buffer for each run, filled by a copy (a request's tensor)
// Usage: taskset -c 1 node bench/cls-input-reuse.mjs [seconds] [modes]   (modes: same,pool,copy,fresh)
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';

const seconds = Number(process.argv[2] ?? 4);
const modes = (process.argv[3] ?? 'same,pool,copy,fresh').split(',');
const session = await ort.InferenceSession.create(join('model_repository', 'ppocr_cls', '1', 'model.onnx'), { intraOpNumThreads: 1, interOpNumThreads: 1 });
const dims = [1, 3, 48, 192];
const n = 3 * 48 * 192;
const same = new Float32Array(n).fill(0.1);
const pool = Array.from({ length: 64 }, () => new Float32Array(n).fill(0.1));
let k = 0;
const feeds = {
  same: () => same,
  pool: () => pool[k++ & 63],
  copy: () => { same.set(pool[k++ & 63]); return same; },
  fresh: () => { const a = new Float32Array(n); a.set(same); return a; },
};
for (const mode of modes) {
  const next = feeds[mode];
  if (!next) throw new Error(`unknown mode ${mode}`);
  for (let i = 0; i < 200; i++) await session.run({ x: new ort.Tensor('float32', next(), dims) });
  const end = performance.now() + seconds * 1000;
  let runs = 0;
  while (performance.now() < end) {
    await session.run({ x: new ort.Tensor('float32', next(), dims) });
    runs++;
  }
  console.log(JSON.stringify({ mode, runsPerSec: Math.round(runs / seconds) }));
}
