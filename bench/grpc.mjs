// Issue #7 benchmark: gRPC vs HTTP (binary tensors) on one embedded server, measured with
// `triode perf`, for `simple` and `ppocr_cls` at concurrency 1, 16 and 64 (each cell measured in
// the order HTTP, gRPC, gRPC, HTTP and averaged per protocol); then the same HTTP
// case through wrk, to compare triode perf's client-side cost with wrk's. Needs wrk and taskset.
// Run by hand:
//   node bench/grpc.mjs [--window 3000] [--trials 5] [--concurrency 1,16,64] [--models simple,ppocr_cls] [--pin auto|off]
// Pinning (bench/pinning.mjs): the server on its cores, `triode perf` and wrk on others (>= 8 cores:
// server on 0-1, load generators on 2-5; 2-7: server on the upper half, load generators on the
// lower; 1 core or --pin off: unpinned). The first line printed (and of bench/out/grpc.md) says which.
// Prints markdown tables; bench/RESULTS.md keeps the committed ones with the command line.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { layout, machine as describeMachine, taskset } from './pinning.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'bench', 'out');
const BIN = join(ROOT, 'packages', 'cli', 'bin', 'triode.js');
const { values: args } = parseArgs({ options: {
  window: { type: 'string', default: '3000' },
  trials: { type: 'string', default: '5' },
  concurrency: { type: 'string', default: '1,16,64' },
  models: { type: 'string', default: 'simple,ppocr_cls' },
  pin: { type: 'string', default: 'auto' },
} });
mkdirSync(OUT, { recursive: true });
const CONCURRENCY = args.concurrency.split(',').map(Number);
const MODELS = args.models.split(',');

// Pinning: the server on PIN.server, triode perf and wrk on PIN.load ('' = unpinned).
const PIN = layout(availableParallelism(), args.pin);
const machine = describeMachine(PIN, { server: 'server', load: 'triode perf / wrk' });
const MACHINE_LINE = `Machine: ${machine.cores} cores (${machine.cpu}); ${machine.layout}.\n\n`;
process.stdout.write(MACHINE_LINE);

const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });

function cpuTicks(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return Number(parts[11]) + Number(parts[12]);
}

