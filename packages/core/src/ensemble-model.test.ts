import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest } from './backend-api.js';
import { Errors } from './errors.js';
import { InferenceServer } from './server.js';
import { validateEnsemble, type ComposingModel } from './ensemble-model.js';
import type { ModelConfig } from './model-config/model-config.js';
import { isOwned, markTransferable } from './tensor/transferable.js';
import type { Tensor } from './tensor/tensor.js';

/**
 * Test-only backend "ops": `add1` adds 1, `double` doubles, `fail` fails on 13; each execution
 * waits 30 ms and records when it ran, so parallel branches can be seen overlapping.
 */
const spans: { model: string; start: number; end: number }[] = [];
/** What each step's model got: its inputs, and whether it owned each (could move it). */
const received: { model: string; input: string; owned: boolean }[] = [];
const ops: Backend = {
  name: 'ops',
  async modelInitialize(ctx) {
    return {
      async instanceInitialize() {
        return {
          async execute(requests: ExecuteRequest[]) {
            const start = performance.now();
            await new Promise((r) => setTimeout(r, 30));
            spans.push({ model: ctx.name, start, end: performance.now() });
            return {
              responses: requests.map((r) => {
                for (const t of r.inputs) received.push({ model: ctx.name, input: t.name, owned: isOwned(t) });
                const x = r.inputs.find((t) => t.name === 'X')!.data as Int32Array;
                const z = r.inputs.find((t) => t.name === 'Z')?.data as Int32Array | undefined;
                if (ctx.name === 'fail' && x[0] === 13) return { error: Errors.invalidArg('thirteen is unlucky') };
                const y = Int32Array.from(x, (v, i) => (ctx.name === 'double' ? v * 2 : ctx.name === 'add' ? v + z![i]! : v + 1));
                // A new array for this response alone: the backend gives it away.
                return { outputs: [{ name: 'Y', datatype: 'INT32' as const, shape: r.inputs[0]!.shape, data: y, owned: true }] };
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

const io = 'input { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n';
const step = (model: string, input: string, output: string) => `step { model_name: "${model}" model_version: -1 input_map { key: "X" value: "${input}" } output_map { key: "Y" value: "${output}" } }`;
const ensemble = (inputs: string, outputs: string, steps: string[]) =>
  `platform: "ensemble"\nmax_batch_size: 0\n${inputs}\n${outputs}\nensemble_scheduling {\n${steps.join('\n')}\n}\n`;

const files: Record<string, string> = {
  'add1/config.pbtxt': `backend: "ops"\n${io}`,
  'double/config.pbtxt': `backend: "ops"\n${io}`,
  'fail/config.pbtxt': `backend: "ops"\n${io}`,
  'floaty/config.pbtxt': 'backend: "ops"\ninput { name: "X" data_type: TYPE_FP32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }\n',
  // IN -> add1 -> double -> OUT
  'chain/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1', 'IN', 't1'), step('double', 't1', 'OUT')]),
  // IN -> add1 -> A and IN -> double -> B, in parallel
  'fork/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output [ { name: "A" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 1 ] } ]', [step('add1', 'IN', 'A'), step('double', 'IN', 'B')]),
  'failing/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1', 'IN', 't1'), step('fail', 't1', 'OUT')]),
  // An ensemble using an ensemble.
  'nested/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', ['step { model_name: "chain" model_version: -1 input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "t" } }', step('add1', 't', 'OUT')]),
  'add/config.pbtxt': 'backend: "ops"\ninput [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "Z" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n',
  // IN -> fail -> t -> add1 -> OUT: a failure with a step still waiting behind it.
  'failing_mid/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('fail', 'IN', 't'), step('add1', 't', 'OUT')]),
  // IN -> add1 -> T (returned, a tap) -> double -> OUT
  'tapped/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output [ { name: "T" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]', [step('add1', 'IN', 'T'), step('double', 'T', 'OUT')]),
  // IN -> add1 -> a; then add(a, IN) -> OUT: IN's second reader starts after its first is done.
  'late/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [
    step('add1', 'IN', 'a'),
    'step { model_name: "add" model_version: -1 input_map { key: "X" value: "a" } input_map { key: "Z" value: "IN" } output_map { key: "Y" value: "OUT" } }',
  ]),
  // P -> add1 -> A and Q -> double -> B: one reader per tensor, but P and Q share a buffer.
  'pair/config.pbtxt': ensemble('input [ { name: "P" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "Q" data_type: TYPE_INT32 dims: [ 1 ] } ]', 'output [ { name: "A" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 1 ] } ]', [step('add1', 'P', 'A'), step('double', 'Q', 'B')]),
  // X (required) and an optional Z the model does not use: OUT = IN + 1, with or without OPT.
  'addopt/config.pbtxt': 'backend: "ops"\ninput [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "Z" data_type: TYPE_INT32 dims: [ 1 ] optional: true } ]\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n',
  'optional_in/config.pbtxt': ensemble('input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "OPT" data_type: TYPE_INT32 dims: [ 1 ] optional: true } ]', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [
    'step { model_name: "addopt" model_version: -1 input_map { key: "X" value: "IN" } input_map { key: "Z" value: "OPT" } output_map { key: "Y" value: "OUT" } }',
  ]),
  // IN -> add1 -> A and IN -> fail -> B: asked for A alone, the failing branch does not run.
  'prune/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output [ { name: "A" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "B" data_type: TYPE_INT32 dims: [ 1 ] } ]', [step('add1', 'IN', 'A'), step('fail', 'IN', 'B')]),
  'dec/config.pbtxt': `backend: "ops"\nmodel_transaction_policy { decoupled: true }\n${io}`,
  'bad_decoupled/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1', 'IN', 't'), step('dec', 't', 'OUT')]),
  // A batching ensemble over a step that does not batch, and the other way round (Triton reshapes between them).
  'mixed_b/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1', 'IN', 'OUT')]).replace('max_batch_size: 0', 'max_batch_size: 4'),
  'mixed_n/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1_b8', 'IN', 'OUT')]),
  'bad_unknown/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('nope', 'IN', 'OUT')]),
  'bad_type/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }', [step('floaty', 'IN', 'OUT')]),
  'bad_cycle/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1', 'b', 'a'), step('double', 'a', 'b'), step('add1', 'IN', 'OUT')]),
  'bad_output/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1', 'IN', 'other')]),
  'add1_b8/config.pbtxt': `backend: "ops"\nmax_batch_size: 8\n${io}`,
  'bad_batch/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1_b8', 'IN', 'OUT')]).replace('max_batch_size: 0', 'max_batch_size: 16'),
  'bad_twice/config.pbtxt': ensemble('input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }', [step('add1', 'IN', 'OUT'), step('double', 'IN', 'OUT')]),
};
const repo = mkdtempSync(join(tmpdir(), 'triode-ensemble-'));
for (const [p, text] of Object.entries(files)) {
  const dir = join(repo, p.split('/')[0]!);
  mkdirSync(join(dir, '1'), { recursive: true });
  writeFileSync(join(repo, p), text);
}
const server = InferenceServer.create({ modelRepositories: [repo], backends: [ops], strictReadiness: false });
afterAll(async () => { await (await server).stop(1000); });

