// Cluster parity: the same curated requests sent to `triode serve` and to a `triode gateway` in
// front of one `triode worker` (one Redis), both on one copy of a small model repository (simple,
// an ensemble identity_chain over custom_identity_int32, the decoupled repeat_int32, and a model
// whose config fails at start), both in explicit model control with every model loaded at start.
// Each request's status and body (HTTP), or gRPC code and message / answer, are compared after
// normalizing only what must differ between two processes (timings, stats counts, the worker's id).
// Requests that change state (loads, unloads, settings) go to both in the same order; after each
// control request the script waits until the gateway's index has caught up (up to 5 s), since a
// gateway reads the index from its workers' heartbeats.
// Needs redis-server on PATH and a build (`npm run build`). Run on its own (it starts and stops
// every process itself, on free ports, by PID):
//   node bench/parity-diff.mjs [--verbose] [--keep-logs]
// It prints each differing request (a: serve, b: gateway) and a summary line; bench/RESULTS.md,
// "Cluster parity: a gateway's answers against triode serve's", has the last run.
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { GrpcClient } from '../packages/client/dist/index.js';

const { values: args } = parseArgs({ options: { verbose: { type: 'boolean', default: false }, 'keep-logs': { type: 'boolean', default: false } } });
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'packages', 'cli', 'bin', 'triode.js');
const { AbortSignal } = globalThis;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(p)); });
  });
}

