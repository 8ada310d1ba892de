/**
 * Issue #14 (scopes 2 and 4) against a `triode serve` child in explicit mode, over HTTP and gRPC:
 * hostile model names and override paths answer 400 / INVALID_ARGUMENT and nothing is created or
 * removed outside the override directory (TMPDIR points at a sandbox holding canary files); a huge
 * instance count is refused before any instance is made; a model whose initialize() never resolves
 * times out, unloads, and does not hold SIGTERM up.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient } from '@triode/client';
import { MAX_LOAD_CALLS } from '@triode/core';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

const NEVER_CONFIG = `name: "never"
backend: "javascript"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`;
// initialize() never resolves: the model never finishes loading.
const NEVER_MODEL = 'export default class Never {\n  initialize() { return new Promise(() => {}); }\n  execute() { return []; }\n}\n';

const simpleConfig = {
  name: 'x', platform: 'onnxruntime_onnx', max_batch_size: 8,
  input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] }],
  output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] }],
};

let triode: Child;
let base: string;
let grpc: GrpcClient;
let outer: string;
let sandbox: string;
let onnx: Buffer;

/** Every path under the sandbox's parent (canaries included), for before/after comparisons. */
function listing(): string[] {
  const walk = (d: string, prefix = ''): string[] => readdirSync(d, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? [`${prefix}${e.name}/`, ...walk(join(d, e.name), `${prefix}${e.name}/`)] : [`${prefix}${e.name}`]));
  return walk(outer).sort();
}

function rssKb(pid: number): number {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
}

const post = (path: string, body?: unknown) => fetch(`${base}${path}`, { method: 'POST', ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });

beforeAll(async () => {
  outer = mkdtempSync(join(tmpdir(), 'triode-hostile-'));
  sandbox = join(outer, 'tmp');
  mkdirSync(join(sandbox, 'models-parent'), { recursive: true });
  writeFileSync(join(outer, 'canary-outer'), 'do not touch');
  writeFileSync(join(sandbox, 'canary'), 'do not touch');
  writeFileSync(join(sandbox, 'models-parent', 'canary'), 'do not touch');
  const repo = makeRepository(['simple'], { 'never/config.pbtxt': NEVER_CONFIG, 'never/1/model.mjs': NEVER_MODEL });
  onnx = readFileSync(join(repo, 'simple', '1', 'model.onnx'));
  const httpPort = await freePort();
  const grpcPort = await freePort();
  // The child's temp directory (override files) is the sandbox.
  const saved = process.env['TMPDIR'];
  process.env['TMPDIR'] = sandbox;
  try {
    triode = await startTriode(['serve', '--model-repository', repo, '--model-control-mode', 'explicit', '--load-model', 'simple',
      '--http-port', String(httpPort), '--http-address', '127.0.0.1', '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1',
      '--allow-metrics=false', '--model-load-timeout-secs', '2', '--exit-timeout-secs', '10'], /Started GRPCInferenceService at 127.0.0.1:\d+/);
  } finally {
    if (saved === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = saved;
  }
  base = `http://127.0.0.1:${httpPort}`;
  grpc = new GrpcClient(`127.0.0.1:${grpcPort}`);
});

afterAll(async () => {
  grpc?.close();
  await triode?.stop();
  if (outer) rmSync(outer, { recursive: true, force: true });
});

describe('hostile model names and override paths (explicit mode)', () => {
  it('HTTP: every hostile name answers 400 for load and unload, and nothing is created or removed', async () => {
    const before = listing();
    const body = { parameters: { config: JSON.stringify(simpleConfig), 'file:1/model.onnx': onnx.toString('base64') } };
    for (const name of ['..%2Fescaped', '..%2F..%2Fmodels-parent', 'a%2Fb', 'a%5Cb', 'x%00y', 'x%0Ay', 'a'.repeat(600)]) {
      const load = await post(`/v2/repository/models/${name}/load`, body);
      expect(load.status, name).toBe(400);
      expect(((await load.json()) as { error: string }).error).toMatch(/^invalid model name '/);
      expect((await post(`/v2/repository/models/${name}/unload`)).status, name).toBe(400);
    }
    expect(listing()).toEqual(before);
  });

  it('gRPC: every hostile name answers INVALID_ARGUMENT, a broken model under ".." included, and nothing is created or removed', async () => {
    const before = listing();
    for (const name of ['..', '../escaped', '../../models-parent', '.', 'a/b', 'a\\b', 'x\u0000y', 'a'.repeat(600), '']) {
      for (const files of [{ '1/model.onnx': onnx }, { '1/model.onnx': new Uint8Array([1, 2, 3]) }]) {
        const err = await grpc.loadModel(name, { config: simpleConfig, files }).then(() => undefined, (e: unknown) => e as { grpcCode?: number; message: string });
        expect(err?.grpcCode, JSON.stringify(name)).toBe(3);
      }
      const err = await grpc.unloadModel(name).then(() => undefined, (e: unknown) => e as { grpcCode?: number });
      expect(err?.grpcCode, JSON.stringify(name)).toBe(3);
    }
    expect(listing()).toEqual(before);
  });

  it('override paths that leave the model directory answer 400; a 256-byte component answers Triton\'s 500; the server stays up', async () => {
    const before = listing();
    for (const rel of ['../escaped', '../../models-parent/x', '/abs', '1/../../x', './1/model.onnx']) {
      const r = await post('/v2/repository/models/ovr/load', { parameters: { config: JSON.stringify(simpleConfig), [`file:${rel}`]: onnx.toString('base64') } });
      expect(r.status, rel).toBe(400);
    }
    const long = await post('/v2/repository/models/ovr/load', { parameters: { config: JSON.stringify(simpleConfig), [`file:1/${'a'.repeat(256)}`]: onnx.toString('base64') } });
    expect(long.status).toBe(500);
    expect(await long.json()).toEqual({ error: "failed to load 'ovr', failed to poll from model repository" });
    const g = await grpc.loadModel('ovr', { config: simpleConfig, files: { [`1/${'a'.repeat(256)}`]: onnx } }).then(() => undefined, (e: unknown) => e as { grpcCode?: number; message: string });
    expect(g?.grpcCode).toBe(13);
    expect(g?.message).toMatch(/failed to load 'ovr', failed to poll from model repository/);
    expect(listing()).toEqual(before);
    expect((await fetch(`${base}/v2/health/live`)).status).toBe(200);
  });

  it('a good override loads from one directory in the sandbox and unloading removes exactly it; a broken one leaves nothing', async () => {
    const before = listing();
    const ok = await post('/v2/repository/models/ovr/load', { parameters: { config: JSON.stringify({ ...simpleConfig, name: 'ovr' }), 'file:1/model.onnx': onnx.toString('base64') } });
    expect(ok.status, await ok.text()).toBe(200);
    const made = listing().filter((p) => !before.includes(p));
    expect(made.filter((p) => /^tmp\/triode-override-[^/]+\/$/.test(p))).toHaveLength(1);
    expect(made.every((p) => p.startsWith(made[0]!))).toBe(true);
    expect((await post('/v2/repository/models/ovr/unload')).status).toBe(200);
    expect(listing()).toEqual(before);
    const broken = await post('/v2/repository/models/ovr/load', { parameters: { config: JSON.stringify({ ...simpleConfig, name: 'ovr' }), 'file:1/model.onnx': Buffer.from('not onnx').toString('base64') } });
    expect(broken.status).toBe(400);
    const error = ((await broken.json()) as { error: string }).error;
    expect(error).toMatch(/^load failed for model 'ovr': version 1 is at UNAVAILABLE state: /);
    expect(error).not.toContain(sandbox);
    expect(error).not.toMatch(/\n\s*at /);
    expect(listing()).toEqual(before);
  });

  it('an unknown model answers Triton\'s INTERNAL "failed to poll from model repository"', async () => {
    const r = await post('/v2/repository/models/nope/load');
    expect(r.status).toBe(500);
    expect(await r.json()).toEqual({ error: "failed to load 'nope', failed to poll from model repository" });
  });
});

describe('bounded model loading', () => {
  it(`at most ${MAX_LOAD_CALLS} load calls are under way at once: the next answers 503 / UNAVAILABLE at once; unloads are never refused (review: 30 loads of 40 MB behind a stuck one held 2.5 GB)`, async () => {
    const port = await freePort();
    const grpcPort = await freePort();
    const repo = makeRepository([]);
    const own = await startTriode(['serve', '--model-repository', repo, '--model-control-mode', 'explicit', '--http-port', String(port), '--http-address', '127.0.0.1',
      '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1', '--allow-metrics=false', '--model-load-timeout-secs', '3600'], /Started GRPCInferenceService at 127.0.0.1:\d+/);
    const client = new GrpcClient(`127.0.0.1:${grpcPort}`);
    const at = `http://127.0.0.1:${port}`;
    const send = (path: string, body?: unknown) => fetch(`${at}${path}`, { method: 'POST', ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
    const never = (name: string) => ({ parameters: { config: JSON.stringify({ name, backend: 'javascript', max_batch_size: 0, input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [1] }], output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [1] }] }), 'file:1/model.mjs': Buffer.from(NEVER_MODEL).toString('base64') } });
    try {
      // Loads that never finish (each its own model: none waits behind another's).
      const loads = Array.from({ length: MAX_LOAD_CALLS }, (_, i) => send(`/v2/repository/models/n${i}/load`, never(`n${i}`)).then((r) => r.status));
      const loading = async () => ((await (await send('/v2/repository/index')).json()) as { state: string }[]).filter((r) => r.state === 'LOADING').length;
      while ((await loading()) < MAX_LOAD_CALLS) await new Promise((r) => setTimeout(r, 50));
      const over = await send('/v2/repository/models/extra/load', never('extra'));
      expect(over.status).toBe(503);
      expect(await over.json()).toEqual({ error: `failed to load 'extra': ${MAX_LOAD_CALLS} load calls are under way on this server, try again when they end` });
      const g = await client.loadModel('extra').then(() => undefined, (e: unknown) => e as { grpcCode?: number; message: string });
      expect(g?.grpcCode).toBe(14);
      // An unload is how a stuck load is given up: it is answered, and its load with it.
      for (let i = 0; i < MAX_LOAD_CALLS; i++) expect((await send(`/v2/repository/models/n${i}/unload`)).status).toBe(200);
      expect(await Promise.all(loads)).toEqual(new Array<number>(MAX_LOAD_CALLS).fill(503));
      // The calls were counted out: a load is taken again (and answered: no such model).
      expect((await send('/v2/repository/models/extra/load')).status).toBe(500);
    } finally {
      client.close();
      await own.stop();
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('instance_group { count: 100000 } is refused with a 400 before any instance is made, and the server does not grow', async () => {
    // "At once" is not timed (a child on a loaded machine is slow either way): the error below is
    // the config check's, made before any instance is, the RSS shows none was, and the loaded
    // `simple` keeps its instances.
    const config = async () => (await (await fetch(`${base}/v2/models/simple/config`)).json()) as { instance_group: { count: number }[] };
    const groups = (await config()).instance_group;
    expect(groups.length).toBeGreaterThan(0);
    const rss = rssKb(triode.proc.pid!);
    const r = await post('/v2/repository/models/simple/load', { parameters: { config: JSON.stringify({ ...simpleConfig, name: 'simple', instance_group: [{ count: 100000, kind: 'KIND_CPU' }] }) } });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { error: string }).error).toMatch(/asks for 100000 instances, more than the limit of \d+ instances per model/);
    expect(rssKb(triode.proc.pid!) - rss).toBeLessThan(50 * 1024);
    expect((await fetch(`${base}/v2/models/simple/ready`)).status).toBe(200);
    expect((await config()).instance_group).toEqual(groups);
  });

  it('a model whose initialize() never resolves fails UNAVAILABLE at --model-load-timeout-secs and can be unloaded', async () => {
    const r = await post('/v2/repository/models/never/load');
    expect(r.status).toBe(503);
    expect(((await r.json()) as { error: string }).error).toMatch(/version 1 did not finish loading within 2000 ms/);
    expect((await post('/v2/repository/models/never/unload')).status).toBe(200);
    expect((await fetch(`${base}/v2/health/live`)).status).toBe(200);
  });

  it('SIGTERM during a load that never finishes: the load is cancelled and the server exits within --exit-timeout-secs', async () => {
    const load = post('/v2/repository/models/never/load').then(async (r) => ({ status: r.status, body: (await r.json()) as { error: string } }), () => undefined);
    // The load is in progress (its instance thread is stuck in initialize()).
    await new Promise((r) => setTimeout(r, 300));
    const start = Date.now();
    const code = await triode.stop(15_000);
    expect(Date.now() - start).toBeLessThan(10_000);
    expect(code).toBe(0);
    const answer = await load;
    if (answer) {
      expect(answer.status).toBe(503);
      expect(answer.body.error).toMatch(/Server is stopping/);
    }
  });
});
