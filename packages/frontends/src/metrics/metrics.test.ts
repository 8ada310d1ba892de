import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferStats, InferenceServer, type GpuDevice, type LatencyObservation, type ModelMetricSettings } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { captureListens } from '../../../../test/helpers/servers.js';
import { createMetricsRegistry, parseMetricsConfig, startMetricsServer, type MetricsConfig, type MetricsServerHandle, type MetricsSource } from './metrics.js';

let server: InferenceServer;
let metrics: MetricsServerHandle;

beforeAll(async () => {
  server = await InferenceServer.create({ modelRepositories: [makeRepository(['simple'])], backends: [new OnnxRuntimeBackend()] });
  metrics = await startMetricsServer(server, 0, '127.0.0.1');
});

afterAll(async () => {
  await metrics?.close();
  await server?.stop(1000);
});

const scrape = async () => (await fetch(`http://127.0.0.1:${metrics.port}/metrics`)).text();

describe('metrics endpoint', () => {
  it("exposes Triton's nv_inference_* families with their types and model/version labels", async () => {
    const input = (n: string) => ({ name: n, datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16) });
    await server.infer({ modelName: 'simple', inputs: [input('INPUT0'), input('INPUT1')] });
    await server.infer({ modelName: 'simple', inputs: [input('INPUT0'), input('INPUT1')] });
    await expect(server.infer({ modelName: 'simple', inputs: [input('INPUT0')] })).rejects.toThrow();
    const text = await scrape();
    const types: Record<string, string> = {
      nv_inference_request_success: 'counter', nv_inference_request_failure: 'counter', nv_inference_count: 'counter',
      nv_inference_exec_count: 'counter', nv_inference_pending_request_count: 'gauge', nv_inference_request_duration_us: 'counter',
      nv_inference_queue_duration_us: 'counter', nv_inference_compute_input_duration_us: 'counter', nv_inference_compute_infer_duration_us: 'counter',
      nv_inference_compute_output_duration_us: 'counter', nv_cpu_utilization: 'gauge', nv_cpu_memory_total_bytes: 'gauge', nv_cpu_memory_used_bytes: 'gauge',
    };
    for (const [name, type] of Object.entries(types)) expect(text).toContain(`# TYPE ${name} ${type}`);
    expect(text).toContain('nv_inference_request_success{model="simple",version="1"} 2');
    expect(text).toContain('nv_inference_request_failure{model="simple",version="1",reason="OTHER"} 1');
    expect(text).toContain('nv_inference_request_failure{model="simple",version="1",reason="REJECTED"} 0');
    expect(text).toContain('nv_inference_count{model="simple",version="1"} 2');
    expect(text).toMatch(/nv_inference_exec_count\{model="simple",version="1"\} [12]\n/);
    expect(text).toContain('nv_inference_pending_request_count{model="simple",version="1"} 0');
    expect(Number(/nv_inference_compute_infer_duration_us\{model="simple",version="1"\} (\d+)/.exec(text)?.[1])).toBeGreaterThan(0);
    expect(Number(/nv_cpu_memory_total_bytes (\d+)/.exec(text)?.[1])).toBeGreaterThan(0);
    // Triton's load time gauge (it was missing).
    expect(text).toContain('# HELP nv_model_load_duration_secs Model load time in seconds\n# TYPE nv_model_load_duration_secs gauge');
    expect(Number(/^nv_model_load_duration_secs\{model="simple",version="1"\} ([\d.e-]+)$/m.exec(text)?.[1])).toBeGreaterThan(0);
  });

  it('answers 404 elsewhere', async () => {
    expect((await fetch(`http://127.0.0.1:${metrics.port}/other`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${metrics.port}/metricsx`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${metrics.port}/metrics//`)).status).toBe(404);
    // As Triton: any method but GET is 405, on any path.
    expect((await fetch(`http://127.0.0.1:${metrics.port}/metrics`, { method: 'POST', body: 'x' })).status).toBe(405);
    expect((await fetch(`http://127.0.0.1:${metrics.port}/other`, { method: 'DELETE' })).status).toBe(405);
  });

  it('serves /metrics/ too, as Triton (its path pattern is `/metrics/?`); other methods there are 405', async () => {
    const res = await fetch(`http://127.0.0.1:${metrics.port}/metrics/`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain('# TYPE nv_inference_request_success counter');
    expect((await fetch(`http://127.0.0.1:${metrics.port}/metrics/?x=1`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${metrics.port}/metrics/`, { method: 'PUT', body: 'x' })).status).toBe(405);
  });
});

describe('--metrics-config', () => {
  it('summaries and the first-response histogram, fed per request; counter_latencies=false drops the duration counters', async () => {
    const s = await InferenceServer.create({ modelRepositories: [makeRepository(['simple', 'repeat_int32'])], backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()] });
    const m = await startMetricsServer(s, 0, '127.0.0.1', parseMetricsConfig([
      'summary_latencies=true', 'histogram_latencies=true', 'counter_latencies=false', 'summary_quantiles=0.5:0.05,0.99:0.001', 'histogram_buckets=1,10,100',
    ]));
    try {
      const input = (n: string) => ({ name: n, datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16) });
      for (let i = 0; i < 5; i++) await s.infer({ modelName: 'simple', inputs: [input('INPUT0'), input('INPUT1')] });
      // A decoupled model: the histogram times the first of its responses, not the whole request
      // (150 ms longer). No more than the test saw pass until that response reached it.
      const sent = performance.now();
      let firstSeenMs = Infinity;
      await s.inferStream({ modelName: 'repeat_int32', inputs: [
        { name: 'IN', datatype: 'INT32', shape: [2], data: Int32Array.of(1, 2) },
        { name: 'DELAY', datatype: 'UINT32', shape: [2], data: Uint32Array.of(0, 150) },
        { name: 'WAIT', datatype: 'UINT32', shape: [1], data: Uint32Array.of(0) },
      ] }, () => { firstSeenMs = Math.min(firstSeenMs, performance.now() - sent); });
      const text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      for (const f of ['request', 'queue', 'compute_input', 'compute_infer', 'compute_output']) {
        expect(text).toContain(`# TYPE nv_inference_${f}_summary_us summary`);
      }
      // Triton's help texts, as a Triton scrape shows them: the compute summaries reuse the counters' texts.
      expect(text).toContain('# HELP nv_inference_request_summary_us Summary of inference request duration in microseconds (includes cached requests)\n');
      expect(text).toContain('# HELP nv_inference_queue_summary_us Summary of inference queuing duration in microseconds (includes cached requests)\n');
      expect(text).toContain('# HELP nv_inference_compute_input_summary_us Cumulative compute input duration in microseconds (does not include cached requests)\n');
      expect(text).toContain('# HELP nv_inference_compute_infer_summary_us Cumulative compute inference duration in microseconds (does not include cached requests)\n');
      expect(text).toContain('# HELP nv_inference_compute_output_summary_us Cumulative inference compute output duration in microseconds (does not include cached requests)\n');
      expect(text).toContain('nv_inference_request_summary_us_count{model="simple",version="1"} 5');
      expect(text).toMatch(/nv_inference_request_summary_us\{quantile="0.99",model="simple",version="1"\} [\d.]+/);
      expect(text).toContain('# TYPE nv_inference_first_response_histogram_ms histogram');
      // As Triton, only decoupled models have the histogram ("Only create response metrics if decoupled model").
      expect(text).not.toContain('nv_inference_first_response_histogram_ms_count{model="simple"');
      expect(text).not.toContain('nv_inference_first_response_histogram_ms_bucket{le="100",model="simple"');
      expect(text).toContain('nv_inference_first_response_histogram_ms_count{model="repeat_int32",version="1"} 1');
      // The buckets asked for; the observation itself is checked against the test's own clock (a
      // fixed bound like le="100" would fail on a slow machine).
      expect(text).toMatch(/nv_inference_first_response_histogram_ms_bucket\{le="100",model="repeat_int32",version="1"\} [01]\n/);
      expect(text).toContain('nv_inference_first_response_histogram_ms_bucket{le="+Inf",model="repeat_int32",version="1"} 1');
      const firstMs = Number(/^nv_inference_first_response_histogram_ms_sum\{model="repeat_int32",version="1"\} ([\d.e+-]+)$/m.exec(text)?.[1]);
      expect(firstMs).toBeGreaterThan(0);
      expect(firstMs).toBeLessThanOrEqual(firstSeenMs);
      expect(text).not.toContain('nv_inference_request_duration_us');
    } finally {
      await m.close();
      await s.stop(1000);
    }
  });

  it('rejects unknown keys and bad values with the flag named', () => {
    expect(() => parseMetricsConfig(['nope=1'])).toThrow(/unknown key 'nope'/);
    expect(() => parseMetricsConfig(['summary_latencies=yes'])).toThrow(/expected true or false/);
    expect(() => parseMetricsConfig(['histogram_buckets=5,1'])).toThrow(/increasing/);
    expect(parseMetricsConfig([])).toEqual({});
  });
});

describe('response cache metrics', () => {
  it("Triton's nv_cache_* families when the server has a cache; the per-model ones only for models that enable it", async () => {
    const { readFileSync } = await import('node:fs');
    const cfg = readFileSync(new URL('../../../../model_repository/simple/config.pbtxt', import.meta.url), 'utf8') + '\nresponse_cache { enable: true }\n';
    const s = await InferenceServer.create({
      modelRepositories: [makeRepository(['simple', 'custom_identity_int32'], { 'simple/config.pbtxt': cfg })], backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()], responseCacheBytes: 1 << 20,
    });
    const m = await startMetricsServer(s, 0, '127.0.0.1', { summaryLatencies: true });
    const noCounters = createMetricsRegistry(s, { cpuMetrics: false, counterLatencies: false });
    try {
      const input = (n: string) => ({ name: n, datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16) });
      for (let i = 0; i < 3; i++) await s.infer({ modelName: 'simple', inputs: [input('INPUT0'), input('INPUT1')] });
      await s.infer({ modelName: 'custom_identity_int32', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2], data: Int32Array.of(1, 2) }] });
      const text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      // A model without response_cache has none of the per-model cache series (Triton creates them only for cache-enabled models).
      expect(text).not.toMatch(/^nv_cache_\w+_per_model\{model="custom_identity_int32"/m);
      // Summaries: the cache-enabled model has the cache hit/miss summaries and no request summary (Triton disables it there).
      expect(text).toContain('nv_cache_hit_summary_per_model_count{model="simple",version="1"} 2');
      expect(text).toContain('nv_cache_miss_summary_per_model_count{model="simple",version="1"} 1');
      expect(text).not.toContain('nv_cache_hit_summary_per_model_count{model="custom_identity_int32"');
      expect(text).not.toContain('nv_inference_request_summary_us_count{model="simple"');
      expect(text).toContain('nv_inference_request_summary_us_count{model="custom_identity_int32",version="1"} 1');
      expect(text).toContain('nv_inference_queue_summary_us_count{model="simple",version="1"} 3');
      // counter_latencies=false: Triton creates the per-model cache counters among the latency counters, so none.
      const without = await noCounters.metrics();
      expect(without).not.toMatch(/nv_cache_\w+_per_model\{/);
      expect(without).toContain('nv_cache_num_hits 2');
      expect(text).toContain('nv_cache_num_hits_per_model{model="simple",version="1"} 2');
      expect(text).toContain('nv_cache_num_misses_per_model{model="simple",version="1"} 1');
      expect(text).toContain('# TYPE nv_cache_hit_duration_per_model counter');
      expect(text).toContain('nv_cache_num_entries 1');
      // The local cache's server-wide gauges, with Triton's help texts (they were missing).
      expect(text).toContain('# HELP nv_cache_num_lookups Number of cache lookups in response cache\n# TYPE nv_cache_num_lookups gauge\nnv_cache_num_lookups 3');
      expect(text).toContain('nv_cache_num_hits 2');
      expect(text).toContain('nv_cache_num_misses 1');
      expect(text).toMatch(/^nv_cache_lookup_duration \d+$/m);
      expect(text).toMatch(/^nv_cache_insertion_duration \d+$/m);
      expect(text).toContain('# HELP nv_cache_miss_duration_per_model Total cache miss (insert+lookup) duration per model, in microseconds');
      expect(text).toContain('nv_inference_count{model="simple",version="1"} 1');
      expect(text).toContain('nv_inference_request_success{model="simple",version="1"} 3');
    } finally {
      noCounters.stopSampling();
      await m.close();
      await s.stop(1000);
    }
  });
});

