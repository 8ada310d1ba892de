import { execFileSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { InferenceServer, markTransferable, serializeBytesTensor, type ExecuteRequest, type ModelConfig } from '@triode/core';
import * as ort from 'onnxruntime-node';
import { EXAMPLES, makeRepository } from '../../../../test/helpers/repository.js';
import { T, model, node, valueInfo } from '../../../../scripts/onnx-writer.mjs';
import { autoCompleteOnnxConfig, defaultMaxBatchSize } from './autocomplete-config.js';
import { OnnxRuntimeBackend, transferList } from './onnxruntime-backend.js';
import { sessionSettings } from './onnxruntime-utils.js';
import { OnnxSession } from './onnxruntime-session.js';

const servers: InferenceServer[] = [];
afterAll(async () => { await Promise.all(servers.map((s) => s.stop(1000))); });

async function serve(repo: string, opts: Partial<Parameters<typeof InferenceServer.create>[0]> = {}): Promise<InferenceServer> {
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()], ...opts });
  servers.push(s);
  return s;
}

describe('ONNX auto-complete', () => {
  it('fills inputs, outputs, max_batch_size 4 and dynamic_batching from a batchable model', async () => {
    const c: ModelConfig = { name: 'simple' };
    await autoCompleteOnnxConfig(c, join(EXAMPLES, 'simple/1/model.onnx'), {});
    expect(c.max_batch_size).toBe(4);
    expect(c.dynamic_batching).toEqual({});
    expect(c.input).toEqual([{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] }]);
    expect(c.output).toEqual([{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] }]);
  });

  it('reads the model in a thread of its own, never on the main thread (a 1 GB model stalled health for 2.2 s)', async () => {
    const create = vi.spyOn(ort.InferenceSession, 'create');
    try {
      const c: ModelConfig = { name: 'simple' };
      await autoCompleteOnnxConfig(c, join(EXAMPLES, 'simple/1/model.onnx'), {});
      expect(c.input).toHaveLength(2);
      expect(create).not.toHaveBeenCalled();
    } finally {
      create.mockRestore();
    }
  });

  it('stops when the load is given up, and reports a model onnxruntime cannot read', async () => {
    const ac = new AbortController();
    const reading = autoCompleteOnnxConfig({ name: 'simple' }, join(EXAMPLES, 'simple/1/model.onnx'), {}, ac.signal);
    ac.abort(new Error('load timed out'));
    await expect(reading).rejects.toThrow('load timed out');
    const bad = join(mkdtempSync(join(tmpdir(), 'triode-ac-bad-')), 'model.onnx');
    writeFileSync(bad, 'not a model');
    await expect(autoCompleteOnnxConfig({ name: 'bad' }, bad, {})).rejects.toThrow(/./);
  });

  it('takes default-max-batch-size from --backend-config and keeps what the config gives', async () => {
    const c: ModelConfig = { name: 'cls', input: [{ name: 'x', data_type: 'TYPE_FP32', dims: [3, 48, 192] }] };
    await autoCompleteOnnxConfig(c, join(EXAMPLES, 'ppocr_cls/1/model.onnx'), { 'default-max-batch-size': '8' });
    expect(c.max_batch_size).toBe(8);
    expect(c.input).toEqual([{ name: 'x', data_type: 'TYPE_FP32', dims: [3, 48, 192] }]);
    expect(c.output).toEqual([{ name: 'softmax_0.tmp_0', data_type: 'TYPE_FP32', dims: [2] }]);
  });

  it('serves a model that has no config.pbtxt at all', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-ac-'));
    cpSync(join(EXAMPLES, 'simple/1'), join(repo, 'bare/1'), { recursive: true });
    const s = await serve(repo);
    expect(s.repositoryIndex()).toEqual([{ name: 'bare', version: '1', state: 'READY', reason: '' }]);
    expect(s.modelConfig('bare')).toMatchObject({ name: 'bare', backend: 'onnxruntime', platform: 'onnxruntime_onnx', max_batch_size: 4, dynamic_batching: { preferred_batch_size: [4] } });
    const r = await s.infer({ modelName: 'bare', inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(3) },
    ] });
    expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual(new Array(16).fill(5));
  });

  /** Y = Identity(X), FP32, of the given dims (a string dim is symbolic: -1). */
  const identity = (dims: (number | string)[]): Uint8Array => model('id', [node('Identity', ['X'], ['Y'], 'n')], [valueInfo(11, 'X', T.FLOAT, dims)], [valueInfo(12, 'Y', T.FLOAT, dims)]);
  const repoOf = (models: Record<string, { onnx: Uint8Array; config?: string }>): string => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-ac-'));
    for (const [name, m] of Object.entries(models)) {
      mkdirSync(join(repo, name, '1'), { recursive: true });
      writeFileSync(join(repo, name, '1', 'model.onnx'), m.onnx);
      if (m.config !== undefined) writeFileSync(join(repo, name, 'config.pbtxt'), m.config);
    }
    return repo;
  };

  it("completes as Triton's AutoCompleteConfig: inputs and outputs given skip it, max_batch_size 0 is filled, dynamic_batching comes with any max_batch_size > 1, a scalar without batching has no reshape", async () => {
    const io = 'input [ { name: "X" data_type: TYPE_FP32 dims: [ -1, 4 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1, 4 ] } ]';
    const s = await serve(repoOf({
      // Before: auto-complete ran, gave max_batch_size 4 and the load failed on the dims.
      full: { onnx: identity(['N', 4]), config: io },
      // Before: UNAVAILABLE, "cannot have empty reshape for non-batching model".
      scalar: { onnx: identity([]) },
      // Before: no dynamic_batching.
      eight: { onnx: identity(['N', 4]), config: 'max_batch_size: 8' },
      // Before: max_batch_size stayed 0 and the dims kept the batch dim.
      zero: { onnx: identity(['N', 4]), config: 'max_batch_size: 0' },
      one: { onnx: identity(['N']), config: 'max_batch_size: 1' },
    }));
    expect(s.repositoryIndex().map((r) => [r.name, r.state, r.reason])).toEqual(
      ['eight', 'full', 'one', 'scalar', 'zero'].map((n) => [n, 'READY', '']));
    expect(s.modelConfig('full')).toMatchObject({ max_batch_size: 0, input: [{ dims: [-1, 4] }], output: [{ dims: [-1, 4] }] });
    expect(s.modelConfig('full').dynamic_batching).toBeUndefined();
    const scalar = s.modelConfig('scalar') as ModelConfig;
    expect(scalar).toMatchObject({ max_batch_size: 0, input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [1] }], output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [1] }] });
    expect(scalar.input![0]!.reshape).toBeUndefined();
    expect(scalar.output![0]!.reshape).toBeUndefined();
    expect(s.modelConfig('eight')).toMatchObject({ max_batch_size: 8, dynamic_batching: { preferred_batch_size: [8] }, input: [{ dims: [4] }] });
    expect(s.modelConfig('zero')).toMatchObject({ max_batch_size: 4, dynamic_batching: { preferred_batch_size: [4] }, input: [{ dims: [4] }], output: [{ dims: [4] }] });
    const one = s.modelConfig('one') as ModelConfig;
    expect(one).toMatchObject({ max_batch_size: 1, input: [{ dims: [1], reshape: { shape: [] } }] });
    expect(one.dynamic_batching).toBeUndefined();
    const r = await s.infer({ modelName: 'full', inputs: [{ name: 'X', datatype: 'FP32', shape: [2, 4], data: new Float32Array(8).fill(1.5) }] });
    expect(r.outputs[0]!.shape).toEqual([2, 4]);
    const r2 = await s.infer({ modelName: 'scalar', inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: new Float32Array([2.5]) }] });
    expect(r2.outputs[0]).toMatchObject({ name: 'Y', shape: [1] });
    expect(Array.from(r2.outputs[0]!.data as Float32Array)).toEqual([2.5]);
  });

  it("refuses a BFLOAT16 tensor naming it and its ONNX type (before: \"Unsupported data type: 16\"; Triton's ConvertFromOnnxDataType maps BFLOAT16 to no type either)", async () => {
    const BFLOAT16 = 16; // TensorProto.DataType
    const bf16 = model('id', [node('Identity', ['X'], ['Y'], 'n')], [valueInfo(11, 'X', BFLOAT16, ['N', 4])], [valueInfo(12, 'Y', BFLOAT16, ['N', 4])]);
    const io = 'max_batch_size: 4 input [ { name: "X" data_type: TYPE_BF16 dims: [ 4 ] } ] output [ { name: "Y" data_type: TYPE_BF16 dims: [ 4 ] } ]';
    const s = await serve(repoOf({ auto: { onnx: bf16 }, given: { onnx: bf16, config: io } }));
    const reasons = Object.fromEntries(s.repositoryIndex().map((r) => [r.name, r.reason]));
    expect(reasons['auto']).toContain("input 'X' of the model has ONNX type BFLOAT16, which the onnxruntime backend does not support");
    expect(reasons['given']).toContain("input 'X' of the model has ONNX type BFLOAT16, which the onnxruntime backend does not support");
  });

  it("completes from the newest version the version policy loads, as Triton reads the loaded version's own file (before: the newest on disk, so version 1 failed its load)", async () => {
    const repo = repoOf({ two: { onnx: identity(['N', 4]), config: 'version_policy: { specific: { versions: [ 1 ] } }' } });
    const int32 = model('id', [node('Identity', ['X'], ['Y'], 'n')], [valueInfo(11, 'X', T.INT32, ['N', 8])], [valueInfo(12, 'Y', T.INT32, ['N', 8])]);
    mkdirSync(join(repo, 'two', '2'));
    writeFileSync(join(repo, 'two', '2', 'model.onnx'), int32);
    const s = await serve(repo);
    expect(s.repositoryIndex().map((r) => [r.name, r.version, r.state, r.reason])).toEqual([['two', '1', 'READY', '']]);
    expect(s.modelConfig('two')).toMatchObject({ input: [{ name: 'X', data_type: 'TYPE_FP32', dims: [4] }], output: [{ name: 'Y', data_type: 'TYPE_FP32', dims: [4] }] });
  });

  it('keeps a side the config gives as given and lists the other in full (Triton fills only an empty side)', async () => {
    const c: ModelConfig = { name: 'm', input: [{ name: 'x' }] };
    await autoCompleteOnnxConfig(c, join(EXAMPLES, 'ppocr_cls/1/model.onnx'), {});
    expect(c.input).toEqual([{ name: 'x' }]);
    expect(c.output).toEqual([{ name: 'softmax_0.tmp_0', data_type: 'TYPE_FP32', dims: [2] }]);
  });

  it("reads default-max-batch-size as Triton's ParseIntValue (std::stoi), never below 0, and refuses one with no number (before: NaN or a negative max_batch_size)", () => {
    expect(defaultMaxBatchSize({})).toBe(4);
    expect(defaultMaxBatchSize({ 'default-max-batch-size': '8' })).toBe(8);
    expect(defaultMaxBatchSize({ 'default-max-batch-size': ' 16x' })).toBe(16);
    expect(defaultMaxBatchSize({ 'default-max-batch-size': '-3' })).toBe(0);
    expect(() => defaultMaxBatchSize({ 'default-max-batch-size': 'abc' })).toThrow("failed to convert 'abc' to integral number");
    expect(() => defaultMaxBatchSize({ 'default-max-batch-size': '99999999999' })).toThrow('to integral number');
  });

  it('with auto-complete disabled, a model without a complete config is unavailable and others stay up', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-ac-'));
    cpSync(join(EXAMPLES, 'simple/1'), join(repo, 'bare/1'), { recursive: true });
    cpSync(join(EXAMPLES, 'simple'), join(repo, 'simple'), { recursive: true });
    const s = await serve(repo, { autoCompleteConfig: false, strictReadiness: true });
    const idx = s.repositoryIndex();
    expect(idx.find((r) => r.name === 'bare')).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringMatching('auto-complete is disabled') });
    expect(idx.find((r) => r.name === 'simple')).toMatchObject({ state: 'READY' });
    expect(s.isReady()).toBe(false);
  });
});

