import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { TriodeError, type ModelConfig } from '@triode/core';
import { EXAMPLES } from '../../../../test/helpers/repository.js';
import { raggedOnnxModel } from '../../../../test/helpers/ragged-onnx.js';
import { T, int, model, msg, node, str, valueInfo } from '../../../../scripts/onnx-writer.mjs';
import type { ExecuteReply, ExecuteResult, ExecuteTask, LoadTask, WireTensor } from './messages.js';
import { OnnxSession, outputBuffers } from './onnxruntime-session.js';
import { OnnxLoader, nativeBinding, type ImmediateOrtSession } from './onnxruntime-loader.js';
import { ExecutionThreadPolicy } from './execution-thread-policy.js';
import { OnnxInstance, mainThreadPath, threadPath } from './onnxruntime-instance.js';
import { raggedBatchConfig, sessionSettings } from './onnxruntime-utils.js';

const dir = mkdtempSync(join(tmpdir(), 'triode-session-'));
const RAGGED_FILE = join(dir, 'ragged.onnx');
writeFileSync(RAGGED_FILE, raggedOnnxModel());
/** Y = Concat(X, X) along dim 0: a batching model whose output has twice the batch's rows. */
const DOUBLED_ROWS_FILE = join(dir, 'doubled-rows.onnx');
writeFileSync(DOUBLED_ROWS_FILE, model('dup', [node('Concat', ['X', 'X'], ['Y'], 'cat', [msg(5, [str(1, 'axis'), int(3, 0), int(20, 2)])])],
  [valueInfo(11, 'X', T.FLOAT, ['batch', 3])], [valueInfo(12, 'Y', T.FLOAT, ['rows', 3])]));

/** The config of test/helpers/ragged-onnx.ts, as the session gets it. */
const RAGGED_CONFIG: ModelConfig = {
  name: 'ragged', max_batch_size: 8,
  input: [{ name: 'INPUT', data_type: 'TYPE_FP32', dims: [-1], allow_ragged_batch: true }],
  output: [{ name: 'DOUBLED', data_type: 'TYPE_FP32', dims: [-1] }, { name: 'ACC', data_type: 'TYPE_FP32', dims: [1] }],
  batch_input: [{ kind: 'BATCH_ACCUMULATED_ELEMENT_COUNT', target_name: ['INDEX'], data_type: 'TYPE_FP32', source_input: ['INPUT'] }],
  batch_output: [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['DOUBLED'], source_input: ['INPUT'] }],
};

const sessions: OnnxSession[] = [];
afterAll(async () => { await Promise.all(sessions.map((s) => s.unload())); });

async function open(task: Partial<LoadTask> & { modelFile: string }): Promise<OnnxSession> {
  const s = new OnnxSession();
  sessions.push(s);
  await s.load({ op: 'load', sessionOptions: sessionSettings({}), ...task });
  return s;
}

const fp32 = (name: string, shape: number[], values: number[]): WireTensor => ({ name, datatype: 'FP32', shape, data: Float32Array.from(values) });
const run = (s: OnnxSession, task: ExecuteTask): Promise<ExecuteResult> => s.run(task);
const plain = (r: ExecuteResult) => r.responses.map((x) => ('outputs' in x ? x.outputs.map((o) => ({ name: o.name, shape: o.shape, data: Array.from(o.data as Float32Array) })) : x));

describe('raggedBatchConfig()', () => {
  it('is set only for a config with a ragged input, a batch_input or a batch_output', () => {
    expect(raggedBatchConfig({ max_batch_size: 8, input: [{ name: 'x', dims: [-1] }] })).toBeUndefined();
    expect(raggedBatchConfig(RAGGED_CONFIG)).toMatchObject({ max_batch_size: 8, batch_input: RAGGED_CONFIG.batch_input, batch_output: RAGGED_CONFIG.batch_output });
    expect(raggedBatchConfig({ max_batch_size: 8, input: [{ name: 'x', dims: [-1], allow_ragged_batch: true }] })).toMatchObject({ batch_input: [], batch_output: [] });
  });
});