describe('pinned memory pool gauges', () => {
  const text = async (config: MetricsConfig) => {
    const registry = createMetricsRegistry({ metricsSnapshot: () => [] }, config);
    try {
      return await registry.metrics();
    } finally {
      registry.stopSampling();
    }
  };

  it("Triton's nv_pinned_memory_pool_* gauges: the configured pool size (Triton's 256 MiB by default) and 0 used, with or without CPU metrics", async () => {
    const t = await text({ cpuMetrics: false });
    expect(t).toContain('# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total memory size, in bytes\n# TYPE nv_pinned_memory_pool_total_bytes gauge\nnv_pinned_memory_pool_total_bytes 268435456\n');
    expect(t).toContain('# HELP nv_pinned_memory_pool_used_bytes Pinned memory pool used memory size, in bytes\n# TYPE nv_pinned_memory_pool_used_bytes gauge\nnv_pinned_memory_pool_used_bytes 0\n');
    expect(await text({ pinnedMemoryPoolBytes: 1048576 })).toContain('nv_pinned_memory_pool_total_bytes 1048576\n');
  });

  it('none on a gateway (its families are prefixed: it holds no tensors)', async () => {
    expect(await text({ cpuMetrics: false, familyPrefix: 'triode_gateway_' })).not.toContain('pinned_memory');
  });
});

