import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { InferenceServer, type GpuDevice, type GpuExecutionProvider, type GpuInventory, type ModelConfig, type ProviderStatus } from '@triode/core';
import { EXAMPLES, makeRepository } from '../../../../test/helpers/repository.js';
import { chooseInstanceDevices } from './instance-devices.js';
import { OnnxRuntimeBackend } from './onnxruntime-backend.js';

const SIMPLE = join(EXAMPLES, 'simple/1/model.onnx');
const h100 = (i: number): GpuDevice => ({ index: i, cudaId: i, uuid: `GPU-${i}`, name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: 81559 * 2 ** 20, memoryUsedBytes: 0 });
const TWO_H100: GpuInventory = { gpus: [h100(0), h100(1)] };

function recorder() {
  const lines: { level: string; msg: string }[] = [];
  const log = (level: string) => (msg: string) => { lines.push({ level, msg }); };
  return { lines, logger: { error: log('error'), warning: log('warning'), info: log('info'), verbose: () => undefined } };
}

const noAdapter = async (p: GpuExecutionProvider): Promise<ProviderStatus> => ({ usable: false, reason: p === 'webgpu' ? 'no WebGPU adapter: x' : 'provider library missing: y' });
const webgpuWorks = async (p: GpuExecutionProvider): Promise<ProviderStatus> => (p === 'webgpu' ? { usable: true } : { usable: false, reason: 'provider library missing: y' });

describe('chooseInstanceDevices()', () => {
  it('KIND_AUTO with GPUs but no usable provider: KIND_CPU, with a warning naming each provider', async () => {
    const { lines, logger } = recorder();
    const config: ModelConfig = { name: 'm', instance_group: [{ kind: 'KIND_AUTO', count: 1 }] };
    await chooseInstanceDevices(config, SIMPLE, { gpus: TWO_H100, probe: noAdapter, logger });
    expect(config.instance_group).toEqual([{ kind: 'KIND_CPU', count: 1 }]);
    expect(lines).toEqual([{ level: 'warning', msg: 'instance group "m_0" of model "m" is KIND_AUTO and runs on CPU: no usable GPU execution provider (cuda: provider library missing: y); WebGPU is used only by models that name it (gpu_execution_accelerator [ { name: "webgpu" } ]) or ask for KIND_GPU' }]);
  });

  it('KIND_GPU with no GPU: the load fails naming nvidia-smi; with no provider: naming each', async () => {
    const { logger } = recorder();
    await expect(chooseInstanceDevices({ name: 'm', instance_group: [{ name: 'g', kind: 'KIND_GPU' }] }, SIMPLE, { gpus: { gpus: [], reason: "no GPU found by nvidia-smi: 'nvidia-smi' was not found (is the NVIDIA driver installed?)" }, probe: noAdapter, logger }))
      .rejects.toThrow(`Cannot place instance group "g" of model "m" on a GPU: no GPU found by nvidia-smi: 'nvidia-smi' was not found (is the NVIDIA driver installed?)`);
    await expect(chooseInstanceDevices({ name: 'm', instance_group: [{ name: 'g', kind: 'KIND_GPU' }] }, SIMPLE, { gpus: TWO_H100, probe: noAdapter, logger }))
      .rejects.toThrow('Cannot place instance group "g" of model "m" on a GPU: no usable GPU execution provider (cuda: provider library missing: y; webgpu: no WebGPU adapter: x)');
  });

  it('a usable provider: KIND_AUTO goes to the GPU (once the core takes KIND_GPU groups), the chosen provider lands in the config', async () => {
    const { lines, logger } = recorder();
    const cudaWorks = async (p: GpuExecutionProvider): Promise<ProviderStatus> => (p === 'cuda' ? { usable: true } : { usable: false, reason: 'no WebGPU adapter: x' });
    const config: ModelConfig = { name: 'm' };
    await chooseInstanceDevices(config, SIMPLE, { gpus: TWO_H100, probe: cudaWorks, logger });
    expect(config.instance_group).toEqual([{ kind: 'KIND_GPU' }]);
    expect(config.optimization?.execution_accelerators?.gpu_execution_accelerator).toEqual([{ name: 'cuda' }]);
    expect(lines).toEqual([{ level: 'info', msg: 'model "m": instance group "m_0" runs on GPU 0, 1 with execution provider cuda' }]);
  });

  it('WebGPU only: a model that names no provider stays on CPU (webgpu not even probed); one that names webgpu, or asks for KIND_GPU, gets it', async () => {
    // On an H200, `simple` (no instance_group) went to WebGPU and served 269 requests/s at c=1
    // against the CPU's thousands (bench/RESULTS.md): KIND_AUTO takes WebGPU only when named.
    const probed: GpuExecutionProvider[] = [];
    const probe = async (p: GpuExecutionProvider) => { probed.push(p); return webgpuWorks(p); };
    const { logger } = recorder();
    const unnamed: ModelConfig = { name: 'm' };
    await chooseInstanceDevices(unnamed, SIMPLE, { gpus: TWO_H100, probe, logger });
    expect(unnamed.instance_group).toBeUndefined();
    expect(unnamed.optimization).toBeUndefined();
    expect(probed).toEqual(['cuda']);
    const named: ModelConfig = { name: 'm', optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'webgpu' }] } } };
    await chooseInstanceDevices(named, SIMPLE, { gpus: TWO_H100, probe, logger });
    expect(named.instance_group).toEqual([{ kind: 'KIND_GPU' }]);
    const gpu: ModelConfig = { name: 'm', instance_group: [{ kind: 'KIND_GPU', count: 1 }] };
    await chooseInstanceDevices(gpu, SIMPLE, { gpus: TWO_H100, probe, logger });
    expect(gpu.instance_group).toEqual([{ kind: 'KIND_GPU', count: 1 }]);
    expect(gpu.optimization?.execution_accelerators?.gpu_execution_accelerator).toEqual([{ name: 'webgpu' }]);
  });

  it('an unknown gpu_execution_accelerator fails the load', async () => {
    const { logger } = recorder();
    const config: ModelConfig = { name: 'm', optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'rocm' }] } } };
    await expect(chooseInstanceDevices(config, SIMPLE, { gpus: TWO_H100, probe: noAdapter, logger })).rejects.toThrow('unknown gpu_execution_accelerator "rocm" for model "m"');
  });
});

