import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CancelToken, InferenceServer, type Backend, type ExecuteRequest, type ExecuteResult, type Logger, type TriodeError } from '@triode/core';
import { ClusterKeys } from '../keys.js';
import { decodeReply, encodeRequestParts, type WireReply } from '../envelope/envelope-codec.js';
import { FrameReader, confirmFrame, fetchKeyOf, tensorsFrameHead } from '../reply-frames.js';
import { Redis } from 'ioredis';
import { MAX_CONTROL_CALLS, RedisBackplane } from '../gateway/redis-backplane.js';
import { startRedis, type RedisHandle } from '../../../../test/helpers/redis.js';
import { StreamConsumer } from './stream-consumer.js';
import { MAX_CONTROL_COMMANDS } from './control-queue.js';
import { ClusterAuth } from '../cluster-auth.js';
import { rawMessage } from '../../../../test/helpers/raw-envelope.js';
import { until } from '../../../../test/helpers/process.js';
import { manualClock } from '../../../core/src/scheduler/test-clock.js';

/** Test backend: 20 ms per execution whatever the batch, OUT = IN. */
/** A test backend named `name` whose every instance runs `execute`. */
function backendOf(name: string, execute: (requests: ExecuteRequest[]) => Promise<ExecuteResult>): Backend {
  return {
    name,
    async modelInitialize() {
      return {
        async instanceInitialize() {
          return { execute, async finalize() {} };
        },
        async finalize() {},
      };
    },
  };
}

/** An instance that never finishes initializing, but gives up when the load is cancelled. */
const stuck: Backend = {
  name: 'stuck',
  async modelInitialize(ctx) {
    return {
      instanceInitialize: () => new Promise<never>((_r, reject) => ctx.signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true })),
      async finalize() {},
    };
  },
};

