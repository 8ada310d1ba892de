/**
 * AsyncJobs against its own redis-server: the bounds on what jobs keep in Redis, ids that are not
 * ours, and Redis going away. Each case here was a defect found by attacking the async routes.
 */
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { Errors, InferenceServer, LocalBackplane, TriodeError, type Backend, type InferenceRequest, type InferenceResponse, type OutputEncoding } from '@triode/core';
import { startRedis, type RedisHandle } from '../../../../test/helpers/redis.js';
import { ClusterAuth } from '../cluster-auth.js';
import { redisOptions } from '../redis/redis-connection.js';
import { AsyncJobs } from './async-jobs.js';
import type { EntryGuard, EntryWithdrawal, EntryWithdrawOutcome, WaitingEntry } from '../gateway/redis-backplane.js';

/** OUT = IN, after `IN[0]` ms. */
const echoBackend: Backend = {
  name: 'echo_wait',
  async modelInitialize() {
    return {
      async instanceInitialize() {
        return {
          async execute(requests) {
            const ms = Math.max(...requests.map((r) => Number((r.inputs[0]!.data as Int32Array)[0])));
            await new Promise((r) => setTimeout(r, ms));
            return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
          },
          async finalize() {},
        };
      },
      async finalize() {},
    };
  },
};

let redis: RedisHandle;
let server: InferenceServer;
const open: AsyncJobs[] = [];

beforeAll(async () => {
  redis = await startRedis();
  const repo = mkdtempSync(join(tmpdir(), 'triode-async-'));
  for (const [m, extra, dims] of [['m', '', '1'], ['dec', 'model_transaction_policy { decoupled: true }\n', '1'], ['big', '', '-1']] as const) {
    mkdirSync(join(repo, m, '1'), { recursive: true });
    writeFileSync(join(repo, m, 'config.pbtxt'), `backend: "echo_wait"\nmax_batch_size: 0\n${extra}input { name: "IN" data_type: TYPE_INT32 dims: [ ${dims} ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ ${dims} ] }\n`);
  }
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [echoBackend] });
}, 60000);

afterAll(async () => {
  for (const j of open) await j.stop();
  await server?.stop(1000);
  fakeRedis?.disconnect();
  await redis?.stop();
});

let prefixes = 0;
function jobs(options: { resultTtlSecs?: number; maxJobs?: number; auth?: ClusterAuth } = {}): AsyncJobs {
  const j = new AsyncJobs(new LocalBackplane(server), { redis: redis.url, prefix: `t${prefixes++}`, ...options });
  j.start();
  open.push(j);
  return j;
}

const request = (ms: number, model = 'm'): InferenceRequest => ({ modelName: model, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(ms) }] }) as InferenceRequest;
const encoding: OutputEncoding = { binary: new Map(), defaultBinary: false };

async function until(cond: () => Promise<boolean>, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function code(p: Promise<unknown>): Promise<string> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(TriodeError);
  return (err as TriodeError).code;
}