describe('an onnxruntime server with two (stand-in) H100s and the real providers', () => {
  const servers: InferenceServer[] = [];
  afterAll(async () => { await Promise.all(servers.map((s) => s.stop(1000))); });

  it('KIND_AUTO models are READY on CPU with a warning; KIND_GPU is UNAVAILABLE with a clear reason, fast; the others stay up', async () => {
    const group = (kind: string) => `platform: "onnxruntime_onnx"\ninstance_group [ { kind: ${kind} count: 1 } ]\n`;
    const repo = makeRepository([], { 'auto/config.pbtxt': group('KIND_AUTO'), 'gpu/config.pbtxt': group('KIND_GPU') });
    for (const m of ['auto', 'gpu']) cpSync(join(EXAMPLES, 'simple/1'), join(repo, m, '1'), { recursive: true });
    const { lines, logger } = recorder();
    const t0 = Date.now();
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend({ gpus: TWO_H100, logger })], strictReadiness: false });
    servers.push(s);
    expect(Date.now() - t0).toBeLessThan(30_000);
    const index = s.repositoryIndex();
    expect(index.find((r) => r.name === 'auto')).toMatchObject({ state: 'READY' });
    expect(s.modelConfig('auto').instance_group).toMatchObject([{ kind: 'KIND_CPU', count: 1 }]);
    expect(lines.find((l) => l.level === 'warning')?.msg).toMatch(/^instance group "auto_0" of model "auto" is KIND_AUTO and runs on CPU: no usable GPU execution provider \(cuda: [^;]*\); WebGPU is used only by models that name it/);
    expect(index.find((r) => r.name === 'gpu')).toMatchObject({
      state: 'UNAVAILABLE', reason: expect.stringMatching(/^Cannot place instance group "gpu_0" of model "gpu" on a GPU: no usable GPU execution provider \(cuda: .*; webgpu: no WebGPU adapter: /),
    });
  });
});