const slow: Backend = {
  name: 'slow',
  async modelInitialize() {
    return {
      async instanceInitialize() {
        return {
          async execute(requests) {
            await new Promise((r) => setTimeout(r, 20));
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
let consumer: StreamConsumer;
let gateway: RedisBackplane;

beforeAll(async () => {
  redis = await startRedis();
  const repo = mkdtempSync(join(tmpdir(), 'triode-worker-'));
  for (const [m, batching] of [['a', '{ }'], ['b', '{ }'], ['c', '{ max_queue_delay_microseconds: 600000 }']] as const) {
    mkdirSync(join(repo, m, '1'), { recursive: true });
    writeFileSync(join(repo, m, 'config.pbtxt'), `backend: "slow"\nmax_batch_size: 8\ndynamic_batching ${batching}\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\ninstance_group { count: 1 kind: KIND_CPU }\n`);
  }
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [slow] });
  consumer = new StreamConsumer(server, { redis: redis.url, prefix: 't1' });
  await consumer.start();
  gateway = new RedisBackplane({ redis: redis.url, prefix: 't1', registryRefreshMs: 50 });
  await gateway.start();
});

afterAll(async () => {
  await gateway?.stop();
  await consumer?.stop(1000);
  await server?.stop(1000);
  await redis?.stop();
});

describe('StreamConsumer', () => {
  it('uses room freed on a full model at once, though its blocking read waits on the other streams', async () => {
    const req = (k: number) => ({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(k) }] });
    await gateway.infer(req(-1));
    const before = consumer.readsTimedOutWithRoom;
    const results = await Promise.all(Array.from({ length: 160 }, (_, k) => gateway.infer(req(k))));
    results.forEach((r, k) => expect((r.outputs[0]!.data as Int32Array)[0]).toBe(k));
    // Model a holds 16 (its slots) at a time: 160 requests fill it again and again, and each time
    // the read then waits on the other (empty) streams only. Room freed on a is meant to cut that
    // read short. Before the fix, every 16 requests waited for the read's 200 ms timeout instead
    // (about 2 s in all): the worker counts each read that ran to its timeout while a stream it
    // left out had room, and there must be none. (Counted, not timed: a slow machine's timing
    // proves nothing either way.)
    expect(consumer.readsTimedOutWithRoom - before).toBe(0);
  });

  describe('model c\'s batcher on a clock the test moves', () => {
    // Model c waits 600 ms (max_queue_delay) for a fuller batch, on a clock that moves only when
    // the test moves it: what the batcher decides is exact, whatever the machine's speed.
    const clock = manualClock();
    /** IN of each request model c executed, in order. */
    const ran: number[] = [];
    const recorded = backendOf('recorded', async (requests) => {
      for (const r of requests) ran.push((r.inputs[0]!.data as Int32Array)[0]!);
      return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
    });
    const keys = new ClusterKeys('tclock');
    let cServer: InferenceServer;
    let cConsumer: StreamConsumer;
    let cGateway: RedisBackplane;

    beforeAll(async () => {
      const repo = mkdtempSync(join(tmpdir(), 'triode-worker-clock-'));
      mkdirSync(join(repo, 'c', '1'), { recursive: true });
      writeFileSync(join(repo, 'c', 'config.pbtxt'), 'backend: "recorded"\nmax_batch_size: 8\ndynamic_batching { max_queue_delay_microseconds: 600000 }\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\ninstance_group { count: 1 kind: KIND_CPU }\n');
      cServer = await InferenceServer.create({ modelRepositories: [repo], backends: [recorded], clock });
      cConsumer = new StreamConsumer(cServer, { redis: redis.url, prefix: 'tclock' });
      await cConsumer.start();
      cGateway = new RedisBackplane({ redis: redis.url, prefix: 'tclock', registryRefreshMs: 50 });
      await cGateway.start();
    });

    afterAll(async () => {
      await cGateway?.stop();
      await cConsumer?.stop(1000);
      await cServer?.stop(1000);
    });

    /** Waits until model c's batcher holds a request for its delay: its timer is armed on the clock. */
    const held = (timersBefore: number) => vi.waitFor(() => expect(clock.pendingTimers()).toBe(timersBefore + 1), { timeout: 30_000 });

    it('counts max_queue_delay from when the gateway queued the request, so time spent in Redis is not added to it', async () => {
      const redisClient = new Redis(redis.url);
      // A gateway's reply stream: workers add replies only to one that exists.
      const replyTo = keys.replies('test');
      let last = (await redisClient.xadd(replyTo, '*', 'open', '1'))!;
      // Puts a request (IN = value, key = value) on model c's stream as a gateway would, queued at
      // `enqueuedMs` (the server's clock).
      const put = async (value: number, enqueuedMs: number): Promise<void> => {
        const [head, ...tensors] = encodeRequestParts({ modelName: 'c', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(value) }] },
          { requestKey: String(value), replyTo, enqueuedMs, deadlineMs: Date.now() + 60_000 });
        await redisClient.xadd(keys.requests('c'), '*', 'r', head!, ...tensors.flatMap((t) => ['t', t]));
      };
      // Resolves once the request's reply (a response) is on the reply stream.
      const answered = async (value: number): Promise<void> => {
        for (;;) {
          const reply = (await redisClient.xreadBuffer('BLOCK', 5000, 'STREAMS', replyTo, last)) as [Buffer, [Buffer, Buffer[]][]][] | null;
          for (const [, entries] of reply ?? []) {
            for (const [id, fields] of entries) {
              last = id.toString();
              const r = decodeReply(fields[1]!);
              if (r.requestKey === String(value)) {
                expect('response' in r).toBe(true);
                return;
              }
            }
          }
        }
      };
      try {
        const timers = clock.pendingTimers();
        // Queued a second ago (e.g. waiting in Redis for a worker): its 600 ms delay is over, and it
        // runs though the clock never moves (counted from its arrival, it would wait for good).
        await put(1, clock.epochMs() - 1000);
        await vi.waitFor(() => expect(ran).toEqual([1]), { timeout: 30_000 });
        await answered(1);
        expect(clock.pendingTimers()).toBe(timers);
        // Queued 400 ms ago: the batcher waits the 200 ms left of its delay for company, no more.
        await put(2, clock.epochMs() - 400);
        await held(timers);
        clock.advance(199e6);
        expect(clock.pendingTimers()).toBe(timers + 1); // still held
        clock.advance(1e6);
        expect(clock.pendingTimers()).toBe(timers); // its batch went
        await answered(2);
        // Queued now: the batcher waits its whole 600 ms.
        await put(3, clock.epochMs());
        await held(timers);
        clock.advance(599e6);
        expect(clock.pendingTimers()).toBe(timers + 1);
        clock.advance(1e6);
        expect(clock.pendingTimers()).toBe(timers);
        await answered(3);
        expect(ran).toEqual([1, 2, 3]);
      } finally {
        redisClient.disconnect();
      }
    });

    it('a request the gateway\'s client cancels leaves the worker\'s queue too (it ran for nobody)', async () => {
      const stats = () => cServer.modelStatistics('c')[0]!.inference_stats;
      const before = { success: stats().success.count, fail: stats().fail.count };
      const timers = clock.pendingTimers();
      const abort = new AbortController();
      const running = cGateway.infer({ modelName: 'c', signal: abort.signal, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(9) }] });
      // Queued on the worker, where model c's batcher holds it (the clock does not move) when it is cancelled.
      await held(timers);
      abort.abort();
      await expect(running).rejects.toThrow(/cancelled/);
      await vi.waitFor(() => expect(stats().fail.count).toBe(before.fail + 1), { timeout: 30_000 });
      // Past the batch delay: still queued, it would run now.
      clock.advance(600e6);
      // A later request runs on the same (only) instance: a batch of the cancelled one would have
      // run before it.
      const next = cGateway.infer({ modelName: 'c', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(10) }] });
      await held(timers);
      clock.advance(600e6);
      expect(Array.from((await next).outputs[0]!.data as Int32Array)).toEqual([10]);
      expect(ran).not.toContain(9);
      expect(ran.at(-1)).toBe(10);
      expect(stats().fail.count).toBe(before.fail + 1);
      expect(stats().success.count).toBe(before.success + 1);
    });
  });

  it('junk on the cancel channel is ignored', async () => {
    const redisClient = new Redis(redis.url);
    try {
      for (const junk of ['{', '[]', 'null', JSON.stringify({ replyTo: 5, requestKey: {} }), 'x'.repeat(100_000)]) await redisClient.publish(new ClusterKeys('t1').cancel, junk);
      const r = await gateway.infer({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(4) }] });
      expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual([4]);
    } finally {
      redisClient.disconnect();
    }
  });

  it('runs the entries Redis delivered to it whose read reply was lost (at start, and after its read connection fails)', async () => {
    // Other workers never take a live worker's entries: unless it reads its own pending entries, a
    // read whose reply was lost leaves them pending and unanswered for as long as it lives.
    const admin = new Redis(redis.url);
    const keys = new ClusterKeys('rec');
    const stream = keys.requests('a');
    const replyTo = keys.replies('test');
    let last = (await admin.xadd(replyTo, '*', 'open', '1'))!;
    const put = async (key: string, value: number): Promise<void> => {
      const [head, ...tensors] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(value) }] },
        { requestKey: key, replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + 20_000 });
      await admin.xadd(stream, '*', 'r', head!, ...tensors.flatMap((t) => ['t', t]));
      // Delivered to the worker's consumer name, as a read whose reply never reached it.
      await admin.xreadgroup('GROUP', keys.group, 'w-rec', 'COUNT', 1, 'STREAMS', stream, '>');
    };
    const replies = new Map<string, ReturnType<typeof decodeReply>>();
    const reply = async (key: string): Promise<ReturnType<typeof decodeReply>> => {
      const deadline = Date.now() + 10_000;
      while (!replies.has(key) && Date.now() < deadline) {
        const got = (await admin.xreadBuffer('BLOCK', 1000, 'STREAMS', replyTo, last)) as [Buffer, [Buffer, Buffer[]][]][] | null;
        for (const [, entries] of got ?? []) {
          for (const [id, fields] of entries) {
            last = id.toString();
            const r = decodeReply(fields[1]!);
            replies.set(r.requestKey, r);
          }
        }
      }
      if (!replies.has(key)) throw new Error(`no reply for ${key}`);
      return replies.get(key)!;
    };
    const answered = async (key: string): Promise<number> => {
      const r = await reply(key);
      if (!('response' in r)) throw new Error(`${key}: ${JSON.stringify(r)}`);
      return (r.response.outputs[0]!.data as Int32Array)[0]!;
    };
    await admin.xgroup('CREATE', stream, keys.group, '0', 'MKSTREAM');
    await put('before-start', 7);
    // A request already delivered twice to this worker id (it stopped while running it, twice):
    // at the restart it counts a third delivery and is answered, not run again (MAX_DELIVERIES).
    await put('killer', 6);
    const killerId = (await admin.xrange(stream, '-', '+')).at(-1)![0];
    await admin.xclaim(stream, keys.group, 'w-rec', 0, killerId);
    const worker = new StreamConsumer(server, { redis: redis.url, prefix: 'rec', workerId: 'w-rec' });
    try {
      await worker.start();
      expect(await answered('before-start')).toBe(7);
      expect(await reply('killer')).toMatchObject({ error: { code: 'UNAVAILABLE', message: expect.stringContaining('the workers that took it stopped') } });
      await put('lost-read', 8);
      // Its blocking read's connection fails (as when a reply is cut off mid-way).
      const clients = String(await admin.client('LIST')).split('\n').filter((l) => l.includes('cmd=xreadgroup'));
      for (const l of clients) await admin.client('KILL', 'ID', /\bid=(\d+)/.exec(l)![1]!);
      expect(clients.length).toBeGreaterThan(0);
      expect(await answered('lost-read')).toBe(8);
      // Each ran once: nothing is left pending.
      const deadline = Date.now() + 5000;
      while (Number(((await admin.xpending(stream, keys.group)) as [number])[0]) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(((await admin.xpending(stream, keys.group)) as [number])[0]).toBe(0);
    } finally {
      await worker.stop(1000);
      admin.disconnect();
    }
  });

  it('a request its gateway traces (envelope `trace`) is answered with the core\'s timestamps, in order, on CLOCK_MONOTONIC; an untraced one with none', async () => {
    const admin = new Redis(redis.url);
    const keys = new ClusterKeys('traced');
    const worker = new StreamConsumer(server, { redis: redis.url, prefix: 'traced' });
    try {
      await worker.start();
      const replyTo = keys.replies('g');
      await admin.xadd(replyTo, '*', 'open', '1');
      const before = Number(process.hrtime.bigint());
      for (const [requestKey, trace] of [['1', true], ['2', false]] as const) {
        const [head, ...tensors] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] },
          { requestKey, replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + 20_000, ...(trace ? { trace } : {}) });
        await admin.xadd(keys.requests('a'), '*', 'r', head!, ...tensors.flatMap((t) => ['t', t]));
      }
      const replies = async () => (await admin.xrangeBuffer(replyTo, '-', '+')).flatMap(([, f]) => (f[0]!.toString() === 'r' ? [decodeReply(f[1]!)] : []));
      const deadline = Date.now() + 10_000;
      while ((await replies()).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      const after = Number(process.hrtime.bigint());
      const byKey = new Map((await replies()).map((r) => [r.requestKey, r]));
      const traced = byKey.get('1') as Extract<WireReply, { response: unknown }>;
      expect(traced.trace!.map((t) => t.name)).toEqual(['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END']);
      for (const t of traced.trace!) {
        expect(t.ns).toBeGreaterThanOrEqual(before - 1e6);
        expect(t.ns).toBeLessThanOrEqual(after + 1e6);
      }
      expect(byKey.get('2')).toMatchObject({ response: { modelName: 'a' } });
      expect('trace' in byKey.get('2')!).toBe(false);
    } finally {
      await worker.stop(1000);
      admin.disconnect();
    }
  });

  it('attack: with a cluster secret, a signed request added again (a replay) is dropped, not run twice', async () => {
    const admin = new Redis(redis.url);
    const keys = new ClusterKeys('replay-req');
    const auth = new ClusterAuth('s3cret');
    const worker = new StreamConsumer(server, { redis: redis.url, prefix: 'replay-req', clusterSecret: 's3cret' });
    try {
      await worker.start();
      const replyTo = keys.replies('g');
      await admin.xadd(replyTo, '*', 'open', '1');
      const [head, ...tensors] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] },
        { requestKey: '1', replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + 20_000 });
      const fields = ['r', head!, ...tensors.flatMap((t) => ['t', t]), 's', auth.mac('request', [head!, ...tensors])!];
      const before = server.modelStatistics('a')[0]!.inference_stats.success.count;
      await admin.xadd(keys.requests('a'), '*', ...fields);
      await admin.xadd(keys.requests('a'), '*', ...fields);
      const deadline = Date.now() + 10_000;
      while ((worker.auth.rejected.get('request') ?? 0) < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      while (server.modelStatistics('a')[0]!.inference_stats.success.count === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 200));
      expect(worker.auth.rejected.get('request')).toBe(1);
      expect(server.modelStatistics('a')[0]!.inference_stats.success.count - before).toBe(1);
      const replies = (await admin.xrange(replyTo, '-', '+')).filter(([, f]) => f[0] === 'r');
      expect(replies).toHaveLength(1);
    } finally {
      await worker.stop(1000);
      admin.disconnect();
    }
  });

  it('attack: the replay guard forgets each request at its own deadline: one with a later deadline does not pin those after it', async () => {
    // Before: pruned in arrival order up to the first entry not yet due, so one long deadline (a
    // gateway with a longer timeout, or a clock ahead) kept every later entry until it passed.
    const admin = new Redis(redis.url);
    const keys = new ClusterKeys('replay-prune');
    const auth = new ClusterAuth('s3cret');
    const worker = new StreamConsumer(server, { redis: redis.url, prefix: 'replay-prune', clusterSecret: 's3cret' });
    try {
      await worker.start();
      const replyTo = keys.replies('g');
      await admin.xadd(replyTo, '*', 'open', '1');
      const send = async (requestKey: string, ttlMs: number) => {
        const [head, ...tensors] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] },
          { requestKey, replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + ttlMs });
        await admin.xadd(keys.requests('a'), '*', 'r', head!, ...tensors.flatMap((t) => ['t', t]), 's', auth.mac('request', [head!, ...tensors])!);
      };
      const answered = async (n: number) => {
        const until = Date.now() + 10_000;
        while ((await admin.xlen(replyTo)) < n + 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      };
      await send('long', 60_000);
      for (let k = 0; k < 20; k++) await send(`short${k}`, 1500);
      await answered(21);
      expect(worker.replayGuardSize).toBe(21);
      await new Promise((r) => setTimeout(r, 1600));
      await send('next', 60_000);
      await answered(22);
      expect(worker.replayGuardSize).toBe(2);
    } finally {
      await worker.stop(1000);
      admin.disconnect();
    }
  });

  it('attack: the replay guard is bounded; past its size the request due first is forgotten (before: every signed request was kept to its deadline, an async job\'s an hour: rate x TTL entries)', async () => {
    const admin = new Redis(redis.url);
    const keys = new ClusterKeys('replay-cap');
    const auth = new ClusterAuth('s3cret');
    const worker = new StreamConsumer(server, { redis: redis.url, prefix: 'replay-cap', clusterSecret: 's3cret', maxReplayGuard: 5 });
    try {
      await worker.start();
      const replyTo = keys.replies('g');
      await admin.xadd(replyTo, '*', 'open', '1');
      const entry = (requestKey: string, ttlMs: number): (string | Buffer)[] => {
        const [head, ...tensors] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] },
          { requestKey, replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + ttlMs });
        return ['r', head!, ...tensors.flatMap((t) => ['t', t]), 's', auth.mac('request', [head!, ...tensors])!];
      };
      const answered = async (n: number) => {
        const until = Date.now() + 10_000;
        while ((await admin.xlen(replyTo)) < n + 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
        expect(await admin.xlen(replyTo)).toBe(n + 1);
      };
      // Twelve requests, each due later than the one before (an hour away, as async jobs).
      const sent = Array.from({ length: 12 }, (_, k) => entry(`job${k}`, 3_600_000 + k * 1000));
      for (const fields of sent) await admin.xadd(keys.requests('a'), '*', ...fields);
      await answered(12);
      expect(worker.replayGuardSize).toBe(5);
      // The last five are still guarded: a replay of one is dropped ...
      await admin.xadd(keys.requests('a'), '*', ...sent[11]!);
      const until = Date.now() + 10_000;
      while ((worker.auth.rejected.get('request') ?? 0) < 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
      expect(worker.auth.rejected.get('request')).toBe(1);
      // ... one forgotten (due first) runs again: compute only, its gateway drops a second reply.
      await admin.xadd(keys.requests('a'), '*', ...sent[0]!);
      await answered(13);
      expect(worker.auth.rejected.get('request')).toBe(1);
      expect(worker.replayGuardSize).toBe(5);
    } finally {
      await worker.stop(1000);
      admin.disconnect();
    }
  });

  it('a worker that started with no model ready reads a model\'s stream once a load makes it ready', async () => {
    // Before: its read loop waited for room on no stream at all, and nothing woke it after the load.
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-empty-'));
    mkdirSync(join(repo, 'e', '1'), { recursive: true });
    writeFileSync(join(repo, 'e', 'config.pbtxt'), 'backend: "slow"\nmax_batch_size: 8\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    const empty = await InferenceServer.create({ modelRepositories: [repo], backends: [slow], modelControlMode: 'explicit' });
    const worker = new StreamConsumer(empty, { redis: redis.url, prefix: 'empty', heartbeatMs: 100 });
    const g = new RedisBackplane({ redis: redis.url, prefix: 'empty', registryRefreshMs: 50, requestTimeoutMs: 5000 });
    try {
      await worker.start();
      await g.start();
      await g.loadModel('e');
      const r = await g.infer({ modelName: 'e', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(9) }] });
      expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual([9]);
    } finally {
      await g.stop();
      await worker.stop(1000);
      await empty.stop(1000);
    }
  });

  it('attack: an entry of the loaded set too long for a JS string (its value or its name) is dropped alone; a joining worker still loads the others (before, it loaded none)', async () => {
    const big = await startRedis(undefined, ['--proto-max-bulk-len', '1gb']);
    const admin = new Redis(big.url);
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-join-'));
    mkdirSync(join(repo, 'e', '1'), { recursive: true });
    writeFileSync(join(repo, 'e', 'config.pbtxt'), 'backend: "slow"\nmax_batch_size: 8\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    const explicit = await InferenceServer.create({ modelRepositories: [repo], backends: [slow], modelControlMode: 'explicit' });
    const worker = new StreamConsumer(explicit, { redis: big.url, prefix: 'join' });
    try {
      const keys = new ClusterKeys('join');
      await admin.hset(keys.desired, 'e', JSON.stringify({ model: 'e', action: 'load' }));
      // 0x1fffffe8 + 24 bytes: past V8's string limit.
      await admin.hset(keys.desired, 'junk', Buffer.alloc(0x1fffffe8 + 24, 0x61));
      // And a field name as long (names are not signed): ioredis's hgetallBuffer keyed an object by
      // it, failed the whole read, and the worker loaded nothing, saying nothing (review).
      await admin.hset(keys.desired, Buffer.alloc(0x1fffffe8 + 24, 0x62), 'x');
      await worker.start();
      expect(explicit.modelReady('e')).toBe(true);
    } finally {
      await worker.stop(1000);
      await explicit.stop(1000);
      admin.disconnect();
      await big.stop();
    }
  }, 90_000);

  it('a later read of the loaded set loads all its models however many, a few at a time (review: queued all at once, those past the control queue\'s bound were refused and never loaded)', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-rejoin-'));
    const names = Array.from({ length: 12 }, (_, i) => `r${i}`);
    for (const m of names) {
      mkdirSync(join(repo, m, '1'), { recursive: true });
      writeFileSync(join(repo, m, 'config.pbtxt'), 'backend: "slow"\nmax_batch_size: 8\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    }
    const explicit = await InferenceServer.create({ modelRepositories: [repo], backends: [slow], modelControlMode: 'explicit' });
    const admin = new Redis(redis.url);
    const warnings: string[] = [];
    const logger: Logger = { info: () => {}, warning: (m: string) => { warnings.push(m); }, error: () => {}, verbose: () => {} };
    const worker = new StreamConsumer(explicit, { redis: redis.url, prefix: 'rejoin', maxControlCommands: 3, rejoinAfterMs: [300], logger });
    try {
      await worker.start();
      // Loaded by the cluster while this worker joined: only the later read finds them.
      const keys = new ClusterKeys('rejoin');
      for (const m of names) await admin.hset(keys.desired, m, JSON.stringify({ model: m, action: 'load' }));
      await until(async () => names.every((m) => explicit.modelReady(m)), 30_000);
      expect(warnings.filter((w) => w.includes('could not load'))).toEqual([]);
    } finally {
      await worker.stop(1000);
      await explicit.stop(1000);
      admin.disconnect();
    }
  }, 60_000);

  it('a reply Redis refuses for good (over proto-max-bulk-len) is answered with an error at once, not left to time out', async () => {
    const small = await startRedis(undefined, ['--proto-max-bulk-len', '1mb']);
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-bigout-'));
    mkdirSync(join(repo, 'big', '1'), { recursive: true });
    writeFileSync(join(repo, 'big', 'config.pbtxt'), 'backend: "bigout"\nmax_batch_size: 0\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_UINT8 dims: [ -1 ] }\n');
    // 2 MiB out for 4 bytes in.
    const bigout = backendOf('bigout', async (requests) => {
      return { responses: requests.map(() => ({ outputs: [{ name: 'OUT', datatype: 'UINT8' as const, shape: [2 << 20], data: new Uint8Array(2 << 20) }] })) };
    });
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [bigout] });
    const worker = new StreamConsumer(s, { redis: small.url, prefix: 'bigout' });
    const g = new RedisBackplane({ redis: small.url, prefix: 'bigout', registryRefreshMs: 50, requestTimeoutMs: 20_000, directReplies: false });
    try {
      await worker.start();
      await g.start();
      const t0 = Date.now();
      await expect(g.infer({ modelName: 'big', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }] }))
        .rejects.toMatchObject({ code: 'INTERNAL', message: expect.stringMatching(/^the response of model 'big' \(\d+ bytes\) could not be passed through Redis$/) });
      expect(Date.now() - t0).toBeLessThan(15_000);
    } finally {
      await g.stop();
      await worker.stop(1000);
      await s.stop(1000);
      await small.stop();
    }
  }, 30_000);

  it('a streamed request to a model with no outputs gets its one response (review: it was taken for the end of a decoupled stream, and none came)', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-noout-'));
    mkdirSync(join(repo, 'sink', '1'), { recursive: true });
    writeFileSync(join(repo, 'sink', 'config.pbtxt'), 'backend: "sink"\nmax_batch_size: 0\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    const sink = backendOf('sink', async (requests) => ({ responses: requests.map(() => ({ outputs: [] })) }));
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [sink] });
    const worker = new StreamConsumer(s, { redis: redis.url, prefix: 'noout' });
    const g = new RedisBackplane({ redis: redis.url, prefix: 'noout', registryRefreshMs: 50, requestTimeoutMs: 5_000 });
    try {
      await worker.start();
      await g.start();
      const request = { modelName: 'sink', id: 'r7', inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1], data: Int32Array.of(1) }] };
      // What embedded mode streams for it: one response, with no outputs.
      const embedded: { id?: string; outputs: number }[] = [];
      await s.inferStream({ ...request }, (r) => { embedded.push({ id: r.id, outputs: r.outputs.length }); });
      const cluster: { id?: string; outputs: number }[] = [];
      await g.inferStream({ ...request }, (r) => { cluster.push({ id: r.id, outputs: r.outputs.length }); });
      expect(embedded).toEqual([{ id: 'r7', outputs: 0 }]);
      expect(cluster).toEqual(embedded);
    } finally {
      await g.stop();
      await worker.stop(1000);
      await s.stop(1000);
    }
  });

  it('attack: load/unload calls at once on a gateway are bounded (each holds a Redis connection; review: no bound)', async () => {
    const outcomes = await Promise.allSettled(Array.from({ length: MAX_CONTROL_CALLS + 4 }, () => gateway.loadModel('a')));
    const over = outcomes.filter((o) => o.status === 'rejected' && /load calls are under way on this gateway/.test(String((o.reason as Error).message)));
    expect(over).toHaveLength(4);
    for (const o of over) expect(((o as PromiseRejectedResult).reason as { code: string }).code).toBe('UNAVAILABLE');
  });

  it(`${MAX_CONTROL_CALLS} loads that never end keep out neither an unload (as in triode serve) nor the unload's effect: it gives them all up (review: refused while they ran, and on workers it waited behind them)`, async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-stuck-'));
    mkdirSync(join(repo, 'stuck', '1'), { recursive: true });
    writeFileSync(join(repo, 'stuck', 'config.pbtxt'), 'backend: "stuck"\nmax_batch_size: 0\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [stuck], modelControlMode: 'explicit', modelLoadTimeoutMs: 3_600_000 });
    const worker = new StreamConsumer(s, { redis: redis.url, prefix: 'stuck' });
    const g = new RedisBackplane({ redis: redis.url, prefix: 'stuck', registryRefreshMs: 50 });
    try {
      await worker.start();
      await g.start();
      const loads = Array.from({ length: MAX_CONTROL_CALLS }, () => g.loadModel('stuck').then(() => 'loaded', (e: TriodeError) => `${e.code}: ${e.message}`));
      // One more load is refused; an unload is not.
      await expect(g.loadModel('stuck')).rejects.toMatchObject({ code: 'UNAVAILABLE', message: `failed to load 'stuck': ${MAX_CONTROL_CALLS} load calls are under way on this gateway, try again when they end` });
      await until(async () => s.repositoryIndex().some((r) => r.name === 'stuck' && r.state === 'LOADING'));
      await g.unloadModel('stuck');
      for (const answer of await Promise.all(loads)) expect(answer).toMatch(/^UNAVAILABLE: .*failed to load 'stuck': the load was cancelled by an unload of the model/);
      expect(s.modelReady('stuck')).toBe(false);
      // Unloads past the bound wait for their turn; those of one model share one call.
      const unloads = await Promise.allSettled(Array.from({ length: 2 * MAX_CONTROL_CALLS + 4 }, (_, k) => g.unloadModel(k % 2 === 0 ? 'stuck' : `other${k}`)));
      expect(unloads.filter((u) => u.status === 'rejected')).toEqual([]);
    } finally {
      await g.stop();
      await worker.stop(1000);
      await s.stop(1000);
    }
  });

  describe('control commands beside a load that never ends', () => {
    /** A worker and a gateway on a repository of `stuck` (its load never ends until given up), `b`, `c`, and `e`, an ensemble of `stuck` then `b`. */
    const cluster = async (prefix: string) => {
      const repo = mkdtempSync(join(tmpdir(), 'triode-worker-scope-'));
      const io = 'max_batch_size: 0\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n';
      for (const [m, backend] of [['stuck', 'stuck'], ['b', 'slow'], ['c', 'slow']]) {
        mkdirSync(join(repo, m!, '1'), { recursive: true });
        writeFileSync(join(repo, m!, 'config.pbtxt'), `backend: "${backend}"\n${io}`);
      }
      mkdirSync(join(repo, 'e', '1'), { recursive: true });
      writeFileSync(join(repo, 'e', 'config.pbtxt'), 'platform: "ensemble"\nmax_batch_size: 0\ninput { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n'
        + 'ensemble_scheduling { step [ { model_name: "stuck" model_version: -1 input_map { key: "IN" value: "X" } output_map { key: "OUT" value: "T" } }, { model_name: "b" model_version: -1 input_map { key: "IN" value: "T" } output_map { key: "OUT" value: "Y" } } ] }\n');
      const s = await InferenceServer.create({ modelRepositories: [repo], backends: [stuck, slow], modelControlMode: 'explicit', modelLoadTimeoutMs: 3_600_000 });
      const worker = new StreamConsumer(s, { redis: redis.url, prefix });
      const g = new RedisBackplane({ redis: redis.url, prefix, registryRefreshMs: 50 });
      await worker.start();
      await g.start();
      const stuckLoading = () => until(async () => s.repositoryIndex().some((r) => r.name === 'stuck' && r.state === 'LOADING'));
      const outcome = (p: Promise<void>) => p.then(() => 'ok', (e: TriodeError) => `${e.code}: ${e.message}`);
      return { s, g, stuckLoading, outcome, close: async () => { await g.stop(); await worker.stop(1000); await s.stop(1000); } };
    };

    it('a load of another model is applied beside it; one of a model it may change (an ensemble\'s step) waits for it (before: every command waited, Triton locks only the models a load affects)', async () => {
      const { s, g, stuckLoading, outcome, close } = await cluster('scope1');
      try {
        const e = outcome(g.loadModel('e'));
        await stuckLoading();
        let b: string | undefined;
        const bLoad = outcome(g.loadModel('b')).then((o) => { b = o; });
        await g.loadModel('c');
        await g.unloadModel('c');
        // e's load may load b as its step: b's load comes after it, on every worker alike.
        expect(b).toBeUndefined();
        await g.unloadModel('stuck');
        expect(await e).toMatch(/^UNAVAILABLE: .*ensemble 'e' depends on 'stuck'/);
        await bLoad;
        expect(b).toBe('ok');
        expect(s.modelReady('b')).toBe(true);
      } finally {
        await close();
      }
    });

    it('an unload gives up its model\'s loads waiting behind another command at once (before: answered only at their turn, once the command ahead ended)', async () => {
      const { s, g, stuckLoading, outcome, close } = await cluster('scope2');
      try {
        const e = outcome(g.loadModel('e'));
        await stuckLoading();
        const b = outcome(g.loadModel('b'));
        const unloadB = outcome(g.unloadModel('b'));
        expect(await b).toBe(`UNAVAILABLE: failed to load 'b': the load was cancelled by an unload of the model`);
        await g.unloadModel('stuck');
        expect(await e).toMatch(/^UNAVAILABLE: /);
        expect(await unloadB).toBe('ok');
        expect(s.modelReady('b')).toBe(false);
      } finally {
        await close();
      }
    });

    it(`attack: a flood of control messages is bounded: the same load asked again joins the one waiting, and past ${MAX_CONTROL_COMMANDS} held one is answered UNAVAILABLE at once (before: every message waited, held, behind the load)`, async () => {
      const { g, stuckLoading, close } = await cluster('flood');
      const r = new Redis(redis.url);
      const keys = new ClusterKeys('flood');
      try {
        const first = g.loadModel('stuck').catch(() => undefined);
        await stuckLoading();
        const n = MAX_CONTROL_COMMANDS + 100;
        const ids = Array.from({ length: n }, (_, k) => `flood-${k}`);
        for (const id of ids) await r.publish(keys.control, JSON.stringify({ id, ts: Date.now(), action: 'load', model: 'stuck' }));
        const answers = async () => {
          const p = r.pipeline();
          for (const id of ids) p.lrange(keys.controlReplies(id), 0, -1);
          return ((await p.exec()) ?? []).flatMap(([, list]) => list as string[]).map((a) => JSON.parse(a) as { error?: { code: string; message: string } });
        };
        // The load running, one waiting with all the others joined to it, and 101 refused.
        await until(async () => (await answers()).length === 101);
        for (const a of await answers()) expect(a.error).toEqual({ code: 'UNAVAILABLE', message: `failed to load 'stuck': ${MAX_CONTROL_COMMANDS} load and unload commands are under way on this worker, try again when they end` });
        await g.unloadModel('stuck');
        await first;
        await until(async () => (await answers()).length === n);
        expect((await answers()).filter((a) => /cancelled by an unload/.test(a.error?.message ?? ''))).toHaveLength(n - 101);
      } finally {
        r.disconnect();
        await close();
      }
    });
  });

  it('a request cancelled before it is queued is answered CANCELLED and never reaches Redis (review: it ran for nobody, a decoupled one for good)', async () => {
    const r = new Redis(redis.url);
    const keys = new ClusterKeys('t1');
    // Redis 7's count of entries ever added to the stream (XLEN drops what workers have deleted).
    const added = async () => {
      const info = (await r.xinfo('STREAM', keys.requests('a'))) as unknown[];
      return Number(info[info.indexOf('entries-added') + 1]);
    };
    try {
      await gateway.infer({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] });
      const before = await added();
      const token = new CancelToken();
      token.cancel();
      await expect(gateway.infer({ modelName: 'a', signal: token, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(2) }] })).rejects.toMatchObject({ code: 'CANCELLED' });
      await expect(gateway.inferStream({ modelName: 'a', signal: token, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] }, () => undefined)).rejects.toMatchObject({ code: 'CANCELLED' });
      expect(await added()).toBe(before);
    } finally {
      r.disconnect();
    }
  });

  it('a Redis that takes commands but does not answer them fails the request with 503 after the command timeout (review: it waited for good)', async () => {
    const g = new RedisBackplane({ redis: redis.url, prefix: 't1', registryRefreshMs: 50, commandTimeoutMs: 500, directReplies: false });
    const r = new Redis(redis.url);
    try {
      await g.start();
      await g.infer({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] });
      // Every write command waits until the UNPAUSE below (as a paused or wedged Redis would keep
      // it); 20 s, so the pause cannot end first, and 20x the 500 ms timeout for the bound.
      await r.call('CLIENT', 'PAUSE', '20000', 'WRITE');
      const t0 = Date.now();
      await expect(g.infer({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(2) }] })).rejects.toMatchObject({ code: 'UNAVAILABLE' });
      expect(Date.now() - t0).toBeLessThan(10_000);
    } finally {
      await r.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      r.disconnect();
      await g.stop();
    }
  });

  describe('streamed responses waiting for clients that read nothing', () => {
    // IN = n: n responses of 4 KiB, as fast as the worker can send them, until cancelled.
    const seen = { produced: 0, cancelled: 0 };
    const flood = backendOf('flood', async (requests) => {
      for (const r of requests) {
        const n = (r.inputs[0]!.data as Int32Array)[0]!;
        void (async () => {
          for (let i = 0; i < n; i++) {
            if (r.signal?.aborted) {
              seen.cancelled++;
              await r.respond!(undefined, true);
              return;
            }
            seen.produced++;
            await r.respond!({ outputs: [{ name: 'OUT', datatype: 'UINT8' as const, shape: [4096], data: new Uint8Array(4096) }] }, i === n - 1);
          }
        })();
      }
      return { responses: [] };
    });
    /** A worker with model 'flood' and a gateway with `options`, for `f`; each response counts 6 KiB against the bounds. */
    const withFlood = async (prefix: string, options: { maxStreamBacklogBytes: number; maxGatewayBacklogBytes?: number }, f: (g: RedisBackplane) => Promise<void>) => {
      seen.produced = 0;
      seen.cancelled = 0;
      const repo = mkdtempSync(join(tmpdir(), 'triode-worker-flood-'));
      mkdirSync(join(repo, 'flood', '1'), { recursive: true });
      writeFileSync(join(repo, 'flood', 'config.pbtxt'), 'backend: "flood"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_UINT8 dims: [ -1 ] }\n');
      const s = await InferenceServer.create({ modelRepositories: [repo], backends: [flood] });
      const worker = new StreamConsumer(s, { redis: redis.url, prefix });
      const g = new RedisBackplane({ redis: redis.url, prefix, registryRefreshMs: 50, requestTimeoutMs: 10_000, ...options });
      try {
        await worker.start();
        await g.start();
        await f(g);
      } finally {
        await g.stop();
        await worker.stop(1000);
        await s.stop(1000);
      }
    };
    const floodRequest = (signal?: CancelToken) => ({ modelName: 'flood', ...(signal ? { signal } : {}), inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1], data: Int32Array.of(20_000) }] });
    /** A client that never reads: every response's promise stays pending. */
    const neverRead = (count: () => void) => () => {
      count();
      return new Promise<void>(() => undefined);
    };

    it('attack: a decoupled stream whose client reads nothing is cancelled once its waiting responses pass the bound (before, the gateway held them all)', async () => {
      await withFlood('flood1', { maxStreamBacklogBytes: 256 << 10 }, async (g) => {
        let handed = 0;
        const outcome = await g.inferStream(floodRequest(), neverRead(() => handed++)).then(() => 'resolved', (e: unknown) => e);
        expect(outcome).toMatchObject({ code: 'UNAVAILABLE', message: "the client did not read the responses of model 'flood': over 262144 bytes of them waited, so the request was cancelled" });
        // 256 KiB at 6 KiB a response: about 43 handed on, not 20,000 (and the model was told to stop).
        expect(handed).toBeLessThan(200);
        for (let i = 0; i < 100 && seen.cancelled < 1; i++) await new Promise((r) => setTimeout(r, 50));
        expect(seen.cancelled).toBe(1);
        expect(seen.produced).toBeLessThan(20_000);
      });
    }, 30_000);

    it('attack: the requests of one call (one gRPC stream: one signal) share its bound (review: each had its own, 1,024 x 16 MiB on a stream)', async () => {
      await withFlood('flood2', { maxStreamBacklogBytes: 256 << 10 }, async (g) => {
        let handed = 0;
        const call = new CancelToken();
        const outcomes = await Promise.all([1, 2].map(() => g.inferStream(floodRequest(call), neverRead(() => handed++)).then(() => 'resolved', (e: unknown) => e)));
        for (const o of outcomes) expect(o).toMatchObject({ code: 'UNAVAILABLE' });
        // One budget of ~43 responses for both (each with its own: ~86).
        expect(handed).toBeLessThan(60);
      });
    }, 30_000);

    it('attack: calls that each stay under their bound are cancelled past the gateway-wide one', async () => {
      await withFlood('flood3', { maxStreamBacklogBytes: 1 << 20, maxGatewayBacklogBytes: 300 << 10 }, async (g) => {
        const outcomes = await Promise.all([1, 2].map(() => g.inferStream(floodRequest(new CancelToken()), neverRead(() => undefined)).then(() => 'resolved', (e: unknown) => e)));
        for (const o of outcomes) expect(o).toMatchObject({ code: 'UNAVAILABLE' });
        expect((outcomes as { message: string }[]).some((o) => o.message === "clients of this gateway did not read over 307200 bytes of streamed responses, so this request of model 'flood' was cancelled")).toBe(true);
      });
    }, 30_000);
  });

  describe('decoupled streams and the gateway\'s request timeout', () => {
    // IN = n > 0: n responses 100 ms apart; IN = -1: one response, then waits (up to 30 s, far past
    // the gateway's timeout and its cancel) to be cancelled.
    const cancelled: boolean[] = [];
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const streamer = backendOf('streamer', async (requests) => {
      for (const r of requests) {
        const n = (r.inputs[0]!.data as Int32Array)[0]!;
        const out = (v: number) => ({ outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [1], data: Int32Array.of(v) }] });
        void (async () => {
          if (n < 0) {
            await r.respond!(out(0), false);
            const t0 = Date.now();
            while (!r.signal?.aborted && Date.now() - t0 < 30_000) await sleep(20);
            cancelled.push(r.signal?.aborted === true);
            await r.respond!(undefined, true);
            return;
          }
          for (let i = 0; i < n; i++) {
            await sleep(100);
            if (r.signal?.aborted) {
              cancelled.push(true);
              await r.respond!(undefined, true);
              return;
            }
            await r.respond!(out(i), i === n - 1);
          }
        })();
      }
      return { responses: [] };
    });
    const setup = async (prefix: string) => {
      const repo = mkdtempSync(join(tmpdir(), 'triode-worker-dec-'));
      mkdirSync(join(repo, 'dec', '1'), { recursive: true });
      writeFileSync(join(repo, 'dec', 'config.pbtxt'), 'backend: "streamer"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
      const s = await InferenceServer.create({ modelRepositories: [repo], backends: [streamer] });
      const worker = new StreamConsumer(s, { redis: redis.url, prefix });
      // 3 s: 30x the gaps between a stream's responses.
      const g = new RedisBackplane({ redis: redis.url, prefix, registryRefreshMs: 50, requestTimeoutMs: 3000 });
      await worker.start();
      await g.start();
      const stop = async () => { await g.stop(); await worker.stop(1000); await s.stop(1000); };
      return { g, stop };
    };
    const req = (v: number) => ({ modelName: 'dec', inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1], data: Int32Array.of(v) }] });

    it('a stream that goes on sending outlives the timeout: it counts from the last response (before, it was cut at 1 s)', async () => {
      const { g, stop } = await setup('dec-long');
      try {
        const got: number[] = [];
        const t0 = Date.now();
        // 40 responses 100 ms apart: 4 s, past the 3 s timeout.
        await g.inferStream(req(40), (r) => { got.push((r.outputs[0]!.data as Int32Array)[0]!); });
        expect(got).toEqual(Array.from({ length: 40 }, (_, i) => i));
        expect(Date.now() - t0).toBeGreaterThan(3000);
      } finally {
        await stop();
      }
    });

    it('a stream whose gateway is gone (its reply stream with it) is cancelled on its worker (before, it ran to its end)', async () => {
      const { g, stop } = await setup('dec-gone');
      try {
        cancelled.length = 0;
        let got = 0;
        const done = g.inferStream(req(100), () => { got++; }).catch(() => undefined);
        await vi.waitFor(() => expect(got).toBeGreaterThanOrEqual(2), { timeout: 30_000 });
        await g.stop();
        await done;
        await vi.waitFor(() => expect(cancelled).toEqual([true]), { timeout: 30_000 });
      } finally {
        await stop();
      }
    });

    it('a stream that stops sending times out, and its worker is told to cancel it (before, the model ran on for nobody)', async () => {
      const { g, stop } = await setup('dec-stuck');
      try {
        cancelled.length = 0;
        await expect(g.inferStream(req(-1), () => undefined)).rejects.toThrow(/within 3 s/);
        await vi.waitFor(() => expect(cancelled).toEqual([true]), { timeout: 30_000 });
      } finally {
        await stop();
      }
    });
  });

  it('a streamed response Redis refuses for good ends the stream with an error (review: the stream went on without it)', async () => {
    const small = await startRedis(undefined, ['--proto-max-bulk-len', '1mb']);
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-bigstream-'));
    mkdirSync(join(repo, 'bigs', '1'), { recursive: true });
    writeFileSync(join(repo, 'bigs', 'config.pbtxt'), 'backend: "bigstream"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_UINT8 dims: [ -1 ] }\n');
    // 4 bytes, then 2 MiB, then a final 4 bytes.
    const bigstream = backendOf('bigstream', async (requests) => {
      for (const r of requests) {
        for (const [n, final] of [[4, false], [2 << 20, false], [4, true]] as const) {
          await r.respond!({ outputs: [{ name: 'OUT', datatype: 'UINT8' as const, shape: [n], data: new Uint8Array(n) }] }, final);
        }
      }
      return { responses: [] };
    });
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [bigstream] });
    const worker = new StreamConsumer(s, { redis: small.url, prefix: 'bigs' });
    const g = new RedisBackplane({ redis: small.url, prefix: 'bigs', registryRefreshMs: 50, requestTimeoutMs: 20_000, directReplies: false });
    try {
      await worker.start();
      await g.start();
      const sizes: number[] = [];
      const outcome = await g.inferStream({ modelName: 'bigs', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }] }, (r) => { sizes.push(r.outputs[0]!.shape[0]!); })
        .then(() => 'ended', (e: Error) => e.message);
      expect(outcome).toMatch(/^a response of model 'bigs' \(\d+ bytes\) could not be passed through Redis$/);
      expect(sizes).toEqual([4]);
    } finally {
      await g.stop();
      await worker.stop(1000);
      await s.stop(1000);
      await small.stop();
    }
  }, 30_000);

  it('a request with NaN or ±Infinity parameters (gRPC doubles) is answered as embedded mode answers it, not left to time out', async () => {
    const req = (parameters: Record<string, number>) => ({ modelName: 'a', parameters, inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(4) }] });
    const t0 = performance.now();
    // The worker's scheduler refuses the timeout (before: the worker dropped the request as
    // malformed, and the gateway answered UNAVAILABLE after its 30 s timeout).
    await expect(gateway.infer(req({ timeout: Number.NaN }))).rejects.toThrow("parameter 'timeout' must be a non-negative integer, got NaN");
    await expect(gateway.infer(req({ priority: Number.NEGATIVE_INFINITY }))).rejects.toThrow("parameter 'priority' must be a non-negative integer, got -Infinity");
    // A custom parameter is the model's business: the request runs.
    const r = await gateway.infer(req({ custom: Number.POSITIVE_INFINITY }));
    expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual([4]);
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it('attack: malformed request entries are acknowledged; the worker keeps serving, and answers those whose envelope reads', async () => {
    const redisClient = new Redis(redis.url);
    const keys = new ClusterKeys('t1');
    const stream = keys.requests('a');
    const replyTo = keys.replies('attack');
    await redisClient.xadd(replyTo, '*', 'open', '1');
    const env = { requestKey: 'k', replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + 10_000 };
    const tensor = { name: 'IN', datatype: 'INT32', shape: [1, 1], bytes: 4 };
    const junk: unknown[] = [
      { modelName: 'a', tensors: [] }, // no envelope
      'a string', 42, null, [],
      { modelName: 'a', tensors: [], env: { ...env, direct: { address: 5, token: 't' } } },
      { modelName: 'a', tensors: [], env: { ...env, deadlineMs: 'never' } },
      { modelName: 'a', tensors: [], env: { ...env, requestKey: { toString: 1 } } },
      { modelName: 'a', tensors: 'x', env },
      { modelName: 'a', tensors: [{ ...tensor, shape: 'abc' }], env },
      { modelName: 'a', tensors: [{ ...tensor, shape: [-1, 1e300] }], env },
      { modelName: 'a', tensors: [{ ...tensor, bytes: -4 }], env },
      { modelName: 'a', tensors: [], outputs: 'abc', env },
      { modelName: 'a', tensors: [], parameters: { p: { toString: 1 } }, env },
      { modelName: 7, tensors: [], env },
    ];
    try {
      for (const meta of junk) {
        const parts = (meta as { tensors?: unknown })?.tensors && Array.isArray((meta as { tensors: unknown[] }).tensors) ? (meta as { tensors: unknown[] }).tensors.map(() => Buffer.alloc(4)) : [];
        await redisClient.xadd(stream, '*', 'r', rawMessage(meta), ...parts.flatMap((t) => ['t', t]));
      }
      await redisClient.xadd(stream, '*', 'r', Buffer.from([1, 2])); // shorter than its length prefix
      // The worker is still there and answers a well-formed request.
      const r = await gateway.infer({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(9) }] });
      expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual([9]);
      // Every junk entry was acknowledged: none waits in the group for good.
      await new Promise((res) => setTimeout(res, 300));
      const pending = (await redisClient.xpending(stream, keys.group)) as [number, ...unknown[]];
      expect(pending[0]).toBe(0);
      // The seven whose envelope reads were answered on their reply stream, at once (their gateway
      // would otherwise wait out its timeout); the others could not be, and were not.
      const replies = (await redisClient.xrangeBuffer(replyTo, '-', '+')).flatMap(([, f]) => (f[0]!.toString() === 'r' ? [decodeReply(f[1]!)] : []));
      expect(replies).toHaveLength(7);
      for (const r of replies) {
        expect(r).toMatchObject({ requestKey: 'k', error: { code: 'INTERNAL' } });
        expect((r as { error: { message: string } }).error.message).toMatch(/^the worker could not read the request: malformed message: /);
      }
    } finally {
      redisClient.disconnect();
    }
  });

  it('attack: a junk registry entry does not stop the gateway routing, reporting readiness or listing workers', async () => {
    const redisClient = new Redis(redis.url);
    const keys = new ClusterKeys('t1');
    try {
      await redisClient.set(keys.worker('junk'), '{}', 'PX', 60_000);
      await redisClient.set(keys.worker('junk2'), JSON.stringify({ workerId: 'junk2', heartbeatMs: Date.now(), models: [{ name: 'a', state: 'READY', stats: { name: 'a', version: '1' } }, 5] }), 'PX', 60_000);
      await redisClient.set(keys.worker('junk3'), JSON.stringify({ workerId: 'junk3', heartbeatMs: Date.now(), models: [{ name: 'b', version: '1', state: 'READY', stats: { name: 'b', version: '1', last_inference: 0, inference_count: 1, execution_count: 1, inference_stats: {}, batch_stats: [] } }] }), 'PX', 60_000);
      // The gateway has read the registry with the junk in it (junk3 is the one it lists).
      await vi.waitFor(async () => expect((await gateway.clusterWorkers()).map((w) => w.id)).toContain('junk3'), { timeout: 30_000 });
      const r = await gateway.infer({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] });
      expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual([3]);
      expect(await gateway.modelReady('a')).toBe(true);
      expect(await gateway.isReady()).toBe(true);
      const ids = (await gateway.clusterWorkers()).map((w) => w.id);
      expect(ids).toContain(consumer.workerId);
      expect(ids).not.toContain('junk');
      expect(ids).not.toContain('junk2');
      expect(ids).toContain('junk3');
      // junk3 is listed, without its statistics (which could not be added up).
      const stats = await gateway.modelStatistics('b');
      expect(stats.every((st) => Number.isFinite(st.inference_count))).toBe(true);
    } finally {
      await redisClient.del(keys.worker('junk'), keys.worker('junk2'), keys.worker('junk3'));
      redisClient.disconnect();
    }
  });

  it('attack: a signed registry entry replayed after its worker is gone, or copied to another key, is dropped', async () => {
    const redisClient = new Redis(redis.url);
    const keys = new ClusterKeys('t-replay');
    const signer = new ClusterAuth('s3cret');
    const signed = new RedisBackplane({ redis: redis.url, prefix: 't-replay', registryRefreshMs: 0, clusterSecret: 's3cret' });
    await signed.start();
    const entry = (workerId: string, heartbeatMs: number) => signer.signText('registry', JSON.stringify({
      workerId, heartbeatMs, ttlMs: 3000, models: [{ name: 'a', version: '1', state: 'READY' }],
    }));
    try {
      // What a worker wrote an hour ago, captured and written back by someone without the secret.
      await redisClient.set(keys.worker('gone'), entry('gone', Date.now() - 3_600_000), 'PX', 60_000);
      // A live worker's entry copied under another key (twice the capacity, as seen by gateways).
      await redisClient.set(keys.worker('live'), entry('live', Date.now()), 'PX', 60_000);
      await redisClient.set(keys.worker('copy'), entry('live', Date.now()), 'PX', 60_000);
      expect((await signed.clusterWorkers()).map((w) => w.id)).toEqual(['live']);
      expect(signed.auth.rejected.get('registry')).toBe(2);
      // Once the live one is gone too, the model is not ready anywhere (it was kept ready by the replay).
      await redisClient.del(keys.worker('live'));
      expect(await signed.modelReady('a')).toBe(false);
      await expect(signed.infer({ modelName: 'a', inputs: [] })).rejects.toThrow(/no live worker is registered/);
    } finally {
      await signed.stop();
      await redisClient.del(keys.worker('gone'), keys.worker('copy'));
      redisClient.disconnect();
    }
  });

  it('attack: a malformed reply for a waiting request is dropped; the request is still answered', async () => {
    const redisClient = new Redis(redis.url);
    const keys = new ClusterKeys('t1');
    try {
      // Model c's batcher holds a lone request for 600 ms: meanwhile, malformed replies for every
      // request key this gateway may have used arrive on its reply stream.
      const pending = gateway.infer({ modelName: 'c', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(5) }] });
      await new Promise((res) => setTimeout(res, 100));
      const [replyKey] = await redisClient.keys(`${keys.replies('')}*`).then((ks) => ks.filter((k) => !k.endsWith('attack') && !k.endsWith('test')));
      const body = (requestKey: string): Buffer => rawMessage({ requestKey, error: { code: 'INTERNAL', message: { toString: 1 } } });
      for (let k = 0; k < 200; k++) await redisClient.xadd(replyKey!, '*', 'r', body(String(k)));
      const r = await pending;
      expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual([5]);
    } finally {
      redisClient.disconnect();
    }
  });

  it('attack: requests that share one abort signal (a gRPC stream) leave no listener on it once answered', async () => {
    const listeners = new Set<() => void>();
    const signal = {
      aborted: false,
      addEventListener: (_t: 'abort', l: () => void) => { listeners.add(l); },
      removeEventListener: (_t: 'abort', l: () => void) => { listeners.delete(l); },
    };
    for (let i = 0; i < 20; i++) {
      await gateway.infer({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(i) }], signal });
    }
    expect(listeners.size).toBe(0);
  });
});