describe('session settings', () => {
  it("reads Triton's onnxruntime parameters and the graph optimization level", () => {
    const s = sessionSettings({
      optimization: { graph: { level: -1 } },
      parameters: { intra_op_thread_count: { string_value: '2' }, inter_op_thread_count: { string_value: '3' }, execution_mode: { string_value: '1' }, 'session.intra_op.allow_spinning': { string_value: '0' }, enable_mem_arena: { string_value: '0' } },
    });
    expect(s).toEqual({ intraOpNumThreads: 2, interOpNumThreads: 3, executionMode: 'parallel', graphOptimizationLevel: 'basic', enableCpuMemArena: false, enableMemPattern: true, configEntries: { 'session.intra_op.allow_spinning': '0' }, arenaResetBytes: 1024 * 1024 * 1024 });
    expect(sessionSettings({ parameters: { arena_reset_bytes: { string_value: '0' } } }).arenaResetBytes).toBe(0);
    expect(sessionSettings({ parameters: { arena_reset_bytes: { string_value: '1048576' } } }).arenaResetBytes).toBe(1048576);
    expect(sessionSettings({}).intraOpNumThreads).toBe(1);
    expect(() => sessionSettings({ name: 'm', parameters: { intra_op_thread_count: { string_value: 'x' } } })).toThrow("parameter 'intra_op_thread_count' of model 'm' must be a non-negative integer, got 'x'");
  });
});

