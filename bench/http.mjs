// Issue #18's benchmark: `simple` over HTTP, Triode (binary and JSON tensors) against the naive
// server (bench/naive-server.mjs, JSON) and the frontend floor (bench/floor-server.mjs), in one run.
// All three servers run at once; each round measures every case on each server in turn (the
// order rotates per round), so the machine's drift lands on all of them alike; the table gives
// medians over the rounds and the ratios the issue asks for, and Triode's server overhead per
// request from its statistics extension (request time - queue - compute, as perf_analyzer).
//
// Pinning (bench/pinning.mjs): with >= 8 cores each server runs on cores 0-1 and wrk (4 threads) on
// cores 2-5, the layout of PERF-BASELINE.md; with 2-7 cores, servers on the upper half and wrk on the
// lower (2 cores: server on core 1, wrk on core 0, so every server gets ONE core); with 1 core or
// --pin off, unpinned. The first line printed says which. Needs wrk and taskset, and
// `npm run build`. Run by hand:
//   node bench/http.mjs [--seconds 5] [--warmup 1] [--rounds 3] [--concurrency 1,16,64] [--pin auto|off]
//     [--triode-args "..."]    extra `triode serve` flags
//     [--execution-thread auto|main|instance]   simple's execution_thread parameter
import { execFileSync, spawn } from 'node:child_process';
import { get } from 'node:http';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuCount, layout, machine as describeMachine, taskset } from './pinning.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '5' },
  warmup: { type: 'string', default: '1' },
  rounds: { type: 'string', default: '3' },
  concurrency: { type: 'string', default: '1,16,64' },
  pin: { type: 'string', default: 'auto' },
  'triode-args': { type: 'string', default: '' },
  'execution-thread': { type: 'string', default: '' },
  out: { type: 'string', default: join(ROOT, 'bench', 'out', 'http.json') },
} });
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);
const ROUNDS = Number(args.rounds);
const CONCURRENCY = args.concurrency.split(',').map(Number);

// --- pinning (bench/pinning.mjs) -----------------------------------------------------------------
const PIN = layout(availableParallelism(), args.pin);
const serverCpus = PIN.server;
const wrkCpus = PIN.load;
const wrkThreads = PIN.pinned ? cpuCount(wrkCpus) : 2;
const pinned = (argv) => taskset(serverCpus, argv);
const machine = describeMachine(PIN, { server: 'servers', load: 'wrk', loadThreads: wrkThreads });
const CORES = machine.cores;
console.log(JSON.stringify({ machine }));

// --- bodies --------------------------------------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), 'triode-http-bench-'));
const in0 = new Int32Array(16).map((_, i) => i);
const in1 = new Int32Array(16).fill(1);
writeFileSync(join(dir, 'simple.json'), JSON.stringify({ inputs: [['INPUT0', in0], ['INPUT1', in1]].map(([name, d]) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from(d) })) }));
const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })) }));
writeFileSync(join(dir, 'simple.bin'), Buffer.concat([header, Buffer.from(in0.buffer), Buffer.from(in1.buffer)]));
const BODIES = { json: { file: join(dir, 'simple.json'), headerLen: '' }, binary: { file: join(dir, 'simple.bin'), headerLen: String(header.byteLength) } };

// --- processes -----------------------------------------------------------------------------------
const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
const children = new Set();
process.on('exit', () => { for (const c of children) if (c.exitCode === null) try { process.kill(c.pid, 'SIGKILL'); } catch { /* gone */ } });