describe('StreamConsumer: fetching a request\'s tensors from its gateway', () => {
  /** A gateway's direct channel stand-in: counts connections and fetches, answers fetches (after `delayMs`) and replies. */
  async function fakeGateway(delayMs = 0): Promise<{ address: string; connections: () => number; fetches: () => number; replies: WireReply[]; close: () => void }> {
    let connections = 0;
    let fetches = 0;
    const replies: WireReply[] = [];
    const server = createServer((s) => {
      connections++;
      s.on('error', () => undefined);
      const reader = new FrameReader();
      let authed = false;
      let taken = 0;
      s.on('data', (c: Buffer) => {
        for (const f of reader.push(c)) {
          if (!authed) {
            authed = true;
            continue;
          }
          const key = fetchKeyOf(f);
          if (key === undefined) {
            replies.push(decodeReply(f));
            s.write(confirmFrame(++taken));
            continue;
          }
          fetches++;
          setTimeout(() => {
            const part = Buffer.from(Int32Array.of(5).buffer);
            s.write(tensorsFrameHead(key, [part]));
            s.write(part);
          }, delayMs);
        }
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, connections: () => connections, fetches: () => fetches, replies, close: () => server.close() };
  }

  /** A worker of its own (prefix `prefix`) on the shared server, whose warnings the test reads. */
  async function fetchingWorker(prefix: string, options: { directReplies?: boolean } = {}) {
    const warnings: string[] = [];
    const logger = { warning: (m: string) => warnings.push(m), info: () => undefined, error: () => undefined, verbose: () => undefined } as unknown as Logger;
    const worker = new StreamConsumer(server, { redis: redis.url, prefix, logger, ...options });
    await worker.start();
    const r = new Redis(redis.url);
    const keys = new ClusterKeys(prefix);
    const replyTo = keys.replies('g-fake');
    await r.xadd(replyTo, '*', 'open', '1');
    /** An entry whose tensors its gateway kept (`[r, header, b, 1]`): `head` from the request, or as given. */
    const add = async (requestKey: string, direct: { address: string; token: string }, head?: Buffer, deadlineMs = Date.now() + 20_000): Promise<Buffer[]> => {
      const [h] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(5) }] },
        { requestKey, replyTo, enqueuedMs: Date.now(), deadlineMs, direct });
      const fields = [Buffer.from('r'), head ?? h!, Buffer.from('b'), Buffer.from('1')];
      await r.xadd(keys.requests('a'), '*', ...fields);
      return fields;
    };
    /** The replies on the reply stream so far. */
    const replies = async () => (await r.xrangeBuffer(replyTo, '-', '+')).flatMap(([, f]) => (f[0]!.toString() === 'r' ? [decodeReply(f[1]!)] : []));
    const pending = async () => ((await r.xpending(keys.requests('a'), keys.group)) as [number])[0];
    const stop = async () => {
      r.disconnect();
      await worker.stop(1000);
    };
    return { warnings, r, keys, replyTo, add, replies, pending, stop };
  }

  const token = '01234567-89ab-cdef-0123-456789abcdef';

  it('attack: a gateway it cannot reach is answered `unfetched` (its gateway sends the request again), without the gateway\'s address; the worker logs the address, once for a flood (review: a 503 naming the address, and no log)', async () => {
    const probe = createServer();
    await new Promise<void>((res) => probe.listen(0, '127.0.0.1', () => res()));
    const address = `127.0.0.1:${(probe.address() as AddressInfo).port}`;
    await new Promise<void>((res) => probe.close(() => res()));
    const w = await fetchingWorker('fx1');
    try {
      for (let k = 0; k < 5; k++) await w.add(`k${k}`, { address, token });
      await until(async () => (await w.replies()).length === 5);
      for (const r of await w.replies()) {
        expect(r).toMatchObject({ error: { code: 'UNAVAILABLE', unfetched: true } });
        expect((r as { error: { message: string } }).error.message).not.toContain('127.0.0.1');
      }
      await until(async () => (await w.pending()) === 0);
      const logged = w.warnings.filter((m) => m.includes('could not fetch'));
      expect(logged).toHaveLength(1);
      expect(logged[0]).toContain(address);
    } finally {
      await w.stop();
    }
  });

  it('attack: a replayed entry fetched while the original is being fetched is acknowledged without running; the original runs once (review: it failed 503 "being fetched already")', async () => {
    const gw = await fakeGateway(200);
    const w = await fetchingWorker('fx2');
    try {
      const fields = await w.add('k1', { address: gw.address, token });
      await w.r.xadd(w.keys.requests('a'), '*', ...fields);
      await until(async () => gw.replies.length === 1 && (await w.pending()) === 0);
      await new Promise((res) => setTimeout(res, 200));
      expect(gw.replies).toHaveLength(1);
      expect(gw.replies[0]).toMatchObject({ requestKey: 'k1', response: { modelName: 'a' } });
      expect(gw.fetches()).toBe(1);
      expect(await w.replies()).toEqual([]);
    } finally {
      gw.close();
      await w.stop();
    }
  });

  it('a request whose deadline has passed is acknowledged without fetching its tensors (they crossed the network to be dropped)', async () => {
    const gw = await fakeGateway();
    const w = await fetchingWorker('fx5');
    try {
      await w.add('late', { address: gw.address, token }, undefined, Date.now() - 1000);
      await w.add('live', { address: gw.address, token });
      await until(async () => gw.replies.length === 1 && (await w.pending()) === 0);
      expect(gw.replies[0]).toMatchObject({ requestKey: 'live' });
      expect(gw.fetches()).toBe(1);
      expect(await w.replies()).toEqual([]);
    } finally {
      gw.close();
      await w.stop();
    }
  });

  it('attack: a header whose tensors pass the limit for a fetch (4e9 bytes, forged) is answered `unfetched` without connecting anywhere (review: the worker read 900 MB from the named peer and kept them)', async () => {
    const gw = await fakeGateway();
    const w = await fetchingWorker('fx3');
    try {
      const head = rawMessage({
        modelName: 'a', tensors: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], bytes: 4e9 }],
        env: { requestKey: 'big', replyTo: w.replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + 20_000, direct: { address: gw.address, token } },
      });
      await w.add('big', { address: gw.address, token }, head);
      await until(async () => (await w.replies()).length === 1);
      expect((await w.replies())[0]).toMatchObject({ requestKey: 'big', error: { unfetched: true } });
      expect(gw.connections()).toBe(0);
      expect(w.warnings.some((m) => /over the limit of 67108864 bytes for a fetch/.test(m))).toBe(true);
    } finally {
      gw.close();
      await w.stop();
    }
  });

  it('with directReplies false, no envelope makes the worker connect anywhere: replies take Redis, a kept request is answered `unfetched` (review: the README said --direct-replies false on the gateways helped; workers still dialled)', async () => {
    const gw = await fakeGateway();
    const w = await fetchingWorker('fx4', { directReplies: false });
    try {
      await w.add('kept', { address: gw.address, token });
      // A request with its tensors, whose envelope names a direct channel.
      const [h, ...parts] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(7) }] },
        { requestKey: 'inline', replyTo: w.replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + 20_000, direct: { address: gw.address, token } });
      for (let i = 0; i < 3; i++) await w.r.xadd(w.keys.requests('a'), '*', 'r', h!, ...parts.flatMap((t) => ['t', t]));
      await until(async () => (await w.replies()).length === 4);
      const replies = await w.replies();
      expect(replies.filter((r) => r.requestKey === 'kept')).toMatchObject([{ error: { unfetched: true } }]);
      expect(replies.filter((r) => r.requestKey === 'inline')).toHaveLength(3);
      for (const r of replies.filter((x) => x.requestKey === 'inline')) expect(Array.from((r as { response: { outputs: { data: Int32Array }[] } }).response.outputs[0]!.data)).toEqual([7]);
      await new Promise((res) => setTimeout(res, 200));
      expect(gw.connections()).toBe(0);
    } finally {
      gw.close();
      await w.stop();
    }
  });
});

