import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { Histogram, Registry, Summary } from 'prom-client';
import type { ModelMetricSettings } from '@triode/core';
import { DistributionFamily, SnapshotFamily, modelLabels } from './model-metric-family.js';

const histogram = (registry: Registry) => new DistributionFamily(registry, {
  name: 'h_ms', help: 'H', type: 'histogram',
  create: (labelNames, buckets) => new Histogram({ name: 'h_ms', help: 'H', labelNames, registers: [], buckets: [...(buckets ?? [1])] }),
});

// These families rely on what prom-client's Registry reads from a registered metric (not part of
// its documented API): prom-client is pinned exactly, and these tests fail if that changes.
describe('prom-client renders the per-model families (pinned: undocumented Registry behaviour)', () => {
  it('prom-client is the pinned version', () => {
    expect((createRequire(import.meta.url)('prom-client/package.json') as { version: string }).version).toBe('15.1.3');
  });

  it('one HELP and TYPE per family, then series with different label sets, label values escaped', async () => {
    const registry = new Registry();
    new SnapshotFamily(registry, {
      name: 'c_total', help: 'C', type: 'counter',
      read: () => [
        { value: 1, labels: modelLabels({ name: 'a', version: '1' }) },
        { value: 2.5, labels: modelLabels({ name: 'b', version: '2', labels: { _team: 'q"\\x\ny' } }) },
      ],
    });
    new SnapshotFamily(registry, { name: 'g', help: 'G', type: 'gauge', read: () => [] });
    const h = histogram(registry);
    h.observe({ name: 'a', version: '1' }, 0.5);
    h.observe({ name: 'b', version: '2', labels: { _team: 'x' } }, 3, undefined, [2, 4]);
    expect(await registry.metrics()).toBe([
      '# HELP c_total C',
      '# TYPE c_total counter',
      'c_total{model="a",version="1"} 1',
      'c_total{model="b",version="2",_team="q\\"\\\\x\\ny"} 2.5',
      '',
      '# HELP g G',
      '# TYPE g gauge',
      '',
      '# HELP h_ms H',
      '# TYPE h_ms histogram',
      'h_ms_bucket{le="1",model="a",version="1"} 1',
      'h_ms_bucket{le="+Inf",model="a",version="1"} 1',
      'h_ms_sum{model="a",version="1"} 0.5',
      'h_ms_count{model="a",version="1"} 1',
      'h_ms_bucket{le="2",model="b",version="2",_team="x"} 0',
      'h_ms_bucket{le="4",model="b",version="2",_team="x"} 1',
      'h_ms_bucket{le="+Inf",model="b",version="2",_team="x"} 1',
      'h_ms_sum{model="b",version="2",_team="x"} 3',
      'h_ms_count{model="b",version="2",_team="x"} 1',
      '',
    ].join('\n'));
    expect((await registry.getMetricsAsJSON()).map((m) => m.name)).toEqual(['c_total', 'g', 'h_ms']);
    // Registered under its name: a second family of that name is refused, as for prom-client's own.
    expect(() => new SnapshotFamily(registry, { name: 'g', help: 'G', type: 'gauge', read: () => [] })).toThrow(/already been registered/);
  });

  it('summaries keep their quantile label first, then the model labels and tags', async () => {
    const registry = new Registry();
    const s = new DistributionFamily(registry, {
      name: 's_us', help: 'S', type: 'summary',
      create: (labelNames) => new Summary({ name: 's_us', help: 'S', labelNames, registers: [], percentiles: [0.5] }),
    });
    s.observe({ name: 'a', version: '1', labels: { _team: 'x' } }, 7);
    expect(await registry.metrics()).toBe([
      '# HELP s_us S', '# TYPE s_us summary',
      's_us{quantile="0.5",model="a",version="1",_team="x"} 7',
      's_us_sum{model="a",version="1",_team="x"} 7',
      's_us_count{model="a",version="1",_team="x"} 1',
      '',
    ].join('\n'));
  });
});

describe('DistributionFamily', () => {
  it('a model version keeps one series: a reload with other labels or buckets starts a new one', async () => {
    const registry = new Registry();
    const h = histogram(registry);
    const before: ModelMetricSettings = { labels: { _team: 'a' }, histogramBuckets: {}, decoupled: false, responseCache: false };
    const same: ModelMetricSettings = { labels: { _team: 'a' }, histogramBuckets: {}, decoupled: false, responseCache: false };
    const after: ModelMetricSettings = { labels: { _team: 'b' }, histogramBuckets: { h_ms: [5] }, decoupled: false, responseCache: false };
    h.observe({ name: 'm', version: '1', labels: before.labels }, 0.5, before);
    // The same labels and buckets in another settings object (the model reloaded unchanged): same series.
    h.observe({ name: 'm', version: '1', labels: same.labels }, 0.5, same);
    expect(await registry.metrics()).toContain('h_ms_count{model="m",version="1",_team="a"} 2');
    h.observe({ name: 'm', version: '1', labels: after.labels }, 0.5, after, [5]);
    const text = await registry.metrics();
    expect(text).not.toContain('_team="a"');
    expect(text).toContain('h_ms_bucket{le="5",model="m",version="1",_team="b"} 1');
    expect(text).toContain('h_ms_count{model="m",version="1",_team="b"} 1');
  });

  it('drops the series of versions no longer loaded at the next scrape (as Triton at unload), so reloads do not pile up', async () => {
    const registry = new Registry();
    let loaded = [{ name: 'a', version: '1' }, { name: 'b', version: '1' }];
    const h = new DistributionFamily(registry, {
      name: 'h_ms', help: 'H', type: 'histogram', live: () => loaded,
      create: (labelNames, buckets) => new Histogram({ name: 'h_ms', help: 'H', labelNames, registers: [], buckets: [...(buckets ?? [1])] }),
    });
    h.observe({ name: 'a', version: '1' }, 0.5);
    h.observe({ name: 'b', version: '1' }, 0.5);
    expect(await registry.metrics()).toContain('h_ms_count{model="b",version="1"} 1');
    loaded = [{ name: 'a', version: '1' }];
    const text = await registry.metrics();
    expect(text).toContain('h_ms_count{model="a",version="1"} 1');
    expect(text).not.toContain('model="b"');
    // Loaded again later: a new series from zero.
    loaded = [{ name: 'a', version: '1' }, { name: 'b', version: '1' }];
    h.observe({ name: 'b', version: '1' }, 0.5);
    expect(await registry.metrics()).toContain('h_ms_count{model="b",version="1"} 1');
  });
});