async function start(argv, ready) {
  const [cmd, rest] = pinned(argv);
  const p = spawn(cmd, rest, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(p);
  let out = '';
  await new Promise((res, rej) => {
    const on = (d) => { out += d; if (ready.test(out)) res(); };
    p.stdout.on('data', on);
    p.stderr.on('data', on);
    p.once('exit', (code) => rej(new Error(`${argv.join(' ')} exited ${code}: ${out}`)));
  });
  p.removeAllListeners('exit');
  p.stdout.removeAllListeners('data').resume();
  p.stderr.removeAllListeners('data').resume();
  return p;
}
async function stop(p) {
  if (p.exitCode !== null) return;
  const done = new Promise((r) => p.once('exit', r));
  process.kill(p.pid, 'SIGTERM');
  const t = setTimeout(() => process.kill(p.pid, 'SIGKILL'), 15000);
  await done;
  clearTimeout(t);
  children.delete(p);
}

function cpuTicks(pid, tid) {
  const f = readFileSync(tid ? `/proc/${pid}/task/${tid}/stat` : `/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(parts[11]) + Number(parts[12]); // utime + stime, clock ticks (100/s)
}
const toMs = (v, unit) => Number(v) * ({ us: 1e-3, ms: 1, s: 1000, m: 60000 }[unit] ?? 1);

function wrk(url, body, c, seconds) {
  const argv = ['wrk', '-t', String(Math.min(wrkThreads, c)), '-c', String(c), '-d', `${seconds}s`, '--latency', '-s', join(ROOT, 'bench', 'post.lua'), url];
  const [cmd, rest] = taskset(wrkCpus, argv);
  const out = execFileSync(cmd, rest, { env: { ...process.env, BODY_FILE: body.file, HEADER_LEN: body.headerLen }, encoding: 'utf8', maxBuffer: 1 << 24 });
  const pct = (p) => { const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s|m)`).exec(out); return m ? toMs(m[1], m[2]) : NaN; };
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN), p50: pct(50), p99: pct(99),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN),
    socketErrors: /Socket errors: (.*)/.exec(out)?.[1] ?? '',
  };
}

/** Triode's statistics for simple: cumulative counts and ns. */
async function triodeStats(port) {
  // A fresh connection each time (agent: false): a kept-alive one may be closed under us.
  const text = await new Promise((res, rej) => {
    get({ host: '127.0.0.1', port, path: '/v2/models/simple/stats', agent: false }, (r) => {
      let b = '';
      r.setEncoding('utf8').on('data', (d) => { b += d; }).on('end', () => res(b)).on('error', rej);
    }).on('error', rej);
  });
  const s = JSON.parse(text).model_stats[0].inference_stats;
  const m = JSON.parse(text).model_stats[0];
  return { n: s.success.count, inferences: m.inference_count, executions: m.execution_count, request: s.success.ns, queue: s.queue.ns, compute: s.compute_input.ns + s.compute_infer.ns + s.compute_output.ns };
}

