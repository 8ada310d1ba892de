import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { EXAMPLES } from '../../../../test/helpers/repository.js';
import { ProviderProbe, describeProviderFailure, vulkanHint } from './gpu-provider.js';
import { classifyGpuFailure, gpuFailureMessage } from './gpu-errors.js';

const SIMPLE = join(EXAMPLES, 'simple/1/model.onnx');
const host = (files: string[], env: Record<string, string> = {}) => ({ env, exists: (p: string) => files.includes(p) });
const LOADER = '/usr/lib/x86_64-linux-gnu/libvulkan.so.1';

describe('vulkanHint()', () => {
  it('names the missing piece: loader, ICD file, or neither', () => {
    expect(vulkanHint(host([]))).toBe('the Vulkan loader libvulkan.so.1 is not installed (Debian/Ubuntu: apt-get install libvulkan1)');
    expect(vulkanHint(host(['/opt/lib/libvulkan.so.1'], { LD_LIBRARY_PATH: '/opt/lib' }))).toMatch(/^no NVIDIA Vulkan ICD found .*set VK_DRIVER_FILES/);
    expect(vulkanHint(host([LOADER], { VK_DRIVER_FILES: '/drv/nvidia_icd.json' }))).toBe('the Vulkan ICD file given by VK_DRIVER_FILES/VK_ICD_FILENAMES does not exist (/drv/nvidia_icd.json)');
    expect(vulkanHint(host([LOADER, '/drv/nvidia_icd.json'], { VK_ICD_FILENAMES: '/drv/nvidia_icd.json' }))).toMatch(/offers no GPU Dawn accepts/);
    expect(vulkanHint(host([LOADER, '/usr/share/vulkan/icd.d/nvidia_icd.json']))).toMatch(/^the NVIDIA Vulkan ICD is present but offers no adapter/);
  });
});

describe('describeProviderFailure()', () => {
  it("turns onnxruntime's messages into what is missing", () => {
    expect(describeProviderFailure('webgpu', 'webgpu_context.cc:136 ... Failed to get a WebGPU adapter: No supported adapters', host([]))).toEqual({
      reason: 'no WebGPU adapter: the Vulkan loader libvulkan.so.1 is not installed (Debian/Ubuntu: apt-get install libvulkan1)', systemWide: true,
    });
    expect(describeProviderFailure('cuda', 'OrtSessionOptionsAppendExecutionProvider_Cuda: Failed to load shared library').reason)
      .toBe('provider library missing: this onnxruntime-node has no cuda provider (install a GPU build of onnxruntime-node, with CUDA and cuDNN)');
    expect(describeProviderFailure('webgpu', 'Unsupported op Foo\nstack')).toEqual({ reason: 'session creation failed: Unsupported op Foo', systemWide: false });
  });
});

describe('ProviderProbe (the real providers, on a machine without a GPU)', () => {
  it('webgpu: no adapter; cuda and tensorrt: library missing; each fast, and answered once', async () => {
    const probe = new ProviderProbe();
    const t0 = Date.now();
    const webgpu = await probe.status('webgpu', SIMPLE);
    const cuda = await probe.status('cuda', SIMPLE);
    const trt = await probe.status('tensorrt', SIMPLE);
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(webgpu).toMatchObject({ usable: false, reason: expect.stringMatching(/^no WebGPU adapter: /) });
    expect(cuda).toMatchObject({ usable: false, reason: expect.stringMatching(/^(provider library missing|not in this onnxruntime-node build)/) });
    expect(trt).toMatchObject({ usable: false });
    expect(await probe.status('webgpu', '/nonexistent.onnx')).toBe(webgpu); // cached: system-wide
  });
});

describe('GPU failures at load and run', () => {
  it('out of memory and a lost device are told apart from other errors', () => {
    expect(classifyGpuFailure('CUDA failure 2: out of memory ; GPU=0')).toBe('out-of-memory');
    expect(classifyGpuFailure('BFCArena::AllocateRawInternal Failed to allocate memory ... CUDA_ERROR_OUT_OF_MEMORY')).toBe('out-of-memory');
    expect(classifyGpuFailure('WebGPU device lost (Destroyed)')).toBe('device-lost');
    expect(classifyGpuFailure('CUDA error cudaErrorIllegalAddress:an illegal memory access was encountered')).toBe('device-lost');
    expect(classifyGpuFailure('input shape mismatch')).toBeUndefined();
  });

  it('each answers a clear message naming the GPU', () => {
    expect(gpuFailureMessage('CUDA failure 2: out of memory\nstack', 'GPU 0 (NVIDIA H100)', 'run the model'))
      .toBe('Cannot run the model: out of GPU memory on GPU 0 (NVIDIA H100): CUDA failure 2: out of memory');
    expect(gpuFailureMessage('device lost', 'GPU 1 (NVIDIA H100)', 'run the model'))
      .toBe('Cannot run the model: GPU 1 (NVIDIA H100) was lost (the model is not ready until it is loaded again): device lost');
    expect(gpuFailureMessage('bad input', 'GPU 0', 'run the model')).toBeUndefined();
  });
});
