import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { InferenceServer } from '@triode/core';
import { EXAMPLES } from '../../../../test/helpers/repository.js';
import { OnnxRuntimeBackend } from './onnxruntime-backend.js';
import { checkModelIo, type OnnxIo } from './model-io-check.js';
import { onnxGraphInputNames } from './onnx-graph-inputs.js';
import { T, int64Initializer, model, node, valueInfo } from '../../../../scripts/onnx-writer.mjs';

const INS: OnnxIo[] = [{ name: 'INPUT0', type: 'int32', dims: [-1, 16] }, { name: 'INPUT1', type: 'int32', dims: [-1, 16] }];
const OUTS: OnnxIo[] = [{ name: 'OUTPUT0', type: 'int32', dims: [-1, 16] }];
const io = (name: string, data_type: string, dims: number[]) => ({ name, data_type, dims });
const SIMPLE_INPUTS = [io('INPUT0', 'TYPE_INT32', [16]), io('INPUT1', 'TYPE_INT32', [16])];

describe('checkModelIo (Triton: ValidateInputs, ValidateOutputs, CompareDimsSupported)', () => {
  it('accepts the config of simple, and a dim the model leaves open', () => {
    expect(() => checkModelIo({ name: 'simple', max_batch_size: 8, input: [io('INPUT0', 'TYPE_INT32', [16]), io('INPUT1', 'TYPE_INT32', [16])], output: [io('OUTPUT0', 'TYPE_INT32', [16])] }, INS, OUTS)).not.toThrow();
    expect(() => checkModelIo({ name: 'm', max_batch_size: 0, input: [io('X', 'TYPE_FP32', [3, 7])] }, [{ name: 'X', type: 'float32', dims: [3, -1] }], [])).not.toThrow();
    // A model scalar takes config dims that are all 1, batching or not (Triton skips the comparison): silero_vad's sr.
    expect(() => checkModelIo({ name: 'm', max_batch_size: 0, input: [io('sr', 'TYPE_INT64', [1])] }, [{ name: 'sr', type: 'int64', dims: [] }], [])).not.toThrow();
    expect(() => checkModelIo({ name: 'm', max_batch_size: 4, input: [io('sr', 'TYPE_INT64', [1, 1])] }, [{ name: 'sr', type: 'int64', dims: [] }], [])).not.toThrow();
    // An input the model does not list may be an overridable initializer (Triton allows it; review: it was refused).
    expect(() => checkModelIo({ name: 'm', max_batch_size: 0, input: [io('B', 'TYPE_INT64', [2])] }, [{ name: 'A', type: 'int64', dims: [2] }], [])).not.toThrow();
  });

  it.each([
    [{ output: [io('OUTPUT9', 'TYPE_INT32', [16])] }, "unexpected inference output 'OUTPUT9', allowed outputs are: OUTPUT0"],
    [{ output: [io('OUTPUT0', 'TYPE_FP32', [16])] }, "unable to load model 'simple', configuration expects datatype TYPE_FP32 for output 'OUTPUT0', model provides TYPE_INT32"],
    [{ output: [io('OUTPUT0', 'TYPE_INT32', [4, 4])] }, "model 'simple', tensor 'OUTPUT0': the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 3 dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,4,4])"],
    [{ input: [io('INPUT0', 'TYPE_INT32', [8]), io('INPUT1', 'TYPE_INT32', [16])] }, "the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 2 dimensions"],
    [{ max_batch_size: 0, input: [io('INPUT0', 'TYPE_INT32', [1, 17]), io('INPUT1', 'TYPE_INT32', [1, 16])] }, "model 'simple', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,16]) but the model configuration specifies 2 dimensions (shape [1,17])"],
  ])('refuses %j', (over, message) => {
    expect(() => checkModelIo({ name: 'simple', max_batch_size: 8, input: SIMPLE_INPUTS, ...over }, INS, OUTS)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringContaining(message) }));
  });

  it("refuses a config input the model does not have, with Triton's words, reading the model's overridable initializers only then (review: it loaded, and every request failed \"input 'INPUT0' is missing in 'feeds'\")", () => {
    let reads = 0;
    const graph = () => { reads++; return ['INPUT1', 'INPUT0', 'W']; };
    const cfg = (names: string[]) => ({ name: 'simple', max_batch_size: 8, input: names.map((n) => io(n, 'TYPE_INT32', [16])) });
    expect(() => checkModelIo(cfg(['INPUT0', 'INPUT1']), INS, OUTS, graph)).not.toThrow();
    expect(reads).toBe(0);
    expect(() => checkModelIo(cfg(['INPUT0\u0000', 'INPUT1']), INS, OUTS, graph))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "unexpected inference input 'INPUT0\\u0000', allowed inputs are: INPUT0, INPUT1, W" }));
    expect(() => checkModelIo(cfg(['INPUT0', 'input1']), INS, OUTS, graph)).toThrow("unexpected inference input 'input1', allowed inputs are: INPUT0, INPUT1, W");
    // An overridable initializer is an input the session takes (optional: it has a default, so it is not counted).
    const unbatched = ['INPUT0', 'INPUT1'].map((n) => io(n, 'TYPE_INT32', [1, 16]));
    expect(() => checkModelIo({ name: 'simple', max_batch_size: 0, input: [...unbatched, { ...io('W', 'TYPE_INT32', [16]), optional: true }], output: [io('OUTPUT0', 'TYPE_INT32', [-1, 16])] }, INS, OUTS, graph)).not.toThrow();
    // The file unreadable: left to run time, as before.
    expect(() => checkModelIo(cfg(['INPUT0', 'INPUTX']), INS, OUTS, () => { throw new Error('not an ONNX model'); })).not.toThrow();
  });

  it("refuses a model whose inputs are not as many as the config gives it, counting Triton's way: optional inputs out, batch inputs, sequence controls and implicit states in", () => {
    expect(() => checkModelIo({ name: 'simple', max_batch_size: 8, input: [SIMPLE_INPUTS[0]!] }, INS, OUTS))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "unable to load model 'simple', configuration expects 1 inputs, model provides 2" }));
    expect(() => checkModelIo({ name: 'simple', max_batch_size: 0, input: SIMPLE_INPUTS.map((i) => ({ ...i, dims: [1, 16], optional: true })) }, INS, OUTS))
      .toThrow("unable to load model 'simple', configuration expects 0 inputs, model provides 2");
    expect(() => checkModelIo({ name: 'simple', max_batch_size: 8, input: SIMPLE_INPUTS, batch_input: [{ kind: 'BATCH_ELEMENT_COUNT', target_name: ['N'], data_type: 'TYPE_INT32', source_input: ['INPUT0'] }] }, INS, OUTS))
      .toThrow('configuration expects 3 inputs, model provides 2');
    // silero_vad: two inputs and its state.
    const vad = [{ name: 'input', type: 'float32', dims: [-1, -1] }, { name: 'state', type: 'float32', dims: [2, -1, 128] }, { name: 'sr', type: 'int64', dims: [] }];
    const vadConfig = { name: 'vad', max_batch_size: 0, input: [io('input', 'TYPE_FP32', [1, -1]), io('sr', 'TYPE_INT64', [1])], sequence_batching: { state: [{ input_name: 'state', output_name: 'stateN', data_type: 'TYPE_FP32', dims: [2, 1, 128] }] } };
    const vadOuts = [{ name: 'output', type: 'float32', dims: [-1, 1] }, { name: 'stateN', type: 'float32', dims: [2, -1, 128] }];
    expect(() => checkModelIo(vadConfig, vad, vadOuts)).not.toThrow();
    expect(() => checkModelIo({ ...vadConfig, sequence_batching: {} }, vad, vadOuts)).toThrow('configuration expects 2 inputs, model provides 3');
    // An optional input is for a model that does not batch.
    expect(() => checkModelIo({ name: 'simple', max_batch_size: 8, input: [SIMPLE_INPUTS[0]!, SIMPLE_INPUTS[1]!, { ...io('W', 'TYPE_INT32', [16]), optional: true }] }, INS, OUTS, () => ['W']))
      .toThrow("unable to load model 'simple', optional input 'W' is not supported for models that support batching");
  });

  it("checks the sequence controls as Triton: a model input, of dims [1], of the control's data type", () => {
    const ins = [{ name: 'INPUT', type: 'int32', dims: [-1, 1] }, { name: 'START', type: 'int32', dims: [-1, 1] }, { name: 'CORRID', type: 'uint64', dims: [-1, 1] }];
    const controls = (start: string, startValues: Record<string, unknown> = { int32_false_true: [0, 1] }) => ({
      name: 'seq', max_batch_size: 8, input: [io('INPUT', 'TYPE_INT32', [1])],
      sequence_batching: { control_input: [{ name: start, control: [{ kind: 'CONTROL_SEQUENCE_START' as const, ...startValues }] }, { name: 'CORRID', control: [{ kind: 'CONTROL_SEQUENCE_CORRID' as const, data_type: 'TYPE_UINT64' }] }] },
    });
    expect(() => checkModelIo(controls('START'), ins, [])).not.toThrow();
    expect(() => checkModelIo(controls('BEGIN'), ins, [])).toThrow(expect.objectContaining({ code: 'INTERNAL', message: "configuration specified sequence control 'BEGIN', but model does not provide that input" }));
    expect(() => checkModelIo(controls('START', { fp32_false_true: [0, 1] }), ins, []))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "unable to load model 'seq', sequence control 'START', the model expects data-type INT32 but the model configuration specifies data-type TYPE_FP32" }));
    expect(() => checkModelIo(controls('START'), [ins[0]!, { ...ins[1]!, dims: [-1, 2] }, ins[2]!], []))
      .toThrow("unable to load model 'seq', sequence control 'START' in model has dims [2] but dims [1] is expected");
  });

  it("checks each implicit state: its input a model input and its output a model output, of the state's data type (review: a misnamed state loaded, and every request failed with onnxruntime's error)", () => {
    const ins = [{ name: 'X', type: 'int32', dims: [1] }, { name: 'S', type: 'int32', dims: [1] }];
    const outs = [{ name: 'Y', type: 'int32', dims: [1] }, { name: 'SO', type: 'int32', dims: [1] }];
    const cfg = (input_name: string, output_name: string, data_type = 'TYPE_INT32') => ({
      name: 'acc', max_batch_size: 0, input: [io('X', 'TYPE_INT32', [1])], output: [io('Y', 'TYPE_INT32', [1])],
      sequence_batching: { state: [{ input_name, output_name, data_type, dims: [1] }] },
    });
    expect(() => checkModelIo(cfg('S', 'SO'), ins, outs)).not.toThrow();
    // A state output may be a configured output too.
    expect(() => checkModelIo(cfg('S', 'Y'), ins, outs)).not.toThrow();
    expect(() => checkModelIo(cfg('S', 'SO_WRONG'), ins, outs)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "unexpected inference output 'SO_WRONG', allowed outputs are: SO, Y" }));
    expect(() => checkModelIo(cfg('S_WRONG', 'SO'), ins, outs)).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "unexpected inference input 'S_WRONG', allowed inputs are: S, X" }));
    expect(() => checkModelIo(cfg('S', 'SO', 'TYPE_FP32'), ins, outs))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "unable to load model 'acc', configuration expects datatype TYPE_FP32 for input state 'S', model provides TYPE_INT32" }));
    expect(() => checkModelIo(cfg('S', 'SO'), ins, [outs[0]!, { ...outs[1]!, type: 'float32' }]))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "unable to load model 'acc', configuration expects datatype TYPE_INT32 for output state 'SO', model provides TYPE_FP32" }));
  });

  it('an output dim the model leaves open must be open in the config too (Triton compares outputs exactly)', () => {
    expect(() => checkModelIo({ name: 'm', max_batch_size: 0, output: [io('Y', 'TYPE_FP32', [4])] }, [], [{ name: 'Y', type: 'float32', dims: [-1] }]))
      .toThrow("model 'm', tensor 'Y': the model expects 1 dimensions (shape [-1]) but the model configuration specifies 1 dimensions (shape [4])");
    expect(() => checkModelIo({ name: 'm', max_batch_size: 0, input: [io('X', 'TYPE_FP32', [4])] }, [{ name: 'X', type: 'float32', dims: [-1] }], [])).not.toThrow();
  });

  it('a batching config needs a first dim the model leaves open', () => {
    expect(() => checkModelIo({ name: 'm', max_batch_size: 4, input: [io('X', 'TYPE_FP32', [3])] }, [{ name: 'X', type: 'float32', dims: [1, 3] }], []))
      .toThrow("model 'm', tensor 'X': for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1; but shape expected by the model is [1,3]");
  });

  it('leaves the shapes of ragged inputs and batch outputs, and of tensors of unknown rank, unchecked', () => {
    expect(() => checkModelIo({
      name: 'r', max_batch_size: 8, input: [{ ...io('IN', 'TYPE_FP32', [-1]), allow_ragged_batch: true }], output: [io('OUT', 'TYPE_FP32', [-1]), io('U', 'TYPE_FP32', [2])],
      batch_output: [{ kind: 'BATCH_SCATTER_WITH_INPUT_SHAPE', target_name: ['OUT'], source_input: ['IN'] }],
    }, [{ name: 'IN', type: 'float32', dims: [-1] }], [{ name: 'OUT', type: 'float32', dims: [-1] }, { name: 'U', type: 'float32' }])).not.toThrow();
  });

  it("a served model whose config names an input its ONNX file does not have does not load, with Triton's words; an overridable initializer is an input (review: it loaded and failed every request)", async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-iocheck-names-'));
    const simpleConfig = (name: string, input0: string) => `name: "${name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n`
      + `input [ { name: "${input0}" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]\n`
      + 'output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] } ]\n';
    for (const [name, input0] of [['nul', 'INPUT0\\000'], ['typo', 'INPUTX']] as const) {
      cpSync(join(EXAMPLES, 'simple/1'), join(repo, name, '1'), { recursive: true });
      writeFileSync(join(repo, name, 'config.pbtxt'), simpleConfig(name, input0));
    }
    // Y = X + B, B an initializer listed among the graph's inputs (IR 7): a request may send it.
    const addB = model('addb', [node('Add', ['X', 'B'], ['Y'], 'add')], [valueInfo(11, 'X', T.INT64, [2]), valueInfo(11, 'B', T.INT64, [2])], [valueInfo(12, 'Y', T.INT64, [2])], [int64Initializer('B', [2], [10, 20])]);
    const addConfig = (name: string, b: string) => `name: "${name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\n`
      + `input [ { name: "X" data_type: TYPE_INT64 dims: [ 2 ] }, { name: "${b}" data_type: TYPE_INT64 dims: [ 2 ] optional: true } ]\noutput [ { name: "Y" data_type: TYPE_INT64 dims: [ 2 ] } ]\n`;
    for (const [name, b] of [['addb', 'B'], ['addc', 'C']] as const) {
      mkdirSync(join(repo, name, '1'), { recursive: true });
      writeFileSync(join(repo, name, '1', 'model.onnx'), addB);
      writeFileSync(join(repo, name, 'config.pbtxt'), addConfig(name, b));
    }
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()], strictReadiness: false });
    try {
      const reason = (m: string) => s.repositoryIndex().find((r) => r.name === m)?.reason;
      expect(reason('nul')).toContain("unexpected inference input 'INPUT0\\u0000', allowed inputs are: INPUT0, INPUT1");
      expect(reason('typo')).toContain("unexpected inference input 'INPUTX', allowed inputs are: INPUT0, INPUT1");
      expect(reason('addc')).toContain("unexpected inference input 'C', allowed inputs are: B, X");
      expect(s.modelReady('addb')).toBe(true);
      const x = { name: 'X', datatype: 'INT64' as const, shape: [2], data: BigInt64Array.of(1n, 2n) };
      expect(Array.from((await s.infer({ modelName: 'addb', inputs: [x] })).outputs[0]!.data as BigInt64Array)).toEqual([11n, 22n]);
      // onnxruntime-node cannot feed it: a request that sends it is refused, not answered with the default (review: [11, 22]).
      const b = { name: 'B', datatype: 'INT64' as const, shape: [2], data: BigInt64Array.of(100n, 200n) };
      await expect(s.infer({ modelName: 'addb', inputs: [x, b] })).rejects.toMatchObject({
        code: 'UNSUPPORTED',
        message: "input 'B' of model 'addb' is an overridable initializer of the ONNX model, which the onnxruntime backend cannot pass (onnxruntime-node feeds a model's required inputs only): send the request without it to use the model's value",
      });
    } finally {
      await s.stop(1000);
    }
  });

  it('a served model whose implicit state the ONNX file does not have does not load (before, it loaded and every request failed: "\'fetches\' contains invalid output name")', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-iocheck-state-'));
    // Y = X + S, SO = Y: an accumulator whose state is S / SO.
    const acc = model('acc', [node('Add', ['X', 'S'], ['Y'], 'add'), node('Identity', ['Y'], ['SO'], 'id')], [valueInfo(11, 'X', T.INT32, [1]), valueInfo(11, 'S', T.INT32, [1])], [valueInfo(12, 'Y', T.INT32, [1]), valueInfo(12, 'SO', T.INT32, [1])]);
    for (const [name, out] of [['acc', 'SO'], ['typo', 'SO_WRONG']] as const) {
      mkdirSync(join(repo, name, '1'), { recursive: true });
      writeFileSync(join(repo, name, '1', 'model.onnx'), acc);
      writeFileSync(join(repo, name, 'config.pbtxt'), `name: "${name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 0\ninput [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n`
        + `sequence_batching { state [ { input_name: "S" output_name: "${out}" data_type: TYPE_INT32 dims: [ 1 ] } ] }\n`);
    }
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()], strictReadiness: false });
    try {
      expect(s.repositoryIndex().find((r) => r.name === 'typo')?.reason).toContain("unexpected inference output 'SO_WRONG', allowed outputs are: SO, Y");
      const ask = async (start: boolean) => (await s.infer({ modelName: 'acc', parameters: { sequence_id: 1, sequence_start: start }, inputs: [{ name: 'X', datatype: 'INT32', shape: [1], data: Int32Array.of(5) }] })).outputs[0]!.data[0];
      expect([await ask(true), await ask(false)]).toEqual([5, 10]);
    } finally {
      await s.stop(1000);
    }
  });

  it('onnxGraphInputNames reads the graph inputs of a file, initializers listed as inputs included, skipping the rest', () => {
    expect(onnxGraphInputNames(join(EXAMPLES, 'simple/1/model.onnx'))).toEqual(['INPUT0', 'INPUT1']);
    const dir = mkdtempSync(join(tmpdir(), 'triode-graph-inputs-'));
    writeFileSync(join(dir, 'a.onnx'), model('g', [node('Add', ['X', 'B'], ['Y'], 'add')], [valueInfo(11, 'X', T.INT64, [2]), valueInfo(11, 'B', T.INT64, [2])], [valueInfo(12, 'Y', T.INT64, [2])], [int64Initializer('B', [2], [1, 2])]));
    expect(onnxGraphInputNames(join(dir, 'a.onnx'))).toEqual(['X', 'B']);
    // Cut short, or not protobuf: an error, not a hang or a crash.
    const bytes = readFileSync(join(dir, 'a.onnx'));
    writeFileSync(join(dir, 'cut.onnx'), bytes.subarray(0, bytes.length - 20));
    expect(() => onnxGraphInputNames(join(dir, 'cut.onnx'))).toThrow('not an ONNX model');
    writeFileSync(join(dir, 'junk.onnx'), Buffer.from([0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f]));
    expect(() => onnxGraphInputNames(join(dir, 'junk.onnx'))).toThrow('not an ONNX model');
    expect(() => onnxGraphInputNames(dir)).toThrow();
  });

  it('a served model whose config contradicts its ONNX file does not load (before, it loaded and answered INT32 data labelled by the config)', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-iocheck-'));
    cpSync(join(EXAMPLES, 'simple/1'), join(repo, 'liar/1'), { recursive: true });
    writeFileSync(join(repo, 'liar/config.pbtxt'), 'name: "liar"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
      + 'input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]\n'
      + 'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4, 4 ] } ]\n');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()], strictReadiness: false });
    try {
      expect(s.repositoryIndex()).toEqual([{ name: 'liar', version: '1', state: 'UNAVAILABLE', reason: expect.stringContaining("configuration expects datatype TYPE_FP32 for output 'OUTPUT0', model provides TYPE_INT32") }]);
    } finally {
      await s.stop(1000);
    }
  });
});