describe('AsyncJobs keeps what it must, and only that', () => {
  it('finished jobs expire after the TTL even when no other job finishes (the limit frees up)', async () => {
    const j = jobs({ resultTtlSecs: 1, maxJobs: 2 });
    const ids = [await j.submit(request(1), encoding), await j.submit(request(1), encoding)];
    await until(async () => (await Promise.all(ids.map((id) => j.status(id)))).every((s) => s.state === 'completed'));
    expect(await code(j.submit(request(1), encoding))).toBe('UNAVAILABLE');
    await new Promise((r) => setTimeout(r, 1500));
    // Before: BullMQ's age limit only acted when another job finished, so none ever expired and
    // every submit got 503 for good.
    const third = await j.submit(request(1), encoding);
    expect(third).toMatch(/^[0-9a-f-]{36}$/);
    expect(await code(j.status(ids[0]!))).toBe('NOT_FOUND');
  });

  it('DELETE of a finished job frees its place; of a waiting one cancels it', async () => {
    const j = jobs({ maxJobs: 1 });
    const id = await j.submit(request(1), encoding);
    await until(async () => (await j.status(id)).state === 'completed');
    const full = await j.submit(request(1), encoding).then(() => undefined, (e: unknown) => e as TriodeError);
    expect(full?.code).toBe('UNAVAILABLE');
    expect(full?.message).toMatch(/DELETE/);
    // Nothing a client's error scrubber takes for an absolute path (a '/' after a space, quote,
    // '(', '=', '[' or ':', as in frontends' error-mapping.ts): before, its hint "(DELETE
    // /v2/jobs/{id})" reached the client as "(DELETE .../{id})".
    expect(full?.message).not.toMatch(/[\s'"`(=[:]\/(?!\/)/);
    expect(await j.cancel(id)).toBe('deleted');
    const next = await j.submit(request(1), encoding);
    await until(async () => (await j.status(next)).state === 'completed');
    expect(await j.cancel(next)).toBe('deleted');
  });

  it('concurrent submits cannot pass maxJobs together', async () => {
    const j = jobs({ maxJobs: 5 });
    const outcomes = await Promise.allSettled(Array.from({ length: 30 }, () => j.submit(request(200), encoding)));
    // Before: the count and the add were separate steps, and all 30 were accepted.
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(5);
  });

  it('attack: submits waiting for their turn are bounded (maxJobs), each holding its request (review: no bound)', async () => {
    const j = jobs({ maxJobs: 4 });
    const outcomes = await Promise.allSettled(Array.from({ length: 40 }, () => j.submit(request(1), encoding)));
    const refused = outcomes.filter((o) => o.status === 'rejected').map((o) => (o as PromiseRejectedResult).reason as TriodeError);
    // At most 4 wait at once: the 36 others are refused at once, not queued behind them.
    expect(refused.filter((e) => /too many async submits at once/.test(e.message))).toHaveLength(36);
    for (const e of refused) expect(e.code).toBe('UNAVAILABLE');
  });

  it('a decoupled model is refused at submit, as /infer refuses it', async () => {
    const j = jobs();
    expect(await code(j.submit(request(1, 'dec'), encoding))).toBe('UNSUPPORTED');
  });
});

describe('AsyncJobs results', () => {
  /** Bytes Redis has sent to its clients so far. */
  async function redisOutputBytes(r: Redis): Promise<number> {
    return Number(/total_net_output_bytes:(\d+)/.exec(await r.info('stats'))![1]);
  }

  it('attack: polling the status of a job with a large result does not read the result (each poll loaded, parsed and hashed it)', async () => {
    const j = jobs();
    const n = 512 * 1024; // a 2 MiB result
    const id = await j.submit({ modelName: 'big', inputs: [{ name: 'IN', datatype: 'INT32', shape: [n], data: new Int32Array(n) }] } as InferenceRequest, encoding);
    await until(async () => (await j.status(id)).state === 'completed');
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const before = await redisOutputBytes(r);
      for (let i = 0; i < 20; i++) expect((await j.status(id)).state).toBe('completed');
      // Before: 20 polls moved 20 copies of the result (over 50 MB) out of Redis.
      expect(await redisOutputBytes(r) - before).toBeLessThan(200_000);
      // Many fetches of the result at once take turns and all get it.
      const all = await Promise.all(Array.from({ length: 24 }, () => j.result(id)));
      for (const { response } of all) expect((response.outputs[0]!.data as Int32Array).length).toBe(n);
    } finally {
      r.disconnect();
    }
  });

  it('a status read as the job completes is never "failed, no result" (the state is read before the fields)', async () => {
    const j = jobs();
    const id = await j.submit(request(300), encoding);
    await until(async () => (await j.status(id)).state === 'active');
    // The state is read 600 ms late: the job completes in between (it runs 300 ms).
    const original = Queue.prototype.getJobState;
    const spy = vi.spyOn(Queue.prototype, 'getJobState').mockImplementation(async function (this: Queue, jobId: string) {
      await new Promise((r) => setTimeout(r, 600));
      return original.call(this, jobId);
    });
    try {
      // Before (review): {"state":"failed","error":"async job '...' has no result"}.
      expect(await j.status(id)).toMatchObject({ state: expect.stringMatching(/^(active|completed)$/) });
    } finally {
      spy.mockRestore();
    }
    await until(async () => (await j.status(id)).state === 'completed');
  });

  it('a job BullMQ failed (stalled past its limit) answers its result with a final error, not 503 (review: clients retried until it expired)', async () => {
    const j = jobs();
    const id = await j.submit(request(1), encoding);
    await until(async () => (await j.status(id)).state === 'completed');
    const r = new Redis(redis.port, '127.0.0.1');
    const spy = vi.spyOn(Queue.prototype, 'getJobState').mockResolvedValue('failed');
    try {
      await r.hset(`bull:t${prefixes - 1}-async:${id}`, 'failedReason', 'job stalled more than allowable limit');
      expect(await j.status(id)).toMatchObject({ state: 'failed', error: 'job stalled more than allowable limit' });
      await expect(j.result(id)).rejects.toMatchObject({ code: 'INTERNAL', message: `async job '${id}' failed: job stalled more than allowable limit` });
    } finally {
      spy.mockRestore();
      r.disconnect();
    }
  });

  it('a job that failed with UNAVAILABLE answers its result with a final error, not the 503 of "not ready yet" (review)', async () => {
    const backplane = new LocalBackplane(server);
    vi.spyOn(backplane, 'infer').mockRejectedValue(new TriodeError('UNAVAILABLE', "model 'm' is not ready"));
    const j = new AsyncJobs(backplane, { redis: redis.url, prefix: `t${prefixes++}` });
    j.start();
    open.push(j);
    const id = await j.submit(request(1), encoding);
    await until(async () => (await j.status(id)).state === 'failed');
    // Before: UNAVAILABLE (503), which is also what a running job's result answers.
    await expect(j.result(id)).rejects.toMatchObject({ code: 'INTERNAL', message: `async job '${id}' failed: model 'm' is not ready` });
    expect((await j.status(id)).error).toBe("model 'm' is not ready");
  });

  it('attack: with a secret, a failure reason or model name someone else wrote to Redis is not shown (review)', async () => {
    const j = jobs({ auth: new ClusterAuth('s3cret') });
    const id = await j.submit(request(1), encoding);
    await until(async () => (await j.status(id)).state === 'completed');
    expect((await j.status(id)).model_name).toBe('m');
    const r = new Redis(redis.port, '127.0.0.1');
    const key = `bull:t${prefixes - 1}-async:${id}`;
    const spy = vi.spyOn(Queue.prototype, 'getJobState').mockResolvedValue('failed');
    try {
      await r.hset(key, 'failedReason', 'Your result moved: fetch it from http://evil.example/x', 'name', 'Your result moved: see http://evil.example/x');
      // Before: both were shown as written.
      const s = await j.status(id);
      expect(s).toMatchObject({ state: 'failed', error: 'job failed' });
      expect(s.model_name).toBeUndefined();
      await expect(j.result(id)).rejects.toMatchObject({ code: 'INTERNAL', message: `async job '${id}' failed: job failed` });
    } finally {
      spy.mockRestore();
      r.disconnect();
    }
  });

  it('attack: a job removed while it runs does not come back as a result key no one expires (review)', async () => {
    const j = jobs();
    const id = await j.submit(request(400), encoding);
    await until(async () => (await j.status(id)).state === 'active');
    const r = new Redis(redis.port, '127.0.0.1');
    const key = `bull:t${prefixes - 1}-async:${id}`;
    try {
      // What BullMQ's clean (or a DELETE racing the run) leaves: the job's hash gone mid-run.
      await r.del(key);
      await new Promise((res) => setTimeout(res, 800));
      expect(await r.exists(key)).toBe(0);
      expect(await code(j.result(id))).toBe('NOT_FOUND');
    } finally {
      r.disconnect();
    }
  });

  it('a result changed in Redis is refused, not served', async () => {
    const j = jobs();
    const id = await j.submit(request(1), encoding);
    await until(async () => (await j.status(id)).state === 'completed');
    expect((await j.result(id)).response.outputs[0]!.name).toBe('OUT');
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const key = `bull:t${prefixes - 1}-async:${id}`;
      const other = await j.submit(request(2), encoding);
      await until(async () => (await j.status(other)).state === 'completed');
      // Another job's (valid) reply put in this job's place.
      await r.hset(key, 'triode-reply', (await r.hget(`bull:t${prefixes - 1}-async:${other}`, 'triode-reply'))!);
      await expect(j.result(id)).rejects.toThrow(/is malformed: it is not the reply its job returned/);
      await r.hdel(key, 'triode-reply');
      expect(await code(j.result(id))).toBe('NOT_FOUND');
    } finally {
      r.disconnect();
    }
  });
});

