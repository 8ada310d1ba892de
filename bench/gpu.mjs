// Issue #17 benchmark: ppocr_det and ppocr_cls at batch 1, 4 and 16, on a GPU (an execution
// provider, webgpu by default) and on the CPU (--cpu-threads intra-op threads), each through
// `triode serve` (HTTP, binary tensors, --concurrency requests in flight) and directly on one raw
// onnxruntime session (one run at a time: the session's own limit). Prints a markdown table.
// Run by hand where a GPU exists (needs the driver, libvulkan1 and the NVIDIA ICD for webgpu; see
// README, GPUs). Not run in CI, and not run where it was written (no GPU there):
//   node bench/gpu.mjs [--seconds 10] [--concurrency 4] [--batches 1,4,16] [--models ppocr_det,ppocr_cls]
//                      [--provider webgpu] [--cpu-threads 8] [--det-size 960] [--devices gpu,cpu]
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Worker } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '10' },
  warmup: { type: 'string', default: '2' },
  concurrency: { type: 'string', default: '4' },
  batches: { type: 'string', default: '1,4,16' },
  models: { type: 'string', default: 'ppocr_det,ppocr_cls' },
  provider: { type: 'string', default: 'webgpu' },
  'cpu-threads': { type: 'string', default: '8' },
  'det-size': { type: 'string', default: '960' },
  devices: { type: 'string', default: 'gpu,cpu' },
} });
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);
const CONCURRENCY = Number(args.concurrency);
const BATCHES = args.batches.split(',').map(Number);
const CPU_THREADS = Number(args['cpu-threads']);
const DET = Number(args['det-size']);
const DEVICES = args.devices.split(',');
const MODELS = {
  ppocr_det: { input: 'x', output: 'sigmoid_0.tmp_0', dims: [3, DET, DET], outDims: [1, -1, -1] },
  ppocr_cls: { input: 'x', output: 'softmax_0.tmp_0', dims: [3, 48, 192], outDims: [2] },
};

const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
const sample = (n) => Float32Array.from({ length: n }, (_, i) => Math.round(Math.sin(i) * 1e4) / 1e4);

/** Runs `once` in `c` loops for `seconds` (after a warmup): requests per second and mean latency. */
async function measure(once, c, seconds) {
  const loop = async (until, lat) => { while (performance.now() < until) { const t = performance.now(); await once(); lat.push(performance.now() - t); } };
  await Promise.all(Array.from({ length: c }, () => loop(performance.now() + WARMUP * 1000, [])));
  const lat = [];
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, () => loop(t0 + seconds * 1000, lat)));
  const s = (performance.now() - t0) / 1000;
  return { rps: lat.length / s, meanMs: lat.reduce((a, b) => a + b, 0) / Math.max(1, lat.length) };
}

/** A repository with `<model>_gpu` (KIND_GPU, the provider) and `<model>_cpu` (KIND_CPU, CPU_THREADS threads), one instance each. */
function repository() {
  const repo = mkdtempSync(join(tmpdir(), 'triode-gpu-bench-'));
  for (const [name, m] of Object.entries(MODELS)) {
    for (const device of DEVICES) {
      const dir = join(repo, `${name}_${device}`);
      cpSync(join(ROOT, 'model_repository', name, '1'), join(dir, '1'), { recursive: true });
      const dims = name === 'ppocr_det' ? '[ 3, -1, -1 ]' : `[ ${m.dims.join(', ')} ]`;
      writeFileSync(join(dir, 'config.pbtxt'), [
        `platform: "onnxruntime_onnx"`, `max_batch_size: ${Math.max(...BATCHES)}`,
        `input [ { name: "${m.input}" data_type: TYPE_FP32 dims: ${dims} } ]`,
        `output [ { name: "${m.output}" data_type: TYPE_FP32 dims: [ ${m.outDims.join(', ')} ] } ]`,
        device === 'gpu'
          ? `instance_group [ { count: 1, kind: KIND_GPU } ]\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "${args.provider}" } ] } }`
          : `instance_group [ { count: 1, kind: KIND_CPU } ]\nparameters { key: "intra_op_thread_count" value: { string_value: "${CPU_THREADS}" } }`,
      ].join('\n'));
    }
  }
  return repo;
}