const run = async (model: string, v: number) => {
  const r = await (await server).infer({ modelName: model, id: 'r1', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(v) }] });
  return Object.fromEntries(r.outputs.map((o) => [o.name, (o.data as Int32Array)[0]]));
};

describe('ensembles', () => {
  it('runs a chain of steps', async () => {
    expect(await run('chain', 4)).toEqual({ OUT: 10 });
  });

  it('attack: an optional ensemble input the request leaves out is left out of its step; the request does not wait for ever', async () => {
    const s = await server;
    expect(s.modelReady('optional_in')).toBe(true);
    expect(await run('optional_in', 4)).toEqual({ OUT: 5 });
    const both = await s.infer({ modelName: 'optional_in', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }, { name: 'OPT', datatype: 'INT32', shape: [1], data: Int32Array.of(9) }] });
    expect((both.outputs[0]!.data as Int32Array)[0]).toBe(2);
    expect(received.some((r) => r.model === 'addopt' && r.input === 'Z')).toBe(true);
  });

  it('runs independent branches in parallel', async () => {
    spans.length = 0;
    expect(await run('fork', 4)).toEqual({ A: 5, B: 8 });
    const [a, b] = spans;
    expect(a!.start < b!.end && b!.start < a!.end).toBe(true);
  });

  it('uses ensembles as steps of ensembles', async () => {
    expect(await run('nested', 1)).toEqual({ OUT: 5 });
  });

  it('names the failed step in the error', async () => {
    await expect(run('failing', 12)).rejects.toThrow("in ensemble 'failing', step 1 (model 'fail') failed: thirteen is unlucky");
    expect(await run('failing', 1)).toEqual({ OUT: 3 });
  });

  it('fails at once when a step fails with other steps still waiting for its output', async () => {
    await expect(run('failing_mid', 13)).rejects.toThrow("in ensemble 'failing_mid', step 0 (model 'fail') failed: thirteen is unlucky");
    expect(await run('failing_mid', 1)).toEqual({ OUT: 3 });
  }, 3000);

  it('runs only the steps the requested outputs need (Triton prunes the others): a failing branch not asked for neither runs nor fails the request', async () => {
    const s = await server;
    spans.length = 0;
    const r = await s.infer({ modelName: 'prune', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(13) }], outputs: [{ name: 'A' }] });
    expect(r.outputs.map((o) => [o.name, (o.data as Int32Array)[0]])).toEqual([['A', 14]]);
    expect(spans.map((x) => x.model)).toEqual(['add1']);
    // Both asked for (or none named): both run, and the failure fails the request.
    await expect(run('prune', 13)).rejects.toThrow("in ensemble 'prune', step 1 (model 'fail') failed: thirteen is unlucky");
  });

  it('passes tensors between a batching ensemble and a step that does not batch, and the other way round, as Triton reshapes them (every request failed)', async () => {
    const s = await server;
    const b = await s.infer({ modelName: 'mixed_b', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(4) }] });
    expect([b.outputs[0]!.shape, Array.from(b.outputs[0]!.data as Int32Array)]).toEqual([[1, 1], [5]]);
    const n = await s.infer({ modelName: 'mixed_n', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(4) }] });
    expect([n.outputs[0]!.shape, Array.from(n.outputs[0]!.data as Int32Array)]).toEqual([[1], [5]]);
    // Only a batch of 1 passes to a model that does not batch.
    await expect(s.infer({ modelName: 'mixed_b', inputs: [{ name: 'IN', datatype: 'INT32', shape: [2, 1], data: Int32Array.of(4, 5) }] }))
      .rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining("step 0 (model 'add1') takes a tensor of shape [2,1], but only a batch of 1 passes") });
  });

  it('attack: a cancelled request starts no further step and fails CANCELLED (before, every step ran to the end)', async () => {
    const s = await server;
    spans.length = 0;
    const abort = new AbortController();
    const done = s.infer({ modelName: 'chain', signal: abort.signal, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }] });
    setTimeout(() => abort.abort(), 10);
    await expect(done).rejects.toMatchObject({ code: 'CANCELLED' });
    await new Promise((r) => setTimeout(r, 100));
    expect(spans.map((x) => x.model)).not.toContain('double');
  });

  describe('lends each tensor until its last use', () => {
    const owned = async (model: string, input: Partial<Tensor>) => {
      received.length = 0;
      const r = await (await server).infer({ modelName: model, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(4), ...input }] });
      return { steps: received.map((x) => `${x.model}.${x.input}:${x.owned}`).sort(), outputs: Object.fromEntries(r.outputs.map((o) => [o.name, [(o.data as Int32Array)[0], o.owned]])) };
    };

    it('a chain: each tensor has one reader, which is given it; the caller owns the result', async () => {
      expect(await owned('chain', { owned: true })).toEqual({ steps: ['add1.X:true', 'double.X:true'], outputs: { OUT: [10, true] } });
      // An input the caller only lent is lent on; what the steps made is still the ensemble's to give.
      expect(await owned('chain', {})).toEqual({ steps: ['add1.X:false', 'double.X:true'], outputs: { OUT: [10, true] } });
    });

    it('fan-out: two steps read IN at once, so both borrow it', async () => {
      expect(await owned('fork', { owned: true })).toEqual({ steps: ['add1.X:false', 'double.X:false'], outputs: { A: [5, true], B: [8, true] } });
    });

    it('a tap: the next step borrows T, the caller gets it once every step is done', async () => {
      expect(await owned('tapped', { owned: true })).toEqual({ steps: ['add1.X:true', 'double.X:false'], outputs: { T: [5, true], OUT: [10, true] } });
    });

    it('the last reader of IN is given it once the first one is done with it', async () => {
      expect(await owned('late', { owned: true })).toEqual({ steps: ['add.X:true', 'add.Z:true', 'add1.X:false'], outputs: { OUT: [9, true] } });
    });

    it('two inputs on one request buffer count as one buffer: read by two steps at once, it is lent to both', async () => {
      const body = Int32Array.of(4, 6);
      markTransferable(body.buffer);
      received.length = 0;
      const r = await (await server).infer({ modelName: 'pair', inputs: [
        { name: 'P', datatype: 'INT32', shape: [1], data: body.subarray(0, 1) }, { name: 'Q', datatype: 'INT32', shape: [1], data: body.subarray(1) },
      ] });
      expect(received.map((x) => `${x.model}.${x.input}:${x.owned}`).sort()).toEqual(['add1.X:false', 'double.X:false']);
      expect(r.outputs.map((o) => (o.data as Int32Array)[0])).toEqual([5, 12]);
      expect(Array.from(body)).toEqual([4, 6]);
    });
  });

  it("reports the ensemble's metadata, config and statistics", async () => {
    const s = await server;
    expect(s.modelMetadata('chain')).toMatchObject({ name: 'chain', platform: 'ensemble', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }] });
    expect(s.modelConfig('chain')).toMatchObject({ platform: 'ensemble', ensemble_scheduling: { step: [expect.objectContaining({ model_name: 'add1' }), expect.objectContaining({ model_name: 'double' })] } });
    expect(s.modelConfig('chain')).not.toHaveProperty('instance_group.0');
    expect(s.modelStatistics('chain')[0]!.inference_stats.success.count).toBeGreaterThan(0);
  });

  it.each([
    ['bad_unknown', "ensemble bad_unknown contains model 'nope' (step 0) which is not loaded or not ready"],
    ['bad_type', 'in ensemble bad_type, ensemble tensor IN has data type TYPE_INT32 but input X of model floaty expects TYPE_FP32'],
    ['bad_cycle', 'ensemble bad_cycle contains a cycle'],
    ['bad_output', 'ensemble output OUT of ensemble bad_output is not produced by any step'],
    ['bad_twice', 'ensemble tensor OUT can appear in an output map only once for ensemble bad_twice step 1'],
    // Triton's check (ensemble_utils.cc); before, the load went through and batches of 9..16 failed at run time.
    ['bad_batch', 'ensemble bad_batch allows maximum batch size 16, but it contains model add1_b8 which only allows maximum batch size to be 8'],
    // Before, it loaded READY and every request failed ("use a streaming endpoint"), streamed ones too.
    ['bad_decoupled', "ensemble bad_decoupled contains decoupled model 'dec' (step 1), which Triode does not support in an ensemble"],
  ])('refuses to load %s', async (name, message) => {
    const row = (await server).repositoryIndex().find((r) => r.name === name)!;
    expect(row.state).toBe('UNAVAILABLE');
    expect(row.reason).toContain(message);
  });
});

