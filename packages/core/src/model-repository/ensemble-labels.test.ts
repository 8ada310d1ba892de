import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';

/** Counts the label files read (each a synchronous read of up to 64 MiB, kept by what reads it). */
const reads = vi.hoisted(() => ({ labels: 0 }));
vi.mock('./repository-fs.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('./repository-fs.js')>();
  return {
    ...real,
    readRepositoryFile: (...args: Parameters<typeof real.readRepositoryFile>) => {
      if (args[1].startsWith('label file')) reads.labels++;
      return real.readRepositoryFile(...args);
    },
  };
});

const { InferenceServer } = await import('../server.js');
const { echoBackend } = await import('../echo-backend.case.js');

describe('ensemble labels', () => {
  it('attack: the versions of an ensemble share its label files, read once (review: each version read and kept its own: 20 versions of a 40 MiB file held 1 GB, and the versions of an ensemble are not bounded by the instance limit)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-ens-labels-'));
    mkdirSync(join(root, 'a', '1'), { recursive: true });
    writeFileSync(join(root, 'a', 'config.pbtxt'), 'backend: "echo"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    for (let v = 1; v <= 6; v++) mkdirSync(join(root, 'ens', String(v)), { recursive: true });
    writeFileSync(join(root, 'ens', 'labels.txt'), 'zero\none\n');
    writeFileSync(join(root, 'ens', 'config.pbtxt'), 'platform: "ensemble"\nmax_batch_size: 4\nversion_policy { all {} }\n'
      + 'input { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] label_filename: "labels.txt" }\n'
      + 'ensemble_scheduling { step [ { model_name: "a" model_version: -1 input_map { key: "IN" value: "X" } output_map { key: "OUT" value: "Y" } } ] }\n');
    reads.labels = 0;
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echoBackend], modelControlMode: 'explicit', startupModels: ['ens'] });
    try {
      expect(s.repositoryIndex().filter((r) => r.name === 'ens').map((r) => r.state)).toEqual(new Array(6).fill('READY'));
      expect(reads.labels).toBe(1);
    } finally {
      await s.stop();
    }
  });
});