describe('hostile session parameters', () => {
  let server: InferenceServer | undefined;
  /** Loads `simple` anew with these parameters added (run on the main thread, where a polluted prototype reaches the whole server). */
  async function loadWith(parameters: Record<string, string>): Promise<void> {
    if (!server) {
      const repo = mkdtempSync(join(tmpdir(), 'triode-params-'));
      cpSync(join(EXAMPLES, 'simple'), join(repo, 'simple'), { recursive: true });
      server = await serve(repo, { modelControlMode: 'explicit', startupModels: ['simple'] });
    }
    const base = server.modelConfig('simple') as ModelConfig;
    const params = Object.fromEntries(Object.entries({ execution_thread: 'main', ...parameters }).map(([k, v]) => [k, { string_value: v }]));
    await server.loadModel('simple', { config: { ...base, parameters: { ...base.parameters, ...params } } as never });
  }

  it("refuses a session.* key with a '__proto__', 'constructor', 'prototype' or empty component, and Object.prototype stays clean", async () => {
    try {
      for (const key of ['session.__proto__.error', 'session.constructor.prototype.error', 'session.prototype.x', 'session..x', 'session.']) {
        await expect(loadWith({ [key]: 'polluted' })).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining(`parameter '${key}' of model 'simple' is not a valid onnxruntime session config key`) });
        expect(({} as Record<string, unknown>).error).toBeUndefined();
        expect(({} as Record<string, unknown>).x).toBeUndefined();
      }
    } finally {
      // Without the fix the prototype is polluted: clean it so that the other tests are not broken too.
      delete (Object.prototype as Record<string, unknown>).error;
      delete (Object.prototype as Record<string, unknown>).x;
    }
  });

  it('refuses session.* keys that make onnxruntime write files, and still takes a harmless one', async () => {
    const out = mkdtempSync(join(tmpdir(), 'triode-written-'));
    for (const [key, value] of [
      ['session.optimized_model_filepath', join(out, 'victim.onnx')], ['session.enable_profiling', '1'],
      ['session.profile_file_prefix', join(out, 'profile')], ['session.save_model_format', 'ORT'],
      ['session.optimized_model_external_initializers_file_name', join(out, 'w.bin')], ['session.SomeDir', out],
    ] as const) {
      await expect(loadWith({ [key]: value })).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining(`parameter '${key}' of model 'simple' is refused`) });
    }
    expect(readdirSync(out)).toEqual([]);
    await loadWith({ 'session.intra_op.allow_spinning': '0' });
    expect(server!.repositoryIndex()).toEqual([{ name: 'simple', version: '1', state: 'READY', reason: '' }]);
  });

  it('refuses a session.* key that is a prefix of another with INVALID_ARG naming both (was an internal error)', async () => {
    await expect(loadWith({ 'session.intra_op': '1', 'session.intra_op.allow_spinning': '0' })).rejects.toMatchObject({
      code: 'INVALID_ARG', message: expect.stringContaining("parameters 'session.intra_op' and 'session.intra_op.allow_spinning' of model 'simple' conflict"),
    });
    // Either order in the config.
    expect(() => sessionSettings({ name: 'm', parameters: { 'session.a.b': { string_value: '1' }, 'session.a': { string_value: '2' } } }))
      .toThrow("parameters 'session.a' and 'session.a.b' of model 'm' conflict");
    // A shared prefix that is not a whole component is no conflict.
    expect(sessionSettings({ parameters: { 'session.a': { string_value: '1' }, 'session.ab.c': { string_value: '2' } } }).configEntries)
      .toEqual({ 'session.a': '1', 'session.ab.c': '2' });
  });

  it('refuses intra_op_thread_count and inter_op_thread_count over 1024 (100000 spawned 18,600 threads)', async () => {
    for (const key of ['intra_op_thread_count', 'inter_op_thread_count']) {
      // Checked without a load first: without the bound, the load below would start the threads.
      expect(() => sessionSettings({ name: 'm', parameters: { [key]: { string_value: '1025' } } })).toThrow(`parameter '${key}' of model 'm' must be at most 1024, got '1025'`);
      expect(sessionSettings({ parameters: { [key]: { string_value: '1024' } } })).toMatchObject(key === 'intra_op_thread_count' ? { intraOpNumThreads: 1024 } : { interOpNumThreads: 1024 });
      await expect(loadWith({ [key]: '100000' })).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining(`parameter '${key}' of model 'simple' must be at most 1024, got '100000'`) });
    }
    await loadWith({ intra_op_thread_count: '2', inter_op_thread_count: '2' });
    expect(server!.repositoryIndex()).toEqual([{ name: 'simple', version: '1', state: 'READY', reason: '' }]);
  });
});