async function startServe(repo) {
  const port = await freePort();
  const p = spawn(process.execPath, ['--initial-old-space-size=128', join(ROOT, 'packages', 'cli', 'bin', 'triode.js'), 'serve', '--model-repository', repo,
    `--http-port=${port}`, '--http-address=127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--strict-readiness=false',
    `--http-max-input-size=${2 ** 30}`], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  p.on('error', (err) => { throw err; });
  let out = '';
  await new Promise((res, rej) => {
    const on = (d) => { out += d; process.stderr.write(d); if (/Started HTTPService/.test(out)) res(); };
    p.stdout.on('data', on);
    p.stderr.on('data', on);
    p.once('exit', (code) => rej(new Error(`triode serve exited with ${code}`)));
  });
  return { base: `http://127.0.0.1:${port}`, stop: () => new Promise((r) => { p.once('exit', r); p.kill('SIGTERM'); }) };
}

/** One binary-tensor request body for `batch` samples. */
function body(m, batch) {
  const data = sample(batch * m.dims.reduce((a, b) => a * b, 1));
  const header = Buffer.from(JSON.stringify({
    inputs: [{ name: m.input, datatype: 'FP32', shape: [batch, ...m.dims], parameters: { binary_data_size: data.byteLength } }],
    outputs: [{ name: m.output, parameters: { binary_data: true } }],
  }));
  return { body: Buffer.concat([header, Buffer.from(data.buffer)]), headerLength: header.length };
}

const rows = [];
const row = (model, batch, path, device, r) => {
  rows.push({ model, batch, path, device, ...r });
  console.error(`${model} b${batch} ${path} ${device}: ${r.error ?? `${(r.rps * batch).toFixed(1)} inf/s`}`);
};

/**
 * `batch` pages for the detector, NCHW, normalized as PP-OCR does ((v - 0.485) / 0.229 ...): white
 * with lines of dark box-shaped glyphs, shifted per page, so the detector finds text (probabilities
 * near 1 over a sixth of the page, checked on the CPU) and its output is not all near zero (a sine or constant input gives probabilities of ~1e-8 everywhere,
 * where any rounding is a large relative error).
 */
function pageImage(batch, h, w) {
  const out = new Float32Array(batch * 3 * h * w);
  const mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225];
  // Lines 40 px apart of box-shaped glyphs 14 px wide and 16 high (two stems, three bars).
  const ink = (y, x) => {
    const ly = y % 40, lx = x % 14;
    return ly >= 12 && ly < 28 && x > 20 && x < w - 20 && (lx === 2 || lx === 3 || lx === 9 || lx === 10 || ((ly === 12 || ly === 13 || ly === 19 || ly === 26 || ly === 27) && lx >= 2 && lx <= 10));
  };
  for (let b = 0; b < batch; b++) {
    for (let y = 0; y < h; y++) {
      for (let x = 0; x < w; x++) {
        const v = ink(y + 3 * b, x + 5 * b) ? 0.05 : 0.97;
        for (let c = 0; c < 3; c++) out[((b * 3 + c) * h + y) * w + x] = (v - mean[c]) / std[c];
      }
    }
  }
  return out;
}

/**
 * Does the model served on the GPU compute what onnxruntime computes on the CPU? One batch of the
 * largest size, fresh non-zero data, through `triode serve` (HTTP, binary output) against a CPU
 * session on the same input: the relative L2 error ||gpu - cpu|| / ||cpu|| and the largest
 * absolute difference (float32 kernels: far under 1e-3 expected).
 */
