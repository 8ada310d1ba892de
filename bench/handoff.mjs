// Issue #18 scope 1: what handing a tiny execution to an instance thread costs, against running it
// on the main thread. `simple` (INT32 add/sub of two [1,16] tensors), the backend's real thread
// file (packages/backends/dist/onnxruntime/onnxruntime-thread.js, so `npm run build` first) and
// the same piscina options as an onnxruntime instance. Run by hand:
//   node bench/handoff.mjs [--seconds 2] [--rounds 5]
// For each way and in-flight count: calls/s, wall µs per call (1 in flight: the latency), and
// main-thread CPU µs per call (from /proc/self/task/<pid>/stat, the main thread only), the median
// of --rounds timed windows after a warm-up.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Piscina } from 'piscina';
import * as ort from 'onnxruntime-node';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const MODEL = join(ROOT, 'model_repository', 'simple', '1', 'model.onnx');
const THREAD = join(ROOT, 'packages', 'backends', 'dist', 'onnxruntime', 'onnxruntime-thread.js');
const { values: args } = parseArgs({ options: { seconds: { type: 'string', default: '2' }, rounds: { type: 'string', default: '5' } } });
const SECONDS = Number(args.seconds);
const ROUNDS = Number(args.rounds);

/** CPU time of the main thread so far, µs (clock ticks: 100 a second). */
function mainCpuUs() {
  const f = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const p = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(p[11]) + Number(p[12])) * 1e4;
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Runs `call` with `inflight` calls outstanding for SECONDS, ROUNDS times; medians. */
async function measure(name, inflight, call) {
  const stop = { at: 0 };
  const loop = async () => { let n = 0; while (performance.now() < stop.at) { await call(); n++; } return n; };
  stop.at = performance.now() + 500;
  await Promise.all(Array.from({ length: inflight }, loop)); // warm-up
  const rows = [];
  for (let r = 0; r < ROUNDS; r++) {
    const c0 = mainCpuUs();
    const t0 = performance.now();
    stop.at = t0 + SECONDS * 1000;
    const counts = await Promise.all(Array.from({ length: inflight }, loop));
    const wallMs = performance.now() - t0;
    const n = counts.reduce((a, b) => a + b, 0);
    rows.push({ rate: n / (wallMs / 1000), wallUs: (wallMs * 1000 * inflight) / n, cpuUs: (mainCpuUs() - c0) / n });
  }
  const out = { way: name, inflight, callsPerS: Math.round(median(rows.map((r) => r.rate))), wallUsPerCall: +median(rows.map((r) => r.wallUs)).toFixed(1), mainCpuUsPerCall: +median(rows.map((r) => r.cpuUs)).toFixed(1) };
  console.log(JSON.stringify(out));
  return out;
}

const in0 = () => new Int32Array(16).map((_, i) => i);
const in1 = () => new Int32Array(16).fill(1);

// 1. session.run on this thread, as the in-thread path would call it.
const session = await ort.InferenceSession.create(MODEL, { intraOpNumThreads: 1, interOpNumThreads: 1 });
const feeds = () => ({ INPUT0: new ort.Tensor('int32', in0(), [1, 16]), INPUT1: new ort.Tensor('int32', in1(), [1, 16]) });
const inline = [];
for (const c of [1, 2]) inline.push(await measure('main thread: session.run', c, () => session.run(feeds(), ['OUTPUT0', 'OUTPUT1'])));

// The run alone: the time the main thread is blocked by the native call (a marker immediate
// queued just before session.run's own immediate, which holds the call).
const blocked = [];
for (let i = 0; i < 20000; i++) {
  let t0 = 0;
  setImmediate(() => { t0 = performance.now(); });
  await session.run(feeds(), ['OUTPUT0', 'OUTPUT1']);
  if (i >= 2000) blocked.push((performance.now() - t0) * 1000);
}
console.log(JSON.stringify({ way: 'main thread: blocked per session.run (µs)', p50: +median(blocked).toFixed(1), p99: +[...blocked].sort((a, b) => a - b)[Math.floor(blocked.length * 0.99)].toFixed(1) }));

// 2. The instance thread: the backend's thread file and an instance's piscina options.
const pool = new Piscina({ filename: THREAD, name: 'default', minThreads: 1, maxThreads: 1, idleTimeout: Infinity, concurrentTasksPerWorker: 2, atomics: 'sync', recordTiming: false, maxQueue: 'auto' });
await pool.run({ op: 'load', modelFile: MODEL, sessionOptions: { intraOpNumThreads: 1, interOpNumThreads: 1, executionMode: 'sequential', graphOptimizationLevel: 'all', enableCpuMemArena: true, enableMemPattern: true, configEntries: {}, arenaResetBytes: 0 } });
const task = () => {
  const a = in0();
  const b = in1();
  return { op: 'execute', requests: [{ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: a }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: b }], batchSize: 1 }], outputNames: ['OUTPUT0', 'OUTPUT1'], batching: true, transfer: [a.buffer, b.buffer] };
};
const inThreadNs = [];
const thread = [];
for (const c of [1, 2]) {
  thread.push(await measure('instance thread: piscina round trip', c, async () => {
    const t = task();
    const r = await pool.run(t, { transferList: t.transfer });
    if (r.error) throw new Error(r.error.message);
    inThreadNs.push(r.computeInputNs + r.computeInferNs + r.computeOutputNs);
  }));
}
console.log(JSON.stringify({ way: 'instance thread: compute inside the thread per call (µs, as reported to statistics)', p50: +(median(inThreadNs) / 1000).toFixed(1) }));
await pool.close({ force: true });

const [i1, i2] = inline;
const [t1, t2] = thread;
console.log(`\n| way | in flight | calls/s | wall µs a call | main-thread CPU µs a call |\n|---|---|---|---|---|`);
for (const r of [i1, i2, t1, t2]) console.log(`| ${r.way} | ${r.inflight} | ${r.callsPerS} | ${r.wallUsPerCall} | ${r.mainCpuUsPerCall} |`);
console.log(`\nhand-off (1 in flight): ${(t1.wallUsPerCall - i1.wallUsPerCall).toFixed(1)} µs more latency, ${(t1.mainCpuUsPerCall - i1.mainCpuUsPerCall).toFixed(1)} µs more main-thread CPU a call than running it on the main thread`);
console.log(`hand-off (2 in flight, an instance's pipeline depth): ${(t2.mainCpuUsPerCall - i2.mainCpuUsPerCall).toFixed(1)} µs more main-thread CPU a call`);