describe('model files that are not regular files', () => {
  /** A repository with `simple` and a model `name` (simple's config, or none) whose model.onnx is made by `make`. */
  function repoWith(name: string, withConfig: boolean, make: (path: string) => void): string {
    const repo = mkdtempSync(join(tmpdir(), 'triode-notfile-'));
    cpSync(join(EXAMPLES, 'simple'), join(repo, 'simple'), { recursive: true });
    mkdirSync(join(repo, name, '1'), { recursive: true });
    if (withConfig) writeFileSync(join(repo, name, 'config.pbtxt'), readFileSync(join(EXAMPLES, 'simple/config.pbtxt'), 'utf8').replace('name: "simple"', `name: "${name}"`));
    make(join(repo, name, '1', 'model.onnx'));
    return repo;
  }

  it('refuses a FIFO as the model file, with or without a config, and the others load (before: the event loop blocked for good)', async () => {
    for (const withConfig of [true, false]) {
      const s = await serve(repoWith('fifo', withConfig, (p) => execFileSync('mkfifo', [p])));
      expect(s.repositoryIndex().find((r) => r.name === 'fifo')).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringMatching(/model file '.*model\.onnx' of model 'fifo' is not a regular file/) });
      expect(s.repositoryIndex().find((r) => r.name === 'simple')).toMatchObject({ state: 'READY' });
    }
  });

  it('refuses a link to /dev/zero as the model file (before: read until memory ran out)', async () => {
    const s = await serve(repoWith('zero', true, (p) => symlinkSync('/dev/zero', p)));
    expect(s.repositoryIndex().find((r) => r.name === 'zero')).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringMatching(/of model 'zero' is not a regular file/) });
    expect(s.repositoryIndex().find((r) => r.name === 'simple')).toMatchObject({ state: 'READY' });
  });
});

