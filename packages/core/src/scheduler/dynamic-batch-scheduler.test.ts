import { describe, expect, it } from 'vitest';
import type { Clock } from '../clock.js';
import { DynamicBatchScheduler } from './dynamic-batch-scheduler.js';

interface R { id: number; batchSize: number; shapeKey: string; enqueueNs: number }

/** A clock whose time moves only when the test says so. */
function fakeClock() {
  let now = 0;
  const timers: { at: number; fn: () => void }[] = [];
  const clock: Clock = {
    nowNs: () => now,
    epochMs: () => now / 1e6,
    setTimeout: (fn, ms) => { const t = { at: now + ms * 1e6, fn }; timers.push(t); return t; },
    clearTimeout: (h) => { const i = timers.indexOf(h as (typeof timers)[number]); if (i >= 0) timers.splice(i, 1); },
  };
  const advance = (ns: number) => {
    now += ns;
    for (const t of [...timers].sort((a, b) => a.at - b.at)) {
      if (t.at <= now) { timers.splice(timers.indexOf(t), 1); t.fn(); }
    }
  };
  return { clock, advance, now: () => now };
}

function harness(instances: number, options: ConstructorParameters<typeof DynamicBatchScheduler>[2]) {
  const batches: number[][] = [];
  const release: (() => void)[] = [];
  const s = new DynamicBatchScheduler<R>(instances, (_i, b) => {
    batches.push(b.map((r) => r.id));
    return new Promise<void>((res) => release.push(res));
  }, options);
  return { s, batches, release };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('DynamicBatchScheduler', () => {
  it('with batching off runs one request per execution, one execution per free instance', async () => {
    const { s, batches, release } = harness(2, { maxBatchSize: 1 });
    for (let i = 0; i < 4; i++) s.enqueue({ id: i, batchSize: 1, shapeKey: '', enqueueNs: 0 });
    expect(batches).toEqual([[0], [1]]);
    expect(s.pendingCount()).toBe(2);
    expect(s.inflightInferenceCount()).toBe(2);
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1], [2]]);
  });

  it('batches queued requests up to max_batch_size counting first dims, ending at a shape change', async () => {
    const { clock } = fakeClock();
    const { s, batches, release } = harness(1, { maxBatchSize: 4, clock });
    s.enqueue({ id: 0, batchSize: 1, shapeKey: 'a', enqueueNs: 0 });
    s.enqueue({ id: 1, batchSize: 2, shapeKey: 'a', enqueueNs: 0 });
    s.enqueue({ id: 2, batchSize: 2, shapeKey: 'a', enqueueNs: 0 });
    s.enqueue({ id: 3, batchSize: 1, shapeKey: 'b', enqueueNs: 0 });
    s.enqueue({ id: 4, batchSize: 1, shapeKey: 'b', enqueueNs: 0 });
    expect(batches).toEqual([[0]]);
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1, 2]]);
    release.shift()!();
    await flush();
    expect(batches).toEqual([[0], [1, 2], [3, 4]]);
  });

  it('waits up to max_queue_delay_microseconds from the oldest request for a fuller batch', () => {
    const { clock, advance } = fakeClock();
    const { s, batches } = harness(1, { maxBatchSize: 8, maxQueueDelayUs: 100, clock });
    s.enqueue({ id: 0, batchSize: 1, shapeKey: '', enqueueNs: 0 });
    advance(50_000);
    s.enqueue({ id: 1, batchSize: 1, shapeKey: '', enqueueNs: 50_000 });
    expect(batches).toEqual([]);
    advance(49_999);
    expect(batches).toEqual([]);
    advance(1);
    expect(batches).toEqual([[0, 1]]);
  });

  it('sends a preferred batch size at once, without waiting for the delay', () => {
    const { clock } = fakeClock();
    const { s, batches } = harness(1, { maxBatchSize: 8, preferredBatchSizes: [2], maxQueueDelayUs: 1000, clock });
    s.enqueue({ id: 0, batchSize: 1, shapeKey: '', enqueueNs: 0 });
    expect(batches).toEqual([]);
    s.enqueue({ id: 1, batchSize: 1, shapeKey: '', enqueueNs: 0 });
    expect(batches).toEqual([[0, 1]]);
  });

  it('sends a full batch at once', () => {
    const { clock } = fakeClock();
    const { s, batches } = harness(1, { maxBatchSize: 2, maxQueueDelayUs: 1000, clock });
    s.enqueue({ id: 0, batchSize: 1, shapeKey: '', enqueueNs: 0 });
    s.enqueue({ id: 1, batchSize: 1, shapeKey: '', enqueueNs: 0 });
    expect(batches).toEqual([[0, 1]]);
  });

  it('idle() resolves once nothing is queued or running', async () => {
    const { s, release } = harness(1, { maxBatchSize: 1 });
    s.enqueue({ id: 0, batchSize: 1, shapeKey: '', enqueueNs: 0 });
    let idle = false;
    void s.idle().then(() => { idle = true; });
    await flush();
    expect(idle).toBe(false);
    release.shift()!();
    await flush();
    expect(idle).toBe(true);
  });
});
