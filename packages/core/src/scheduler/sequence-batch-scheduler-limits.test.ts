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