describe('OnnxSession.load() session config entries', () => {
  it("builds ORT's nested options without a prototype, so that even an unchecked '__proto__' key cannot reach Object.prototype", async () => {
    const s = new OnnxSession();
    sessions.push(s);
    const sessionOptions = { ...sessionSettings({}), configEntries: { 'session.__proto__.error': 'polluted' } };
    try {
      // Whether ORT takes the unknown entry does not matter here, only what building the options did.
      await s.load({ op: 'load', modelFile: join(EXAMPLES, 'simple/1/model.onnx'), sessionOptions }).catch(() => undefined);
      expect(({} as Record<string, unknown>).error).toBeUndefined();
    } finally {
      delete (Object.prototype as Record<string, unknown>).error;
    }
  });
});

describe('OnnxSession.run() with ragged batches (Triton: SetInputTensors / ReadOutputTensors)', () => {
  it('joins requests of different shapes into one [total elements] input with its batch input, and scatters the outputs back', async () => {
    const s = await open({ modelFile: RAGGED_FILE, raggedBatch: raggedBatchConfig(RAGGED_CONFIG)! });
    const inputs = [fp32('INPUT', [1, 3], [1, 2, 3]), fp32('INPUT', [1, 1], [10]), fp32('INPUT', [1, 4], [5, 6, 7, 8])];
    const r = await run(s, { op: 'execute', requests: inputs.map((t) => ({ inputs: [t], batchSize: 1 })), outputNames: ['DOUBLED', 'ACC'], batching: true });
    expect(plain(r)).toEqual([
      [{ name: 'DOUBLED', shape: [1, 3], data: [2, 4, 6] }, { name: 'ACC', shape: [1, 1], data: [3] }],
      [{ name: 'DOUBLED', shape: [1, 1], data: [20] }, { name: 'ACC', shape: [1, 1], data: [4] }],
      [{ name: 'DOUBLED', shape: [1, 4], data: [10, 12, 14, 16] }, { name: 'ACC', shape: [1, 1], data: [8] }],
    ]);
    // The requests' own buffers were read, never detached.
    expect(inputs.map((t) => t.data.byteLength)).toEqual([12, 4, 16]);
  });

  it('a lone request is flattened too, and gets its own batch input', async () => {
    const s = await open({ modelFile: RAGGED_FILE, raggedBatch: raggedBatchConfig(RAGGED_CONFIG)! });
    const input = fp32('INPUT', [1, 2], [4, 5]);
    const r = await run(s, { op: 'execute', requests: [{ inputs: [input], batchSize: 1 }], outputNames: ['ACC', 'DOUBLED'], batching: true });
    expect(plain(r)).toEqual([[{ name: 'ACC', shape: [1, 1], data: [2] }, { name: 'DOUBLED', shape: [1, 2], data: [8, 10] }]]);
    expect(input.data.byteLength).toBe(8);
  });

  it('without the ragged settings the model misses its batch input (the regular path is unchanged)', async () => {
    const s = await open({ modelFile: RAGGED_FILE });
    await expect(s.run({ op: 'execute', requests: [{ inputs: [fp32('INPUT', [2], [1, 2])], batchSize: 0 }], outputNames: ['DOUBLED'], batching: false })).rejects.toThrow(/INDEX/);
  });

  it('regular models still concatenate along the batch dim and split by batch size', async () => {
    const s = await open({ modelFile: join(EXAMPLES, 'simple/1/model.onnx') });
    const req = (v: number, n: number) => ({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32' as const, shape: [n, 16], data: new Int32Array(16 * n).fill(v) })), batchSize: n });
    const r = await run(s, { op: 'execute', requests: [req(1, 1), req(2, 2)], outputNames: ['OUTPUT0'], batching: true });
    expect(r.responses.map((x) => ('outputs' in x ? x.outputs[0]!.shape : []))).toEqual([[1, 16], [2, 16]]);
    expect(r.responses.map((x) => ('outputs' in x ? (x.outputs[0]!.data as Int32Array)[0] : 0))).toEqual([2, 4]);
  });
});

describe('OnnxSession.run() splits outputs as Triton\'s BackendOutputResponder does', () => {
  it('each request gets its batch size\'s rows, a lone request too; the rows beyond are left out, never handed to another request', async () => {
    const s = await open({ modelFile: DOUBLED_ROWS_FILE });
    const req = (v: number) => ({ inputs: [fp32('X', [1, 3], [v, v + 1, v + 2])], batchSize: 1 });
    // Before, each request got half the elements: A got [1,2,3, 100,101,102], B's row included.
    const batch = await run(s, { op: 'execute', requests: [req(1), req(100)], outputNames: ['Y'], batching: true });
    expect(plain(batch)).toEqual([[{ name: 'Y', shape: [1, 3], data: [1, 2, 3] }], [{ name: 'Y', shape: [1, 3], data: [100, 101, 102] }]]);
    // Before, a lone request got [2,3] with a [1,3] request's batch size.
    expect(plain(await run(s, { op: 'execute', requests: [req(10)], outputNames: ['Y'], batching: true }))).toEqual([[{ name: 'Y', shape: [1, 3], data: [10, 11, 12] }]]);
    // A model that does not batch answers with its output as it is.
    expect(plain(await run(s, { op: 'execute', requests: [{ inputs: [fp32('X', [1, 3], [7, 8, 9])], batchSize: 0 }], outputNames: ['Y'], batching: false }))).toMatchObject([[{ shape: [2, 3] }]]);
  });
});

describe('a GPU lost mid-run (issue #17), with a stand-in: the session\'s run throws what onnxruntime throws then', () => {
  const SIMPLE = join(EXAMPLES, 'simple/1/model.onnx');
  const GPU = 'GPU 0 (Fake GPU)';
  const silent = { error() {}, warning() {}, info() {}, verbose() {} };
  const simpleTask = (): ExecuteTask => ({
    op: 'execute', outputNames: ['OUTPUT0'], batching: true,
    requests: [{ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16).fill(1) })), batchSize: 1 }],
  });
  // The session runs on the CPU here, but believes it is on a GPU: its errors are read as GPU failures.
  const load = (gpu?: string): LoadTask => ({ op: 'load', modelFile: SIMPLE, sessionOptions: sessionSettings({}), ...(gpu ? { gpu } : {}) });
  afterEach(() => { vi.restoreAllMocks(); });
  /** The class of OnnxLoader's sessions, which runs every session (see onnxruntime-loader.ts): its next run throws `err`. */
  let SESSION: Pick<ImmediateOrtSession, 'run'>;
  beforeAll(async () => {
    const s = await OnnxLoader.create(SIMPLE, {});
    SESSION = Object.getPrototypeOf(s) as typeof SESSION;
    await s.release();
  });
  const failNextRun = (err: Error) => vi.spyOn(SESSION, 'run').mockImplementationOnce(() => { throw err; });

  it.each([
    ['WebGPU', 'WebGPU device lost (Destroyed)'],
    ['CUDA', 'CUDA error cudaErrorIllegalAddress:an illegal memory access was encountered'],
  ])('%s: the batch fails UNAVAILABLE with the clear message and instanceLost; the session is dropped, every later run answers the same', async (_name, text) => {
    const path = await mainThreadPath(load(GPU));
    const run = failNextRun(new Error(`${text}\nstack`));
    const message = `Cannot run the model: ${GPU} was lost (the model is not ready until it is loaded again): ${text}`;
    expect(await path.run(simpleTask(), [])).toEqual({ error: { code: 'UNAVAILABLE', message, instanceLost: true } });
    expect(await path.run(simpleTask(), [])).toEqual({ error: { code: 'UNAVAILABLE', message, instanceLost: true } });
    expect(run).toHaveBeenCalledTimes(1);
    await path.close();
  });

  it('the instance throws it as a TriodeError with instanceLost (what makes the core mark the version not ready)', async () => {
    const main = await mainThreadPath(load(GPU));
    const instance = new OnnxInstance({ main, policy: new ExecutionThreadPolicy('main'), batching: true, logger: silent, label: 'model "m" instance 0', model: 'm' });
    failNextRun(new Error('WebGPU device lost (Destroyed)'));
    const request = { ...simpleTask().requests[0]!, outputNames: ['OUTPUT0'], parameters: {} };
    const e = await instance.execute([request]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TriodeError);
    expect(e).toMatchObject({ code: 'UNAVAILABLE', instanceLost: true, message: expect.stringContaining(`${GPU} was lost`) });
    await instance.finalize();
  });

  it('out of GPU memory fails the batch only; the same text on a CPU instance is an onnx runtime error', async () => {
    const gpu = await mainThreadPath(load(GPU));
    failNextRun(new Error('CUDA failure 2: out of memory'));
    expect(await gpu.run(simpleTask(), [])).toEqual({ error: { code: 'UNAVAILABLE', message: `Cannot run the model: out of GPU memory on ${GPU}: CUDA failure 2: out of memory` } });
    expect(await gpu.run(simpleTask(), [])).toMatchObject({ responses: [{ outputs: [{ name: 'OUTPUT0' }] }] });
    const cpu = await mainThreadPath(load());
    failNextRun(new Error('WebGPU device lost (Destroyed)'));
    expect(await cpu.run(simpleTask(), [])).toEqual({ error: { code: 'INTERNAL', message: 'onnx runtime error: WebGPU device lost (Destroyed)' } });
    expect(await cpu.run(simpleTask(), [])).toMatchObject({ responses: [{ outputs: [{ name: 'OUTPUT0' }] }] });
    await gpu.close();
    await cpu.close();
  });
});

