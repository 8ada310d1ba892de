/**
 * `triode serve` on a machine without a GPU, with a stand-in nvidia-smi that lists two H100s:
 * the GPU startup table, the nv_gpu_* metrics (and none with --allow-gpu-metrics=false), KIND_AUTO
 * models READY on CPU with a warning, KIND_GPU models UNAVAILABLE with a clear reason, fast.
 */
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES, ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

const STAND_IN = join(ROOT, 'test', 'fixtures', 'gpu', 'nvidia-smi');
const UUIDS = ['GPU-5f0c1e2a-1111-2222-3333-444455556666', 'GPU-9a8b7c6d-7777-8888-9999-aaaabbbbcccc'];
const group = (kind: string) => `platform: "onnxruntime_onnx"\ninstance_group [ { kind: ${kind} count: 1 } ]\n`;

function repository(): string {
  const repo = makeRepository(['simple'], { 'auto/config.pbtxt': group('KIND_AUTO'), 'gpu/config.pbtxt': group('KIND_GPU') });
  for (const m of ['auto', 'gpu']) cpSync(join(EXAMPLES, 'simple/1'), join(repo, m, '1'), { recursive: true });
  return repo;
}

const children: Child[] = [];
async function serve(extra: string[], nvidiaSmi: string): Promise<{ child: Child; http: number; metrics: number; ms: number }> {
  const [http, metrics] = [await freePort(), await freePort()];
  const t0 = Date.now();
  const child = await startTriode(['serve', '--model-repository', repository(), `--http-port=${http}`, '--http-address=127.0.0.1', '--allow-grpc=false',
    `--metrics-port=${metrics}`, '--metrics-address=127.0.0.1', '--strict-readiness=false', ...extra], undefined, 60_000, { TRIODE_NVIDIA_SMI: nvidiaSmi });
  children.push(child);
  return { child, http, metrics, ms: Date.now() - t0 };
}

let two: Awaited<ReturnType<typeof serve>>;
beforeAll(async () => { two = await serve([], STAND_IN); });
afterAll(async () => { await Promise.all(children.map((c) => c.stop())); });

describe('triode serve with a stand-in nvidia-smi listing two H100s', () => {
  it('the startup table lists both GPUs: index, name, memory', () => {
    expect(two.child.output()).toMatch(/\| GPU \| CUDA id \| Name +\| Memory +\|/);
    expect(two.child.output()).toMatch(/\| 0 +\| 0 +\| NVIDIA H100 80GB HBM3 \| 81559 MiB \|/);
    expect(two.child.output()).toMatch(/\| 1 +\| 1 +\| NVIDIA H100 80GB HBM3 \| 81559 MiB \|/);
  });

  it('/metrics has nv_gpu_memory_total_bytes and nv_gpu_utilization (0-1) for both gpu_uuids', async () => {
    const text = await (await fetch(`http://127.0.0.1:${two.metrics}/metrics`)).text();
    for (const uuid of UUIDS) {
      expect(text).toContain(`nv_gpu_memory_total_bytes{gpu_uuid="${uuid}"} ${81559 * 1024 * 1024}`);
      expect(text).toMatch(new RegExp(`^nv_gpu_utilization\\{gpu_uuid="${uuid}"\\} (0|0\\.\\d+|1)$`, 'm'));
    }
    expect(text).toContain(`nv_gpu_utilization{gpu_uuid="${UUIDS[0]}"} 0.37`);
    expect(text).toContain(`nv_gpu_power_limit{gpu_uuid="${UUIDS[0]}"} 700`);
  });

  it('a KIND_AUTO model is READY on CPU, with a warning naming what is missing', async () => {
    const cfg = (await (await fetch(`http://127.0.0.1:${two.http}/v2/models/auto/config`)).json()) as { instance_group: { kind: string }[] };
    expect(cfg.instance_group[0]!.kind).toBe('KIND_CPU');
    expect((await fetch(`http://127.0.0.1:${two.http}/v2/models/auto/ready`)).status).toBe(200);
    expect(two.child.output()).toMatch(/instance group \\?"auto_0\\?" of model \\?"auto\\?" is KIND_AUTO and runs on CPU: no usable GPU execution provider \(cuda: [^;]+\); WebGPU is used only by models that name it/);
  });

  it('a KIND_GPU model is UNAVAILABLE with a clear reason in < 30 s, and the others serve', async () => {
    expect(two.ms).toBeLessThan(30_000);
    const index = (await (await fetch(`http://127.0.0.1:${two.http}/v2/repository/index`, { method: 'POST', body: '{}' })).json()) as { name: string; state: string; reason?: string }[];
    const gpu = index.find((r) => r.name === 'gpu')!;
    expect(gpu.state).toBe('UNAVAILABLE');
    expect(gpu.reason).toMatch(/^Cannot place instance group "gpu_0" of model "gpu" on a GPU: no usable GPU execution provider \(cuda: .*provider library missing.*; webgpu: no WebGPU adapter: /);
    expect(index.find((r) => r.name === 'simple')?.state).toBe('READY');
  });
});

describe('other GPU situations', () => {
  it('--allow-gpu-metrics=false: no nv_gpu_* metrics, though GPUs are found', async () => {
    const s = await serve(['--allow-gpu-metrics=false'], STAND_IN);
    const text = await (await fetch(`http://127.0.0.1:${s.metrics}/metrics`)).text();
    expect(text).toContain('nv_inference_request_success');
    expect(text).not.toMatch(/nv_gpu_|nv_energy_consumption/);
    await s.child.stop();
  });

  it('no nvidia-smi: KIND_GPU fails naming it; KIND_AUTO is READY on CPU; no GPU metrics', async () => {
    const s = await serve(['--allow-gpu-metrics=true'], join(ROOT, 'test', 'fixtures', 'gpu', 'no-such-nvidia-smi'));
    const index = (await (await fetch(`http://127.0.0.1:${s.http}/v2/repository/index`, { method: 'POST', body: '{}' })).json()) as { name: string; state: string; reason?: string }[];
    expect(index.find((r) => r.name === 'gpu')?.reason).toMatch(/^Cannot place instance group "gpu_0" of model "gpu" on a GPU: no GPU found by nvidia-smi: '.*no-such-nvidia-smi' was not found \(is the NVIDIA driver installed\?\)$/);
    expect(index.find((r) => r.name === 'auto')?.state).toBe('READY');
    expect(s.child.output()).toMatch(/--allow-gpu-metrics=true: no nv_gpu_\* metrics: no GPU found by nvidia-smi/);
    expect(await (await fetch(`http://127.0.0.1:${s.metrics}/metrics`)).text()).not.toMatch(/nv_gpu_/);
    await s.child.stop();
  });
});