describe('AsyncJobs with a cluster secret', () => {
  it('attack: a captured signed job added again under a new id is refused, and counted (review: replayed without limit)', async () => {
    const auth = new ClusterAuth('s3cret');
    const j = jobs({ auth });
    const name = `t${prefixes - 1}-async`;
    const id = await j.submit(request(600), encoding);
    const r = new Redis(redis.port, '127.0.0.1');
    const q = new Queue(name, { connection: { host: '127.0.0.1', port: redis.port } });
    try {
      // Its data while it runs (the request is dropped once it ran).
      const captured = JSON.parse((await r.hget(`bull:${name}:${id}`, 'data'))!) as Record<string, unknown>;
      expect(captured['request']).not.toBe('');
      const replayed = (await q.add('m', captured, { jobId: randomUUID(), attempts: 1 })).id!;
      await until(async () => ['completed', 'failed'].includes((await j.status(replayed)).state));
      // Before: the replay completed (and ran the request again).
      expect(await j.status(replayed)).toMatchObject({ state: 'failed', error: expect.stringMatching(/not signed with the cluster secret/) });
      expect(auth.rejected.get('job')).toBeGreaterThanOrEqual(1);
      await until(async () => (await j.status(id)).state === 'completed');
    } finally {
      await q.close();
      r.disconnect();
    }
  });

  it('attack: a signed job submitted longer ago than the result TTL is refused when it comes to run', async () => {
    const auth = new ClusterAuth('s3cret');
    const j = new AsyncJobs(new LocalBackplane(server), { redis: redis.url, prefix: `t${prefixes++}`, resultTtlSecs: 1, auth });
    open.push(j);
    // No worker takes it until it is over a second old.
    const id = await j.submit(request(1), encoding);
    await new Promise((res) => setTimeout(res, 1500));
    j.start();
    await until(async () => ['completed', 'failed'].includes((await j.status(id)).state));
    // Before: it ran (a job re-added under its own id after it expired ran again).
    expect(await j.status(id)).toMatchObject({ state: 'failed', error: expect.stringMatching(/submitted more than 1 s ago/) });
  });
});

/** A model's stream as the fakes below share it: each unread request, by `${replyTo} ${requestKey}`. */
type FakeStream = Map<string, { read: () => boolean; reject: (err: TriodeError) => void }>;

/** A client of the tests' Redis for the fakes' guard checks. */
let fakeRedis: Redis | undefined;

/**
 * A backplane whose requests wait, as if queued in a model's stream, until `withdrawEntry` takes one
 * back (it fails CANCELLED), or forever once `read` (a worker has it); each reports where it waits
 * (unless `records` is false: not yet). Backplanes given one stream are gateways of one cluster.
 */
