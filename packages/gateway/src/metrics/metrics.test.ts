import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { startMetricsServer, type MetricsServerHandle } from './metrics.js';

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
