import { describe, expect, it } from 'vitest';
import type { ModelInstanceGroup } from '../model-config/model-config.js';
import type { GpuDevice } from './gpu-discovery.js';
import { chooseExecutionProvider, needsProviderProbe, requestedProviders, type GpuExecutionProvider, type ProviderStatus } from './execution-provider.js';

const gpu = (i: number): GpuDevice => ({ index: i, cudaId: i, uuid: `GPU-${i}`, name: 'H100', memoryTotalBytes: 1, memoryUsedBytes: 0 });
const TWO = [gpu(0), gpu(1)];
const NO_ADAPTER: ProviderStatus = { usable: false, reason: 'no WebGPU adapter' };
const NO_LIB: ProviderStatus = { usable: false, reason: 'provider library missing' };

function choose(group: ModelInstanceGroup, gpus: GpuDevice[], status: [GpuExecutionProvider, ProviderStatus][], providers: GpuExecutionProvider[] = ['cuda', 'webgpu']) {
  return chooseExecutionProvider({ model: 'm', group: { name: 'g', ...group }, gpus, gpuReason: 'no GPU found by nvidia-smi: it listed none', providers, status: new Map(status) });
}

describe('requestedProviders()', () => {
  it('reads gpu_execution_accelerator names in order; the default order when none', () => {
    expect(requestedProviders({})).toEqual(['cuda', 'webgpu']);
    expect(requestedProviders({}, { kind: 'KIND_GPU' })).toEqual(['cuda', 'webgpu']);
    // KIND_AUTO (or no kind) takes CUDA only, unless the model names a provider.
    expect(requestedProviders({}, { kind: 'KIND_AUTO' })).toEqual(['cuda']);
    expect(requestedProviders({}, {})).toEqual(['cuda']);
    expect(requestedProviders({ optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'webgpu' }] } } }, {})).toEqual(['webgpu']);
    expect(requestedProviders({ optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'webgpu' }, { name: 'TensorRT' }, { name: 'webgpu' }] } } })).toEqual(['webgpu', 'tensorrt']);
    expect(() => requestedProviders({ name: 'm', optimization: { execution_accelerators: { gpu_execution_accelerator: [{ name: 'openvino' }] } } }))
      .toThrow('unknown gpu_execution_accelerator "openvino" for model "m" (tensorrt, cuda, webgpu)');
  });
});

describe('chooseExecutionProvider()', () => {
  it('KIND_CPU and KIND_MODEL stay on CPU whatever the GPUs', () => {
    expect(choose({ kind: 'KIND_CPU' }, TWO, [['cuda', { usable: true }]])).toEqual({ device: 'cpu' });
    expect(choose({ kind: 'KIND_MODEL' }, TWO, [['cuda', { usable: true }]])).toEqual({ device: 'cpu' });
  });

  it('KIND_GPU takes the first usable provider in order', () => {
    expect(choose({ kind: 'KIND_GPU' }, TWO, [['cuda', NO_LIB], ['webgpu', { usable: true }]])).toEqual({ device: 'gpu', provider: 'webgpu' });
    expect(choose({ kind: 'KIND_GPU' }, TWO, [['cuda', { usable: true }], ['webgpu', { usable: true }]])).toEqual({ device: 'gpu', provider: 'cuda' });
  });

  it('KIND_GPU fails naming what is missing: the GPU, a listed GPU, each provider', () => {
    const err = (r: ReturnType<typeof choose>) => (r.device === 'error' ? `${r.error.code}: ${r.error.message}` : JSON.stringify(r));
    expect(err(choose({ kind: 'KIND_GPU' }, [], []))).toBe('UNAVAILABLE: Cannot place instance group "g" of model "m" on a GPU: no GPU found by nvidia-smi: it listed none');
    expect(err(choose({ kind: 'KIND_GPU', gpus: [0, 3] }, TWO, [['webgpu', { usable: true }]])))
      .toBe('UNAVAILABLE: Cannot place instance group "g" of model "m" on a GPU: it lists GPU 3, but the visible GPUs are 0, 1');
    expect(err(choose({ kind: 'KIND_GPU' }, TWO, [['cuda', NO_LIB], ['webgpu', NO_ADAPTER]])))
      .toBe('UNAVAILABLE: Cannot place instance group "g" of model "m" on a GPU: no usable GPU execution provider (cuda: provider library missing; webgpu: no WebGPU adapter)');
  });

  it('KIND_AUTO goes to a GPU when one and a provider are usable, else to CPU with a warning (never an error)', () => {
    expect(choose({ kind: 'KIND_AUTO' }, TWO, [['webgpu', { usable: true }]])).toEqual({ device: 'gpu', provider: 'webgpu' });
    expect(choose({ kind: 'KIND_AUTO' }, TWO, [['cuda', NO_LIB]], ['cuda'])).toEqual({
      device: 'cpu', warning: 'instance group "g" of model "m" is KIND_AUTO and runs on CPU: no usable GPU execution provider (cuda: provider library missing); WebGPU is used only by models that name it (gpu_execution_accelerator [ { name: "webgpu" } ]) or ask for KIND_GPU',
    });
    expect(choose({ kind: 'KIND_AUTO' }, TWO, [['cuda', NO_LIB], ['webgpu', NO_ADAPTER]])).toEqual({
      device: 'cpu', warning: 'instance group "g" of model "m" is KIND_AUTO and runs on CPU: no usable GPU execution provider (cuda: provider library missing; webgpu: no WebGPU adapter)',
    });
    expect(choose({ kind: 'KIND_AUTO' }, [], [])).toEqual({ device: 'cpu', warning: 'instance group "g" of model "m" is KIND_AUTO and runs on CPU: no GPU found by nvidia-smi: it listed none' });
    // No kind at all on a machine without a GPU: CPU quietly (Triton's default).
    expect(choose({}, [], [])).toEqual({ device: 'cpu' });
    // gpus: [] asks for no GPU.
    expect(choose({ kind: 'KIND_AUTO', gpus: [] }, TWO, [['webgpu', { usable: true }]])).toEqual({ device: 'cpu' });
  });

  it('probes providers only where the answer can matter', () => {
    expect(needsProviderProbe({ kind: 'KIND_GPU' }, TWO)).toBe(true);
    expect(needsProviderProbe({}, TWO)).toBe(true);
    expect(needsProviderProbe({ kind: 'KIND_GPU' }, [])).toBe(false);
    expect(needsProviderProbe({ kind: 'KIND_GPU', gpus: [5] }, TWO)).toBe(false);
    expect(needsProviderProbe({ kind: 'KIND_AUTO', gpus: [] }, TWO)).toBe(false);
    expect(needsProviderProbe({ kind: 'KIND_CPU' }, TWO)).toBe(false);
  });
});
