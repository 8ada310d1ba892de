import { describe, expect, it } from 'vitest';
import type { TriodeError } from '../errors.js';
import { DynamicBatchScheduler, type DynamicBatchSchedulerOptions } from './dynamic-batch-scheduler.js';
import { runSchedulerCases } from './scheduler.case.js';
import { manualClock } from './test-clock.js';

interface R { id: number; batchSize: number; shapeKey: string; enqueueNs: number; delayFromNs?: number; deadlineNs: number; priority?: number; timeoutUs?: number }
const req = (id: number, enqueueNs = 0, extra: Partial<R> = {}): R => ({ id, batchSize: 1, shapeKey: '', enqueueNs, deadlineNs: 0, ...extra });

runSchedulerCases<R>({
  name: 'DynamicBatchScheduler, batching off',
  create: (n, runner, clock, onReject) => new DynamicBatchScheduler(n, runner, { clock, onReject }),
  request: (i, clock) => req(i, clock.nowNs()),
});
runSchedulerCases<R>({
  name: 'DynamicBatchScheduler, max_batch_size 4 with delay',
  create: (n, runner, clock, onReject) => new DynamicBatchScheduler(n, runner, { clock, onReject, maxBatchSize: 4, maxQueueDelayUs: 100 }),
  request: (i, clock) => req(i, clock.nowNs()),
});

