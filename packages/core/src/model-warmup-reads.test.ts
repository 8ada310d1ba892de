import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

/** Counts the reads of repository files (each one a synchronous read on the event loop). */
const reads = vi.hoisted(() => ({ n: 0 }));
vi.mock('./model-repository/repository-fs.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('./model-repository/repository-fs.js')>();
  return {
    ...real,
    readRepositoryFile: (...args: Parameters<typeof real.readRepositoryFile>) => {
      reads.n++;
      return real.readRepositoryFile(...args);
    },
  };
});

const { warmupRequests } = await import('./model-warmup.js');

describe('warmupRequests: input_data_file reads', () => {
  it('attack: a file named by many inputs of a sample is read once (review: read again for each, synchronously: 200 inputs naming a 48 MiB file held the event loop 7 s, past any load timeout)', () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-warmup-reads-'));
    mkdirSync(join(root, 'm', 'warmup'), { recursive: true });
    writeFileSync(join(root, 'm', 'warmup', 'one.bin'), Buffer.from([1, 2, 3, 4]));
    const inputs = Object.fromEntries(Array.from({ length: 1000 }, (_, i) => [`I${i}`, { data_type: 'TYPE_INT8', dims: [1], input_data_file: 'one.bin' }]));
    reads.n = 0;
    const [req] = [...warmupRequests({ name: 's', batch_size: 1, inputs }, { name: 'm', max_batch_size: 0 }, join(root, 'm'))];
    expect(req!.inputs).toHaveLength(1000);
    expect(Array.from(req!.inputs[999]!.data as Int8Array)).toEqual([1]);
    expect(reads.n).toBe(1);
  });
});