describe('instances', () => {
  it('moves owned buffers into the instance thread, never a lent one, whatever its size or offset', () => {
    const big = new Float32Array(4096);
    const given = new Int32Array(4);
    const lent = new Int32Array(4);
    const body = new Uint8Array(1000);
    markTransferable(body.buffer);
    const tensor = (data: ArrayBufferView, owned?: boolean) => ({ name: 'x', datatype: 'FP32' as const, shape: [1], data: data as Float32Array, ...(owned !== undefined ? { owned } : {}) });
    const req = (...inputs: ReturnType<typeof tensor>[]): ExecuteRequest => ({ inputs, outputNames: [], batchSize: 1, parameters: {} });
    const list = transferList([
      // A whole buffer nobody declared: lent (the old rule moved it).
      req(tensor(big)),
      req(tensor(given, true)), req(tensor(lent, false)),
      // Two views of one request body: the body moves once.
      req(tensor(body.subarray(100, 200)), tensor(body.subarray(300, 400))),
    ]);
    expect(list).toEqual([given.buffer, body.buffer]);
    // A body tensor an ensemble lends stays put.
    expect(transferList([req(tensor(body.subarray(0, 4), false))])).toEqual([]);
  });

  it('runs requests on several instances in parallel and answers each with its own result', async () => {
    const s = await serve(makeRepository(['simple']));
    const results = await Promise.all(Array.from({ length: 50 }, (_, k) => s.infer({ modelName: 'simple', inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(k) },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
    ], outputs: [{ name: 'OUTPUT1' }] })));
    results.forEach((r, k) => {
      expect(r.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
      expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual(new Array(16).fill(k - 1));
    });
    expect(s.modelStatistics('simple')[0]!.inference_stats.success.count).toBe(50);
  });

  it("a model's instances share one main-thread session, released with the last of them", async () => {
    const repo = makeRepository(['simple']);
    appendFileSync(join(repo, 'simple', 'config.pbtxt'), '\ninstance_group [ { count: 3, kind: KIND_CPU } ]\nparameters { key: "execution_thread" value: { string_value: "main" } }\n');
    const loads = vi.spyOn(OnnxSession.prototype, 'load');
    const unloads = vi.spyOn(OnnxSession.prototype, 'unload');
    try {
      const s = await serve(repo, { modelControlMode: 'explicit', startupModels: ['simple'] });
      // Three instances on the main thread (execution_thread "main": no threads), one session.
      expect(loads).toHaveBeenCalledTimes(1);
      const results = await Promise.all(Array.from({ length: 30 }, (_, k) => s.infer({ modelName: 'simple', inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(k) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) },
      ] })));
      results.forEach((r, k) => expect(Array.from(r.outputs[0]!.data as Int32Array)).toEqual(new Array(16).fill(k + 2)));
      expect(unloads).not.toHaveBeenCalled();
      await s.unloadModel('simple');
      expect(unloads).toHaveBeenCalledTimes(1);
      // Loaded again: a session of its own, not the one released.
      await s.loadModel('simple');
      expect(loads).toHaveBeenCalledTimes(2);
      expect((await s.infer({ modelName: 'simple', inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
      ] })).outputs[0]!.data).toEqual(new Int32Array(16).fill(2));
    } finally {
      loads.mockRestore();
      unloads.mockRestore();
    }
  });

  it('an in-process input is lent unless the caller gives it: only an owned one is detached after infer', async () => {
    const s = await serve(makeRepository(['ppocr_cls']));
    const x = new Float32Array(3 * 48 * 192).fill(0.2);
    const r = await s.infer({ modelName: 'ppocr_cls', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], data: x }] });
    expect(r.outputs[0]!.shape).toEqual([1, 2]);
    expect(x.byteLength).toBe(3 * 48 * 192 * 4);
    expect(x[5]).toBeCloseTo(0.2);
    const r2 = await s.infer({ modelName: 'ppocr_cls', inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], data: x, owned: true }] });
    expect(Array.from(r2.outputs[0]!.data as Float32Array)).toEqual(Array.from(r.outputs[0]!.data as Float32Array));
    expect(x.byteLength).toBe(0);
    // An output made for one response is given to it; moving it on takes it from no one else.
    expect(r.outputs[0]!.owned).toBe(true);
  });
});

