// Issue #4 benchmark (run by hand; needs wrk and taskset for the HTTP part):
//   node bench/scheduling.mjs [--seconds 10] [--pin auto|off]
// 1. `simple` at c=64 over HTTP (binary), with and without dynamic batching, in one server.
// 2. A model with a fixed cost per batch (10 ms per execution whatever its size, max_batch_size 8,
//    2 instances) at c=64, with max_queue_delay_microseconds: throughput vs the ideal
//    2 instances x 8 / 10 ms = 1600 inferences/s. In-process, with a test backend.
// 3. The batcher's own latency at c=1: `simple` in-process with dynamic batching (delay 0) vs the
//    default scheduler, alternating windows, p50 difference; and in-process throughput at c=64
//    with and without batching (the HTTP figure of 1. is bounded by the one HTTP thread).
// Pinning (bench/pinning.mjs), for 1.: the server and wrk on separate cores (>= 8 cores: server on
// 0-1, wrk on 2-5; 2-7: server on the upper half, wrk on the lower; 1 core or --pin off: unpinned);
// 2. and 3. run in this process, not pinned. The first line printed says which.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { layout, machine as describeMachine, taskset } from './pinning.mjs';
import { InferenceServer } from '@triode/core';
import { OnnxRuntimeBackend } from '@triode/backends';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, pin: { type: 'string', default: 'auto' } } });
const SECONDS = Number(args.seconds);
const PIN = layout(availableParallelism(), args.pin); // 1.: the server on PIN.server, wrk on PIN.load
const machine = describeMachine(PIN, { server: 'server', load: 'wrk' });
console.log(`Machine: ${machine.cores} cores (${machine.cpu}); HTTP (1.): ${machine.layout}.\n`);
const f = (x, d = 0) => (Number.isFinite(x) ? x.toFixed(d) : 'n/a');

const simpleNoBatch = (await import('node:fs')).readFileSync(join(ROOT, 'model_repository/simple/config.pbtxt'), 'utf8')
  .replace('name: "simple"', 'name: "simple_nobatch"').replace(/\ndynamic_batching \{ \}\n/, '\n');
function repoWithBothSimples() {
  const repo = mkdtempSync(join(tmpdir(), 'triode-bench-'));
  cpSync(join(ROOT, 'model_repository/simple'), join(repo, 'simple'), { recursive: true });
  cpSync(join(ROOT, 'model_repository/simple/1'), join(repo, 'simple_nobatch/1'), { recursive: true });
  writeFileSync(join(repo, 'simple_nobatch/config.pbtxt'), simpleNoBatch);
  return repo;
}

// 1. HTTP, c=64, with and without batching.
const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
const http = {};
{
  const repo = repoWithBothSimples();
  const port = await freePort();
  const p = spawn(...taskset(PIN.server, [join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--log-info=false']), { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise((res) => { let out = ''; const on = (d) => { out += d; if (/READY[\s\S]*READY[\s\S]*\+\n/.test(out)) res(); }; p.stdout.on('data', on); p.stderr.on('data', on); });
  const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })) }));
  const bodyFile = join(repo, 'body.bin');
  writeFileSync(bodyFile, Buffer.concat([header, Buffer.from(new Int32Array(32).fill(3).buffer)]));
  const wrk = (model, seconds) => {
    const out = execFileSync(...taskset(PIN.load, ['wrk', '-t2', '-c64', `-d${seconds}s`, '--latency', '-s', join(ROOT, 'bench/post.lua'), `http://127.0.0.1:${port}/v2/models/${model}/infer`]), { env: { ...process.env, BODY_FILE: bodyFile, HEADER_LEN: String(header.byteLength) }, encoding: 'utf8' });
    const ms = (m) => (m ? Number(m[1]) * ({ us: 1e-3, ms: 1, s: 1000 }[m[2]]) : NaN);
    return { rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]), p50: ms(/\s50%\s+([\d.]+)(us|ms|s)/.exec(out)), p99: ms(/\s99%\s+([\d.]+)(us|ms|s)/.exec(out)), non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0) };
  };
  for (const m of ['simple_nobatch', 'simple']) {
    wrk(m, 3);
    http[m] = wrk(m, SECONDS);
    const stats = await (await fetch(`http://127.0.0.1:${port}/v2/models/${m}/stats`)).json();
    const st = stats.model_stats[0];
    http[m].avgBatch = st.inference_count / st.execution_count;
    console.error(m, JSON.stringify(http[m]));
  }
  process.kill(p.pid, 'SIGTERM');
  await new Promise((r) => p.once('exit', r));
  rmSync(repo, { recursive: true, force: true });
}

