// Issue #3 benchmark: in one run, the raw onnxruntime limit, Triode embedded over HTTP (binary
// tensors and JSON) and the naive Hono server, for `simple` and `ppocr_cls` b1 requests at
// concurrency 1, 16 and 64. Needs wrk (apt-get install -y wrk) and taskset. Run by hand, not in CI:
//   node bench/run.mjs [--seconds 10] [--warmup 3] [--out bench/out/results.json]
//     [--concurrency 1,16,64] [--models simple,ppocr_cls] [--pin auto|off]
// Pinning (bench/pinning.mjs): each server and wrk on separate cores (>= 8 cores: server on 0-1,
// wrk on 2-5; 2-7: server on the upper half, wrk on the lower; 1 core or --pin off: unpinned); the
// raw and in-process measurements (one process each) are not pinned. The first line printed, and
// `machine` in the results file, say which.
// Prints a markdown table; bench/RESULTS.md keeps the committed one with its command line.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { layout, machine as describeMachine, taskset } from './pinning.mjs';
import { freePort, start, stop } from './harness.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'bench', 'out');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '10' },
  warmup: { type: 'string', default: '3' },
  out: { type: 'string', default: join(OUT, 'results.json') },
  concurrency: { type: 'string', default: '1,16,64' },
  models: { type: 'string', default: 'simple,ppocr_cls' },
  pin: { type: 'string', default: 'auto' },
} });
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);
const CONCURRENCY = args.concurrency.split(',').map(Number);
const MODELS = args.models.split(',');
mkdirSync(OUT, { recursive: true });

// Pinning: servers on PIN.server, wrk on PIN.load ('' = unpinned).
const PIN = layout(availableParallelism(), args.pin);
const machine = describeMachine(PIN, { server: 'server', load: 'wrk' });
console.log(`Machine: ${machine.cores} cores (${machine.cpu}); ${machine.layout}.\n`);


/** Request bodies: JSON, and binary (JSON header + raw tensor bytes, outputs binary). */
function bodies(model) {
  const inputs = model === 'simple'
    ? [['INPUT0', 'INT32', [1, 16], new Int32Array(16).map((_, i) => i)], ['INPUT1', 'INT32', [1, 16], new Int32Array(16).fill(1)]]
    : [['x', 'FP32', [1, 3, 48, 192], Float32Array.from({ length: 3 * 48 * 192 }, (_, i) => Math.round(Math.sin(i) * 1e4) / 1e4)]];
  const json = JSON.stringify({ inputs: inputs.map(([name, datatype, shape, data]) => ({ name, datatype, shape, data: Array.from(data) })) });
  const header = Buffer.from(JSON.stringify({
    parameters: { binary_data_output: true },
    inputs: inputs.map(([name, datatype, shape, data]) => ({ name, datatype, shape, parameters: { binary_data_size: data.byteLength } })),
  }));
  const binary = Buffer.concat([header, ...inputs.map(([, , , d]) => Buffer.from(d.buffer))]);
  const jf = join(OUT, `${model}.json`);
  const bf = join(OUT, `${model}.bin`);
  writeFileSync(jf, json);
  writeFileSync(bf, binary);
  return { json: { file: jf, headerLen: '' }, binary: { file: bf, headerLen: String(header.byteLength) } };
}

function cpuTicks(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(parts[11]) + Number(parts[12]); // utime + stime, in clock ticks (100/s)
}

const toMs = (v, unit) => Number(v) * ({ us: 1e-3, ms: 1, s: 1000, m: 60000 }[unit] ?? 1);