const checks = [];
async function check(name, m, file) {
  const batch = Math.max(...BATCHES);
  const n = batch * m.dims.reduce((a, b) => a * b, 1);
  const data = name === 'ppocr_det' ? pageImage(batch, m.dims[1], m.dims[2])
    : Float32Array.from({ length: n }, (_, i) => Math.round(Math.cos(i * 0.37 + checks.length) * 1e4) / 1e4);
  const cpu = await ort.InferenceSession.create(file, { intraOpNumThreads: CPU_THREADS, executionProviders: ['cpu'] });
  const want = (await cpu.run({ [m.input]: new ort.Tensor('float32', data, [batch, ...m.dims]) }))[m.output].data;
  await cpu.release();
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: m.input, datatype: 'FP32', shape: [batch, ...m.dims], parameters: { binary_data_size: data.byteLength } }], outputs: [{ name: m.output, parameters: { binary_data: true } }] }));
  const r = await fetch(`${serve.base}/v2/models/${name}_gpu/infer`, { method: 'POST', body: Buffer.concat([header, Buffer.from(data.buffer)]), headers: { 'Inference-Header-Content-Length': String(header.length) } });
  const buf = Buffer.from(await r.arrayBuffer());
  if (r.status !== 200) { checks.push({ name, batch, error: `HTTP ${r.status}: ${buf.toString().slice(0, 200)}` }); return; }
  const hl = Number(r.headers.get('inference-header-content-length'));
  const bytes = buf.subarray(hl);
  const got = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  if (got.length !== want.length) { checks.push({ name, batch, error: `${got.length} values, want ${want.length}` }); return; }
  let num = 0, den = 0, maxAbs = 0, nan = 0;
  for (let i = 0; i < want.length; i++) {
    if (!Number.isFinite(got[i])) nan++;
    const d = got[i] - want[i];
    num += d * d; den += want[i] * want[i]; maxAbs = Math.max(maxAbs, Math.abs(d));
  }
  checks.push({ name, batch, values: want.length, relL2: Math.sqrt(num / den), maxAbs, nan });
  console.error(`check ${name} b${batch}: ${JSON.stringify(checks.at(-1))}`);
}

/**
 * A raw session on a worker thread, as Triode runs a KIND_GPU instance (1 CPU thread): each batch
 * timed as the main-thread raw session is. If this is slow where the main-thread session is fast,
 * the cost is onnxruntime or Dawn on a worker thread, not Triode's request path.
 */
function rawOnWorker(file, m, options) {
  const code = `
const { parentPort, workerData: w } = require('node:worker_threads');
const ort = require('node:module').createRequire(w.root + '/package.json')('onnxruntime-node');
(async () => {
  const s = await ort.InferenceSession.create(w.file, w.options);
  const out = [];
  for (const batch of w.batches) {
    const n = batch * w.dims.reduce((a, b) => a * b, 1);
    const x = new ort.Tensor('float32', Float32Array.from({ length: n }, (_, i) => Math.round(Math.sin(i) * 1e4) / 1e4), [batch, ...w.dims]);
    const loop = async (ms) => { const lat = []; const end = performance.now() + ms; while (performance.now() < end) { const t = performance.now(); await s.run({ [w.input]: x }); lat.push(performance.now() - t); } return lat; };
    await loop(w.warmup * 1000);
    const t0 = performance.now();
    const lat = await loop(w.seconds * 1000);
    const sec = (performance.now() - t0) / 1000;
    out.push({ batch, rps: lat.length / sec, meanMs: lat.reduce((a, b) => a + b, 0) / Math.max(1, lat.length) });
  }
  await s.release();
  parentPort.postMessage(out);
})().catch((err) => parentPort.postMessage({ error: String(err && err.message || err).split('\\n')[0] }));
`;
  return new Promise((res) => {
    const wk = new Worker(code, { eval: true, workerData: { root: ROOT, file, options, batches: BATCHES, dims: m.dims, input: m.input, seconds: SECONDS, warmup: WARMUP } });
    wk.once('message', (r) => { res(r); void wk.terminate(); });
    wk.once('error', (err) => res({ error: err.message }));
  });
}

