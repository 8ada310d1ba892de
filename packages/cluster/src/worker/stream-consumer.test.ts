import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceServer, type Backend } from '@triode/core';
import { ClusterKeys } from '../keys.js';
import { decodeReply, encodeRequestParts } from '../envelope/envelope-codec.js';
import { Redis } from 'ioredis';
import { RedisBackplane } from '../gateway/redis-backplane.js';
import { startRedis, type RedisHandle } from '../../../../test/helpers/redis.js';
import { StreamConsumer } from './stream-consumer.js';

/** Test backend: 20 ms per execution whatever the batch, OUT = IN. */
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
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: 160 }, (_, k) => gateway.infer(req(k))));
    const ms = performance.now() - t0;
    results.forEach((r, k) => expect((r.outputs[0]!.data as Int32Array)[0]).toBe(k));
    // 160 requests = 20 batches of 20 ms (~0.4 s). Before the fix, every 16 requests (the model's
    // slots) waited for the 200 ms read timeout: about 2 s. The bound leaves room for a slow machine.
    expect(ms).toBeLessThan(1200);
  });

  it('counts max_queue_delay from when the gateway queued the request, so time spent in Redis is not added to it', async () => {
    const redisClient = new Redis(redis.url);
    // A gateway's reply stream: workers add replies only to one that exists.
    const replyTo = new ClusterKeys('t1').replies('test');
    let last = (await redisClient.xadd(replyTo, '*', 'open', '1'))!;
    // Puts a request on model c's stream as a gateway would, queued at `enqueuedMs`; resolves
    // with how long its reply took to come back.
    const roundTrip = async (key: string, enqueuedMs: number): Promise<number> => {
      const [head, ...tensors] = encodeRequestParts({ modelName: 'c', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] },
        { requestKey: key, replyTo, enqueuedMs, deadlineMs: Date.now() + 10_000 });
      const t0 = performance.now();
      await redisClient.xadd(new ClusterKeys('t1').requests('c'), '*', 'r', head!, ...tensors.flatMap((t) => ['t', t]));
      for (;;) {
        const reply = (await redisClient.xreadBuffer('BLOCK', 5000, 'STREAMS', replyTo, last)) as [Buffer, [Buffer, Buffer[]][]][] | null;
        for (const [, entries] of reply ?? []) {
          for (const [id, fields] of entries) {
            last = id.toString();
            const r = decodeReply(fields[1]!);
            if (r.requestKey === key) {
              expect('response' in r).toBe(true);
              return performance.now() - t0;
            }
          }
        }
      }
    };
    try {
      // Queued a second ago (e.g. waiting in Redis for a worker): its 600 ms delay is over, it runs at once.
      expect(await roundTrip('waited', Date.now() - 1000)).toBeLessThan(400);
      // Queued now: the batcher waits its 600 ms for company.
      expect(await roundTrip('fresh', Date.now())).toBeGreaterThanOrEqual(550);
    } finally {
      redisClient.disconnect();
    }
  });
});