async function startServer(httpPort, grpcPort) {
  const child = spawn(...taskset(PIN.server, [BIN, 'serve', '--model-repository', join(ROOT, 'model_repository'), '--http-port', String(httpPort), '--http-address', '127.0.0.1',
    '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1', '--allow-metrics=false', '--log-info=false']), { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => { err += d; });
  for (let i = 0; i < 300; i++) {
    try {
      const r = await fetch(`http://127.0.0.1:${httpPort}/v2/health/ready`);
      if (r.ok) return child;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error(`server did not start: ${err}`);
}

let runs = 0;

/** One `triode perf` run; returns its JSON result and the server's CPU over the run. */
function perf(server, protocol, url, model, c) {
  const json = join(OUT, `perf-${protocol}-${model}-${c}-${runs++}.json`);
  rmSync(json, { force: true });
  const t0 = cpuTicks(server.pid);
  const w0 = Date.now();
  execFileSync(...taskset(PIN.load, [process.execPath, BIN, 'perf', '-m', model, '-i', protocol, '-u', url, '--concurrency-range', String(c),
    '-p', args.window, '-r', args.trials, '--warmup-request-count', '20', '--input-data', 'zero', '--json', json]), { stdio: 'ignore' });
  const serverCpu = (cpuTicks(server.pid) - t0) / ((Date.now() - w0) / 10);
  return { ...JSON.parse(readFileSync(json, 'utf8'))[0], serverCpu };
}

/** Two perf results averaged field by field (throughput, latencies, CPU). */
function mean(a, b) {
  const avg = (x, y) => (x + y) / 2;
  return {
    ...a,
    throughput: avg(a.throughput, b.throughput), requestsPerSec: avg(a.requestsPerSec, b.requestsPerSec),
    latencyUs: Object.fromEntries(Object.keys(a.latencyUs).map((k) => [k, avg(a.latencyUs[k], b.latencyUs[k])])),
    clientCpu: avg(a.clientCpu, b.clientCpu), serverCpu: avg(a.serverCpu, b.serverCpu),
  };
}

const httpPort = await freePort();
const grpcPort = await freePort();
const server = await startServer(httpPort, grpcPort);
const rows = [];
try {
  for (const model of MODELS) {
    for (const c of CONCURRENCY) {
      // ABBA order (HTTP, gRPC, gRPC, HTTP), averaged: a drift of the machine's speed during the
      // cell weighs on both protocols alike.
      const h1 = perf(server, 'http', `127.0.0.1:${httpPort}`, model, c);
      const g1 = perf(server, 'grpc', `127.0.0.1:${grpcPort}`, model, c);
      const g2 = perf(server, 'grpc', `127.0.0.1:${grpcPort}`, model, c);
      const h2 = perf(server, 'http', `127.0.0.1:${httpPort}`, model, c);
      const h = mean(h1, h2);
      const g = mean(g1, g2);
      rows.push({ model, c, h, g });
      process.stderr.write(`${model} c=${c}: http ${h.throughput.toFixed(0)}/s, grpc ${g.throughput.toFixed(0)}/s\n`);
    }
  }
  // triode perf vs wrk on the same HTTP case (simple, binary, c=16): client CPU per request.
  const body = join(OUT, 'simple.bin');
  const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } }] }));
  writeFileSync(body, Buffer.concat([header, Buffer.alloc(128)]));
  const wrkOut = (() => {
    const before = process.cpuUsage();
    const t0 = cpuTicks(server.pid);
    const w0 = Date.now();
    const child = spawn(...taskset(PIN.load, ['wrk', '-t', '2', '-c', '16', '-d', '10s', '--latency', '-s', join(ROOT, 'bench', 'post.lua'), `http://127.0.0.1:${httpPort}/v2/models/simple/infer`]),
      { env: { ...process.env, BODY_FILE: body, HEADER_LEN: String(header.byteLength) } });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    return new Promise((resolve) => child.on('exit', () => {
      const wall = (Date.now() - w0) / 1000;
      // wrk's own CPU: from /proc of the finished child is gone; use its rusage via `time`-like reading of children.
      resolve({ out, wall, serverCpu: (cpuTicks(server.pid) - t0) / (wall * 100), before });
    }));
  })();
  const w = await wrkOut;
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(w.out)?.[1] ?? NaN);
  const p50 = /50%\s+([\d.]+)(us|ms|s)/.exec(w.out);
  rows.wrk = { rps, p50: p50 ? `${p50[1]} ${p50[2]}` : '?', serverCpu: w.serverCpu };
} finally {
  server.kill('SIGTERM');
}

const fmt = (x) => x.toFixed(0);
let md = '| model | c | HTTP infer/s | gRPC infer/s | gRPC / HTTP | HTTP p50 ms | gRPC p50 ms | perf client CPU HTTP / gRPC | server CPU HTTP / gRPC |\n|---|---|---|---|---|---|---|---|---|\n';
for (const { model, c, h, g } of rows) {
  md += `| ${model} | ${c} | ${fmt(h.throughput)} | ${fmt(g.throughput)} | ${(g.throughput / h.throughput).toFixed(2)}x | ${(h.latencyUs.p50 / 1000).toFixed(3)} | ${(g.latencyUs.p50 / 1000).toFixed(3)} | ${(h.clientCpu * 100).toFixed(0)}% / ${(g.clientCpu * 100).toFixed(0)}% | ${(h.serverCpu * 100).toFixed(0)}% / ${(g.serverCpu * 100).toFixed(0)}% |\n`;
}
const simple16 = rows.find((r) => r.model === 'simple' && r.c === 16);
if (rows.wrk && simple16) {
  md += `\nSame HTTP case (simple, binary, c=16): wrk ${fmt(rows.wrk.rps)} req/s (p50 ${rows.wrk.p50}), server CPU ${(rows.wrk.serverCpu * 100).toFixed(0)}%;`;
  md += ` triode perf ${fmt(simple16.h.throughput)} req/s with ${(simple16.h.clientCpu * 100).toFixed(0)}% of a core for itself (${(simple16.h.clientCpu * 1e6 / simple16.h.requestsPerSec).toFixed(1)} µs CPU per request).\n`;
}
process.stdout.write(md);
writeFileSync(join(OUT, 'grpc.md'), MACHINE_LINE + md);
