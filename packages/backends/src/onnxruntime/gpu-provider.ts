/**
 * @module GPU execution providers of onnxruntime-node: whether each works here (a probe session,
 * with the reason in words when it does not: no WebGPU adapter and which Vulkan piece is missing,
 * provider library missing).
 * Triton: onnxruntime_backend/src/onnxruntime.cc (execution accelerators)
 */
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import * as ort from 'onnxruntime-node';
import type { GpuExecutionProvider, ProviderStatus } from '@triode/core';

/** Where distributions put the Vulkan loader. */
const VULKAN_LOADER_DIRS = ['/usr/lib/x86_64-linux-gnu', '/usr/lib/aarch64-linux-gnu', '/usr/lib64', '/usr/lib', '/lib/x86_64-linux-gnu', '/lib64', '/usr/local/lib'];
/** Where the NVIDIA driver puts its Vulkan ICD manifest. */
const NVIDIA_ICD_FILES = ['/usr/share/vulkan/icd.d/nvidia_icd.json', '/etc/vulkan/icd.d/nvidia_icd.json', '/usr/share/vulkan/icd.d/nvidia_icd.x86_64.json'];

/** What `vulkanHint` looks at (injectable for tests). */
export interface VulkanEnvironment {
  env: Readonly<Record<string, string | undefined>>;
  exists(path: string): boolean;
}

const HOST: VulkanEnvironment = { env: process.env, exists: existsSync };

/**
 * Why Dawn (WebGPU over Vulkan) may have found no adapter: the Vulkan loader `libvulkan.so.1`
 * missing, or no NVIDIA ICD manifest where the loader looks (`VK_DRIVER_FILES` /
 * `VK_ICD_FILENAMES`, else the default places).
 */
export function vulkanHint(host: VulkanEnvironment = HOST): string {
  const dirs = [...(host.env['LD_LIBRARY_PATH'] ?? '').split(delimiter).filter(Boolean), ...VULKAN_LOADER_DIRS];
  if (!dirs.some((d) => host.exists(join(d, 'libvulkan.so.1')))) {
    return 'the Vulkan loader libvulkan.so.1 is not installed (Debian/Ubuntu: apt-get install libvulkan1)';
  }
  const named = (host.env['VK_DRIVER_FILES'] ?? host.env['VK_ICD_FILENAMES'] ?? '').split(delimiter).filter(Boolean);
  if (named.length > 0) {
    const missing = named.filter((f) => !host.exists(f));
    if (missing.length === named.length) return `the Vulkan ICD file given by VK_DRIVER_FILES/VK_ICD_FILENAMES does not exist (${missing.join(', ')})`;
    return 'the Vulkan ICD given by VK_DRIVER_FILES/VK_ICD_FILENAMES offers no GPU Dawn accepts (is the NVIDIA driver loaded? nvidia-smi must work)';
  }
  if (!NVIDIA_ICD_FILES.some((f) => host.exists(f))) {
    return `no NVIDIA Vulkan ICD found (${NVIDIA_ICD_FILES[0]}): set VK_DRIVER_FILES (or VK_ICD_FILENAMES) to the driver's nvidia_icd.json`;
  }
  return 'the NVIDIA Vulkan ICD is present but offers no adapter Dawn accepts (is the NVIDIA driver loaded? nvidia-smi must work)';
}

/** A provider's session-creation failure in words: what is missing, and whether it holds for every model. */
export function describeProviderFailure(provider: GpuExecutionProvider, message: string, host: VulkanEnvironment = HOST): { reason: string; systemWide: boolean } {
  if (/Failed to get a WebGPU adapter/i.test(message)) return { reason: `no WebGPU adapter: ${vulkanHint(host)}`, systemWide: true };
  if (/Failed to load (shared )?library/i.test(message)) {
    return { reason: `provider library missing: this onnxruntime-node has no ${provider} provider (install a GPU build of onnxruntime-node, with CUDA and cuDNN${provider === 'tensorrt' ? ' and TensorRT' : ''})`, systemWide: true };
  }
  return { reason: `session creation failed: ${message.split('\n')[0]!.trim()}`, systemWide: false };
}

/** Whether this onnxruntime-node lists the provider at all (the npm package bundles only webgpu). */
function listed(provider: GpuExecutionProvider): boolean {
  try {
    return ort.listSupportedBackends().some((b) => b.name === provider);
  } catch {
    return true;
  }
}

/**
 * Probes providers with a session of the model itself (released at once). A system-wide answer
 * (it works; no adapter; no library) is kept for every later model; a model-specific failure is not.
 */
export class ProviderProbe {
  readonly #known = new Map<GpuExecutionProvider, ProviderStatus>();

  /** The provider's status for this model file. */
  async status(provider: GpuExecutionProvider, modelFile: string): Promise<ProviderStatus> {
    const known = this.#known.get(provider);
    if (known) return known;
    if (!listed(provider)) {
      const s: ProviderStatus = { usable: false, reason: `not in this onnxruntime-node build (${provider} is not among its backends)` };
      this.#known.set(provider, s);
      return s;
    }
    try {
      const session = await ort.InferenceSession.create(modelFile, { executionProviders: [provider], graphOptimizationLevel: 'disabled' });
      await session.release();
      this.#known.set(provider, { usable: true });
      return { usable: true };
    } catch (err) {
      const { reason, systemWide } = describeProviderFailure(provider, err instanceof Error ? err.message : String(err));
      const s: ProviderStatus = { usable: false, reason };
      if (systemWide) this.#known.set(provider, s);
      return s;
    }
  }
}