describe('ensembles that lead back to themselves', () => {
  it('attack: a reload whose step names the ensemble itself, or an ensemble that uses it, is refused (it recursed without end)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-ensemble-cycle-'));
    const put = (p: string, text: string) => {
      mkdirSync(join(root, p.split('/')[0]!, '1'), { recursive: true });
      writeFileSync(join(root, p), text);
    };
    put('add1/config.pbtxt', `backend: "ops"\n${io}`);
    const one = (stepModel: string) => ensemble('input { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }', [step(stepModel, 'X', 'Y')]);
    put('ens/config.pbtxt', one('add1'));
    put('outer/config.pbtxt', one('ens'));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [ops], modelControlMode: 'explicit', startupModels: ['add1', 'ens', 'outer'] });
    try {
      const x = (v: number) => ({ modelName: 'outer', inputs: [{ name: 'X', datatype: 'INT32' as const, shape: [1], data: Int32Array.of(v) }] });
      expect(((await s.infer(x(1))).outputs[0]!.data as Int32Array)[0]).toBe(2);
      const config = (m: string) => s.modelConfig(m) as never as Record<string, unknown>;
      const withStep = (m: string, stepModel: string) => ({ ...config(m), ensemble_scheduling: { step: [{ model_name: stepModel, model_version: -1, input_map: { X: 'X' }, output_map: { Y: 'Y' } }] } });
      await expect(s.loadModel('ens', { config: withStep('ens', 'ens') as never })).rejects.toThrow('circular dependency between ensembles: ens -> ens (step 0)');
      await expect(s.loadModel('ens', { config: withStep('ens', 'outer') as never })).rejects.toThrow('circular dependency between ensembles: ens -> outer -> ens');
      // Still served as before.
      expect(((await s.infer(x(5))).outputs[0]!.data as Int32Array)[0]).toBe(6);
    } finally {
      await s.stop(1000);
    }
  });

  it('attack: a request whose call chain already holds the model is refused, not left waiting on itself', async () => {
    const s = await server;
    await expect(s.infer({ modelName: 'chain', blsChain: ['add1'], blsDepth: 1, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }] }))
      .rejects.toThrow(/step 0 \(model 'add1'\) failed: request to model 'add1' refused: it is already in the call chain \(add1 -> chain -> add1\)/);
  });
});