describe('StreamConsumer: its own request streams (sequence models)', () => {
  /** A server with sequence model 'sq' (and 'a', without sequences), on the 'slow' backend. */
  async function sequenceServer(): Promise<InferenceServer> {
    const repo = mkdtempSync(join(tmpdir(), 'triode-worker-own-'));
    const io = 'input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\ninstance_group { count: 1 kind: KIND_CPU }\n';
    mkdirSync(join(repo, 'sq', '1'), { recursive: true });
    writeFileSync(join(repo, 'sq', 'config.pbtxt'), `backend: "slow"\nmax_batch_size: 8\nsequence_batching { }\n${io}`);
    mkdirSync(join(repo, 'a', '1'), { recursive: true });
    writeFileSync(join(repo, 'a', 'config.pbtxt'), `backend: "slow"\nmax_batch_size: 8\n${io}`);
    return InferenceServer.create({ modelRepositories: [repo], backends: [slow] });
  }

  it('a worker\'s own stream has an expiry its heartbeat renews, is made again with its group if it goes while the worker lives, and is deleted when the worker stops; the same worker id started again makes it again (review: they stayed in Redis for good, one per sequence model per worker lifetime)', async () => {
    const keys = new ClusterKeys('own1');
    const r = new Redis(redis.url);
    const s = await sequenceServer();
    const own = keys.workerRequests('sq', 'w-own');
    let worker = new StreamConsumer(s, { redis: redis.url, prefix: 'own1', workerId: 'w-own', heartbeatMs: 100, ownStreamTtlMs: 600 });
    const g = new RedisBackplane({ redis: redis.url, prefix: 'own1', registryRefreshMs: 50, requestTimeoutMs: 5000, directReplies: false });
    try {
      await worker.start();
      await g.start();
      expect(await r.type(own)).toBe('stream');
      const first = await r.pttl(own);
      expect(first).toBeGreaterThan(0);
      expect(first).toBeLessThanOrEqual(600);
      // Renewed by the heartbeats: its expiry moves later while it stays the same stream (a
      // marker group of the test's shows that: one made again after it expired would not have it).
      // Waited for, not slept on: a loaded machine may be slow to send the next heartbeat.
      await r.xgroup('CREATE', own, 'marker', '$');
      let expiresAt = Number(await r.call('PEXPIRETIME', own));
      await vi.waitFor(async () => {
        const groups = ((await r.xinfo('GROUPS', own).catch(() => [])) as unknown[][]).map((row) => String(row[1]));
        if (!groups.includes('marker')) {
          // Expired and made again (the machine stalled past the expiry): watch the new one.
          await r.xgroup('CREATE', own, 'marker', '$').catch(() => undefined);
          expiresAt = Number(await r.call('PEXPIRETIME', own));
          throw new Error('the stream was made again; waiting for a renewal');
        }
        expect(Number(await r.call('PEXPIRETIME', own))).toBeGreaterThan(expiresAt);
      }, { timeout: 30_000 });
      await r.xgroup('DESTROY', own, 'marker');
      expect(await r.pttl(own)).toBeGreaterThan(0);
      // Only the worker's own streams expire: not the model's shared stream.
      expect(await r.pttl(keys.requests('sq'))).toBe(-1);
      // Gone while the worker lives (expired while Redis was paused): made again, group and expiry too.
      await r.del(own);
      await until(async () => (await r.exists(own)) === 1 && (await r.pttl(own)) > 0, 3000);
      expect(((await r.xinfo('GROUPS', own)) as unknown[][]).map((row) => String(row[1]))).toEqual([keys.group]);
      // And it serves the sequence routed to it.
      const reply = await g.infer({ modelName: 'sq', parameters: { sequence_id: 5, sequence_start: true, sequence_end: true }, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] });
      expect(Array.from(reply.outputs[0]!.data as Int32Array)).toEqual([3]);
      // Stopped: its own stream goes with its registry entry.
      await worker.stop(1000);
      expect(await r.exists(own, keys.worker('w-own'))).toBe(0);
      expect(await r.exists(keys.requests('sq'))).toBe(1);
      // Started again under the same id: made again.
      worker = new StreamConsumer(s, { redis: redis.url, prefix: 'own1', workerId: 'w-own', heartbeatMs: 100, ownStreamTtlMs: 600 });
      await worker.start();
      expect(await r.type(own)).toBe('stream');
      expect(await r.pttl(own)).toBeGreaterThan(0);
    } finally {
      await g.stop();
      await worker.stop(1000);
      await s.stop(1000);
      r.disconnect();
    }
  });

  it('the own stream of a worker that dies (no stop, no more heartbeats) expires by itself', async () => {
    const keys = new ClusterKeys('own2');
    const r = new Redis(redis.url);
    // The worker connects as a user of its own: disabling it and killing its connections is the worker's death, as Redis sees it.
    await r.call('ACL', 'SETUSER', 'doomed', 'on', '>pw', '~*', '&*', '+@all');
    const s = await sequenceServer();
    const worker = new StreamConsumer(s, { redis: `redis://doomed:pw@127.0.0.1:${redis.port}`, prefix: 'own2', workerId: 'w-dies', heartbeatMs: 100, ownStreamTtlMs: 600 });
    const own = keys.workerRequests('sq', 'w-dies');
    try {
      await worker.start();
      expect(await r.pttl(own)).toBeGreaterThan(0);
      await r.call('ACL', 'SETUSER', 'doomed', 'off');
      await r.call('CLIENT', 'KILL', 'USER', 'doomed');
      await until(async () => (await r.exists(own)) === 0, 3000);
      expect(await r.exists(keys.worker('w-dies'))).toBe(0);
    } finally {
      await worker.stop(200);
      await s.stop(1000);
      await r.call('ACL', 'DELUSER', 'doomed');
      r.disconnect();
    }
  });
});

