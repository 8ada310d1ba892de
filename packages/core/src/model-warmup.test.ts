import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest } from './backend-api.js';
import { InferenceServer } from './server.js';

/** Records what each execution got; fails on a value of 7 (to test a failing warmup). */
function recorder(seen: number[][], readyAt: boolean[], server: { s?: InferenceServer }): Backend {
  return {
    name: 'rec',
    async modelInitialize() {
      return {
        async instanceInitialize() {
          return {
            async execute(requests: ExecuteRequest[]) {
              readyAt.push(server.s?.modelReady('m') ?? false);
              return {
                responses: requests.map((r) => {
                  const x = Array.from(r.inputs[0]!.data as Int32Array);
                  seen.push(x);
                  if (x.includes(7)) throw new Error('seven');
                  return { outputs: [{ ...r.inputs[0]!, name: 'OUT' }] };
                }),
              };
            },
            async finalize() {},
          };
        },
        async finalize() {},
      };
    },
  };
}

function repo(warmup: string, files: Record<string, Uint8Array> = {}): string {
  const root = mkdtempSync(join(tmpdir(), 'triode-warmup-'));
  mkdirSync(join(root, 'm', '1'), { recursive: true });
  mkdirSync(join(root, 'm', 'warmup'), { recursive: true });
  writeFileSync(join(root, 'm', 'config.pbtxt'), `backend: "rec"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 2 ] }\ninstance_group { count: 1 kind: KIND_CPU }\n${warmup}`);
  for (const [name, data] of Object.entries(files)) writeFileSync(join(root, 'm', 'warmup', name), data);
  return root;
}

describe('model warmup', () => {
  it('runs every sample (zero, random, from a file) count times before the model is READY', async () => {
    const seen: number[][] = [];
    const readyAt: boolean[] = [];
    const holder: { s?: InferenceServer } = {};
    const file = new Uint8Array(Int32Array.of(5, 6, 5, 6).buffer);
    const s = await InferenceServer.create({
      modelRepositories: [repo(`model_warmup [
        { name: "zeros" batch_size: 2 count: 2 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } },
        { name: "file" batch_size: 2 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] input_data_file: "in.bin" } } },
        { name: "random" inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } } }
      ]`, { 'in.bin': file })],
      backends: [recorder(seen, readyAt, holder)],
    });
    holder.s = s;
    try {
      expect(seen.slice(0, 3)).toEqual([[0, 0, 0, 0], [0, 0, 0, 0], [5, 6, 5, 6]]);
      expect(seen[3]).toHaveLength(2);
      expect(readyAt.every((r) => r === false)).toBe(true);
      expect(s.modelReady('m')).toBe(true);
    } finally {
      await s.stop(1000);
    }
  });

  it('a failing warmup sample makes the model UNAVAILABLE with the reason', async () => {
    const file = new Uint8Array(Int32Array.of(7, 7).buffer);
    const s = await InferenceServer.create({
      modelRepositories: [repo('model_warmup { name: "bad" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] input_data_file: "bad.bin" } } }', { 'bad.bin': file })],
      backends: [recorder([], [], {})],
    });
    try {
      const row = s.repositoryIndex()[0]!;
      expect(row.state).toBe('UNAVAILABLE');
      expect(row.reason).toContain('warmup sample failed: seven');
    } finally {
      await s.stop(1000);
    }
  });
});