describe('GPU metrics', () => {
  const MIB = 1024 * 1024;
  const h100 = (i: number, extra: Partial<GpuDevice> = {}): GpuDevice => ({
    index: i, cudaId: i, uuid: `GPU-${i}`, name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: 81559 * MIB, memoryUsedBytes: 1024 * MIB * i, ...extra,
  });
  const source = (gpus: GpuDevice[]): MetricsSource => ({ metricsSnapshot: () => [], gpuStatus: async () => gpus });
  const text = async (src: MetricsSource, config: MetricsConfig = {}) => {
    const registry = createMetricsRegistry(src, { cpuMetrics: false, ...config });
    try {
      return await registry.metrics();
    } finally {
      registry.stopSampling();
    }
  };

  it("reports Triton's nv_gpu_* gauges per gpu_uuid: utilization as a 0-1 ratio, memory in bytes, power in W", async () => {
    const t = await text(source([h100(0, { utilization: 0.37, powerDrawW: 120.5, powerLimitW: 700 }), h100(1, { utilization: 0 })]));
    expect(t).toContain('# TYPE nv_gpu_utilization gauge');
    expect(t).toContain('nv_gpu_utilization{gpu_uuid="GPU-0"} 0.37');
    expect(t).toContain('nv_gpu_utilization{gpu_uuid="GPU-1"} 0');
    expect(t).toContain(`nv_gpu_memory_total_bytes{gpu_uuid="GPU-1"} ${81559 * MIB}`);
    expect(t).toContain(`nv_gpu_memory_used_bytes{gpu_uuid="GPU-1"} ${1024 * MIB}`);
    expect(t).toContain('nv_gpu_power_usage{gpu_uuid="GPU-0"} 120.5');
    expect(t).toContain('nv_gpu_power_limit{gpu_uuid="GPU-0"} 700');
    // A reading the GPU does not report is left out, not reported as 0.
    expect(t).not.toContain('nv_gpu_power_usage{gpu_uuid="GPU-1"}');
    expect(t).toContain('# TYPE nv_energy_consumption counter');
  });

  it('none with gpuMetrics false (--allow-gpu-metrics=false), nor for a source without GPUs (a gateway)', async () => {
    expect(await text(source([h100(0)]), { gpuMetrics: false })).not.toMatch(/nv_gpu_|nv_energy/);
    expect(await text({ metricsSnapshot: () => [] })).not.toMatch(/nv_gpu_|nv_energy/);
  });

  it('energy is the power integrated over the sampling intervals, in J since start', async () => {
    // Fake timers and Date: the sampler's ticks and the time between them are exact, where a
    // pause of the event loop on a loaded machine made one real interval worth 50 J.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    const registry = createMetricsRegistry(source([h100(0, { powerDrawW: 100 })]), { cpuMetrics: false, intervalMs: 100 });
    try {
      const energy = async () => Number(/nv_energy_consumption\{gpu_uuid="GPU-0"\} ([\d.e+-]+)/.exec(await registry.metrics())?.[1]);
      // The first sample, at start, has no interval before it.
      expect(await energy()).toBe(0);
      // Ticks at 100, 200 and 300 ms: three intervals of 0.1 s at 100 W.
      await vi.advanceTimersByTimeAsync(350);
      expect(await energy()).toBe(30);
      // The clock jumps 200 ms with no tick (the event loop held): the next tick, at 400 ms on
      // the timers, comes 300 ms after the last sample and counts all of it (30 J), not 0.1 s.
      vi.setSystemTime(Date.now() + 200);
      await vi.advanceTimersByTimeAsync(50);
      expect(await energy()).toBe(60);
    } finally {
      registry.stopSampling();
      vi.useRealTimers();
    }
  });

  it('a slow or stuck GPU reader never queues samples behind it: one at a time, and a scrape answers with the last readings', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'] });
    let calls = 0;
    let release: (() => void) | undefined;
    const slow: MetricsSource = {
      metricsSnapshot: () => [],
      gpuStatus: async () => {
        calls++;
        // The first answers at once; the next hangs until released (nvidia-smi stuck).
        if (calls > 1) await new Promise<void>((r) => { release = r; });
        return [h100(0, { utilization: 0.25 })];
      },
    };
    const registry = createMetricsRegistry(slow, { cpuMetrics: false, intervalMs: 100 });
    try {
      // Six ticks while the second sample hangs.
      await vi.advanceTimersByTimeAsync(600);
      // Before, every tick chained one more sample behind the stuck one, and a scrape awaited them all.
      expect(calls).toBe(2);
      // The scrape answers while the reader is still stuck (no time passes, nothing is released:
      // a scrape that waited for the stuck sample would never answer).
      expect(await registry.metrics()).toContain('nv_gpu_utilization{gpu_uuid="GPU-0"} 0.25');
      release?.();
      await vi.advanceTimersByTimeAsync(100);
      expect(calls).toBe(3);
    } finally {
      release?.();
      registry.stopSampling();
      vi.useRealTimers();
    }
  });

  it("a gateway's prefix renames them like the other families", async () => {
    expect(await text(source([h100(0, { utilization: 0.5 })]), { familyPrefix: 'triode_gateway_' })).toContain('triode_gateway_gpu_utilization{gpu_uuid="GPU-0"} 0.5');
  });
});

