import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InferenceServer, type Backend } from '@triode/core';
import { RedisBackplane } from '@triode/gateway';
import { startRedis, type RedisHandle } from '../../../test/helpers/redis.js';
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
  for (const m of ['a', 'b']) {
    mkdirSync(join(repo, m, '1'), { recursive: true });
    writeFileSync(join(repo, m, 'config.pbtxt'), 'backend: "slow"\nmax_batch_size: 8\ndynamic_batching { }\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\ninstance_group { count: 1 kind: KIND_CPU }\n');
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
});