const children = [];
function start(cmd, argv, ready, name) {
  const proc = spawn(cmd, argv, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  const child = { proc, name, out: '' };
  children.push(child);
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} not ready in 90 s:\n${child.out.slice(-2000)}`)), 90_000);
    const on = (d) => { child.out += d.toString(); if (ready.test(child.out)) { clearTimeout(timer); resolve(child); } };
    proc.stdout.on('data', on);
    proc.stderr.on('data', on);
    proc.once('exit', (code) => { clearTimeout(timer); reject(new Error(`${name} exited ${code}:\n${child.out.slice(-2000)}`)); });
  });
}
async function stopAll() {
  for (const c of children.reverse()) {
    if (c.proc.exitCode !== null || c.proc.signalCode !== null) continue;
    const gone = new Promise((r) => c.proc.once('exit', r));
    process.kill(c.proc.pid, 'SIGTERM');
    const t = setTimeout(() => { if (c.proc.exitCode === null) process.kill(c.proc.pid, 'SIGKILL'); }, 8000);
    await gone;
    clearTimeout(t);
  }
}

// --- the repository: a copy, so loads and unloads touch nothing of the checkout's
const repo = mkdtempSync(join(tmpdir(), 'parity-repo-'));
for (const m of ['simple', 'identity_chain', 'custom_identity_int32', 'repeat_int32']) cpSync(join(ROOT, 'model_repository', m), join(repo, m), { recursive: true });
// Three versions on disk, the latest two served.
for (const v of ['1', '2', '3']) cpSync(join(ROOT, 'model_repository', 'custom_identity_int32', '1'), join(repo, 'multi', v), { recursive: true });
writeFileSync(join(repo, 'multi', 'config.pbtxt'), 'name: "multi"\nbackend: "javascript"\nmax_batch_size: 8\nversion_policy { latest { num_versions: 2 } }\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]\n');
// A request that takes long enough to be in flight while the servers exit.
cpSync(join(ROOT, 'model_repository', 'sleepy'), join(repo, 'sleepy'), { recursive: true });
writeFileSync(join(repo, 'sleepy', 'config.pbtxt'), 'name: "sleepy"\nbackend: "javascript"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\nparameters { key: "delay_ms" value: { string_value: "3000" } }\n');
mkdirSync(join(repo, 'broken', '1'), { recursive: true });
writeFileSync(join(repo, 'broken', 'config.pbtxt'), 'name: "broken"\nbackend: "no_such_backend"\nmax_batch_size: 0\ninput [ { name: "I" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "O" data_type: TYPE_INT32 dims: [ 1 ] } ]\n');

const [redisPort, sHttp, sGrpc, gHttp, gGrpc] = await Promise.all([0, 0, 0, 0, 0].map(() => freePort()));
const redis = `redis://127.0.0.1:${redisPort}`;
const control = ['--model-control-mode', 'explicit', '--load-model', '*'];
let exitCode = 0;
try {
  await start('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], /Ready to accept connections/, 'redis');
  await Promise.all([
    start(process.execPath, [BIN, 'serve', '--model-repository', repo, '--http-port', String(sHttp), '--grpc-port', String(sGrpc), '--metrics-port', '0', '--http-address', '127.0.0.1', '--grpc-address', '127.0.0.1', ...control], /Started HTTPService at/, 'serve'),
    start(process.execPath, [BIN, 'worker', '--redis', redis, '--model-repository', repo, '--worker-id', 'w1', '--metrics-port', '0', ...control], /./, 'worker'),
    start(process.execPath, [BIN, 'gateway', '--redis', redis, '--http-port', String(gHttp), '--grpc-port', String(gGrpc), '--metrics-port', '0', '--http-address', '127.0.0.1', '--grpc-address', '127.0.0.1'], /Started HTTPService at/, 'gateway'),
  ]);
  // The gateway is ready once the worker has loaded its models and said so.
  const end = Date.now() + 60_000;
  for (;;) {
    const [a, b] = await Promise.all([fetch(`http://127.0.0.1:${sHttp}/v2/health/ready`).then((r) => r.status, () => 0), fetch(`http://127.0.0.1:${gHttp}/v2/health/ready`).then((r) => r.status, () => 0)]);
    const idx = await Promise.all([sHttp, gHttp].map((p) => fetch(`http://127.0.0.1:${p}/v2/repository/index`, { method: 'POST' }).then((r) => r.text(), () => '')));
    if (a === b && a !== 0 && idx[0] === idx[1]) break;
    if (Date.now() > end) { console.log(`not settled: ready ${a}/${b}\n  ${idx[0]}\n  ${idx[1]}`); break; }
    await sleep(250);
  }
  exitCode = await compare();
} catch (err) {
  console.error(err);
  for (const c of children) console.error(`--- ${c.name}\n${c.out.slice(-3000)}`);
  exitCode = 2;
} finally {
  await stopAll();
  if (args['keep-logs']) for (const c of children) console.log(`--- ${c.name}\n${c.out.slice(-4000)}`);
  rmSync(repo, { recursive: true, force: true });
}
process.exit(exitCode);

// --- normalizing: what two processes cannot share
function normalize(v, key = '') {
  if (Array.isArray(v)) return v.map((x) => normalize(x, key));
  if (v && typeof v === 'object') {
    const o = {};
    for (const [k, x] of Object.entries(v)) o[k] = normalize(x, k);
    return o;
  }
  if (/(^|_)ns$|last_inference|^count$|inference_count|execution_count|memory_usage/.test(key) && (typeof v === 'number' || typeof v === 'string')) return 0;
  if (typeof v === 'string') return v.replace(/worker '?w1'?/g, 'worker W').replace(/\bw1\b/g, 'W');
  return v;
}
function bodyOf(text) {
  try { return normalize(JSON.parse(text)); } catch { return normalize(text); }
}

async function http(port, { method = 'GET', path, body, headers }) {
  const init = { method, headers: { ...(body !== undefined && typeof body !== 'string' ? { 'content-type': 'application/json' } : {}), ...headers } };
  if (body !== undefined) init.body = typeof body === 'string' ? body : JSON.stringify(body);
  try {
    const r = await fetch(`http://127.0.0.1:${port}${path}`, { ...init, signal: AbortSignal.timeout(20_000) });
    const text = await r.text();
    return { status: r.status, allow: r.headers.get('allow') ?? undefined, body: method === 'HEAD' ? `(${text.length} bytes)` : bodyOf(text) };
  } catch (err) {
    return { clientError: String(err?.cause?.code ?? err?.message ?? err) };
  }
}

async function grpc(client, call) {
  try {
    return { ok: normalize(JSON.parse(JSON.stringify(await call(client), (_k, x) => (typeof x === 'bigint' ? String(x) : x)))) };
  } catch (err) {
    return { code: err.grpcCode, message: normalize(err.message) };
  }
}

async function compare() {
  const A = { http: sHttp, grpc: new GrpcClient(`127.0.0.1:${sGrpc}`) };
  const B = { http: gHttp, grpc: new GrpcClient(`127.0.0.1:${gGrpc}`) };
  const diffs = [];
  let compared = 0;
  const same = (x, y) => JSON.stringify(x) === JSON.stringify(y);
  const record = (label, a, b) => {
    compared++;
    if (same(a, b)) { if (args.verbose) console.log(`same  ${label}: ${JSON.stringify(a).slice(0, 160)}`); return; }
    diffs.push(label);
    console.log(`DIFF  ${label}\n   a: ${JSON.stringify(a).slice(0, 600)}\n   b: ${JSON.stringify(b).slice(0, 600)}`);
  };
  const H = async (req, label = `${req.method ?? 'GET'} ${req.path}${req.body !== undefined ? ' ' + (typeof req.body === 'string' ? req.body : JSON.stringify(req.body)) : ''}`) => {
    const a = await http(A.http, req);
    const b = await http(B.http, req);
    record(`http ${label}`, a, b);
    return [a, b];
  };
  const G = async (label, call) => {
    const a = await grpc(A.grpc, call);
    const b = await grpc(B.grpc, call);
    record(`grpc ${label}`, a, b);
  };
  // After a state change the gateway learns the worker's index from its heartbeat: wait for it.
  const settle = async () => {
    const end = Date.now() + 5000;
    while (Date.now() < end) {
      const [a, b] = await Promise.all([A.http, B.http].map((p) => http(p, { method: 'POST', path: '/v2/repository/index' })));
      if (same(a, b)) return;
      await sleep(200);
    }
  };
  const index = (tag) => H({ method: 'POST', path: '/v2/repository/index' }, `index ${tag}`);
  const load = async (m, body) => { await H({ method: 'POST', path: `/v2/repository/models/${m}/load`, body }); await settle(); };
  const unload = async (m, body) => { await H({ method: 'POST', path: `/v2/repository/models/${m}/unload`, body }); await settle(); };
  const simpleInfer = { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) }] };
  const chainInfer = { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] }] };
  const VERSIONS = [undefined, '1', '2', '3', '0', '1abc', ' 1', '-1', '+1', '01', '99999999999999999999', '9007199254740993', ''];
  const vpath = (m, v) => `/v2/models/${encodeURIComponent(m)}${v === undefined ? '' : `/versions/${encodeURIComponent(v)}`}`;

  // --- server
  for (const p of ['/v2/health/live', '/v2/health/ready', '/v2']) await H({ path: p });
  await G('ServerLive', (c) => c.isServerLive());
  await G('ServerReady', (c) => c.isServerReady());
  await G('ServerMetadata', (c) => c.serverMetadata());

  // --- models: ready, unknown, failed at start; versions good and bad
  for (const m of ['simple', 'identity_chain', 'repeat_int32', 'nosuch', 'broken', 'multi']) {
    for (const v of VERSIONS) {
      for (const tail of ['', '/config', '/ready', '/stats']) await H({ path: vpath(m, v) + tail });
      await G(`ModelMetadata ${m} v=${JSON.stringify(v)}`, (c) => c.modelMetadata(m, v));
      await G(`ModelReady ${m} v=${JSON.stringify(v)}`, (c) => c.isModelReady(m, v));
      await G(`ModelStatistics ${m} v=${JSON.stringify(v)}`, (c) => c.modelStatistics(m, v));
      if (v === undefined || v === '1abc' || v === '2') await G(`ModelConfig ${m} v=${JSON.stringify(v)}`, (c) => c.modelConfig(m, v));
    }
  }
  await H({ path: '/v2/models/stats' });
  await G('ModelStatistics all', (c) => c.modelStatistics());

  // --- infer
  await H({ method: 'POST', path: '/v2/models/simple/infer', body: simpleInfer });
  await H({ method: 'POST', path: '/v2/models/simple/versions/1abc/infer', body: simpleInfer });
  await H({ method: 'POST', path: '/v2/models/simple/versions/2/infer', body: simpleInfer });
  await H({ method: 'POST', path: '/v2/models/identity_chain/infer', body: chainInfer });
  await H({ method: 'POST', path: '/v2/models/repeat_int32/infer', body: { inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }, { name: 'DELAY', datatype: 'UINT32', shape: [1], data: [0] }, { name: 'WAIT', datatype: 'UINT32', shape: [1], data: [0] }] } });
  await H({ method: 'POST', path: '/v2/models/nosuch/infer', body: simpleInfer });
  await H({ method: 'POST', path: '/v2/models/broken/infer', body: chainInfer });
  await H({ method: 'POST', path: '/v2/models/broken/versions/1/infer', body: chainInfer });
  await H({ method: 'POST', path: '/v2/models/nosuch/versions/1/infer', body: chainInfer });
  for (const v of ['1', '2', '3', '4']) await H({ method: 'POST', path: `/v2/models/multi/versions/${v}/infer`, body: chainInfer });
  await H({ method: 'POST', path: '/v2/models/multi/infer', body: chainInfer });
  await H({ method: 'POST', path: '/v2/models/simple/generate', body: { INPUT0: Array(16).fill(1), INPUT1: Array(16).fill(2) } });
  await H({ method: 'POST', path: '/v2/models/simple/generate', body: { INPUT0: [1] } });
  await H({ method: 'POST', path: '/v2/models/simple/generate_stream', body: { INPUT0: Array(16).fill(1), INPUT1: Array(16).fill(2) } });
  await H({ method: 'POST', path: '/v2/models/nosuch/generate', body: { INPUT0: [1] } });
  await G('ModelInfer simple', (c) => c.infer('simple', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }] }).then((r) => ({ outputs: r.outputs?.map((o) => o.name) ?? Object.keys(r) })));
  await G('ModelInfer simple v1abc', (c) => c.infer('simple', { version: '1abc', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }] }));
  for (const v of VERSIONS.filter((x) => x !== undefined)) {
    await H({ method: 'POST', path: `${vpath('simple', v)}/infer`, body: simpleInfer });
    await H({ method: 'POST', path: `${vpath('simple', v)}/generate`, body: { INPUT0: Array(16).fill(1), INPUT1: Array(16).fill(2) } });
    await G(`ModelInfer simple v=${JSON.stringify(v)}`, (c) => c.infer('simple', { version: v, inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }] }).then((r) => ({ model_version: r.modelVersion ?? r.model_version })));
  }
  // ModelStreamInfer: the answers (results or in-band errors) of all its requests, sorted (the
  // requests of one stream run concurrently, so their answers may come in any order).
  const streamOf = (reqs) => (c) => new Promise((resolve) => {
    const got = [];
    const s = c.stream((err, r) => got.push(err ? { error: err.message } : { version: r.modelVersion, outputs: r.outputs.map((o) => o.name) }));
    for (const [m, o] of reqs) s.infer(m, o);
    const sorted = () => got.map((x) => JSON.stringify(x)).sort().map((x) => JSON.parse(x));
    s.end().then(() => resolve(sorted()), (e) => resolve([...sorted(), { end: e.message }]));
  });
  const i32 = (name, n) => ({ name, datatype: 'INT32', shape: [1, n], data: new Int32Array(n) });
  await G('ModelStreamInfer mixed', streamOf([
    ['simple', { id: 'a', inputs: [i32('INPUT0', 16), i32('INPUT1', 16)] }],
    ['nosuch', { id: 'b', inputs: [i32('INPUT0', 16)] }],
    ['simple', { id: 'c', version: '2', inputs: [i32('INPUT0', 16), i32('INPUT1', 16)] }],
    ['simple', { id: 'd', version: '-1', inputs: [i32('INPUT0', 16), i32('INPUT1', 16)] }],
    ['simple', { id: 'e', inputs: [i32('INPUT0', 16)] }],
    ['broken', { id: 'f', inputs: [i32('I', 1)] }],
    ['repeat_int32', { id: 'g', inputs: [{ name: 'IN', datatype: 'INT32', shape: [2], data: new Int32Array([7, 8]) }, { name: 'DELAY', datatype: 'UINT32', shape: [2], data: new Uint32Array([0, 0]) }, { name: 'WAIT', datatype: 'UINT32', shape: [1], data: new Uint32Array([0]) }] }],
  ]));
  await G('ModelInfer nosuch', (c) => c.infer('nosuch', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }] }));

  // --- HEAD and wrong methods
  for (const p of ['/v2', '/v2/health/live', '/v2/health/ready', '/v2/models/simple', '/v2/models/simple/ready', '/v2/models/simple/config', '/v2/models/simple/stats', '/v2/models/stats', '/v2/repository/index', '/v2/models/simple/infer', '/v2/trace/setting', '/v2/logging', '/v2/models/nosuch']) await H({ method: 'HEAD', path: p });
  for (const [m, p] of [['POST', '/v2'], ['DELETE', '/v2/models/simple'], ['GET', '/v2/models/simple/infer'], ['GET', '/v2/repository/index'], ['PUT', '/v2/repository/index'], ['GET', '/v2/repository/models/simple/load'], ['POST', '/v2/health/ready'], ['POST', '/v2/models/stats'], ['PUT', '/v2/logging'], ['DELETE', '/v2/trace/setting'], ['GET', '/v2/models/simple/generate'], ['GET', '/v2/nope'], ['GET', '/nope']]) await H({ method: m, path: p });

  // --- trace and logging settings
  await H({ path: '/v2/trace/setting' });
  await H({ path: '/v2/models/simple/trace/setting' });
  await H({ path: '/v2/models/nosuch/trace/setting' });
  for (const body of [{ trace_rate: '7' }, { trace_rate: 7 }, { trace_level: ['TIMESTAMPS'] }, { trace_level: 'TIMESTAMPS' }, { trace_count: '-1' }, { trace_count: '12abc' }, { trace_file: 'x' }, { bogus: '1' }, 'not json', [], { log_frequency: '99999999999' }]) await H({ method: 'POST', path: '/v2/trace/setting', body });
  await H({ method: 'POST', path: '/v2/models/simple/trace/setting', body: { trace_rate: '3' } });
  await H({ method: 'POST', path: '/v2/models/simple/trace/setting', body: { trace_rate: null } });
  await H({ method: 'POST', path: '/v2/models/nosuch/trace/setting', body: { trace_rate: '3' } });
  await H({ path: '/v2/trace/setting' });
  await H({ path: '/v2/models/simple/trace/setting' });
  await H({ path: '/v2/logging' });
  for (const body of [{ log_verbose_level: 1 }, { log_verbose_level: 0 }, { log_info: 'yes' }, { log_format: 'json' }, { log_format: 'ISO8601' }, { log_format: 'default' }, { log_file: 'x' }, { bogus: 1 }, 'not json', [], {}]) await H({ method: 'POST', path: '/v2/logging', body });
  await H({ path: '/v2/logging' });
  await G('LogSettings get', (c) => c.logSettings());
  await G('LogSettings bad', (c) => c.logSettings({ log_format: 'json' }));

  // --- repository: index and failed loads
  await index('at start');
  await H({ method: 'POST', path: '/v2/repository/index', body: { ready: true } }, 'index ready=true');
  await H({ method: 'POST', path: '/v2/repository/index', body: { ready: 'x' } }, 'index ready="x"');
  await H({ method: 'POST', path: '/v2/repository/index', body: 'not json' }, 'index not json');
  await G('RepositoryIndex', (c) => c.repositoryIndex());
  await G('RepositoryIndex ready', (c) => c.repositoryIndex(true));
  await load('nosuch');
  await load('a..b');
  await load('..');
  await load('simple', { parameters: 'x' });
  await load('simple', { parameters: { bogus: 'x' } });
  await load('simple', { parameters: { config: 5 } });
  await load('simple', { parameters: { config: 'not json' } });
  await load('simple', { parameters: { config: '{"backend": "no_such_backend"}' } });
  await load('simple', 'not json');
  await load('simple', []);
  await index('after failed loads of simple');
  await H({ method: 'POST', path: '/v2/models/simple/infer', body: simpleInfer }, 'infer simple after failed loads');
  await load('broken');
  await index('after reloading broken');
  await G('RepositoryModelLoad nosuch', (c) => c.loadModel('nosuch'));
  await G('RepositoryModelLoad bad config', (c) => c.loadModel('simple', { config: 'not json' }));
  await G('RepositoryModelUnload nosuch', (c) => c.unloadModel('nosuch'));

  // --- unloads: an ensemble's step, the ensemble, with and without unload_dependents
  await unload('nosuch');
  await unload('a..b');
  await unload('simple', { parameters: { unload_dependents: 'yes' } });
  await unload('simple', 'not json');
  await index('after refused unloads');
  await unload('custom_identity_int32');
  await index('after unloading the step');
  await H({ method: 'POST', path: '/v2/models/identity_chain/infer', body: chainInfer }, 'infer the ensemble after its step was unloaded');
  await H({ path: '/v2/models/custom_identity_int32' });
  await H({ path: '/v2/models/custom_identity_int32/ready' });
  await H({ path: '/v2/models/custom_identity_int32/versions/1/ready' });
  await H({ path: '/v2/models/custom_identity_int32/versions/1' });
  await H({ path: '/v2/models/custom_identity_int32/stats' });
  await G('ModelMetadata unloaded', (c) => c.modelMetadata('custom_identity_int32'));
  await G('ModelMetadata unloaded v1', (c) => c.modelMetadata('custom_identity_int32', '1'));
  await load('custom_identity_int32');
  await index('after loading the step again');
  await load('identity_chain');
  await unload('custom_identity_int32', { parameters: { unload_dependents: true } });
  await index('after unloading the step with unload_dependents');
  await load('custom_identity_int32');
  await load('identity_chain');
  await unload('identity_chain', { parameters: { unload_dependents: true } });
  await index('after unloading the ensemble with unload_dependents');
  await load('identity_chain');
  await index('after loading the ensemble (its steps with it?)');
  await load('custom_identity_int32');
  await unload('identity_chain');
  await index('after unloading the ensemble alone');
  await unload('simple');
  await index('after unloading simple');
  await H({ method: 'POST', path: '/v2/models/simple/infer', body: simpleInfer }, 'infer to unloaded simple');
  await H({ method: 'POST', path: '/v2/models/simple/versions/1/infer', body: simpleInfer }, 'infer to unloaded simple v1');
  await H({ method: 'POST', path: '/v2/models/simple/generate', body: { INPUT0: [1] } }, 'generate to unloaded simple');
  await G('ModelInfer unloaded simple', (c) => c.infer('simple', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }] }));
  for (const v of [undefined, '1', '1abc']) for (const tail of ['', '/ready', '/config', '/stats']) await H({ path: vpath('simple', v) + tail });
  await unload('simple');
  await index('after unloading simple twice');
  await H({ path: '/v2/models/stats' });
  await G('RepositoryIndex end', (c) => c.repositoryIndex());

  // --- statistics with their counts, once the worker's heartbeat has carried them (up to 5 s)
  const rawStats = async (port) => {
    const r = await fetch(`http://127.0.0.1:${port}/v2/models/stats`);
    const j = await r.json();
    return j.model_stats.map((m) => ({ name: m.name, version: m.version, inference_count: m.inference_count, execution_count: m.execution_count, success: m.inference_stats.success.count, fail: m.inference_stats.fail.count, batches: m.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]) }));
  };
  {
    let a, b;
    for (const end = Date.now() + 5000; Date.now() < end; await sleep(250)) {
      [a, b] = [await rawStats(A.http), await rawStats(B.http)];
      if (same(a, b)) break;
    }
    record('http GET /v2/models/stats (counts)', a, b);
  }

  // --- a model directory added after start: not listed until loaded (README, Differences)
  cpSync(join(repo, 'custom_identity_int32'), join(repo, 'late'), { recursive: true });
  writeFileSync(join(repo, 'late', 'config.pbtxt'), 'name: "late"\nbackend: "javascript"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ -1 ] } ]\n');
  await index('after a model directory was added');
  await H({ path: '/v2/models/late/ready' });
  await load('late');
  await index('after loading the added model');
  await unload('multi');
  await index('after unloading multi');
  for (const v of [undefined, '1', '2', '3']) await H({ path: vpath('multi', v) });

  // --- exiting: a request in flight on each, then SIGTERM to serve and to the gateway
  const inflight = [A.http, B.http].map((p) => http(p, { method: 'POST', path: '/v2/models/sleepy/infer', body: { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: [5] }] } }));
  await sleep(500);
  for (const name of ['serve', 'gateway']) { const c = children.find((x) => x.name === name); process.kill(c.proc.pid, 'SIGTERM'); }
  await sleep(300);
  for (const p of ['/v2/health/live', '/v2/health/ready', '/v2', '/v2/models/simple', '/v2/models/custom_identity_int32', '/v2/models/custom_identity_int32/ready', '/v2/models/custom_identity_int32/config', '/v2/models/custom_identity_int32/stats', '/v2/models/stats', '/v2/models/nosuch', '/v2/logging', '/v2/trace/setting']) await H({ path: p }, `exiting: GET ${p}`);
  await H({ method: 'POST', path: '/v2/repository/index' }, 'exiting: index');
  await H({ method: 'POST', path: '/v2/repository/models/simple/load' }, 'exiting: load simple');
  await H({ method: 'POST', path: '/v2/repository/models/late/unload' }, 'exiting: unload late');
  await H({ method: 'POST', path: '/v2/models/custom_identity_int32/infer', body: chainInfer }, 'exiting: infer');
  await G('exiting: ServerLive', (c) => c.isServerLive());
  await G('exiting: ServerReady', (c) => c.isServerReady());
  await G('exiting: ModelReady', (c) => c.isModelReady('custom_identity_int32'));
  await G('exiting: ModelMetadata', (c) => c.modelMetadata('custom_identity_int32'));
  await G('exiting: RepositoryIndex', (c) => c.repositoryIndex());
  const [ia, ib] = await Promise.all(inflight);
  record('http exiting: the request in flight at SIGTERM', ia, ib);

  console.log(`\n${compared} requests compared, ${diffs.length} differ`);
  return diffs.length ? 1 : 0;
}
