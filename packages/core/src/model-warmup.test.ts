import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest } from './backend-api.js';
import { InferenceServer } from './server.js';
import { warmupRequests } from './model-warmup.js';

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
        { name: "random" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } } },
        { name: "skipped, as Triton skips a sample of batch size 0" inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] input_data_file: "seven.bin" } } }
      ]`, { 'in.bin': file, 'seven.bin': new Uint8Array(Int32Array.of(7, 7).buffer) })],
      backends: [recorder(seen, readyAt, holder)],
    });
    holder.s = s;
    try {
      expect(seen.slice(0, 3)).toEqual([[0, 0, 0, 0], [0, 0, 0, 0], [5, 6, 5, 6]]);
      expect(seen[3]).toHaveLength(2);
      expect(seen).toHaveLength(4);
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

  it('runs each sample count times on every instance (count: 3), all before the model is READY', async () => {
    const perInstance = [0, 0, 0];
    const readyAt: boolean[] = [];
    const holder: { s?: InferenceServer } = {};
    const backend: Backend = {
      name: 'rec',
      async modelInitialize() {
        return {
          async instanceInitialize(_group, index) {
            return {
              async execute(requests: ExecuteRequest[]) {
                readyAt.push(holder.s?.modelReady('m') ?? false);
                perInstance[index]! += requests.length;
                return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
              },
              async finalize() {},
            };
          },
          async finalize() {},
        };
      },
    };
    const root = repo('model_warmup [ { name: "a" batch_size: 1 count: 2 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } }, { name: "b" batch_size: 3 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } } } ]');
    writeFileSync(join(root, 'm', 'config.pbtxt'), readFileSync(join(root, 'm', 'config.pbtxt'), 'utf8').replace('instance_group { count: 1 kind: KIND_CPU }', 'instance_group { count: 3 kind: KIND_CPU }'));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [backend] });
    holder.s = s;
    try {
      expect(s.modelReady('m')).toBe(true);
      // 2 + 1 warmup requests on each of the 3 instances.
      expect(perInstance).toEqual([3, 3, 3]);
      expect(readyAt).toHaveLength(9);
      expect(readyAt.every((r) => r === false)).toBe(true);
      // Warmup does not count in the model's statistics.
      expect(s.modelStatistics('m')[0]!.inference_count).toBe(0);
    } finally {
      await s.stop(1000);
    }
  });

  it('a sample that fails on one instance only makes the model UNAVAILABLE', async () => {
    const backend: Backend = {
      name: 'rec',
      async modelInitialize() {
        return {
          async instanceInitialize(_group, index) {
            return {
              async execute(requests: ExecuteRequest[]) {
                if (index === 2) throw new Error(`instance ${index} is broken`);
                return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
              },
              async finalize() {},
            };
          },
          async finalize() {},
        };
      },
    };
    const root = repo('model_warmup { name: "z" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } }');
    writeFileSync(join(root, 'm', 'config.pbtxt'), readFileSync(join(root, 'm', 'config.pbtxt'), 'utf8').replace('count: 1 kind', 'count: 3 kind'));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [backend] });
    try {
      const row = s.repositoryIndex()[0]!;
      expect(row.state).toBe('UNAVAILABLE');
      expect(row.reason).toContain('warmup sample failed: instance 2 is broken');
    } finally {
      await s.stop(1000);
    }
  });

  it('warms a sequence model with one whole sequence (START and END) per instance, and a decoupled model until its final response', async () => {
    const controls: number[][] = [];
    let finals = 0;
    const backend: Backend = {
      name: 'rec',
      async modelInitialize() {
        return {
          async instanceInitialize() {
            return {
              async execute(requests: ExecuteRequest[]) {
                for (const r of requests) {
                  const flags = ['START', 'END'].map((n) => r.inputs.find((t) => t.name === n)).filter((t) => t).map((t) => Number(t!.data[0]));
                  if (flags.length) controls.push(flags);
                  if (r.respond) {
                    // Answers later, as a decoupled model may: warmup waits for the final response.
                    setTimeout(() => { finals++; r.respond!({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] }, true); }, 5);
                  }
                }
                return { responses: requests.map((r) => (r.respond ? { outputs: [] } : { outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
              },
              async finalize() {},
            };
          },
          async finalize() {},
        };
      },
    };
    const sample = 'model_warmup { name: "z" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } }';
    const seq = repo(`${sample}\nsequence_batching { control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }, { name: "END" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] } ] }`);
    writeFileSync(join(seq, 'm', 'config.pbtxt'), readFileSync(join(seq, 'm', 'config.pbtxt'), 'utf8').replace('count: 1 kind', 'count: 2 kind'));
    const dec = repo(`${sample}\nmodel_transaction_policy { decoupled: true }`);
    const a = await InferenceServer.create({ modelRepositories: [seq], backends: [backend] });
    const b = await InferenceServer.create({ modelRepositories: [dec], backends: [backend] });
    try {
      expect(a.modelReady('m')).toBe(true);
      expect(controls).toEqual([[1, 1], [1, 1]]);
      expect(b.modelReady('m')).toBe(true);
      expect(finals).toBe(1);
    } finally {
      await Promise.all([a.stop(1000), b.stop(1000)]);
    }
  });
});

describe('warmupRequests', () => {
  const config = { name: 'm', max_batch_size: 0 };
  const bytesSample = (dims: number[], file?: string) => ({
    name: 's', batch_size: 1, inputs: { IN: { data_type: 'TYPE_STRING', dims, ...(file ? { input_data_file: file } : { zero_data: true }) } },
  });

  it('attack: a BYTES input of 64M elements is refused at once, not built as a JS array of 64M (gigabytes, a stalled event loop)', () => {
    const t0 = performance.now();
    expect(() => [...warmupRequests(bytesSample([67_108_864]), config, '/nonexistent')]).toThrow(/over the limit of 16777216 BYTES elements/);
    expect(() => [...warmupRequests(bytesSample([4096, 4097]), config, '/nonexistent')]).toThrow(/over the limit of 16777216 BYTES elements/);
    // Refused before anything is made (a generous bound: no test may depend on the machine's speed).
    expect(performance.now() - t0).toBeLessThan(5000);
  });

  it('a BYTES input of zero data is empty elements in the serialized form', () => {
    const [empty] = [...warmupRequests(bytesSample([3]), config, '/nonexistent')];
    expect(Array.from(empty!.inputs[0]!.data as Uint8Array)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
  });
});

describe('warmupRequests: a sample read as Triton reads it', () => {
  const config = { name: 'm', max_batch_size: 4, input: [{ name: 'S', data_type: 'TYPE_STRING', dims: [2] }] };
  const serialized = (words: string[]) => {
    const parts = words.map((w) => { const b = Buffer.from(w); const n = Buffer.alloc(4); n.writeUInt32LE(b.length); return Buffer.concat([n, b]); });
    return new Uint8Array(Buffer.concat(parts));
  };

  it('a BYTES input_data_file is the serialized tensor of one batch item, as Triton reads it (before, the whole file became one element, repeated)', () => {
    const root = repo('', { 'words.bin': serialized(['ab', 'cde']) });
    const sample = { name: 'w', batch_size: 2, inputs: { S: { data_type: 'TYPE_STRING', dims: [2], input_data_file: 'words.bin' } } };
    const [req] = [...warmupRequests(sample, config, join(root, 'm'))];
    expect(req!.inputs[0]!.shape).toEqual([2, 2]);
    expect(Buffer.from(req!.inputs[0]!.data as Uint8Array)).toEqual(Buffer.from(serialized(['ab', 'cde', 'ab', 'cde'])));
    const wrong = { ...sample, inputs: { S: { ...sample.inputs.S, dims: [3] } } };
    expect(() => [...warmupRequests(wrong, config, join(root, 'm'))]).toThrow("warmup sample 'w': file 'words.bin' holds 2 BYTES elements, input 'S' of dims [3] needs 3");
  });

  it('attack: a BYTES input from a file counts its file, once per batch item, against the sample limit (review: 8 inputs naming one 1 MiB file, batch 250, made 2 GB)', () => {
    const one = Buffer.alloc(4 + (1 << 20));
    one.writeUInt32LE(1 << 20, 0);
    const root = repo('', { 'big.bin': new Uint8Array(one) });
    // 200 MiB each, under the limit of one input; 600 MiB together, over the sample's.
    const inputs = Object.fromEntries(['S0', 'S1', 'S2'].map((n) => [n, { data_type: 'TYPE_STRING', dims: [1], input_data_file: 'big.bin' }]));
    const sample = { name: 'b', batch_size: 200, inputs };
    expect(() => warmupRequests(sample, { name: 'm', max_batch_size: 256 }, join(root, 'm')).next()).toThrow(expect.objectContaining({
      code: 'INVALID_ARG', message: "warmup sample 'b': its inputs (up to 'S2') are over the limit of 536870912 bytes for one sample",
    }));
  });

  it('zero data for BYTES is empty elements; a sample of batch size 0 (or none given) makes no request', () => {
    const zero = { name: 'z', batch_size: 1, inputs: { S: { data_type: 'TYPE_STRING', dims: [2], zero_data: true } } };
    const [req] = [...warmupRequests(zero, config, '/nonexistent')];
    expect(Array.from(req!.inputs[0]!.data as Uint8Array)).toEqual(new Array(8).fill(0));
    expect([...warmupRequests({ ...zero, batch_size: 0 }, config, '/nonexistent')]).toEqual([]);
    const { batch_size: _none, ...unset } = zero;
    expect([...warmupRequests(unset, config, '/nonexistent')]).toEqual([]);
  });

  it('a variable (negative) dim gets Triton\'s INVALID_ARG, first (review: [-1] was "over the limit", [-1, -1] ran as one element)', () => {
    for (const dims of [[-1], [-1, -1], [2, -2], [-1, 1_000_000_000]]) {
      const sample = { name: 'v', batch_size: 1, inputs: { OK: { data_type: 'TYPE_INT32', dims: [2] }, INPUT0: { data_type: 'TYPE_STRING', dims } } };
      expect(() => [...warmupRequests(sample, config, '/nonexistent')], JSON.stringify(dims)).toThrow(expect.objectContaining({
        code: 'INVALID_ARG', message: "warmup setting expects all variable-size dimensions are specified for input 'INPUT0'",
      }));
    }
  });
});
