import { describe, expect, it } from 'vitest';
import { InferStats } from './infer-stats.js';

describe('InferStats, as Triton\'s InferenceStatsAggregator counts', () => {
  it('a cache hit does not move last_inference (UpdateSuccessCacheHit leaves it)', () => {
    const s = new InferStats();
    s.recordCacheHit(1_700_000_000_000, 500, 100);
    const j = s.toJson('m', '1');
    expect(j.last_inference).toBe(0);
    expect(j.inference_stats.success).toEqual({ count: 1, ns: 500 });
    expect(j.inference_stats.cache_hit).toEqual({ count: 1, ns: 100 });
  });

  it('a cache miss adds its lookup and insert time to success.ns as well as cache_miss (UpdateSuccessCacheMiss)', () => {
    const s = new InferStats();
    s.recordSuccess(1_700_000_000_000, 1000, 100, 10, 800, 10);
    s.recordCacheMiss(40);
    const j = s.toJson('m', '1');
    expect(j.inference_stats.success).toEqual({ count: 1, ns: 1040 });
    expect(j.inference_stats.cache_miss).toEqual({ count: 1, ns: 40 });
  });

  it('a failure does not move last_inference (UpdateFailure leaves it)', () => {
    const s = new InferStats();
    s.recordFailure(1_700_000_000_000, 300);
    const j = s.toJson('m', '1');
    expect(j.last_inference).toBe(0);
    expect(j.inference_stats.fail).toEqual({ count: 1, ns: 300 });
  });
});