class StreamLikeBackplane extends LocalBackplane implements EntryWithdrawal {
  read = false;
  records = true;
  readonly withdrawn: WaitingEntry[] = [];
  /** Called before each `withdrawEntry` checks anything (what the rest of the cluster did meanwhile). */
  beforeWithdraw: (() => Promise<void>) | undefined;
  /** Called with each `withdrawEntry`'s answer, before the caller gets it. */
  afterWithdraw: ((outcome: EntryWithdrawOutcome) => void) | undefined;
  readonly infers: InferenceRequest[] = [];
  readonly #records = new WeakMap<InferenceRequest, (entry: WaitingEntry) => void>();
  readonly #stream: FakeStream;
  readonly #replyTo: string;

  constructor(server: InferenceServer, stream: FakeStream = new Map(), gateway = 'g') {
    super(server);
    this.#stream = stream;
    this.#replyTo = `p:reply:${gateway}`;
  }

  watchEntry(request: InferenceRequest, record: (entry: WaitingEntry) => void): void {
    this.#records.set(request, record);
  }

  override infer(request: InferenceRequest): Promise<InferenceResponse> {
    const requestKey = String(this.infers.push(request));
    return new Promise((_, reject) => {
      // Its gateway gone, it stays unread.
      this.#stream.set(`${this.#replyTo} ${requestKey}`, { read: () => this.read, reject });
      // Given up when the gateway stops.
      request.signal?.addEventListener('abort', () => reject(Errors.cancelled()));
      if (this.records) this.#records.get(request)?.({ stream: 'p:req:m', entryId: `1-${requestKey}`, replyTo: this.#replyTo, requestKey });
    });
  }

  async withdrawEntry(entry: WaitingEntry, guard?: EntryGuard): Promise<EntryWithdrawOutcome> {
    await this.beforeWithdraw?.();
    const outcome = await this.#withdrawEntry(entry, guard);
    this.afterWithdraw?.(outcome);
    return outcome;
  }

  async #withdrawEntry(entry: WaitingEntry, guard?: EntryGuard): Promise<EntryWithdrawOutcome> {
    this.withdrawn.push(entry);
    fakeRedis ??= new Redis(redis.port, '127.0.0.1');
    if (guard && (await fakeRedis.hget(guard.key, guard.field)) !== guard.text) return 'moved';
    const waiting = this.#stream.get(`${entry.replyTo} ${entry.requestKey}`);
    if (!waiting) return 'gone';
    if (waiting.read()) return 'read';
    this.#stream.delete(`${entry.replyTo} ${entry.requestKey}`);
    if (guard) await fakeRedis.hset(guard.key, guard.markField, guard.mark);
    waiting.reject(Errors.cancelled());
    return 'withdrawn';
  }
}