describe('validateEnsemble', () => {
  it('attack: a step input named like an Object.prototype member (toString) that the step does not map is refused at load (it passed, and every request failed)', () => {
    const step = { config: { name: 'm', max_batch_size: 0, input: [{ name: 'toString', data_type: 'TYPE_INT32', dims: [1] }], output: [{ name: 'Y', data_type: 'TYPE_INT32', dims: [1] }] } };
    const ensemble = {
      name: 'e', platform: 'ensemble', max_batch_size: 0,
      input: [{ name: 'IN', data_type: 'TYPE_INT32', dims: [1] }], output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [1] }],
      ensemble_scheduling: { step: [{ model_name: 'm', model_version: -1, input_map: {}, output_map: { Y: 'OUT' } }] },
    };
    expect(() => validateEnsemble(ensemble as never, () => step as never)).toThrow('in ensemble e, input toString of model m (step 0) is not mapped');
  });
});

describe('validateEnsemble() cycle check', () => {
  const identity: ComposingModel = { config: { max_batch_size: 0, input: [{ name: 'X', data_type: 'TYPE_INT32', dims: [-1] }], output: [{ name: 'Y', data_type: 'TYPE_INT32', dims: [-1] }] } };
  const lookup = () => identity;
  const graph = (steps: [string, string, string][]): ModelConfig => ({
    name: 'e', platform: 'ensemble', max_batch_size: 0,
    input: [{ name: 'IN', data_type: 'TYPE_INT32', dims: [-1] }], output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [-1] }],
    ensemble_scheduling: { step: steps.map(([model_name, x, y]) => ({ model_name, model_version: -1, input_map: { X: x }, output_map: { Y: y } })) },
  });

  it('walks a valid 10,000-step chain (review: it recursed once a step and ran out of call stack)', () => {
    const n = 10_000;
    // Step k reads what step k + 1 writes: the walk from step 0 goes n deep.
    const steps = Array.from({ length: n }, (_, k): [string, string, string] => [`m${k}`, k === n - 1 ? 'IN' : `t${k + 1}`, k === 0 ? 'OUT' : `t${k}`]);
    expect(validateEnsemble(graph(steps), lookup)).toHaveLength(n);
  });

  it('names the path that leads back, from the first step walked, as before', () => {
    expect(() => validateEnsemble(graph([['a', 'b', 'a'], ['d', 'a', 'b'], ['a', 'IN', 'OUT']]), lookup)).toThrow(expect.objectContaining({
      code: 'INVALID_ARG', message: 'ensemble e contains a cycle: a -> d -> a',
    }));
    expect(() => validateEnsemble(graph([['x', 'IN', 'OUT'], ['p', 't3', 't1'], ['q', 't1', 't2'], ['r', 't2', 't3']]), lookup)).toThrow('ensemble e contains a cycle: p -> r -> q -> p');
  });
});