function wrk(url, body, c, seconds) {
  const [cmd, argv] = taskset(PIN.load, ['wrk', '-t', String(Math.min(2, c)), '-c', String(c), '-d', `${seconds}s`, '--latency', '-s', join(ROOT, 'bench', 'post.lua'), url]);
  const out = execFileSync(cmd, argv, {
    env: { ...process.env, BODY_FILE: body.file, HEADER_LEN: body.headerLen }, encoding: 'utf8', maxBuffer: 1 << 24,
  });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN);
  const pct = (p) => { const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s|m)`).exec(out); return m ? toMs(m[1], m[2]) : NaN; };
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const errors = /Socket errors: (.*)/.exec(out)?.[1] ?? '';
  return { rps, p50: pct(50), p99: pct(99), non2xx, errors };
}

// Servers this script started are ended (by PID) when it exits, also when a measurement fails
// (bench/harness.mjs; a failed wrk used to leave its `triode serve` running).
const startProcess = (cmd, argv, readyRe) => start(PIN.server, [cmd, ...argv], readyRe, ROOT);

function measure(name, proc, url, model, encoding, body, c) {
  if (WARMUP > 0) wrk(url, body, c, WARMUP); // wrk refuses -d 0s
  const t0 = cpuTicks(proc.pid);
  const r = wrk(url, body, c, SECONDS);
  const cpu = (cpuTicks(proc.pid) - t0) / SECONDS; // percent of one core
  const row = { server: name, model, encoding, c, ...r, cpu };
  console.error(JSON.stringify(row));
  return row;
}

const results = { date: new Date().toISOString(), seconds: SECONDS, machine, raw: {}, rows: [] };
// 1. Raw onnxruntime limit, one and two threads.
for (const model of MODELS) {
  for (const threads of [1, 2]) {
    const out = execFileSync(process.execPath, [join(ROOT, 'bench', 'raw-limit.mjs'), join(ROOT, 'model_repository'), model, String(threads), String(SECONDS)], { encoding: 'utf8' });
    const r = JSON.parse(out.trim().split('\n').pop());
    results.raw[`${model}/${threads}`] = r.inferencesPerSec;
    console.error(JSON.stringify(r));
  }
}
const bodiesByModel = Object.fromEntries(MODELS.map((m) => [m, bodies(m)]));

// 1b. Triode in-process (no HTTP): the core and its instance threads alone.
results.inprocess = {};
for (const model of MODELS) for (const c of CONCURRENCY) {
  const out = execFileSync(process.execPath, [join(ROOT, 'bench', 'inprocess.mjs'), join(ROOT, 'model_repository'), model, String(c), String(SECONDS)], { encoding: 'utf8' });
  const r = JSON.parse(out.trim().split('\n').pop());
  results.inprocess[`${model}/${c}`] = r;
  console.error(JSON.stringify({ inprocess: true, ...r }));
}

// 2. Triode embedded.
{
  const port = await freePort();
  const repo = join(OUT, 'repo');
  execFileSync('rm', ['-rf', repo]);
  mkdirSync(repo, { recursive: true });
  for (const m of MODELS) execFileSync('cp', ['-r', join(ROOT, 'model_repository', m), join(repo, m)]);
  const p = await startProcess(join(ROOT, 'packages/cli/bin/triode.js'), ['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--log-info=false'], /READY[\s\S]*\+\n/);
  await new Promise((r) => setTimeout(r, 500));
  for (const model of MODELS) for (const encoding of ['binary', 'json']) for (const c of CONCURRENCY) {
    results.rows.push(measure('triode', p, `http://127.0.0.1:${port}/v2/models/${model}/infer`, model, encoding, bodiesByModel[model][encoding], c));
  }
  await stop(p);
}

// 3. Naive server.
{
  const port = await freePort();
  const p = await startProcess(process.execPath, [join(ROOT, 'bench', 'naive-server.mjs'), String(port), join(ROOT, 'model_repository')], /naive server on/);
  for (const model of MODELS) for (const c of CONCURRENCY) {
    results.rows.push(measure('naive', p, `http://127.0.0.1:${port}/v2/models/${model}/infer`, model, 'json', bodiesByModel[model].json, c));
  }
  await stop(p);
}

writeFileSync(args.out, JSON.stringify(results, null, 2));

// Markdown.
const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');
console.log(`Raw onnxruntime limit (b1, inferences/s): ${MODELS.map((m) => `${m} ${f(results.raw[`${m}/1`])} on 1 thread, ${f(results.raw[`${m}/2`])} on 2`).join('; ')}\n`);
console.log('Triode in-process (InferenceServer.infer, no HTTP):\n');
console.log('| model | c | req/s | p50 ms | p99 ms | x raw 2-thread limit |');
console.log('|---|---|---|---|---|---|');
for (const [k, r] of Object.entries(results.inprocess)) {
  const [m] = k.split('/');
  console.log(`| ${m} | ${r.c} | ${f(r.rps)} | ${f(r.p50, 3)} | ${f(r.p99, 3)} | ${f(r.rps / results.raw[`${m}/2`], 2)} |`);
}
console.log(`\nOver HTTP (${machine.layout}):\n`);
console.log('| server | model | encoding | c | req/s | p50 ms | p99 ms | server CPU % | x raw 2-thread limit | errors |');
console.log('|---|---|---|---|---|---|---|---|---|---|');
for (const r of results.rows) {
  const ratio = r.rps / results.raw[`${r.model}/2`];
  console.log(`| ${r.server} | ${r.model} | ${r.encoding} | ${r.c} | ${f(r.rps)} | ${f(r.p50, 3)} | ${f(r.p99, 3)} | ${f(r.cpu)} | ${f(ratio, 2)} | ${r.non2xx}${r.errors ? ` ${r.errors}` : ''} |`);
}
const get = (s, m, e, c) => results.rows.find((r) => r.server === s && r.model === m && r.encoding === e && r.c === c);
if (MODELS.includes('ppocr_cls')) {
  const b16 = get('triode', 'ppocr_cls', 'binary', 16);
  const tj = CONCURRENCY.map((c) => get('triode', 'ppocr_cls', 'json', c).rps / get('naive', 'ppocr_cls', 'json', c).rps);
  console.log(`\nTargets: ppocr_cls binary c=16 = ${f(b16?.rps / results.raw['ppocr_cls/2'], 2)}x the raw 2-thread limit (target >= 0.8); ` +
    `cls JSON vs naive = ${tj.map((x) => f(x, 2)).join(' / ')}x at c=${CONCURRENCY.join('/')} (target >= 2)`);
}
if (MODELS.includes('simple')) {
  console.log(`simple binary c=1 p50 = ${f(get('triode', 'simple', 'binary', 1)?.p50, 3)} ms, JSON c=1 p50 = ${f(get('triode', 'simple', 'json', 1)?.p50, 3)} ms (target <= 0.3 ms)`);
}