describe('an instance thread that ends (its heap ran out, an uncaught throw): the session is loaded again in the new thread', () => {
  const THREAD_FILE = fileURLToPath(new URL('../../dist/onnxruntime/onnxruntime-thread.js', import.meta.url));
  const task = (v: number): ExecuteTask => ({
    op: 'execute', outputNames: ['OUTPUT0'], batching: true,
    requests: [{ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32' as const, shape: [1, 16], data: new Int32Array(16).fill(v) })), batchSize: 1 }],
  });
  const sum = (r: ExecuteReply) => {
    const first = 'responses' in r ? r.responses[0]! : r;
    return 'outputs' in first ? (first.outputs[0]!.data as Int32Array)[0] : first;
  };
  const open = async (modelFile: string) => {
    const pool = new Piscina({ filename: THREAD_FILE, minThreads: 1, maxThreads: 1, idleTimeout: Infinity, concurrentTasksPerWorker: 2, atomics: 'disabled' });
    const load: LoadTask = { op: 'load', modelFile, sessionOptions: sessionSettings({}) };
    await pool.run(load);
    const ended: (Error | undefined)[] = [];
    return { pool, ended, path: threadPath(pool, load, (err) => ended.push(err)) };
  };

  it('answers again after its thread ended: before, every later batch failed "the instance has no session"', async () => {
    const { pool, ended, path } = await open(join(EXAMPLES, 'simple/1/model.onnx'));
    try {
      expect(sum(await path.run(task(1), []))).toBe(2);
      await pool.threads[0]!.terminate();
      await vi.waitFor(() => expect(ended).toHaveLength(1));
      expect(sum(await path.run(task(3), []))).toBe(6);
      expect(sum(await path.run(task(4), []))).toBe(8);
    } finally {
      await path.close();
    }
    // Closing ends the thread too; that is not a thread lost.
    expect(ended).toHaveLength(1);
  });

  it('when the session cannot be loaded again, the batch fails with instanceLost (the version goes not ready)', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'triode-reload-')), 'model.onnx');
    copyFileSync(join(EXAMPLES, 'simple/1/model.onnx'), file);
    const { pool, ended, path } = await open(file);
    try {
      rmSync(file);
      await pool.threads[0]!.terminate();
      await vi.waitFor(() => expect(ended).toHaveLength(1));
      await expect(path.run(task(1), [])).rejects.toMatchObject({ code: 'UNAVAILABLE', instanceLost: true, message: expect.stringContaining('the instance thread ended and its session could not be loaded again') });
    } finally {
      await path.close();
    }
  });
});

