// Issue #6 benchmark (run by hand; needs wrk and redis-server):
//   node bench/cluster.mjs [--seconds 10]
// Every triode process starts through the bin's shebang (its V8 flags), as `npx triode` does.
// 1. Cluster (redis + 1 gateway + 1 worker) vs embedded (`triode serve`), binary requests,
//    `simple` and `ppocr_cls` at c=1 and c=16; all processes on the same 2 cores.
// 2. Scale-out: the latency-bound `sleepy` model (20 ms per batch of up to 8, 1 instance per
//    worker: 400 inferences/s per worker) with 1, 2 and 4 workers behind one gateway, c=64.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { seconds: { type: 'string', default: '10' } } });
const SECONDS = Number(args.seconds);
const BIN = join(ROOT, 'packages/cli/bin/triode.js');
const procs = [];
const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
function start(cmd, argv, ready) {
  const p = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  p.stderr.on('data', (d) => { if (process.env.BENCH_DEBUG) process.stderr.write(d); });
  procs.push(p);
  return new Promise((res, rej) => { let out = ''; const on = (d) => { out += d; if (ready.test(out)) res(p); }; p.stdout.on('data', on); p.stderr.on('data', on); p.once('exit', (c) => rej(new Error(`${argv.join(' ')} exited ${c}: ${out}`))); });
}
async function stop(p) { if (p.exitCode !== null) return; const e = new Promise((r) => p.once('exit', r)); p.kill('SIGTERM'); await e; }
const repo = mkdtempSync(join(tmpdir(), 'triode-bench-'));
for (const m of ['simple', 'ppocr_cls', 'sleepy']) cpSync(join(ROOT, 'model_repository', m), join(repo, m), { recursive: true });

function bodyFile(name, inputs) {
  const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: inputs.map(([n, dt, shape, data]) => ({ name: n, datatype: dt, shape, parameters: { binary_data_size: data.byteLength } })) }));
  const f = join(repo, `${name}.bin`);
  writeFileSync(f, Buffer.concat([header, ...inputs.map(([, , , d]) => Buffer.from(d.buffer))]));
  return { file: f, headerLen: String(header.length) };
}
const bodies = {
  simple: bodyFile('simple', [['INPUT0', 'INT32', [1, 16], new Int32Array(16).fill(1)], ['INPUT1', 'INT32', [1, 16], new Int32Array(16).fill(2)]]),
  ppocr_cls: bodyFile('cls', [['x', 'FP32', [1, 3, 48, 192], new Float32Array(3 * 48 * 192).fill(0.1)]]),
  sleepy: bodyFile('sleepy', [['INPUT0', 'INT32', [1, 1], Int32Array.of(7)]]),
};
function wrk(port, model, c, seconds) {
  const out = execFileSync('wrk', [`-t${c > 1 ? 2 : 1}`, `-c${c}`, `-d${seconds}s`, '--latency', '-s', join(ROOT, 'bench/post.lua'), `http://127.0.0.1:${port}/v2/models/${model}/infer`], { env: { ...process.env, BODY_FILE: bodies[model].file, HEADER_LEN: bodies[model].headerLen }, encoding: 'utf8' });
  const ms = (m) => (m ? Number(m[1]) * ({ us: 1e-3, ms: 1, s: 1000 }[m[2]]) : NaN);
  return { rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]), p50: ms(/\s50%\s+([\d.]+)(us|ms|s)/.exec(out)), p99: ms(/\s99%\s+([\d.]+)(us|ms|s)/.exec(out)), non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0) };
}
const measure = (port, model, c) => { wrk(port, model, c, 2); return wrk(port, model, c, SECONDS); };
const rows = [];
try {
  // Embedded.
  {
    const port = await freePort();
    const p = await start(BIN, ['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--log-info=false'], /READY[\s\S]*\+\n/);
    await new Promise((r) => setTimeout(r, 500));
    for (const model of ['simple', 'ppocr_cls']) for (const c of [1, 16]) rows.push({ mode: 'embedded', model, c, ...measure(port, model, c) });
    await stop(p);
  }
  // Cluster: redis + gateway + N workers.
  const redisPort = await freePort();
  const redis = await start('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], /Ready to accept/);
  const url = `redis://127.0.0.1:${redisPort}`;
  const gwPort = await freePort();
  const gw = await start(BIN, ['gateway', '--metrics-port', '0', '--redis', url, '--http-port', String(gwPort), '--http-address', '127.0.0.1', '--allow-grpc=false'], /Started HTTPService/);
  const workers = [await start(BIN, ['worker', '--metrics-port', '0', '--redis', url, '--model-repository', repo, '--worker-id', 'w0', '--log-info=false'], /\+\n[\s\S]*\+\n/)];
  await new Promise((r) => setTimeout(r, 1500));
  for (const model of ['simple', 'ppocr_cls']) for (const c of [1, 16]) rows.push({ mode: 'cluster (1 worker)', model, c, ...measure(gwPort, model, c) });
  const scale = [];
  for (const n of (process.env.SCALE_ONLY ? [1, 2, 4] : [1, 2, 4])) {
    while (workers.length < n) workers.push(await start(BIN, ['worker', '--metrics-port', '0', '--redis', url, '--model-repository', repo, '--worker-id', `w${workers.length}`, '--log-info=false'], /\+\n[\s\S]*\+\n/));
    await new Promise((r) => setTimeout(r, 2000));
    scale.push({ workers: n, ...measure(gwPort, 'sleepy', 64) });
  }
  for (const w of workers) await stop(w);
  await stop(gw);
  await stop(redis);

  console.log('| mode | model | c | req/s | p50 ms | p99 ms | errors |');
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.mode} | ${r.model} | ${r.c} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} | ${r.non2xx} |`);
  const get = (mode, model, c) => rows.find((r) => r.mode.startsWith(mode) && r.model === model && r.c === c);
  console.log(`\nppocr_cls c=16: cluster ${(get('cluster', 'ppocr_cls', 16).rps / get('embedded', 'ppocr_cls', 16).rps).toFixed(2)}x embedded (target >= 0.7); added p50 at c=1: simple ${(get('cluster', 'simple', 1).p50 - get('embedded', 'simple', 1).p50).toFixed(3)} ms, ppocr_cls ${(get('cluster', 'ppocr_cls', 1).p50 - get('embedded', 'ppocr_cls', 1).p50).toFixed(3)} ms (target <= 0.5)\n`);
  console.log('| sleepy (20 ms per batch of 8, 1 instance per worker), c=64 | req/s | p50 ms | x linear (n x 1 worker) | x ideal (400/s per worker) |');
  console.log('|---|---|---|---|---|');
  for (const s of scale) console.log(`| ${s.workers} worker${s.workers > 1 ? 's' : ''} | ${s.rps.toFixed(0)} | ${s.p50.toFixed(1)} | ${(s.rps / (scale[0].rps * s.workers)).toFixed(2)} | ${(s.rps / (400 * s.workers)).toFixed(2)} |`);
} finally {
  for (const p of procs) if (p.exitCode === null) p.kill('SIGKILL');
}