// --- run -----------------------------------------------------------------------------------------
const rows = [];
try {
  const repo = join(dir, 'repo');
  cpSync(join(ROOT, 'model_repository', 'simple'), join(repo, 'simple'), { recursive: true });
  if (args['execution-thread']) appendFileSync(join(repo, 'simple', 'config.pbtxt'), `\nparameters { key: "execution_thread" value: { string_value: "${args['execution-thread']}" } }\n`);
  const [tport, nport, fport] = [await freePort(), await freePort(), await freePort()];
  const triode = await start([process.execPath, join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo, '--http-port', String(tport), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', ...args['triode-args'].split(' ').filter(Boolean)], /Started HTTPService at/);
  const naive = await start([process.execPath, join(ROOT, 'bench', 'naive-server.mjs'), String(nport), join(ROOT, 'model_repository')], /naive server on/);
  const floor = await start([process.execPath, join(ROOT, 'bench', 'floor-server.mjs'), String(fport)], /floor server on/);
  const url = (port) => `http://127.0.0.1:${port}/v2/models/simple/infer`;
  const SERVERS = [
    { server: 'triode', encoding: 'binary', proc: triode, port: tport },
    { server: 'triode', encoding: 'json', proc: triode, port: tport },
    { server: 'naive', encoding: 'json', proc: naive, port: nport },
    { server: 'floor', encoding: 'binary', proc: floor, port: fport },
  ];
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of CONCURRENCY) {
      for (let k = 0; k < SERVERS.length; k++) {
        const s = SERVERS[(k + round) % SERVERS.length];
        const body = BODIES[s.encoding];
        if (WARMUP > 0) wrk(url(s.port), body, c, WARMUP);
        const before = s.server === 'triode' ? await triodeStats(s.port) : undefined;
        const t0 = cpuTicks(s.proc.pid);
        const m0 = cpuTicks(s.proc.pid, s.proc.pid);
        const r = wrk(url(s.port), body, c, SECONDS);
        const cpuUs = ((cpuTicks(s.proc.pid) - t0) * 10_000) / r.requests; // process CPU µs a request
        const mainUs = ((cpuTicks(s.proc.pid, s.proc.pid) - m0) * 10_000) / r.requests; // main thread's
        const row = { round, server: s.server, encoding: s.encoding, c, ...r, cpuUsPerRequest: +cpuUs.toFixed(1), mainCpuUsPerRequest: +mainUs.toFixed(1) };
        if (before) {
          const after = await triodeStats(s.port);
          const n = after.n - before.n;
          row.requestsPerExecution = +((after.inferences - before.inferences) / (after.executions - before.executions)).toFixed(2);
          row.serverRequestUs = +((after.request - before.request) / n / 1000).toFixed(1);
          row.serverOverheadUs = +(((after.request - before.request) - (after.queue - before.queue) - (after.compute - before.compute)) / n / 1000).toFixed(1);
        }
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    }
  }
  for (const p of [triode, naive, floor]) await stop(p);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// --- report --------------------------------------------------------------------------------------
const median = (xs) => { const s = xs.filter(Number.isFinite).sort((a, b) => a - b); return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN; };
const pick = (server, encoding, c, key) => median(rows.filter((r) => r.server === server && r.encoding === encoding && r.c === c).map((r) => r[key]));
/** Per round ratio a/b of req/s, then the median of those (the same round's drift cancels). */
const ratio = (a, b, c) => median([...Array(ROUNDS).keys()].map((round) => {
  const x = rows.find((r) => r.round === round && r.server === a[0] && r.encoding === a[1] && r.c === c);
  const y = rows.find((r) => r.round === round && r.server === b[0] && r.encoding === b[1] && r.c === c);
  return x && y ? x.rps / y.rps : NaN;
}));
const f = (x, d = 0) => (Number.isFinite(x) ? x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '-');
const lines = [];
lines.push(`Machine: ${CORES} cores (${machine.cpu}); ${machine.layout}. ${ROUNDS} rounds of ${SECONDS} s (+${WARMUP} s warmup) per case; medians.`);
lines.push('');
lines.push('| server | tensors | c | req/s | p50 ms | p99 ms | process CPU µs/req | main thread CPU µs/req | Triode requests/execution | Triode server overhead µs/req | non-2xx |');
lines.push('|---|---|---|---|---|---|---|---|---|---|---|');
for (const [server, encoding] of [['triode', 'binary'], ['triode', 'json'], ['naive', 'json'], ['floor', 'binary']]) {
  for (const c of CONCURRENCY) {
    const non2xx = rows.filter((r) => r.server === server && r.encoding === encoding && r.c === c).reduce((a, r) => a + r.non2xx, 0);
    lines.push(`| ${server} | ${encoding} | ${c} | ${f(pick(server, encoding, c, 'rps'))} | ${f(pick(server, encoding, c, 'p50'), 3)} | ${f(pick(server, encoding, c, 'p99'), 3)} | ${f(pick(server, encoding, c, 'cpuUsPerRequest'), 1)} | ${f(pick(server, encoding, c, 'mainCpuUsPerRequest'), 1)} | ${server === 'triode' ? f(pick(server, encoding, c, 'requestsPerExecution'), 2) : ''} | ${server === 'triode' ? f(pick(server, encoding, c, 'serverOverheadUs'), 1) : ''} | ${non2xx} |`);
  }
}
lines.push('');
lines.push('| ratio (median of per-round ratios) | ' + CONCURRENCY.map((c) => `c=${c}`).join(' | ') + ' |');
lines.push('|---|' + CONCURRENCY.map(() => '---').join('|') + '|');
lines.push('| Triode binary / naive JSON (target >= 1.0) | ' + CONCURRENCY.map((c) => f(ratio(['triode', 'binary'], ['naive', 'json'], c), 2)).join(' | ') + ' |');
lines.push('| Triode JSON / naive JSON (target >= 1.0) | ' + CONCURRENCY.map((c) => f(ratio(['triode', 'json'], ['naive', 'json'], c), 2)).join(' | ') + ' |');
lines.push('| Triode binary / frontend floor (target >= 0.6 at c=64) | ' + CONCURRENCY.map((c) => f(ratio(['triode', 'binary'], ['floor', 'binary'], c), 2)).join(' | ') + ' |');
console.log(lines.join('\n'));
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, JSON.stringify({ date: new Date().toISOString(), machine, args, rows }, null, 2));
