import { describe, expect, it } from 'vitest';
import type { GpuDevice } from './gpu-discovery.js';
import { instancePlacements, placeInstance, selectGpus } from './gpu-placement.js';

const gpu = (i: number, cudaId = i): GpuDevice => ({ index: i, cudaId, uuid: `GPU-${i}`, name: 'H100', memoryTotalBytes: 1, memoryUsedBytes: 0 });
const THREE = [gpu(0), gpu(1), gpu(2)];

describe('instancePlacements()', () => {
  it('puts count instances on each listed GPU, in Triton order; all GPUs when gpus is absent', () => {
    expect(instancePlacements({ kind: 'KIND_GPU', count: 2, gpus: [0, 2] }, THREE).map((g) => g.cudaId)).toEqual([0, 2, 0, 2]);
    expect(instancePlacements({ kind: 'KIND_GPU', count: 1 }, THREE).map((g) => g.cudaId)).toEqual([0, 1, 2]);
    expect(placeInstance({ kind: 'KIND_GPU', count: 2, gpus: [1, 2] }, 3, THREE).cudaId).toBe(2);
    expect(placeInstance({ kind: 'KIND_GPU', count: 2, gpus: [1, 2] }, 4, THREE).cudaId).toBe(1);
  });

  it('gpus are CUDA ids: with CUDA_VISIBLE_DEVICES=2, GPU 0 is nvidia-smi index 2', () => {
    expect(instancePlacements({ kind: 'KIND_GPU', gpus: [0] }, [gpu(2, 0)]).map((g) => g.index)).toEqual([2]);
  });

  it('refuses a GPU that is not visible, and no GPU at all', () => {
    expect(() => instancePlacements({ name: 'g', kind: 'KIND_GPU', gpus: [0, 4] }, THREE)).toThrow('instance group "g" lists GPU 4, but the visible GPUs are 0, 1, 2');
    expect(() => instancePlacements({ name: 'g', kind: 'KIND_GPU' }, [])).toThrow('instance group "g" has kind KIND_GPU but no GPU is visible');
  });
});

describe('selectGpus()', () => {
  it('all, or nvidia-smi indices', () => {
    expect(selectGpus('all', THREE).map((g) => g.index)).toEqual([0, 1, 2]);
    expect(selectGpus('0,2', THREE).map((g) => g.index)).toEqual([0, 2]);
    expect(selectGpus(' 2 , 2', THREE).map((g) => g.index)).toEqual([2]);
  });
  it('names what is wrong', () => {
    expect(() => selectGpus('0,7', THREE)).toThrow('--gpus 0,7: there is no GPU 7 (nvidia-smi lists 0, 1, 2)');
    expect(() => selectGpus('first', THREE)).toThrow("--gpus expects all or GPU indices such as 0,2, got 'first'");
    expect(() => selectGpus('all', [], "no GPU found by nvidia-smi: 'nvidia-smi' was not found")).toThrow("Cannot run one worker per GPU (--gpus all): no GPU found by nvidia-smi: 'nvidia-smi' was not found");
  });
});
