import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../../../test/helpers/repository.js';
import { applyCudaVisibleDevices, parseNvidiaSmiCsv, queryGpus } from './gpu-discovery.js';

const STAND_IN = join(ROOT, 'test', 'fixtures', 'gpu', 'nvidia-smi');
const MIB = 1024 * 1024;
const CSV = [
  '0, GPU-aaaa-0, NVIDIA H100 80GB HBM3, 81559, 1024, 37, 120.50, 700.00',
  '1, GPU-bbbb-1, NVIDIA H100 80GB HBM3, 81559, 0, [N/A], [N/A], [Not Supported]',
  '2, GPU-cccc-2, NVIDIA A10, 23028, 10, 5, 30, 150',
  'garbage line',
].join('\n');

describe('parseNvidiaSmiCsv()', () => {
  it('reads MiB as bytes, % as a 0-1 ratio, W as W; [N/A] readings are left out', () => {
    const gpus = parseNvidiaSmiCsv(CSV);
    expect(gpus).toHaveLength(3);
    expect(gpus[0]).toEqual({ index: 0, cudaId: 0, uuid: 'GPU-aaaa-0', name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: 81559 * MIB, memoryUsedBytes: 1024 * MIB, utilization: 0.37, powerDrawW: 120.5, powerLimitW: 700 });
    expect(gpus[1]).toEqual({ index: 1, cudaId: 1, uuid: 'GPU-bbbb-1', name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: 81559 * MIB, memoryUsedBytes: 0 });
  });
});

describe('applyCudaVisibleDevices()', () => {
  const all = parseNvidiaSmiCsv(CSV);
  const seen = (v: string | undefined) => applyCudaVisibleDevices(all, v).map((g) => [g.index, g.cudaId]);
  it('unset: every GPU; set: the listed ones in its order, renumbered as CUDA numbers them', () => {
    expect(seen(undefined)).toEqual([[0, 0], [1, 1], [2, 2]]);
    expect(seen('2,0')).toEqual([[2, 0], [0, 1]]);
    expect(seen('GPU-bbbb')).toEqual([[1, 0]]);
  });
  it('as in CUDA, the list ends at the first entry that names no GPU: "" and -1 hide all', () => {
    expect(seen('')).toEqual([]);
    expect(seen('-1')).toEqual([]);
    expect(seen('1,7,0')).toEqual([[1, 0]]);
    expect(seen('GPU-')).toEqual([]); // ambiguous prefix
  });
});

describe('queryGpus()', () => {
  it('runs the stand-in nvidia-smi and honours CUDA_VISIBLE_DEVICES', async () => {
    const { gpus, reason } = await queryGpus({ nvidiaSmi: STAND_IN });
    expect(reason).toBeUndefined();
    expect(gpus.map((g) => [g.index, g.name])).toEqual([[0, 'NVIDIA H100 80GB HBM3'], [1, 'NVIDIA H100 80GB HBM3']]);
    const one = await queryGpus({ nvidiaSmi: STAND_IN, cudaVisibleDevices: '1' });
    expect(one.gpus.map((g) => [g.index, g.cudaId])).toEqual([[1, 0]]);
    expect((await queryGpus({ nvidiaSmi: STAND_IN, cudaVisibleDevices: '' })).reason).toBe("no GPU found by nvidia-smi: CUDA_VISIBLE_DEVICES='' hides all 2");
  });
  it('a missing or failing nvidia-smi is no GPU, with the reason, never a throw', async () => {
    expect(await queryGpus({ nvidiaSmi: '/nonexistent/nvidia-smi' })).toEqual({ gpus: [], reason: "no GPU found by nvidia-smi: '/nonexistent/nvidia-smi' was not found (is the NVIDIA driver installed?)" });
    const failing = await queryGpus({ nvidiaSmi: 'false' });
    expect(failing.gpus).toEqual([]);
    expect(failing.reason).toMatch(/^no GPU found by nvidia-smi: 'false' failed/);
  });
});