describe('StreamConsumer: junk from peers does not flood the log', () => {
  it('attack: malformed requests, requests whose reply stream is not a gateway\'s and malformed control messages are each logged at most once every 10 s, the next line counting those left out (review: a line per junk entry, unbounded)', async () => {
    const warnings: string[] = [];
    const logger = { warning: (m: string) => warnings.push(m), info: () => undefined, error: () => undefined, verbose: () => undefined } as unknown as Logger;
    const worker = new StreamConsumer(server, { redis: redis.url, prefix: 'wflood', logger });
    const r = new Redis(redis.url);
    const keys = new ClusterKeys('wflood');
    const stream = keys.requests('a');
    const realNow = Date.now.bind(Date);
    const N = 200;
    const lines = (what: string) => warnings.filter((m) => m.includes(what));
    const [head, ...tensors] = encodeRequestParts({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(5) }] },
      { requestKey: 'k', replyTo: 'elsewhere', enqueuedMs: Date.now(), deadlineMs: Date.now() + 60_000 });
    const notForAGateway = [Buffer.from('r'), head!, ...tensors.flatMap((t) => [Buffer.from('t'), t])];
    /** Every entry added so far has been taken and acknowledged (acknowledged entries are deleted). */
    const drained = () => until(async () => (await r.xlen(stream)) === 0);
    /** Every control message published so far has been taken: they are applied one at a time, in order, and this one is answered. */
    let probes = 0;
    const controlDone = async () => {
      const id = `probe${probes++}`;
      await r.publish(keys.control, JSON.stringify({ id, action: 'unload', model: 'nope' }));
      await until(async () => (await r.llen(keys.controlReplies(id))) === 1);
    };
    try {
      await worker.start();
      for (let i = 0; i < N; i++) {
        await r.xadd(stream, '*', 'r', Buffer.from([1, 2])); // shorter than its length prefix
        await r.xadd(stream, '*', ...notForAGateway);
        await r.publish(keys.control, `junk ${i}`);
      }
      await drained();
      await controlDone();
      expect(lines('dropping a malformed request')).toHaveLength(1);
      expect(lines('whose reply stream is not a gateway\'s')).toHaveLength(1);
      expect(lines('dropped a malformed control message')).toHaveLength(1);
      // Past the 10 s, the next one of each is logged with the count of those left out.
      vi.spyOn(Date, 'now').mockImplementation(() => realNow() + 10_001);
      await r.xadd(stream, '*', 'r', Buffer.from([1, 2]));
      await r.xadd(stream, '*', ...notForAGateway);
      await r.publish(keys.control, 'junk');
      await drained();
      await controlDone();
      for (const what of ['dropping a malformed request', 'whose reply stream is not a gateway\'s', 'dropped a malformed control message']) {
        expect(lines(what)).toHaveLength(2);
        expect(lines(what)[1]).toContain(`(and ${N - 1} more since the last warning)`);
      }
    } finally {
      vi.restoreAllMocks();
      r.disconnect();
      await worker.stop(1000);
    }
  });
});