function harness(instances: number, options: DynamicBatchSchedulerOptions<R>) {
  const clock = manualClock();
  const batches: number[][] = [];
  const release: (() => void)[] = [];
  const rejected: [number, string][] = [];
  const s = new DynamicBatchScheduler<R>(instances, (_i, b) => {
    batches.push(b.map((r) => r.id));
    return new Promise<void>((res) => release.push(res));
  }, { clock, onReject: (r, e: TriodeError) => rejected.push([r.id, e.message]), ...options });
  return { s, batches, release, rejected, clock };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('DynamicBatchScheduler', () => {
  it('with batching off runs one request per execution, one execution per free instance', async () => {
    const { s, batches, release } = harness(2, { maxBatchSize: 1 });
    for (let i = 0; i < 4; i++) s.enqueue(req(i));
    expect(batches).toEqual([[0], [1]]);
    expect(s.pendingCount()).toBe(2);
    expect(s.inflightInferenceCount()).toBe(2);
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1], [2]]);
  });

  it('batches up to max_batch_size counting first dims, ending a batch at a shape change', async () => {
    const { s, batches, release } = harness(1, { maxBatchSize: 4 });
    s.enqueue(req(0, 0, { shapeKey: 'a' }));
    s.enqueue(req(1, 0, { batchSize: 2, shapeKey: 'a' }));
    s.enqueue(req(2, 0, { batchSize: 2, shapeKey: 'a' }));
    s.enqueue(req(3, 0, { shapeKey: 'b' }));
    s.enqueue(req(4, 0, { shapeKey: 'b' }));
    expect(batches).toEqual([[0]]);
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1, 2]]);
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1, 2], [3, 4]]);
  });

  it('waits max_queue_delay_microseconds from the oldest request for a fuller batch', () => {
    const { s, batches, clock } = harness(1, { maxBatchSize: 8, maxQueueDelayUs: 100 });
    s.enqueue(req(0, 0));
    clock.advance(50_000);
    s.enqueue(req(1, 50_000));
    expect(batches).toEqual([]);
    clock.advance(49_999);
    expect(batches).toEqual([]);
    clock.advance(1);
    expect(batches).toEqual([[0, 1]]);
  });

  it('counts the delay from delayFromNs when the request was queued upstream (a cluster request queued at its gateway)', () => {
    const { s, batches, clock } = harness(1, { maxBatchSize: 8, maxQueueDelayUs: 100 });
    clock.advance(1_000_000);
    // Queued at the gateway 60 µs ago: 40 µs of its delay are left.
    s.enqueue(req(0, 1_000_000, { delayFromNs: 940_000 }));
    clock.advance(39_999);
    expect(batches).toEqual([]);
    clock.advance(1);
    expect(batches).toEqual([[0]]);
    // Queued upstream longer ago than the whole delay: it goes at once.
    const late = harness(1, { maxBatchSize: 8, maxQueueDelayUs: 100 });
    late.clock.advance(1_000_000);
    late.s.enqueue(req(1, 1_000_000, { delayFromNs: 800_000 }));
    expect(late.batches).toEqual([[1]]);
  });

  it('sends the largest preferred batch size the queue can form at once', () => {
    const { s, batches } = harness(1, { maxBatchSize: 8, preferredBatchSizes: [2, 3], maxQueueDelayUs: 1000 });
    s.enqueue(req(0));
    expect(batches).toEqual([]);
    s.enqueue(req(1));
    expect(batches).toEqual([[0, 1]]);
  });

  it('attack: a preferred size listed 200,000 times is one preferred size (each batch decision scanned them all, review)', () => {
    const { s, batches } = harness(1, { maxBatchSize: 8, preferredBatchSizes: [...new Array<number>(200_000).fill(3), 2], maxQueueDelayUs: 1000 });
    s.enqueue(req(0));
    expect(batches).toEqual([]);
    s.enqueue(req(1));
    expect(batches).toEqual([[0, 1]]);
  });

  it('sends a full batch at once', () => {
    const { s, batches } = harness(1, { maxBatchSize: 2, maxQueueDelayUs: 1000 });
    s.enqueue(req(0));
    s.enqueue(req(1));
    expect(batches).toEqual([[0, 1]]);
  });

  it('serves higher priority levels first', async () => {
    const { s, batches, release } = harness(1, { maxBatchSize: 1, queuePolicy: { priority_levels: 2, default_priority_level: 2 } });
    s.enqueue(req(0));
    s.enqueue(req(1));
    s.enqueue(req(2, 0, { priority: 1 }));
    s.enqueue(req(3, 0, { priority: 2 }));
    release.shift()!();
    await flush();
    release.shift()!();
    await flush();
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [2], [1], [3]]);
  });

  it('refuses a request when the queue is full', () => {
    const { s } = harness(1, { maxBatchSize: 1, queuePolicy: { default_queue_policy: { max_queue_size: 1 } } });
    s.enqueue(req(0)); // runs
    s.enqueue(req(1)); // queued
    expect(() => s.enqueue(req(2))).toThrow('Exceeds maximum queue size');
  });

  it('answers a timed-out request when it times out, while the instance is still busy (REJECT)', () => {
    const { s, batches, rejected, clock } = harness(1, { maxBatchSize: 1, queuePolicy: { default_queue_policy: { default_timeout_microseconds: 100 } } });
    s.enqueue(req(0));
    s.enqueue(req(1));
    clock.advance(99_999);
    expect(rejected).toEqual([]);
    clock.advance(1);
    expect(rejected).toEqual([[1, 'Request timeout expired']]);
    expect(batches).toEqual([[0]]);
    expect(s.pendingCount()).toBe(0);
  });

  it('moves a timed-out request behind the others with DELAY', async () => {
    const { s, batches, release, rejected, clock } = harness(1, { maxBatchSize: 1, queuePolicy: { default_queue_policy: { default_timeout_microseconds: 100, timeout_action: 'DELAY' } } });
    s.enqueue(req(0, 0));
    s.enqueue(req(1, 0));
    clock.advance(60_000);
    s.enqueue(req(2, 60_000));
    clock.advance(40_000); // 1 expires, 2 does not
    release.shift()!();
    await flush();
    release.shift()!();
    await flush();
    expect(rejected).toEqual([]);
    expect(batches).toEqual([[0], [2], [1]]);
  });

  it('applies a shorter request timeout only when allow_timeout_override is set', () => {
    const { s, rejected, clock } = harness(1, { maxBatchSize: 1, queuePolicy: { default_queue_policy: { default_timeout_microseconds: 1000, allow_timeout_override: true } } });
    s.enqueue(req(0));
    s.enqueue(req(1, 0, { timeoutUs: 10 }));
    s.enqueue(req(2, 0, { timeoutUs: 5000 }));
    clock.advance(10_000);
    expect(rejected).toEqual([[1, 'Request timeout expired']]);
    clock.advance(990_000);
    expect(rejected.map((r) => r[0])).toEqual([1, 2]);
  });

  it('hands a busy instance a second batch ahead only when it is full (pipelining)', async () => {
    const { s, batches } = harness(1, { maxBatchSize: 2, pipelineDepth: 2 });
    s.enqueue(req(0));
    s.enqueue(req(1));
    expect(batches).toEqual([[0]]);
    s.enqueue(req(2));
    expect(batches).toEqual([[0], [1, 2]]);
  });

  it('attack: a batch with a queue timeout is not handed ahead to a busy instance, so its timeout still applies (review: REJECT at 100 ms answered after 474 ms)', async () => {
    for (const maxBatchSize of [1, 2]) {
      const { s, batches, release, rejected, clock } = harness(1, {
        maxBatchSize,
        pipelineDepth: 2,
        queuePolicy: { default_queue_policy: { timeout_action: 'REJECT', default_timeout_microseconds: 100 } },
      });
      for (let i = 0; i < 1 + maxBatchSize; i++) s.enqueue(req(i));
      expect(batches).toEqual([[0]]); // the rest (a full batch) is not handed ahead
      clock.advance(200_000);
      expect(rejected.map((r) => r[0])).toEqual(maxBatchSize === 1 ? [1] : [1, 2]);
      expect(rejected[0]![1]).toBe('Request timeout expired');
      release.shift()!();
      await flush();
      expect(batches).toHaveLength(1);
    }
  });

  it('a batch without queue timeouts is still handed ahead, and a timed one goes once the instance is free', async () => {
    const { s, batches, release } = harness(1, {
      maxBatchSize: 1,
      pipelineDepth: 2,
      queuePolicy: { priority_levels: 2, default_priority_level: 1, priority_queue_policy: { '2': { default_timeout_microseconds: 1_000_000 } } },
    });
    s.enqueue(req(0));
    s.enqueue(req(1));
    expect(batches).toEqual([[0], [1]]);
    s.enqueue(req(2, 0, { priority: 2 }));
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1]]); // instance 0 still runs [1]: [2] waits
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1], [2]]);
  });

  it('cancel() removes a queued request', () => {
    const { s, batches, release } = harness(1, { maxBatchSize: 1 });
    const r1 = req(1);
    s.enqueue(req(0));
    s.enqueue(r1);
    expect(s.cancel(r1)).toBe(true);
    expect(s.cancel(r1)).toBe(false);
    release.shift()!();
    expect(batches).toEqual([[0]]);
  });

  it('idle() resolves once nothing is queued or running', async () => {
    const { s, release } = harness(1, { maxBatchSize: 1 });
    s.enqueue(req(0));
    let idle = false;
    void s.idle().then(() => { idle = true; });
    await flush();
    expect(idle).toBe(false);
    release.shift()!();
    await flush();
    expect(idle).toBe(true);
  });
});
