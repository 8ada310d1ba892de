import { describe, expect, it } from 'vitest';
import type { ModelSequenceBatching } from '../model-config/model-config.js';
import { SequenceBatchScheduler, type SequenceSchedulable } from './sequence-batch-scheduler.js';
import { manualClock } from './test-clock.js';

interface R extends SequenceSchedulable { id: string }

const r = (seq: number, n: number, opts: { start?: boolean; end?: boolean; at?: number } = {}): R => ({
  id: `${seq}_${n}`,
  batchSize: 1,
  shapeKey: '',
  enqueueNs: opts.at ?? 0,
  deadlineNs: 0,
  sequence: { key: `n:${seq}`, correlationId: BigInt(seq), start: opts.start ?? false, end: opts.end ?? false },
});

function harness(config: ModelSequenceBatching, maxBatchSize = 4) {
  const clock = manualClock();
  const batches: string[][] = [];
  const release: (() => void)[] = [];
  const ended: string[] = [];
  const s = new SequenceBatchScheduler<R>(1, (_i, b) => {
    batches.push(b.map((x) => x.id));
    return new Promise<void>((res) => release.push(res));
  }, { config, modelName: 'm', maxBatchSize, clock, onSequenceEnd: (k) => ended.push(k) });
  return { s, batches, release, ended, clock };
}

const flush = async () => { for (let i = 0; i < 3; i++) await new Promise((res) => setImmediate(res)); };

describe('SequenceBatchScheduler: batch sizes', () => {
  it('never dispatches an empty batch for an Oldest preferred_batch_size of 0 (review: it was dispatched for ever, the request hung)', async () => {
    const { s, batches, release } = harness({ oldest: { max_candidate_sequences: 4, preferred_batch_size: [0] } });
    s.enqueue(r(1, 0, { start: true }));
    await flush();
    expect(batches).toEqual([['1_0']]);
    release.shift()!();
    await flush();
    expect(batches).toEqual([['1_0']]);
  });
});

describe('SequenceBatchScheduler: the idle timeout counts from the last arrival (Triton\'s reaper)', () => {
  const MS = 1_000_000;

  it('a sequence whose last request arrived over max_sequence_idle ago is force-ended even while that request runs', async () => {
    const { s, batches, release, ended, clock } = harness({ max_sequence_idle_microseconds: 500_000 });
    s.enqueue(r(1, 0, { start: true }));
    await flush();
    expect(batches).toEqual([['1_0']]);
    // The START runs 300 ms, then the client waits 300 ms: 600 ms since its arrival.
    clock.advance(300 * MS);
    release.shift()!();
    await flush();
    clock.advance(300 * MS);
    await flush();
    expect(ended).toEqual(['n:1']);
    expect(() => s.enqueue(r(1, 1, { at: clock.nowNs() }))).toThrow("inference request for sequence 1 to model 'm' must specify the START flag on the first request of the sequence");
  });

  it('force-ended while it runs: its running request completes, the slot is freed after it, a continuation meanwhile is refused', async () => {
    const { s, batches, release, ended, clock } = harness({ max_sequence_idle_microseconds: 500_000 });
    s.enqueue(r(1, 0, { start: true }));
    await flush();
    clock.advance(600 * MS);
    await flush();
    // Still running: not ended yet, but it takes nothing more.
    expect(ended).toEqual([]);
    expect(() => s.enqueue(r(1, 1, { at: clock.nowNs() }))).toThrow(/must specify the START flag/);
    release.shift()!();
    await flush();
    expect(ended).toEqual(['n:1']);
    expect(s.activeSequenceCount()).toBe(0);
    // A new START of the id is a new sequence.
    s.enqueue(r(1, 2, { start: true, at: clock.nowNs() }));
    await flush();
    expect(batches).toEqual([['1_0'], ['1_2']]);
  });

  it('a sequence whose requests keep arriving within the timeout is not ended, however long each runs', async () => {
    const { s, batches, release, ended, clock } = harness({ max_sequence_idle_microseconds: 500_000 });
    s.enqueue(r(1, 0, { start: true }));
    await flush();
    clock.advance(400 * MS);
    s.enqueue(r(1, 1, { at: clock.nowNs() }));
    clock.advance(400 * MS);
    await flush();
    expect(ended).toEqual([]);
    release.shift()!();
    await flush();
    expect(batches).toEqual([['1_0'], ['1_1']]);
  });
});