describe('metric_tags and model_metrics', () => {
  const FAMILY = 'nv_inference_first_response_histogram_ms';
  // Decoupled, so that they have the first-response histogram; 'ads' enables the response cache.
  const TAGGED: ModelMetricSettings = { labels: { _team: 'search', _tier: 'gold' }, histogramBuckets: { [FAMILY]: [1, 10] }, decoupled: true, responseCache: false };
  const TAGS_ONLY: ModelMetricSettings = { labels: { _team: 'ads' }, histogramBuckets: {}, decoupled: true, responseCache: true };
  // Three versions: no config settings (as before tags existed), tags with buckets, tags only.
  const source = (): MetricsSource & { observe(name: string, ms: number, s?: ModelMetricSettings): void } => {
    const stats = new InferStats();
    stats.recordSuccess(0, 2_000_000, 0, 0, 1_000_000, 0);
    stats.recordFailure(0, 1000, 'BACKEND');
    let listener: ((m: string, v: string, o: LatencyObservation, s?: ModelMetricSettings) => void) | undefined;
    const entry = (name: string, settings?: ModelMetricSettings) => ({ name, version: '1', stats: stats.toJson(name, '1'), failures: { ...stats.failures }, pending: 0, ...settings });
    return {
      metricsSnapshot: () => [entry('plain'), entry('tagged', TAGGED), entry('ads', TAGS_ONLY)],
      observeLatencies: (l) => { listener = l; },
      responseCacheStats: () => ({ entries: 0, bytes: 0, capacity: 1, hits: 0, misses: 0, evictions: 0, lookupNs: 0, insertNs: 0 }),
      observe: (name, ms, s) => listener?.(name, '1', { requestNs: ms * 1e6, queueNs: 0, computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0, firstResponseNs: ms * 1e6 }, s),
    };
  };
  const block = (text: string, family: string) => text.split('\n\n').find((b) => b.startsWith(`# HELP ${family} `))?.trimEnd();

  it('a tagged and an untagged model in one family: one HELP/TYPE, each series with its own labels ("_" + key)', async () => {
    const registry = createMetricsRegistry(source(), { cpuMetrics: false });
    const text = await registry.metrics();
    expect(block(text, 'nv_inference_request_success')).toBe([
      '# HELP nv_inference_request_success Number of successful inference requests, all batch sizes',
      '# TYPE nv_inference_request_success counter',
      'nv_inference_request_success{model="plain",version="1"} 1',
      'nv_inference_request_success{model="tagged",version="1",_team="search",_tier="gold"} 1',
      'nv_inference_request_success{model="ads",version="1",_team="ads"} 1',
    ].join('\n'));
    expect(block(text, 'nv_inference_request_failure')).toContain([
      'nv_inference_request_failure{model="plain",version="1",reason="OTHER"} 0',
      'nv_inference_request_failure{model="tagged",version="1",_team="search",_tier="gold",reason="REJECTED"} 0',
      'nv_inference_request_failure{model="tagged",version="1",_team="search",_tier="gold",reason="CANCELED"} 0',
      'nv_inference_request_failure{model="tagged",version="1",_team="search",_tier="gold",reason="BACKEND"} 1',
    ].join('\n'));
    // Only successes count toward the request duration, as in Triton's UpdateSuccess (a failure adds only to its counter).
    expect(block(text, 'nv_inference_request_duration_us')).toContain('nv_inference_request_duration_us{model="tagged",version="1",_team="search",_tier="gold"} 2000\n');
    // Every per-model family carries the tags.
    for (const f of ['nv_inference_count', 'nv_inference_exec_count', 'nv_inference_pending_request_count', 'nv_inference_request_duration_us', 'nv_inference_queue_duration_us',
      'nv_inference_compute_input_duration_us', 'nv_inference_compute_infer_duration_us', 'nv_inference_compute_output_duration_us']) {
      expect(block(text, f)).toContain(`${f}{model="tagged",version="1",_team="search",_tier="gold"} `);
      expect(block(text, f)).toContain(`${f}{model="plain",version="1"} `);
    }
    // The per-model cache counters: only the model that enables the cache has them (as Triton's reporter).
    for (const f of ['nv_cache_num_hits_per_model', 'nv_cache_num_misses_per_model', 'nv_cache_hit_duration_per_model', 'nv_cache_miss_duration_per_model']) {
      expect(block(text, f)).toContain(`${f}{model="ads",version="1",_team="ads"} `);
      expect(text).not.toContain(`${f}{model="tagged"`);
      expect(text).not.toContain(`${f}{model="plain"`);
    }
    expect(text.match(/^# TYPE nv_inference_request_success /gm)).toHaveLength(1);
  });

  it("per-model buckets from model_metrics; a model without model_metrics keeps the server-wide buckets; summaries carry the tags", async () => {
    const src = source();
    const registry = createMetricsRegistry(src, { cpuMetrics: false, histogramLatencies: true, summaryLatencies: true, summaryQuantiles: [[0.5, 0.05]], histogramBucketsMs: [5, 50] });
    src.observe('plain', 3);
    src.observe('tagged', 3, TAGGED);
    src.observe('tagged', 20, TAGGED);
    src.observe('ads', 20, TAGS_ONLY);
    const text = await registry.metrics();
    expect(block(text, FAMILY)).toBe([
      `# HELP ${FAMILY} Duration from request to first response in milliseconds`,
      `# TYPE ${FAMILY} histogram`,
      `${FAMILY}_bucket{le="5",model="plain",version="1"} 1`,
      `${FAMILY}_bucket{le="50",model="plain",version="1"} 1`,
      `${FAMILY}_bucket{le="+Inf",model="plain",version="1"} 1`,
      `${FAMILY}_sum{model="plain",version="1"} 3`,
      `${FAMILY}_count{model="plain",version="1"} 1`,
      `${FAMILY}_bucket{le="1",model="tagged",version="1",_team="search",_tier="gold"} 0`,
      `${FAMILY}_bucket{le="10",model="tagged",version="1",_team="search",_tier="gold"} 1`,
      `${FAMILY}_bucket{le="+Inf",model="tagged",version="1",_team="search",_tier="gold"} 2`,
      `${FAMILY}_sum{model="tagged",version="1",_team="search",_tier="gold"} 23`,
      `${FAMILY}_count{model="tagged",version="1",_team="search",_tier="gold"} 2`,
      `${FAMILY}_bucket{le="5",model="ads",version="1",_team="ads"} 0`,
      `${FAMILY}_bucket{le="50",model="ads",version="1",_team="ads"} 1`,
      `${FAMILY}_bucket{le="+Inf",model="ads",version="1",_team="ads"} 1`,
      `${FAMILY}_sum{model="ads",version="1",_team="ads"} 20`,
      `${FAMILY}_count{model="ads",version="1",_team="ads"} 1`,
    ].join('\n'));
    expect(block(text, 'nv_inference_request_summary_us')).toContain('nv_inference_request_summary_us_count{model="tagged",version="1",_team="search",_tier="gold"} 2');
    expect(block(text, 'nv_inference_request_summary_us')).toContain('nv_inference_request_summary_us{quantile="0.5",model="plain",version="1"} 3000');
  });

  it('an InferenceServer gives the metrics its models\' tags and buckets (metricsSnapshot, observeLatencies)', async () => {
    const { readFileSync } = await import('node:fs');
    const cfg = readFileSync(new URL('../../../../model_repository/repeat_int32/config.pbtxt', import.meta.url), 'utf8') +
      `\nmetric_tags [ { key: "team" value: "search" } ]\nmodel_metrics { metric_control { metric_identifier { family: "${FAMILY}" } histogram_options { buckets: [ 2, 4 ] } } }\n`;
    const s = await InferenceServer.create({
      modelRepositories: [makeRepository(['simple', 'repeat_int32'], { 'repeat_int32/config.pbtxt': cfg })],
      backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()],
    });
    const registry = createMetricsRegistry(s, { cpuMetrics: false, histogramLatencies: true });
    try {
      expect(s.metricsSnapshot().map((m) => [m.name, m.labels, m.histogramBuckets, m.decoupled, m.responseCache])).toEqual([
        ['repeat_int32', { _team: 'search' }, { [FAMILY]: [2, 4] }, true, false],
        ['simple', {}, {}, false, false],
      ]);
      await s.inferStream({ modelName: 'repeat_int32', inputs: [
        { name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) },
        { name: 'DELAY', datatype: 'UINT32', shape: [1], data: Uint32Array.of(0) },
        { name: 'WAIT', datatype: 'UINT32', shape: [1], data: Uint32Array.of(0) },
      ] }, () => undefined);
      const text = await registry.metrics();
      expect(text).toContain('nv_inference_request_success{model="repeat_int32",version="1",_team="search"} 1');
      expect(text).toContain('nv_inference_request_success{model="simple",version="1"} 0');
      expect(text).toContain(`${FAMILY}_bucket{le="4",model="repeat_int32",version="1",_team="search"} `);
      expect(text).toContain(`${FAMILY}_count{model="repeat_int32",version="1",_team="search"} 1`);
    } finally {
      registry.stopSampling();
      await s.stop(1000);
    }
  });
});

