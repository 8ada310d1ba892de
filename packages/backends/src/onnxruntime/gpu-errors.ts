/**
 * @module What a GPU failure at load or run means (out of memory, a lost device) and the clear
 * error a client gets for it. Plain functions: the instance thread uses them on its errors.
 * Triton: onnxruntime_backend/src/onnxruntime.cc (errors from Ort::Run)
 */

/** What a GPU failure message means: out of memory, a lost device, or neither. */
export type GpuFailure = 'out-of-memory' | 'device-lost' | undefined;

const OOM = /out of memory|CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation|OutOfMemory|Failed to allocate (a )?buffer|GPUOutOfMemoryError/i;
const LOST = /device (was |is |has been )?lost|DeviceLost|CUDA_ERROR_ILLEGAL_ADDRESS|cudaErrorIllegalAddress|cudaErrorLaunchFailure|uncorrectable ECC|fallen off the bus|CUDA_ERROR_LAUNCH_FAILED/i;

/** Classifies an onnxruntime error raised on a GPU. */
export function classifyGpuFailure(message: string): GpuFailure {
  if (LOST.test(message)) return 'device-lost';
  if (OOM.test(message)) return 'out-of-memory';
  return undefined;
}

/**
 * The message a client gets for a GPU failure (`where`: e.g. `GPU 0 (NVIDIA H100)`), or
 * undefined when the error is not one.
 */
export function gpuFailureMessage(message: string, where: string, action: string): string | undefined {
  const kind = classifyGpuFailure(message);
  const detail = message.split('\n')[0]!.trim();
  if (kind === 'out-of-memory') return `Cannot ${action}: out of GPU memory on ${where}: ${detail}`;
  if (kind === 'device-lost') return `Cannot ${action}: ${where} was lost (the model is not ready until it is loaded again): ${detail}`;
  return undefined;
}