describe('AsyncJobs: DELETE of a job whose request waits for a worker', () => {
  function withdrawable(auth: ClusterAuth): { j: AsyncJobs; backplane: StreamLikeBackplane; key: (id: string) => string } {
    const backplane = new StreamLikeBackplane(server);
    const prefix = `t${prefixes++}`;
    const j = new AsyncJobs(backplane, { redis: redis.url, prefix, auth });
    j.start();
    open.push(j);
    return { j, backplane, key: (id) => `bull:${prefix}-async:${id}` };
  }

  it('a running job whose request no worker has read is taken back where its gateway recorded it, reads cancelled from then on, and its result is CANCELLED; one a worker has read answers 503 (review: every running job answered 503)', async () => {
    const { j, backplane, key } = withdrawable(new ClusterAuth('s3cret'));
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const id = await j.submit(request(1), encoding);
      await until(async () => (await r.hexists(key(id), 'triode-entry')) === 1);
      expect(await j.status(id)).toMatchObject({ state: 'active' });
      expect(await j.cancel(id)).toBe('cancelled');
      expect(backplane.withdrawn).toEqual([{ stream: 'p:req:m', entryId: '1-1', replyTo: 'p:reply:g', requestKey: '1' }]);
      expect(await j.status(id)).toMatchObject({ state: 'cancelled' });
      // Its gateway, told, ends it: still cancelled, and finished.
      await until(async () => (await j.status(id)).finished_ms !== undefined);
      expect(await j.status(id)).toMatchObject({ state: 'cancelled' });
      await expect(j.result(id)).rejects.toMatchObject({ code: 'CANCELLED', message: `async job '${id}' was cancelled by the client before it ran` });
      // Then a DELETE deletes it, as a finished job.
      expect(await j.cancel(id)).toBe('deleted');
      expect(await code(j.status(id))).toBe('NOT_FOUND');
      backplane.read = true;
      const running = await j.submit(request(1), encoding);
      await until(async () => (await r.hexists(key(running), 'triode-entry')) === 1);
      await expect(j.cancel(running)).rejects.toMatchObject({ code: 'UNAVAILABLE', message: `async job '${running}' is running and can no longer be cancelled` });
      expect(await j.status(running)).toMatchObject({ state: 'active' });
    } finally {
      r.disconnect();
    }
  });

  it('attack: with a secret, a request entry or a cancel mark someone else wrote to Redis is not acted on: 503, nothing taken back, the job still active (a DELETE would sign a CANCELLED reply for any request named)', async () => {
    const auth = new ClusterAuth('s3cret');
    const { j, backplane, key } = withdrawable(auth);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const first = await j.submit(request(1), encoding);
      const second = await j.submit(request(1), encoding);
      await until(async () => (await r.hexists(key(first), 'triode-entry')) === 1 && (await r.hexists(key(second), 'triode-entry')) === 1);
      // Another job's signed entry, and an unsigned one.
      await r.hset(key(first), 'triode-entry', (await r.hget(key(second), 'triode-entry'))!);
      await expect(j.cancel(first)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
      await r.hset(key(first), 'triode-entry', JSON.stringify({ stream: 'p:req:m', entryId: '1-1', replyTo: 'p:reply:g', requestKey: '1' }));
      await expect(j.cancel(first)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
      expect(backplane.withdrawn).toEqual([]);
      await r.hset(key(first), 'triode-cancelled', '1');
      expect(await j.status(first)).toMatchObject({ state: 'active' });
      expect(auth.rejected.get('job')).toBeGreaterThanOrEqual(3);
    } finally {
      r.disconnect();
    }
  });

  it('attack: a job taken again is not cancelled through the entry its former take recorded, still unread: the DELETE answers 503 while the new take runs it (review: it withdrew that entry and marked the job cancelled; GET said cancelled, the result CANCELLED, and the job ran to completion)', async () => {
    const auth = new ClusterAuth('s3cret');
    const stream: FakeStream = new Map();
    const prefix = `t${prefixes++}`;
    const first = new AsyncJobs(new StreamLikeBackplane(server, stream, 'g1'), { redis: redis.url, prefix, auth });
    first.start();
    open.push(first);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const id = await first.submit(request(1), encoding);
      await until(async () => (await r.hexists(`bull:${prefix}-async:${id}`, 'triode-entry')) === 1);
      // Its gateway goes (its request's entry stays unread in the stream, as if it died), and
      // another takes the job; a worker has read its request, not yet recorded.
      await first.stop();
      const backplane = new StreamLikeBackplane(server, stream, 'g2');
      backplane.read = true;
      backplane.records = false;
      const second = new AsyncJobs(backplane, { redis: redis.url, prefix, auth });
      second.start();
      open.push(second);
      await until(async () => backplane.infers.length === 1);
      await expect(second.cancel(id)).rejects.toMatchObject({ code: 'UNAVAILABLE', message: `async job '${id}' is running and can no longer be cancelled` });
      expect(await second.status(id)).toMatchObject({ state: 'active' });
    } finally {
      r.disconnect();
    }
  });

  it('a DELETE that loses the race with the holding gateway\'s exit withdraw (its entry gone, the job still active, waiting again 200 ms later) removes the job as a waiting one (review: it answered 503 "can no longer be cancelled" at once)', async () => {
    const auth = new ClusterAuth('s3cret');
    const stream: FakeStream = new Map();
    const prefix = `t${prefixes++}`;
    const holder = new AsyncJobs(new StreamLikeBackplane(server, stream, 'g1'), { redis: redis.url, prefix, auth });
    holder.start();
    open.push(holder);
    // The gateway the DELETE reaches (it takes no jobs, so none is taken again meanwhile).
    const backplane = new StreamLikeBackplane(server, stream, 'g2');
    const other = new AsyncJobs(backplane, { redis: redis.url, prefix, auth });
    open.push(other);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const id = await holder.submit(request(1), encoding);
      await until(async () => (await r.hexists(`bull:${prefix}-async:${id}`, 'triode-entry')) === 1);
      // The holder, exiting, has taken its unread request back (so the DELETE's withdraw finds it
      // gone) and moves the job back to wait a moment later.
      let stopped: Promise<void> | undefined;
      backplane.beforeWithdraw = async () => stream.clear();
      backplane.afterWithdraw = () => { setTimeout(() => { stopped = holder.stop(); }, 200); };
      expect(await other.status(id)).toMatchObject({ state: 'active' });
      expect(await other.cancel(id)).toBe('cancelled');
      expect(backplane.withdrawn).toHaveLength(1);
      expect(await code(other.status(id))).toBe('NOT_FOUND');
      await stopped;
    } finally {
      r.disconnect();
    }
  });

  it('a DELETE whose withdraw finds the entry gone while the job stays active waits a bounded time, then answers 503 "try again", not "can no longer be cancelled"', async () => {
    const stream: FakeStream = new Map();
    const backplane = new StreamLikeBackplane(server, stream);
    const prefix = `t${prefixes++}`;
    const j = new AsyncJobs(backplane, { redis: redis.url, prefix, auth: new ClusterAuth('s3cret') });
    j.start();
    open.push(j);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const id = await j.submit(request(1), encoding);
      await until(async () => (await r.hexists(`bull:${prefix}-async:${id}`, 'triode-entry')) === 1);
      backplane.beforeWithdraw = async () => stream.clear();
      const err = await j.cancel(id).then(() => undefined, (e: unknown) => e as TriodeError);
      expect(err).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringMatching(/^async job '[^']+' cannot be cancelled now \(.*\): try again$/) });
      expect(backplane.withdrawn).toHaveLength(1);
      expect(await j.status(id)).toMatchObject({ state: 'active' });
    } finally {
      r.disconnect();
    }
  });

  it('a DELETE whose withdraw finds the job\'s record changed meanwhile (\'moved\') tries once more with the new record, and takes the request back (it answered 503)', async () => {
    const auth = new ClusterAuth('s3cret');
    const { j, backplane, key } = withdrawable(auth);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      const id = await j.submit(request(1), encoding);
      await until(async () => (await r.hexists(key(id), 'triode-entry')) === 1);
      // The same entry, recorded again (as a take records each time Redis queues its request):
      // another text, so the guard of the record the DELETE read no longer holds.
      const text = (await r.hget(key(id), 'triode-entry'))!;
      const again = JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(text) as Record<string, unknown>).reverse()));
      backplane.beforeWithdraw = async () => {
        backplane.beforeWithdraw = undefined;
        await r.hset(key(id), 'triode-entry', again);
      };
      const outcomes: EntryWithdrawOutcome[] = [];
      backplane.afterWithdraw = (o) => outcomes.push(o);
      expect(await j.cancel(id)).toBe('cancelled');
      expect(outcomes).toEqual(['moved', 'withdrawn']);
      expect(await j.status(id)).toMatchObject({ state: 'cancelled' });
    } finally {
      r.disconnect();
    }
  });

  it('a cancelled job that a gateway takes again (the one that held it died) is not run', async () => {
    const auth = new ClusterAuth('s3cret');
    const backplane = new StreamLikeBackplane(server);
    const prefix = `t${prefixes++}`;
    const j = new AsyncJobs(backplane, { redis: redis.url, prefix, auth });
    open.push(j);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      // Waiting (not started), with the mark a DELETE leaves.
      const id = await j.submit(request(1), encoding);
      await r.hset(`bull:${prefix}-async:${id}`, 'triode-cancelled', auth.mac('job', ['cancelled', id])!.toString('hex'));
      j.start();
      await until(async () => (await j.status(id)).finished_ms !== undefined);
      expect(backplane.infers).toHaveLength(0);
      await expect(j.result(id)).rejects.toMatchObject({ code: 'CANCELLED' });
    } finally {
      r.disconnect();
    }
  });

  it('a take refused by its checks (here the TTL) still clears the entry a former take recorded (review: the clearing step came after the checks, so a DELETE could still withdraw that entry and mark the finished job cancelled)', async () => {
    const auth = new ClusterAuth('s3cret');
    const backplane = new StreamLikeBackplane(server);
    const prefix = `t${prefixes++}`;
    const j = new AsyncJobs(backplane, { redis: redis.url, prefix, resultTtlSecs: 1, auth });
    open.push(j);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      // Waiting (not started) with a former take's record, taken once it is over a second old.
      const id = await j.submit(request(1), encoding);
      await r.hset(`bull:${prefix}-async:${id}`, 'triode-entry', JSON.stringify({ stream: 'p:req:m', entryId: '1-1', replyTo: 'p:reply:g', requestKey: '1' }));
      await new Promise((res) => setTimeout(res, 1500));
      j.start();
      await until(async () => (await j.status(id)).finished_ms !== undefined);
      expect(await j.status(id)).toMatchObject({ state: 'failed', error: expect.stringMatching(/submitted more than 1 s ago/) });
      expect(await r.hexists(`bull:${prefix}-async:${id}`, 'triode-entry')).toBe(0);
    } finally {
      r.disconnect();
    }
  });
});

