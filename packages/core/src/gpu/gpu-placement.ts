/**
 * @module Where instances go: `count` instances of a KIND_GPU group on each GPU it lists (all
 * visible GPUs when it lists none), and the GPUs a `triode worker --gpus` list names.
 * Triton: core/src/backend_model_instance.cc (TritonModelInstance::CreateInstances)
 */
import { Errors } from '../errors.js';
import type { ModelInstanceGroup } from '../model-config/model-config.js';
import type { GpuDevice } from './gpu-discovery.js';

/** The group's GPUs (CUDA ids in `group.gpus`; all visible when absent) that are not visible. */
export function missingGpus(group: ModelInstanceGroup, gpus: readonly GpuDevice[]): number[] {
  return (group.gpus ?? []).filter((id) => !gpus.some((g) => g.cudaId === id));
}

/**
 * The GPU of each instance of a KIND_GPU group, in Triton's order: for each of the `count`
 * copies, one instance per listed GPU (`gpus: [0, 1]`, `count: 2` -> GPUs 0, 1, 0, 1).
 * @throws TriodeError INVALID_ARG when the group lists a GPU that is not visible, UNAVAILABLE when none is.
 */
export function instancePlacements(group: ModelInstanceGroup, gpus: readonly GpuDevice[]): GpuDevice[] {
  const missing = missingGpus(group, gpus);
  if (missing.length > 0) {
    throw Errors.invalidArg(`instance group "${group.name ?? ''}" lists GPU ${missing.join(', ')}, but the visible GPUs are ${gpus.length ? gpus.map((g) => g.cudaId).join(', ') : 'none'}`);
  }
  const listed = group.gpus?.length ? group.gpus.map((id) => gpus.find((g) => g.cudaId === id)!) : [...gpus];
  if (listed.length === 0) throw Errors.unavailable(`instance group "${group.name ?? ''}" has kind KIND_GPU but no GPU is visible`);
  const out: GpuDevice[] = [];
  for (let c = 0; c < (group.count ?? 1); c++) out.push(...listed);
  return out;
}

/** The GPU of the `ordinal`-th instance (0-based within its group) of a KIND_GPU group. */
export function placeInstance(group: ModelInstanceGroup, ordinal: number, gpus: readonly GpuDevice[]): GpuDevice {
  const all = instancePlacements(group, gpus);
  return all[ordinal % all.length]!;
}

/**
 * The GPUs a `--gpus` value names: `all`, or `nvidia-smi` indices separated by commas (`0,2`).
 * @throws TriodeError INVALID_ARG naming a bad or unknown index, UNAVAILABLE when there is no GPU.
 */
export function selectGpus(spec: string, gpus: readonly GpuDevice[], reason = 'no GPU found by nvidia-smi'): GpuDevice[] {
  const s = spec.trim().toLowerCase();
  if (gpus.length === 0) throw Errors.unavailable(`Cannot run one worker per GPU (--gpus ${spec}): ${reason}`);
  if (s === 'all') return [...gpus];
  const out: GpuDevice[] = [];
  for (const part of s.split(',')) {
    if (!/^\d+$/.test(part.trim())) throw Errors.invalidArg(`--gpus expects all or GPU indices such as 0,2, got '${spec}'`);
    const gpu = gpus.find((g) => g.index === Number(part));
    if (!gpu) throw Errors.invalidArg(`--gpus ${spec}: there is no GPU ${part.trim()} (nvidia-smi lists ${gpus.map((g) => g.index).join(', ')})`);
    if (!out.includes(gpu)) out.push(gpu);
  }
  return out;
}