describe('outputBuffers: what an instance thread moves back with a result', () => {
  it('lists each output buffer once (views of one batch output share it), skips failed requests and shared memory', () => {
    const batch = new Float32Array(6);
    const own = new Float32Array(2);
    const sab = new Float32Array(new SharedArrayBuffer(8));
    const list = outputBuffers({
      responses: [
        { outputs: [fp32('Y', [1, 3], [0, 0, 0]), { ...fp32('Y', [1, 3], []), data: batch.subarray(0, 3) }] },
        { outputs: [{ ...fp32('Y', [1, 3], []), data: batch.subarray(3) }, { ...fp32('Z', [2], []), data: own }, { ...fp32('S', [2], []), data: sab }] },
        { error: { code: 'INTERNAL', message: 'failed alone' } },
      ],
      computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0,
    });
    expect(list).toHaveLength(3);
    expect(list).toContain(batch.buffer);
    expect(list).toContain(own.buffer);
    expect(list.every((b) => b instanceof ArrayBuffer)).toBe(true);
  });
});

describe('a run on OnnxLoader\'s native session: no immediate, no onnxruntime-common run around it (issue #18)', () => {
  const SIMPLE = join(EXAMPLES, 'simple/1/model.onnx');
  const ints = (v: number) => new Int32Array(16).fill(v);
  const task = (names: string[], outputNames = ['OUTPUT0', 'OUTPUT1']): ExecuteTask => ({
    op: 'execute', outputNames, batching: true,
    requests: [{ inputs: names.map((name, i) => ({ name, datatype: 'INT32' as const, shape: [1, 16], data: ints(i + 2) })), batchSize: 1 }],
  });
  afterEach(() => { vi.restoreAllMocks(); });

  it('answers as before, without InferenceSession.run and without an immediate', async () => {
    const s = await open({ modelFile: SIMPLE });
    const common = vi.spyOn((ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype, 'run');
    const immediate = vi.spyOn(globalThis, 'setImmediate');
    const r = await s.run(task(['INPUT0', 'INPUT1']));
    expect(common).not.toHaveBeenCalled();
    expect(immediate).not.toHaveBeenCalled();
    expect(r.responses[0]).toMatchObject({ outputs: [{ name: 'OUTPUT0', shape: [1, 16], data: ints(5) }, { name: 'OUTPUT1', shape: [1, 16], data: ints(-1) }] });
    expect(r.computeInferNs).toBeGreaterThan(0);
  });

  it('main-thread runs chained by promises alone still let the event loop turn: a timer fires (before: the chain starved it)', async () => {
    const path = await mainThreadPath({ op: 'load', modelFile: SIMPLE, sessionOptions: sessionSettings({}) });
    try {
      let fired = false;
      setTimeout(() => { fired = true; }, 1);
      let runs = 0;
      const t0 = Date.now();
      while (!fired && runs < 5000 && Date.now() - t0 < 2000) {
        expect(await path.run(task(['INPUT0', 'INPUT1']), [])).toMatchObject({ responses: [{ outputs: [{ data: ints(5) }, { data: ints(-1) }] }] });
        runs++;
      }
      expect(fired).toBe(true);
    } finally {
      await path.close();
    }
  });

  it('what the checks refuse is an answer with onnxruntime-common\'s message, and the session keeps serving', async () => {
    const s = await open({ modelFile: SIMPLE });
    const fail = (t: ExecuteTask) => s.run(t).then(() => 'answered', (err: unknown) => s.failure(err));
    expect(await fail(task(['INPUT0']))).toEqual({ error: { code: 'INTERNAL', message: "onnx runtime error: input 'INPUT1' is missing in 'feeds'." } });
    expect(await fail(task(['INPUT0', 'INPUT1'], ['NOPE']))).toEqual({ error: { code: 'INTERNAL', message: "onnx runtime error: 'fetches' contains invalid output name: NOPE." } });
    expect(await fail(task(['INPUT0', 'INPUT1'], []))).toEqual({ error: { code: 'INTERNAL', message: "onnx runtime error: 'fetches' cannot be an empty array." } });
    expect((await s.run(task(['INPUT0', 'INPUT1']))).responses[0]).toMatchObject({ outputs: [{ data: ints(5) }, { data: ints(-1) }] });
  });

  it('without the native binding, a session of onnxruntime-common\'s gives the same answers, and compute_infer still starts at its run', async () => {
    expect(nativeBinding()).not.toBeNull();
    const create = OnnxLoader.create.bind(OnnxLoader);
    vi.spyOn(OnnxLoader, 'create').mockImplementation((file, options) => create(file, options, null));
    const s = await open({ modelFile: SIMPLE });
    const common = vi.spyOn((ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype, 'run');
    const r = await s.run(task(['INPUT0', 'INPUT1']));
    expect(common).toHaveBeenCalledTimes(1);
    expect(r.responses[0]).toMatchObject({ outputs: [{ name: 'OUTPUT0', shape: [1, 16], data: ints(5) }, { name: 'OUTPUT1', shape: [1, 16], data: ints(-1) }] });
    expect(r.computeInferNs).toBeGreaterThan(0);
  });
});
