// Issue #18 scope 1: `simple` over HTTP, Triode (this checkout's build) against the naive server,
// in one short run: wrk, binary and JSON, c=1/16/64, for comparing builds (the in-thread execution
// path on and off) run after run. Needs wrk, taskset and `npm run build`. Run by hand:
//   node bench/inthread-http.mjs [--seconds 3] [--warmup 1] [--concurrency 1,16,64]
//     [--execution-thread auto|main|instance] [--naive true] [--pin auto|off]
// Pinning (bench/pinning.mjs): the server and wrk on separate cores (>= 8 cores: server on 0-1, wrk
// on 2-5; 2-7: server on the upper half, wrk on the lower; 1 core or --pin off: unpinned).
// Prints a first JSON line {"machine": {cores, cpu, layout}} saying which, then one JSON line per
// measurement: server, encoding, c, req/s, p50/p99 ms, server CPU %.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { layout, machine as describeMachine, taskset } from './pinning.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '3' },
  warmup: { type: 'string', default: '1' },
  concurrency: { type: 'string', default: '1,16,64' },
  'execution-thread': { type: 'string', default: '' },
  naive: { type: 'string', default: 'true' },
  pin: { type: 'string', default: 'auto' },
} });
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);
const CONCURRENCY = args.concurrency.split(',').map(Number);

// Pinning: the server on PIN.server, wrk on PIN.load ('' = unpinned).
const PIN = layout(availableParallelism(), args.pin);
console.log(JSON.stringify({ machine: describeMachine(PIN, { server: 'server', load: 'wrk' }) }));

const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });

const dir = mkdtempSync(join(tmpdir(), 'triode-inthread-'));
const in0 = new Int32Array(16).map((_, i) => i);
const in1 = new Int32Array(16).fill(1);
writeFileSync(join(dir, 'simple.json'), JSON.stringify({ inputs: [['INPUT0', in0], ['INPUT1', in1]].map(([name, d]) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from(d) })) }));
const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })) }));
writeFileSync(join(dir, 'simple.bin'), Buffer.concat([header, Buffer.from(in0.buffer), Buffer.from(in1.buffer)]));
const BODIES = { json: { file: join(dir, 'simple.json'), headerLen: '' }, binary: { file: join(dir, 'simple.bin'), headerLen: String(header.byteLength) } };

function cpuTicks(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(parts[11]) + Number(parts[12]);
}
const toMs = (v, unit) => Number(v) * ({ us: 1e-3, ms: 1, s: 1000, m: 60000 }[unit] ?? 1);

function wrk(url, body, c, seconds) {
  const out = execFileSync(...taskset(PIN.load, ['wrk', '-t', String(Math.min(2, c)), '-c', String(c), '-d', `${seconds}s`, '--latency', '-s', join(ROOT, 'bench', 'post.lua'), url]), {
    env: { ...process.env, BODY_FILE: body.file, HEADER_LEN: body.headerLen }, encoding: 'utf8',
  });
  const pct = (p) => { const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s|m)`).exec(out); return m ? toMs(m[1], m[2]) : NaN; };
  return { rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN), p50: pct(50), p99: pct(99), non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0) };
}

async function start(argv, ready) {
  const p = spawn(...taskset(PIN.server, [process.execPath, ...argv]), { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  await new Promise((res, rej) => {
    const on = (d) => { out += d; if (ready.test(out)) res(); };
    p.stdout.on('data', on);
    p.stderr.on('data', on);
    p.once('exit', (code) => rej(new Error(`exited ${code}: ${out}`)));
  });
  p.removeAllListeners('exit');
  return p;
}
async function stop(p) {
  const done = new Promise((r) => p.once('exit', r));
  process.kill(p.pid, 'SIGTERM');
  await done;
}

function measure(server, p, url, encoding, c) {
  if (WARMUP > 0) wrk(url, BODIES[encoding], c, WARMUP); // wrk refuses -d 0s
  const t0 = cpuTicks(p.pid);
  const r = wrk(url, BODIES[encoding], c, SECONDS);
  const row = { server, encoding, c, ...r, cpu: Math.round((cpuTicks(p.pid) - t0) / SECONDS) };
  console.log(JSON.stringify(row));
  if (process.env.INTHREAD_LOG) appendFileSync(process.env.INTHREAD_LOG, JSON.stringify({ root: ROOT, ...row }) + '\n');
}

try {
  const repo = join(dir, 'repo');
  cpSync(join(ROOT, 'model_repository', 'simple'), join(repo, 'simple'), { recursive: true });
  if (args['execution-thread']) appendFileSync(join(repo, 'simple', 'config.pbtxt'), `\nparameters { key: "execution_thread" value: { string_value: "${args['execution-thread']}" } }\n`);
  const port = await freePort();
  const triode = await start(['--initial-old-space-size=128', join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false'], /Started HTTPService at/);
  for (const encoding of ['binary', 'json']) for (const c of CONCURRENCY) measure('triode', triode, `http://127.0.0.1:${port}/v2/models/simple/infer`, encoding, c);
  await stop(triode);
  if (args.naive === 'true') {
    const nport = await freePort();
    const naive = await start([join(ROOT, 'bench', 'naive-server.mjs'), String(nport), join(ROOT, 'model_repository')], /naive server on/);
    for (const c of CONCURRENCY) measure('naive', naive, `http://127.0.0.1:${nport}/v2/models/simple/infer`, 'json', c);
    await stop(naive);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