describe('nv_model_load_duration_secs', () => {
  it('an ensemble reports 0, as Triton (every model has the gauge; only backend models set it)', async () => {
    const s = await InferenceServer.create({ modelRepositories: [makeRepository(['custom_identity_int32', 'identity_chain'])], backends: [new JavaScriptBackend()] });
    const registry = createMetricsRegistry(s, { cpuMetrics: false });
    try {
      const text = await registry.metrics();
      expect(text).toContain('nv_model_load_duration_secs{model="identity_chain",version="1"} 0\n');
      expect(Number(/^nv_model_load_duration_secs\{model="custom_identity_int32",version="1"\} ([\d.e-]+)$/m.exec(text)?.[1])).toBeGreaterThan(0);
    } finally {
      registry.stopSampling();
      await s.stop(1000);
    }
  });
});

describe('summaries and histograms before the first request', () => {
  const FAMILY = 'nv_inference_first_response_histogram_ms';
  it('each loaded version has its series from its load, as Triton adds them then: summaries count 0, sum 0, NaN quantiles; histogram buckets 0', async () => {
    let settings: ModelMetricSettings = { labels: { _team: 'a' }, histogramBuckets: { [FAMILY]: [1, 2] }, decoupled: true, responseCache: false };
    const plain: ModelMetricSettings = { labels: {}, histogramBuckets: {}, decoupled: false, responseCache: false };
    const stats = new InferStats();
    const entry = (name: string, s: ModelMetricSettings) => ({ name, version: '1', stats: stats.toJson(name, '1'), failures: { ...stats.failures }, pending: 0, ...s });
    const src: MetricsSource = { metricsSnapshot: () => [entry('d', settings), entry('p', plain)], observeLatencies: () => undefined };
    const registry = createMetricsRegistry(src, { cpuMetrics: false, summaryLatencies: true, histogramLatencies: true, summaryQuantiles: [[0.5, 0.05], [0.9, 0.01]] });
    let text = await registry.metrics();
    expect(text).toContain([
      'nv_inference_queue_summary_us{quantile="0.5",model="p",version="1"} Nan',
      'nv_inference_queue_summary_us{quantile="0.9",model="p",version="1"} Nan',
      'nv_inference_queue_summary_us_sum{model="p",version="1"} 0',
      'nv_inference_queue_summary_us_count{model="p",version="1"} 0',
    ].join('\n'));
    expect(text).toContain('nv_inference_request_summary_us_count{model="d",version="1",_team="a"} 0');
    // The decoupled model's histogram, with its model_metrics buckets; none for the other.
    expect(text).toContain([
      `${FAMILY}_bucket{le="1",model="d",version="1",_team="a"} 0`,
      `${FAMILY}_bucket{le="2",model="d",version="1",_team="a"} 0`,
      `${FAMILY}_bucket{le="+Inf",model="d",version="1",_team="a"} 0`,
      `${FAMILY}_sum{model="d",version="1",_team="a"} 0`,
      `${FAMILY}_count{model="d",version="1",_team="a"} 0`,
    ].join('\n'));
    expect(text).not.toContain(`${FAMILY}_count{model="p"`);
    // Reloaded with other tags: the new labels, before any request.
    settings = { ...settings, labels: { _team: 'b' } };
    await new Promise((r) => setImmediate(r));
    text = await registry.metrics();
    expect(text).toContain(`${FAMILY}_count{model="d",version="1",_team="b"} 0`);
    expect(text).not.toContain('_team="a"');
    registry.stopSampling();
  });
});