/**
 * A backplane as RedisBackplane is while it routes a request (a registry read, its sequence's
 * turn): the request waits for `route()`, and is then refused in the stopping schedulers' words if
 * the gateway has begun to exit meanwhile; `withdraw` finds nothing to take back before that.
 */
class RoutingBackplane extends LocalBackplane {
  exiting = false;
  readonly infers: InferenceRequest[] = [];
  readonly withdraws: InferenceRequest[] = [];
  #routed!: () => void;
  readonly #route = new Promise<void>((r) => { this.#routed = r; });

  route(): void {
    this.#routed();
  }

  override async infer(request: InferenceRequest): Promise<InferenceResponse> {
    this.infers.push(request);
    await this.#route;
    if (this.exiting) throw Errors.schedulerStopping();
    return super.infer(request);
  }

  async withdraw(request: InferenceRequest): Promise<boolean> {
    this.withdraws.push(request);
    return false;
  }
}

describe('AsyncJobs at the gateway\'s exit', () => {
  it('a job whose request the exiting backplane refused before sending it (still being routed when the exit began) goes back to wait, and runs on another gateway (review: it failed "Server is stopping" for good)', async () => {
    const backplane = new RoutingBackplane(server);
    const prefix = `t${prefixes++}`;
    const exiting = new AsyncJobs(backplane, { redis: redis.url, prefix });
    exiting.start();
    open.push(exiting);
    const id = await exiting.submit(request(1), encoding);
    await until(async () => backplane.infers.length === 1);
    // As `triode gateway` at SIGTERM: the backplane first, then the jobs.
    backplane.exiting = true;
    exiting.beginExit();
    expect(backplane.withdraws).toEqual(backplane.infers);
    backplane.route();
    await until(async () => (await exiting.status(id)).state !== 'active');
    // Before: 'failed', "Server is stopping, scheduler for model has stopped accepting new inference requests".
    expect(await exiting.status(id)).toMatchObject({ state: 'waiting' });
    const next = new AsyncJobs(new LocalBackplane(server), { redis: redis.url, prefix });
    next.start();
    open.push(next);
    await until(async () => (await next.status(id)).state === 'completed');
    expect((await next.result(id)).response.outputs[0]!.data).toEqual(Int32Array.of(1));
  });
});

