/**
 * Async jobs end to end: redis-server, a worker and gateways as child processes, with a model
 * that holds each request until the test releases it (a file named after its input appears), so
 * nothing here depends on how fast the machine is. Each case was a defect found by attacking the
 * async routes.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const work = mkdtempSync(join(tmpdir(), 'triode-async-e2e-'));
/** Lets the requests whose input is `k` finish. */
const release = (k: number): void => writeFileSync(join(work, `release-${k}`), '');

const HOLD = `import { tensor } from 'triode';
import { existsSync } from 'node:fs';
export default class Hold {
  async execute(requests) {
    for (const r of requests) {
      const file = ${JSON.stringify(work)} + '/release-' + r.input('IN').data[0];
      while (!existsSync(file)) await new Promise((res) => setTimeout(res, 20));
    }
    return requests.map((r) => ({ outputs: [tensor('OUT', 'INT32', r.input('IN').shape, r.input('IN').data)] }));
  }
}
`;

let redis: RedisHandle;
let worker: Child;
const gateways: Child[] = [];

async function startGateway(extra: string[] = []): Promise<{ child: Child; base: string }> {
  const port = await freePort();
  const child = await startTriode(['gateway', '--metrics-port', '0', '--redis', redis.url, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', ...extra]);
  gateways.push(child);
  return { child, base: `http://127.0.0.1:${port}` };
}

const body = (k: number) => JSON.stringify({ inputs: [{ name: 'IN', shape: [1], datatype: 'INT32', data: [k] }] });

async function submit(base: string, k: number): Promise<string> {
  const r = await fetch(`${base}/v2/models/hold/infer_async`, { method: 'POST', body: body(k) });
  expect(r.status).toBe(202);
  return ((await r.json()) as { job_id: string }).job_id;
}

async function state(base: string, id: string): Promise<{ state: string; error?: string }> {
  return (await (await fetch(`${base}/v2/jobs/${id}`)).json()) as { state: string; error?: string };
}

beforeAll(async () => {
  redis = await startRedis();
  const repo = makeRepository([], {
    'hold/config.pbtxt': 'name: "hold"\nbackend: "javascript"\nmax_batch_size: 0\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\ninstance_group { count: 1 kind: KIND_CPU }\n',
    'hold/1/model.mjs': HOLD,
  });
  worker = await startTriode(['worker', '--metrics-port', '0', '--redis', redis.url, '--model-repository', repo, '--model-control-mode', 'explicit', '--load-model', 'hold'], /Started worker/);
}, 60_000);

afterAll(async () => {
  for (let k = 0; k < 20; k++) release(k);
  await Promise.all([...gateways.map((g) => g.stop()), worker?.stop()]);
  await redis?.stop();
});

describe('async jobs through gateways', () => {
  it('attack: a gateway that exits takes no more jobs: one submitted while it drains waits for another gateway (it failed "Server is stopping")', async () => {
    const first = await startGateway();
    // A job in flight keeps the gateway draining until it is released.
    const held = await submit(first.base, 1);
    await until(async () => (await state(first.base, held)).state === 'active');
    process.kill(first.child.proc.pid!, 'SIGTERM');
    // Written as it begins to exit (in the same turn).
    await until(async () => first.child.output().includes('Received SIGTERM'));
    release(2);
    const late = await submit(first.base, 2);
    // Before: taken at once by the exiting gateway and failed with "Server is stopping".
    for (let i = 0; i < 10; i++) {
      expect(await state(first.base, late)).toMatchObject({ state: 'waiting' });
      await new Promise((r) => setTimeout(r, 100));
    }
    release(1);
    expect(await first.child.exited).toBe(0);
    // The job in flight finished before it exited; the other one waited for the next gateway.
    const next = await startGateway();
    expect(await state(next.base, held)).toMatchObject({ state: 'completed' });
    await until(async () => (await state(next.base, late)).state === 'completed');
    const result = await fetch(`${next.base}/v2/jobs/${late}/result`);
    expect(result.status).toBe(200);
    expect(((await result.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([2]);
    await next.child.stop();
  }, 60_000);

  it('attack: a job queued behind a busy model waits past the request timeout (it failed "no worker answered ... within 1 s")', async () => {
    const g = await startGateway(['--request-timeout-secs', '1']);
    const id = await submit(g.base, 3);
    await until(async () => (await state(g.base, id)).state === 'active');
    // Three request timeouts later, it still waits for the model.
    await new Promise((r) => setTimeout(r, 3000));
    expect(await state(g.base, id)).toMatchObject({ state: 'active' });
    release(3);
    await until(async () => (await state(g.base, id)).state === 'completed');
    const result = await fetch(`${g.base}/v2/jobs/${id}/result`);
    expect(result.status).toBe(200);
    expect(((await result.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([3]);
    // /infer keeps its timeout.
    const sync = await fetch(`${g.base}/v2/models/hold/infer`, { method: 'POST', body: body(4) });
    expect(sync.status).toBe(503);
    expect(((await sync.json()) as { error: string }).error).toMatch(/within 1 s/);
    release(4);
    await g.child.stop();
  }, 60_000);

  it('attack: a job still waiting for its model when its gateway exits goes back for the next gateway (it failed "Server is stopping" for good)', async () => {
    const first = await startGateway(['--exit-timeout-secs', '1']);
    const id = await submit(first.base, 5);
    await until(async () => (await state(first.base, id)).state === 'active');
    // It outlasts the exit timeout: the gateway gives up on it.
    expect(await first.child.stop()).toBe(0);
    release(5);
    const next = await startGateway();
    await until(async () => ['completed', 'failed'].includes((await state(next.base, id)).state));
    expect(await state(next.base, id)).toMatchObject({ state: 'completed' });
    const result = await fetch(`${next.base}/v2/jobs/${id}/result`);
    expect(result.status).toBe(200);
    expect(((await result.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([5]);
    await next.child.stop();
  }, 60_000);

  it('attack: a job queued for a model that is then unloaded fails after a request timeout, not at the end of its wait (an hour)', async () => {
    const g = await startGateway(['--request-timeout-secs', '1']);
    // The model's one instance runs the first; the second waits in the model's stream.
    const running = await submit(g.base, 6);
    const queued = await submit(g.base, 7);
    await until(async () => (await state(g.base, running)).state === 'active' && (await state(g.base, queued)).state === 'active');
    // The unload answers once the running request is done.
    const unloaded = fetch(`${g.base}/v2/repository/models/hold/unload`, { method: 'POST' });
    // Before: 'active' until the job's wait ended (--async-result-ttl-secs after its submit).
    await until(async () => (await state(g.base, queued)).state === 'failed');
    expect((await state(g.base, queued)).error).toMatch(/^no worker serves model 'hold' any more \(.+\), and none answered the request within 1 s after that$/);
    release(6);
    expect((await unloaded).status).toBe(200);
    expect((await fetch(`${g.base}/v2/repository/models/hold/load`, { method: 'POST' })).status).toBe(200);
    await g.child.stop();
  }, 60_000);

  it('attack: at SIGTERM a job whose request no worker has taken goes back to wait at once, while those a worker took drain (it waited out the whole --exit-timeout-secs)', async () => {
    const first = await startGateway(['--exit-timeout-secs', '600']);
    // The worker takes two requests of 'hold' (its one instance runs one, the other waits there);
    // the third waits in Redis for room on a worker.
    const ids = [await submit(first.base, 8), await submit(first.base, 9), await submit(first.base, 10)];
    const states = async (): Promise<string[]> => Promise.all(ids.map(async (id) => (await state(first.base, id)).state));
    await until(async () => (await states()).every((s) => s === 'active'));
    process.kill(first.child.proc.pid!, 'SIGTERM');
    await until(async () => first.child.output().includes('Received SIGTERM'));
    // Before: all three stayed active until the exit timeout (600 s), then the third went back.
    await until(async () => (await states()).filter((s) => s === 'waiting').length === 1);
    const back = ids[(await states()).indexOf('waiting')]!;
    expect((await states()).filter((s) => s === 'active')).toHaveLength(2);
    for (const k of [8, 9, 10]) release(k);
    // The two a worker took finish before the gateway exits; the other runs on the next gateway.
    expect(await first.child.exited).toBe(0);
    const next = await startGateway();
    for (const id of ids.filter((i) => i !== back)) expect(await state(next.base, id)).toMatchObject({ state: 'completed' });
    await until(async () => (await state(next.base, back)).state === 'completed');
    const result = await fetch(`${next.base}/v2/jobs/${back}/result`);
    expect(result.status).toBe(200);
    await next.child.stop();
  }, 60_000);
});