describe('the metrics server\'s own errors', () => {
  it('attack: an error it emits after it listens is a warning, not the end of the process', async () => {
    const { servers, stop } = captureListens();
    let m: MetricsServerHandle | undefined;
    const warned: string[] = [];
    const onWarning = (w: Error) => warned.push(w.message);
    process.on('warning', onWarning);
    try {
      m = await startMetricsServer(server, 0, '127.0.0.1');
      stop();
      expect(servers).toHaveLength(1);
      expect(() => servers[0]!.emit('error', new Error('accept ENOMEM'))).not.toThrow();
      await new Promise((r) => setImmediate(r));
      expect(warned).toContain('metrics server: accept ENOMEM');
    } finally {
      stop();
      process.off('warning', onWarning);
      await m?.close();
    }
  });
});

describe('the metrics port and slow clients', () => {
  it('attack: a request whose body never finishes is cut at the request timeout, as on the HTTP port (review: Node\'s default held it 300 s)', async () => {
    const { connect } = await import('node:net');
    const m = await startMetricsServer(server, 0, '127.0.0.1', {}, { headersTimeoutMs: 300, requestTimeoutMs: 600, connectionsCheckingIntervalMs: 100 });
    try {
      const started = Date.now();
      const closedAfter = await new Promise<number>((resolve, reject) => {
        const s = connect(m.port, '127.0.0.1', () => s.write('GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\nx'));
        // A byte now and then: never the whole body.
        const drip = setInterval(() => { if (!s.destroyed) s.write('x'); }, 100);
        s.on('data', () => undefined);
        s.on('close', () => { clearInterval(drip); resolve(Date.now() - started); });
        s.on('error', () => undefined);
        setTimeout(() => { clearInterval(drip); s.destroy(); reject(new Error('still open after 10 s')); }, 10_000);
      });
      expect(closedAfter).toBeLessThan(10_000);
    } finally {
      await m.close();
    }
  });

  it('a connection that sends nothing is closed after the headers timeout, as on the HTTP port (Node times a connection\'s first request from when it connects)', async () => {
    const { connect } = await import('node:net');
    const m = await startMetricsServer(server, 0, '127.0.0.1', {}, { headersTimeoutMs: 300, requestTimeoutMs: 600, connectionsCheckingIntervalMs: 100 });
    try {
      const closed = await new Promise<boolean>((resolve) => {
        const s = connect(m.port, '127.0.0.1');
        // Read: a socket that is not read never sees the server close it.
        s.on('data', () => undefined);
        s.on('error', () => undefined);
        const timer = setTimeout(() => { s.destroy(); resolve(false); }, 30_000);
        s.on('close', () => { clearTimeout(timer); resolve(true); });
      });
      expect(closed).toBe(true);
    } finally {
      await m.close();
    }
  });

  it('pipelined scrapes on one connection, now served one at a time as on the HTTP port (listen-connection.test.ts attacks the queue), are all answered in order', async () => {
    const { connect } = await import('node:net');
    const m = await startMetricsServer(server, 0, '127.0.0.1');
    try {
      const s = connect(m.port, '127.0.0.1');
      s.on('error', () => undefined);
      let answers = 0;
      let text = '';
      s.on('data', (d: Buffer) => { text += d.toString('latin1'); answers = (text.match(/HTTP\/1\.1 200/g) ?? []).length; });
      s.write('GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n'.repeat(20));
      for (let k = 0; k < 100 && answers < 20; k++) await new Promise((r) => setTimeout(r, 50));
      // All answered, in order, on the one connection.
      expect(answers).toBe(20);
      s.destroy();
    } finally {
      await m.close();
    }
  });
});