const serve = await startServe(repository());
try {
  for (const [name, m] of Object.entries(MODELS).filter(([n]) => args.models.split(',').includes(n))) {
    for (const device of DEVICES) {
      const label = device === 'gpu' ? `GPU (${args.provider})` : `CPU (${CPU_THREADS} threads)`;
      const ready = await fetch(`${serve.base}/v2/models/${name}_${device}/ready`);
      const file = join(ROOT, 'model_repository', name, '1', 'model.onnx');
      // Raw sessions: onnxruntime's defaults (on a GPU: as many CPU threads as cores for the nodes
      // the provider leaves to the CPU), and on a GPU also Triode's (1 intra-op, 1 inter-op thread).
      const raws = device === 'gpu'
        ? [['raw session', { executionProviders: [args.provider] }], ['raw session, 1 CPU thread', { executionProviders: [args.provider], intraOpNumThreads: 1, interOpNumThreads: 1 }]]
        : [['raw session', { intraOpNumThreads: CPU_THREADS, executionProviders: ['cpu'] }]];
      const sessions = [];
      for (const [path, options] of raws) {
        try {
          sessions.push([path, await ort.InferenceSession.create(file, options)]);
        } catch (err) {
          for (const b of BATCHES) row(name, b, path, label, { error: `session failed: ${err.message.split('\n')[0]}` });
        }
      }
      if (device === 'gpu' && ready.status === 200) await check(name, m, file);
      if (device === 'gpu') {
        const onWorker = await rawOnWorker(file, m, raws[1][1]);
        for (const [i, b] of BATCHES.entries()) row(name, b, 'raw session, 1 CPU thread, worker thread', label, Array.isArray(onWorker) ? onWorker[i] : { error: `worker: ${onWorker.error}` });
      }
      for (const batch of BATCHES) {
        const x = new ort.Tensor('float32', sample(batch * m.dims.reduce((a, b) => a * b, 1)), [batch, ...m.dims]);
        for (const [path, session] of sessions) row(name, batch, path, label, await measure(() => session.run({ [m.input]: x }), 1, SECONDS));
        // The raw runs blocked this event loop for seconds: let the client see the server's
        // keep-alive closes first, or it writes to a closed socket (EPIPE, "fetch failed").
        await new Promise((r) => setTimeout(r, 50));
        if (ready.status !== 200) {
          const index = await (await fetch(`${serve.base}/v2/repository/index`, { method: 'POST', body: '{}' })).json();
          row(name, batch, 'triode serve', label, { error: `not loaded: ${index.find((e) => e.name === `${name}_${device}`)?.reason ?? ready.status}` });
          continue;
        }
        const { body: b, headerLength } = body(m, batch);
        const once = async () => {
          const r = await fetch(`${serve.base}/v2/models/${name}_${device}/infer`, { method: 'POST', body: b, headers: { 'Inference-Header-Content-Length': String(headerLength) } });
          if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
          await r.arrayBuffer();
        };
        row(name, batch, 'triode serve', label, await measure(once, CONCURRENCY, SECONDS).catch((err) => ({ error: `${err.message}${err.cause ? ` (${err.cause.code ?? err.cause.message})` : ''}` })));
      }
      for (const [, session] of sessions) await session.release();
    }
  }
} finally {
  await serve.stop();
}

if (checks.length) {
  console.log(`\nThe GPU's answers against onnxruntime on the CPU (same input, largest batch; float32: relative L2 far under 1e-3 expected):\n`);
  console.log('| model | batch | values | relative L2 error | max abs difference | non-finite | verdict |');
  console.log('|---|---|---|---|---|---|---|');
  for (const c of checks) {
    console.log(c.error ? `| ${c.name} | ${c.batch} | | | | | ${c.error.replace(/\|/g, '/')} |`
      : `| ${c.name} | ${c.batch} | ${c.values} | ${c.relL2.toExponential(2)} | ${c.maxAbs.toExponential(2)} | ${c.nan} | ${c.nan === 0 && c.relL2 < 1e-3 ? 'same' : 'DIFFERENT'} |`);
  }
  console.log('');
}
console.log(`\nnode bench/gpu.mjs --seconds ${SECONDS} --concurrency ${CONCURRENCY} --batches ${BATCHES.join(',')} --provider ${args.provider} --cpu-threads ${CPU_THREADS} --det-size ${DET}\n`);
console.log('| model | batch | path | device | inferences/s | requests/s | mean ms/request |');
console.log('|---|---|---|---|---|---|---|');
for (const r of rows) {
  console.log(r.error
    ? `| ${r.model} | ${r.batch} | ${r.path} | ${r.device} | ${r.error.replace(/\|/g, '/')} | | |`
    : `| ${r.model} | ${r.batch} | ${r.path} | ${r.device} | ${(r.rps * r.batch).toFixed(1)} | ${r.rps.toFixed(1)} | ${r.meanMs.toFixed(2)} |`);
}