// 2. Fixed cost per batch.
function fixedCostBackend(costMs) {
  return {
    name: 'fixed_cost',
    async modelInitialize() {
      return {
        async instanceInitialize() {
          return {
            async execute(requests) {
              await new Promise((r) => setTimeout(r, costMs));
              return { responses: requests.map((r) => ({ outputs: [{ name: 'OUT', datatype: 'FP32', shape: r.inputs[0].shape, data: r.inputs[0].data }] })) };
            },
            async finalize() {},
          };
        },
        async finalize() {},
      };
    },
  };
}
const fixed = {};
for (const delayUs of [0, 2000, 5000]) {
  const repo = mkdtempSync(join(tmpdir(), 'triode-bench-'));
  mkdirSync(join(repo, 'fixed_cost/1'), { recursive: true });
  writeFileSync(join(repo, 'fixed_cost/config.pbtxt'), `backend: "fixed_cost"\nmax_batch_size: 8\ninput { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }\noutput { name: "OUT" data_type: TYPE_FP32 dims: [ 4 ] }\ndynamic_batching { max_queue_delay_microseconds: ${delayUs} }\ninstance_group { count: 2 kind: KIND_CPU }\n`);
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [fixedCostBackend(10)] });
  const run = async (ms) => {
    let n = 0;
    const end = performance.now() + ms;
    await Promise.all(Array.from({ length: 64 }, async () => {
      while (performance.now() < end) { await s.infer({ modelName: 'fixed_cost', inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 4], data: new Float32Array(4) }] }); n++; }
    }));
    return n / (ms / 1000);
  };
  await run(1000);
  const before = s.modelStatistics('fixed_cost')[0];
  const rps = await run(SECONDS * 1000);
  const after = s.modelStatistics('fixed_cost')[0];
  fixed[delayUs] = { rps, avgBatch: (after.inference_count - before.inference_count) / (after.execution_count - before.execution_count) };
  console.error('fixed', delayUs, JSON.stringify(fixed[delayUs]));
  await s.stop();
  rmSync(repo, { recursive: true, force: true });
}

// 3. Batcher latency at c=1 (and 1b: in-process throughput at c=64 with and without batching).
const lat = { simple: [], simple_nobatch: [] };
const inproc = {};
{
  const repo = repoWithBothSimples();
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()] });
  for (const model of ['simple_nobatch', 'simple', 'simple_nobatch', 'simple']) {
    let n = 0;
    const end = performance.now() + SECONDS * 500;
    await Promise.all(Array.from({ length: 64 }, async () => {
      while (performance.now() < end) {
        await s.infer({ modelName: model, inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) })) });
        n++;
      }
    }));
    inproc[model] = n / (SECONDS / 2);
    console.error('inprocess c=64', model, inproc[model]);
  }
  const window = async (model, ms) => {
    const xs = [];
    const end = performance.now() + ms;
    while (performance.now() < end) {
      const t = performance.now();
      await s.infer({ modelName: model, inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) })) });
      xs.push((performance.now() - t) * 1000);
    }
    xs.sort((a, b) => a - b);
    return xs[xs.length >> 1];
  };
  await window('simple', 1000);
  await window('simple_nobatch', 1000);
  const rounds = Math.max(4, SECONDS);
  for (let i = 0; i < rounds; i++) {
    lat.simple.push(await window('simple', 1000));
    lat.simple_nobatch.push(await window('simple_nobatch', 1000));
  }
  await s.stop();
  rmSync(repo, { recursive: true, force: true });
}
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

console.log('| case | req/s | p50 ms | p99 ms | avg batch | |');
console.log('|---|---|---|---|---|---|');
const nb = http.simple_nobatch;
const b = http.simple;
console.log(`| simple, HTTP binary, c=64, default scheduler | ${f(nb.rps)} | ${f(nb.p50, 2)} | ${f(nb.p99, 2)} | ${f(nb.avgBatch, 2)} | |`);
console.log(`| simple, HTTP binary, c=64, dynamic_batching { } | ${f(b.rps)} | ${f(b.p50, 2)} | ${f(b.p99, 2)} | ${f(b.avgBatch, 2)} | **${f(b.rps / nb.rps, 2)}x** (target >= 2) |`);
console.log(`| simple, in-process, c=64, default scheduler | ${f(inproc.simple_nobatch)} | | | | |`);
console.log(`| simple, in-process, c=64, dynamic_batching { } | ${f(inproc.simple)} | | | | **${f(inproc.simple / inproc.simple_nobatch, 2)}x** (target >= 2) |`);
for (const [d, r] of Object.entries(fixed)) {
  console.log(`| fixed 10 ms per batch, max_batch_size 8, 2 instances, c=64, max_queue_delay ${d} µs | ${f(r.rps)} | | | ${f(r.avgBatch, 2)} | **${f(r.rps / 1600, 2)}x** the ideal 1600/s (target >= 0.9) |`);
}
const lb = median(lat.simple);
const ln = median(lat.simple_nobatch);
console.log(`\nBatcher latency at c=1 (in-process, median of ${lat.simple.length} alternating 1 s windows): dynamic batching p50 ${f(lb, 1)} µs, default scheduler p50 ${f(ln, 1)} µs: **${f(lb - ln, 1)} µs** (target <= 30)`);
