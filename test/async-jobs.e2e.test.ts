/**
 * Async jobs end to end: redis-server, a worker and gateways as child processes, with a model
 * that holds each request until the test releases it (a file named after its input appears), so
 * nothing here depends on how fast the machine is. Each case was a defect found by attacking the
 * async routes.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const work = mkdtempSync(join(tmpdir(), 'triode-async-e2e-'));
/** Lets the requests whose input is `k` finish. */
const release = (k: number): void => writeFileSync(join(work, `release-${k}`), '');

/** Whether the model has begun a request whose input is `k`. */
const ran = (k: number): boolean => existsSync(join(work, `ran-${k}`));

const HOLD = `import { tensor } from 'triode';
import { existsSync, writeFileSync } from 'node:fs';
export default class Hold {
  async execute(requests) {
    for (const r of requests) writeFileSync(${JSON.stringify(work)} + '/ran-' + r.input('IN').data[0], '');
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

async function state(base: string, id: string): Promise<{ state: string; error?: string; finished_ms?: number }> {
  return (await (await fetch(`${base}/v2/jobs/${id}`)).json()) as { state: string; error?: string; finished_ms?: number };
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
    // Never taken by the exiting gateway, not even for a moment (BullMQ counts each take in the
    // job's 'ats' field): before, a wait for a job that began before the SIGTERM took it when it
    // came, and the gateway handed it back, so a poll now and then saw it 'active'.
    const r = new Redis(redis.url);
    try {
      expect(await r.hget(`bull:triode-async:${late}`, 'ats')).toBeNull();
    } finally {
      r.disconnect();
    }
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

  it('a job whose request waits behind busy ones is cancelled by a DELETE on another gateway than the one holding it, and never runs; one a worker has taken still answers 503 (all three answered 503 "is running")', async () => {
    const holder = await startGateway();
    // The worker takes two requests of 'hold' (its one instance runs one, the other waits there);
    // the third waits in Redis, unread.
    const ks = [11, 12, 13];
    const ids = [await submit(holder.base, 11), await submit(holder.base, 12), await submit(holder.base, 13)];
    await until(async () => (await Promise.all(ids.map(async (id) => (await state(holder.base, id)).state))).every((s) => s === 'active'));
    const inflight = async (): Promise<number | undefined> => ((await (await fetch(`${holder.base}/v2/cluster/workers`)).json()) as { workers: { inflight: number }[] }).workers[0]?.inflight;
    await until(async () => (await inflight()) === 2);
    // Started once the holder had taken all three: it holds none of them.
    const other = await startGateway();
    const del = (id: string) => fetch(`${other.base}/v2/jobs/${id}`, { method: 'DELETE' });
    let cancelled: string | undefined;
    // Tried again until one goes: the holder records where a request waits once Redis has queued it.
    await until(async () => {
      for (const id of ids) {
        const r = await del(id);
        if (r.status === 200) {
          expect(await r.json()).toEqual({ job_id: id, state: 'cancelled' });
          cancelled = id;
          return true;
        }
        expect(r.status).toBe(503);
      }
      return false;
    });
    const taken = ids.filter((id) => id !== cancelled);
    // The two a worker has taken can no longer be cancelled.
    for (const id of taken) {
      const r = await del(id);
      expect(r.status).toBe(503);
      expect(((await r.json()) as { error: string }).error).toBe(`async job '${id}' is running and can no longer be cancelled`);
    }
    // Cancelled from the DELETE on, on every gateway; then its holder, told, ends it.
    expect(await state(other.base, cancelled!)).toMatchObject({ state: 'cancelled' });
    expect(await state(holder.base, cancelled!)).toMatchObject({ state: 'cancelled' });
    await until(async () => (await state(holder.base, cancelled!)).finished_ms !== undefined);
    expect(await state(holder.base, cancelled!)).toMatchObject({ state: 'cancelled' });
    const result = await fetch(`${other.base}/v2/jobs/${cancelled!}/result`);
    expect(result.status).toBe(400);
    expect(((await result.json()) as { error: string }).error).toBe(`async job '${cancelled!}' was cancelled by the client before it ran`);
    for (const k of ks) release(k);
    for (const id of taken) await until(async () => (await state(holder.base, id)).state === 'completed');
    // A job submitted after it runs: the worker has read the stream past where it was.
    release(14);
    const after = await submit(holder.base, 14);
    await until(async () => (await state(holder.base, after)).state === 'completed');
    expect(ran(ks[ids.indexOf(cancelled!)]!)).toBe(false);
    for (const id of taken) expect(ran(ks[ids.indexOf(id)]!)).toBe(true);
    // A cancelled job's DELETE deletes it, as a finished one's.
    expect(await (await del(cancelled!)).json()).toEqual({ job_id: cancelled, state: 'deleted' });
    expect((await fetch(`${holder.base}/v2/jobs/${cancelled!}`)).status).toBe(404);
    await Promise.all([holder.child.stop(), other.child.stop()]);
  }, 90_000);
});