describe('batched outputs', () => {
  it('responses of one batch stay intact when one of them is fed back as an input', async () => {
    const repo = makeRepository([], {
      'batched/config.pbtxt': [
        'platform: "onnxruntime_onnx" max_batch_size: 8',
        'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]',
        'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]',
        'dynamic_batching { max_queue_delay_microseconds: 200000 preferred_batch_size: [ 2 ] }',
        'instance_group [ { count: 1 kind: KIND_CPU } ]',
      ].join('\n'),
    });
    cpSync(join(EXAMPLES, 'simple/1'), join(repo, 'batched/1'), { recursive: true });
    const s = await serve(repo);
    const req = (a: Int32Array) => ({ modelName: 'batched', inputs: [
      { name: 'INPUT0', datatype: 'INT32' as const, shape: [1, 16], data: a },
      { name: 'INPUT1', datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16).fill(1) },
    ] });
    const [ra, rb] = await Promise.all([s.infer(req(new Int32Array(16).fill(10))), s.infer(req(new Int32Array(16).fill(20)))]);
    expect(s.modelStatistics('batched')[0]!.execution_count).toBe(1);
    const a0 = ra.outputs[0]!.data as Int32Array;
    const b0 = rb.outputs[0]!.data as Int32Array;
    expect(a0.buffer).toBe(b0.buffer); // one batch, one output buffer
    // Each response is lent its view of the shared buffer: fed back as it is, it is copied, not moved.
    expect([ra.outputs[0]!.owned, rb.outputs[0]!.owned]).toEqual([false, false]);
    await s.infer({ modelName: 'batched', inputs: [{ ...ra.outputs[0]!, name: 'INPUT0' }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) }] });
    expect(Array.from(b0)).toEqual(new Array(16).fill(21));
    expect(Array.from(a0)).toEqual(new Array(16).fill(11));
  });
});