describe('AsyncJobs and hostile job data', () => {
  it('attack: a job whose data is not JSON fails (malformed) instead of staying active, so DELETE works and its place frees (review)', async () => {
    const j = new AsyncJobs(new LocalBackplane(server), { redis: redis.url, prefix: `t${prefixes++}`, maxJobs: 1 });
    open.push(j);
    const name = `t${prefixes - 1}-async`;
    const r = new Redis(redis.port, '127.0.0.1');
    const q = new Queue(name, { connection: { host: '127.0.0.1', port: redis.port } });
    try {
      const id = randomUUID();
      await q.add('m', { request: '', binary: [], defaultBinary: false }, { jobId: id, attempts: 1 });
      await r.hset(`bull:${name}:${id}`, 'data', '{not json');
      j.start();
      // Before: it stayed 'active' for good, held the one place, and DELETE answered 503 "running".
      await until(async () => (await j.status(id)).state === 'failed');
      expect((await j.status(id)).error).toMatch(/malformed/);
      expect(await j.cancel(id)).toBe('deleted');
      const next = await j.submit(request(1), encoding);
      await until(async () => (await j.status(next)).state === 'completed');
    } finally {
      await q.close();
      r.disconnect();
    }
  });
});

describe('AsyncJobs takes only its own job ids', () => {
  it('names of the queue\'s own keys are not jobs: 404, and nothing is deleted', async () => {
    const j = jobs();
    const prefix = `bull:t${prefixes - 1}-async`;
    await j.submit(request(1), encoding);
    const r = new Redis(redis.port, '127.0.0.1');
    try {
      expect(await r.exists(`${prefix}:meta`)).toBe(1);
      for (const id of ['meta', 'events', 'completed', 'stalled-check', 'id', '../x', '']) {
        expect(await code(j.status(id)), id).toBe('NOT_FOUND');
        expect(await code(j.result(id)), id).toBe('NOT_FOUND');
        expect(await code(j.cancel(id)), id).toBe('NOT_FOUND');
      }
      // Before: DELETE /v2/jobs/meta answered 200 and removed the queue's meta hash.
      expect(await r.exists(`${prefix}:meta`)).toBe(1);
    } finally {
      r.disconnect();
    }
  });
});

// stop() reaches into BullMQ's worker where its close never finishes (Redis gone): bullmq is
// pinned exactly, and these fail if what it uses changes.
describe('bullmq private API used by stop() (pinned)', () => {
  it('bullmq is the pinned version', () => {
    expect((createRequire(import.meta.url)('bullmq/package.json') as { version: string }).version).toBe('5.81.5');
  });

  it("a running worker has blockingConnection.client, lockManager.close/isRunning (close stops the renewal) and stalledCheckStopper", async () => {
    const w = new Worker(`pinned-${randomUUID()}`, async () => undefined, { connection: redisOptions(redis.url, 'jobs'), autorun: false });
    try {
      void w.run();
      const p = w as unknown as { blockingConnection: { client: Promise<Redis> }; lockManager: { close(): Promise<void>; isRunning(): boolean }; stalledCheckStopper?: () => void };
      expect((await p.blockingConnection.client).status).toBe('ready');
      await until(async () => p.lockManager.isRunning() && typeof p.stalledCheckStopper === 'function');
      await p.lockManager.close();
      expect(p.lockManager.isRunning()).toBe(false);
    } finally {
      await w.close();
    }
  });
});

