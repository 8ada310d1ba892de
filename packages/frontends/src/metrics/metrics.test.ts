import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, type GpuDevice } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
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
  });

  it('answers 404 elsewhere', async () => {
    expect((await fetch(`http://127.0.0.1:${metrics.port}/other`)).status).toBe(404);
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
      // A decoupled model: the histogram times the first of its responses, not the whole request.
      await s.inferStream({ modelName: 'repeat_int32', inputs: [
        { name: 'IN', datatype: 'INT32', shape: [2], data: Int32Array.of(1, 2) },
        { name: 'DELAY', datatype: 'UINT32', shape: [2], data: Uint32Array.of(0, 150) },
        { name: 'WAIT', datatype: 'UINT32', shape: [1], data: Uint32Array.of(0) },
      ] }, () => undefined);
      const text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      for (const f of ['request', 'queue', 'compute_input', 'compute_infer', 'compute_output']) {
        expect(text).toContain(`# TYPE nv_inference_${f}_summary_us summary`);
      }
      expect(text).toContain('nv_inference_request_summary_us_count{model="simple",version="1"} 5');
      expect(text).toMatch(/nv_inference_request_summary_us\{quantile="0.99",model="simple",version="1"\} [\d.]+/);
      expect(text).toContain('# TYPE nv_inference_first_response_histogram_ms histogram');
      expect(text).toContain('nv_inference_first_response_histogram_ms_bucket{le="100",model="simple",version="1"} 5');
      expect(text).toContain('nv_inference_first_response_histogram_ms_count{model="repeat_int32",version="1"} 1');
      expect(text).toContain('nv_inference_first_response_histogram_ms_bucket{le="100",model="repeat_int32",version="1"} 1');
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
  it("Triton's nv_cache_* families when the server has a cache", async () => {
    const { readFileSync } = await import('node:fs');
    const cfg = readFileSync(new URL('../../../../model_repository/simple/config.pbtxt', import.meta.url), 'utf8') + '\nresponse_cache { enable: true }\n';
    const s = await InferenceServer.create({ modelRepositories: [makeRepository(['simple'], { 'simple/config.pbtxt': cfg })], backends: [new OnnxRuntimeBackend()], responseCacheBytes: 1 << 20 });
    const m = await startMetricsServer(s, 0, '127.0.0.1');
    try {
      const input = (n: string) => ({ name: n, datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16) });
      for (let i = 0; i < 3; i++) await s.infer({ modelName: 'simple', inputs: [input('INPUT0'), input('INPUT1')] });
      const text = await (await fetch(`http://127.0.0.1:${m.port}/metrics`)).text();
      expect(text).toContain('nv_cache_num_hits_per_model{model="simple",version="1"} 2');
      expect(text).toContain('nv_cache_num_misses_per_model{model="simple",version="1"} 1');
      expect(text).toContain('# TYPE nv_cache_hit_duration_per_model counter');
      expect(text).toContain('nv_cache_num_entries 1');
      expect(text).toContain('nv_inference_count{model="simple",version="1"} 1');
      expect(text).toContain('nv_inference_request_success{model="simple",version="1"} 3');
    } finally {
      await m.close();
      await s.stop(1000);
    }
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
    const registry = createMetricsRegistry(source([h100(0, { powerDrawW: 100 })]), { cpuMetrics: false, intervalMs: 100 });
    try {
      await new Promise((r) => setTimeout(r, 350));
      const joules = Number(/nv_energy_consumption\{gpu_uuid="GPU-0"\} ([\d.e+-]+)/.exec(await registry.metrics())?.[1]);
      expect(joules).toBeGreaterThan(10); // >= 2 intervals of 0.1 s at 100 W
      expect(joules).toBeLessThan(50);
    } finally {
      registry.stopSampling();
    }
  });

  it("a gateway's prefix renames them like the other families", async () => {
    expect(await text(source([h100(0, { utilization: 0.5 })]), { familyPrefix: 'triode_gateway_' })).toContain('triode_gateway_gpu_utilization{gpu_uuid="GPU-0"} 0.5');
  });
});