describe('BYTES inputs', () => {
  it('an element that is not UTF-8 fails its request alone, not altered and not the batch', async () => {
    const repo = makeRepository(['simple_string']);
    appendFileSync(join(repo, 'simple_string', 'config.pbtxt'), '\ndynamic_batching { max_queue_delay_microseconds: 200000 }\n');
    const s = await serve(repo);
    const strings = (xs: (string | Uint8Array)[]) => serializeBytesTensor(xs);
    const one = strings(new Array<string>(16).fill('1'));
    const bad = strings([Uint8Array.of(0xff, 0x00, 0xc0), ...new Array<string>(15).fill('1')]);
    const infer = (in0: Uint8Array) => s.infer({ modelName: 'simple_string', inputs: [
      { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], data: in0 },
      { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], data: one },
    ] });
    const [good, refused] = await Promise.allSettled([infer(strings(new Array<string>(16).fill('2'))), infer(bad)]);
    // Before: the bytes reached the model as U+FFFD (the string model here: a parse of garbage).
    expect(refused).toMatchObject({ status: 'rejected', reason: { code: 'INVALID_ARG', message: expect.stringContaining("input 'INPUT0': element 0 is not valid UTF-8") } });
    expect(good.status).toBe('fulfilled');
    const out = (good as PromiseFulfilledResult<Awaited<ReturnType<typeof infer>>>).value.outputs.find((o) => o.name === 'OUTPUT0')!;
    expect(Buffer.from(out.data as Uint8Array).toString('latin1')).toContain('3');
  });
});