describe('AsyncJobs while Redis is away', () => {
  it('answers UNAVAILABLE at once instead of waiting for Redis', async () => {
    const own = await startRedis();
    const j = new AsyncJobs(new LocalBackplane(server), { redis: own.url, prefix: 'down' });
    j.start();
    const id = await j.submit(request(1), encoding);
    await until(async () => (await j.status(id)).state === 'completed');
    await own.stop();
    const t0 = Date.now();
    // Before: the calls queued in ioredis until Redis came back (no answer after 150 s).
    expect(await code(j.status(id))).toBe('UNAVAILABLE');
    expect(await code(j.result(id))).toBe('UNAVAILABLE');
    expect(await code(j.cancel(id))).toBe('UNAVAILABLE');
    expect(await code(j.submit(request(1), encoding))).toBe('UNAVAILABLE');
    expect(Date.now() - t0).toBeLessThan(5000);
    await j.stop();
  }, 30000);

  it('stop() after beginExit with Redis gone leaves none of the worker\'s or the queue\'s connections trying to reconnect, and BullMQ\'s lock renewal stopped (review: beginExit\'s graceful close was what the forced close got back, so nothing was forced, and the worker went on reconnecting for good)', async () => {
    const own = await startRedis();
    const run = vi.spyOn(Worker.prototype, 'run');
    const close = vi.spyOn(Queue.prototype, 'close');
    const j = new AsyncJobs(new LocalBackplane(server), { redis: own.url, prefix: 'exit-down' });
    try {
      j.start();
      const worker = run.mock.contexts[0] as Worker;
      const [client, blocking] = [await worker.client, await worker.waitUntilReady()];
      await own.stop();
      j.beginExit();
      await j.stop();
      // The queue's client too (review: its close "succeeded" with Redis gone, and nothing cut it).
      const queue = close.mock.contexts[0] as Queue;
      const queueClient = await queue.client;
      // BullMQ's lock renewal (a timer every 7.5 s that keeps the process alive) is stopped (review:
      // the graceful close never got to it).
      expect((worker as unknown as { lockManager: { isRunning(): boolean } }).lockManager.isRunning()).toBe(false);
      // BullMQ's connections retry every second or more; one that does within 2.5 s was left on.
      let attempts = 0;
      for (const c of [client, blocking, queueClient]) c.on('connecting', () => attempts++);
      await new Promise((res) => setTimeout(res, 2500));
      expect(attempts).toBe(0);
    } finally {
      run.mockRestore();
      close.mockRestore();
      await own.stop();
    }
  }, 30000);

  it('a submit whose add Redis ran but answered too late says the job may be queued, and names it (review: the client saw a plain 503, retried, and the job ran twice)', async () => {
    const own = await startRedis();
    const j = new AsyncJobs(new LocalBackplane(server), { redis: own.url, prefix: 'late', commandTimeoutMs: 300 });
    j.start();
    // Redis runs the add; its answer comes after the submit's deadline.
    const add = Queue.prototype.add;
    const spy = vi.spyOn(Queue.prototype, 'add').mockImplementation(async function (this: Queue, ...args: Parameters<Queue['add']>) {
      const job = await add.apply(this, args);
      await new Promise((r) => setTimeout(r, 600));
      return job;
    });
    try {
      const err = await j.submit(request(1), encoding).then(() => undefined, (e: unknown) => e as TriodeError);
      expect(err).toMatchObject({ code: 'UNAVAILABLE' });
      // Before: "async jobs: Redis is unavailable (submit)", and nothing to tell the job by.
      const id = /job '([0-9a-f-]{36})' may have been queued/.exec(err!.message)?.[1];
      expect(id).toBeDefined();
      await until(async () => (await j.status(id!)).state === 'completed');
    } finally {
      spy.mockRestore();
      await j.stop();
      await own.stop();
    }
  }, 30000);

  it('a submit whose deadline passes before its add was sent does not add it afterwards: its plain 503 means nothing was queued (review: the count answered late, the add followed, and the retried job ran twice)', async () => {
    const own = await startRedis();
    const j = new AsyncJobs(new LocalBackplane(server), { redis: own.url, prefix: 'slow-count', commandTimeoutMs: 300 });
    j.start();
    // The count answers only once the submit has failed.
    let open!: () => void;
    const gate = new Promise<void>((r) => { open = r; });
    let counted: Promise<unknown> | undefined;
    const getJobCounts = Queue.prototype.getJobCounts;
    const counts = vi.spyOn(Queue.prototype, 'getJobCounts').mockImplementation(function (this: Queue, ...types: Parameters<Queue['getJobCounts']>) {
      const p = getJobCounts.apply(this, types).then(async (c) => { await gate; return c; });
      counted = p;
      return p;
    });
    const add = vi.spyOn(Queue.prototype, 'add');
    try {
      const err = await j.submit(request(1), encoding).then(() => undefined, (e: unknown) => e as TriodeError);
      expect(err).toMatchObject({ code: 'UNAVAILABLE', message: 'async jobs: Redis is unavailable (submit)' });
      open();
      await counted;
      // Whatever followed the count has run by now (the add is issued in the same turn).
      await new Promise((r) => setImmediate(r));
      // Before: the add was sent here, and the job ran.
      expect(add).not.toHaveBeenCalled();
      counts.mockRestore();
      expect(await j.counts()).toMatchObject({ waiting: 0, active: 0, completed: 0 });
    } finally {
      counts.mockRestore();
      add.mockRestore();
      await j.stop();
      await own.stop();
    }
  }, 30000);

  it('attack: answers UNAVAILABLE when Redis is connected but does not answer (paused), and the job count too (review: no answer ever)', async () => {
    const own = await startRedis();
    const j = new AsyncJobs(new LocalBackplane(server), { redis: own.url, prefix: 'paused', commandTimeoutMs: 300 });
    j.start();
    try {
      const id = await j.submit(request(1), encoding);
      await until(async () => (await j.status(id)).state === 'completed');
      process.kill(own.proc.pid!, 'SIGSTOP');
      // Each call either settles (its code) or is still waiting after 8 s ('no answer').
      const answer = async (p: Promise<unknown>): Promise<string> => {
        let timer: NodeJS.Timeout | undefined;
        const late = new Promise<string>((r) => { timer = setTimeout(() => r('no answer'), 8000); });
        try {
          return await Promise.race([p.then(() => 'answered', (e: unknown) => (e instanceof TriodeError ? e.code : String(e))), late]);
        } finally {
          clearTimeout(timer);
        }
      };
      // Before: none of them answered until Redis did.
      expect(await Promise.all([j.status(id), j.result(id), j.cancel(id), j.submit(request(1), encoding), j.counts()].map(answer)))
        .toEqual(['UNAVAILABLE', 'UNAVAILABLE', 'UNAVAILABLE', 'UNAVAILABLE', 'UNAVAILABLE']);
    } finally {
      process.kill(own.proc.pid!, 'SIGCONT');
      await j.stop();
      await own.stop();
    }
  }, 30000);
});
