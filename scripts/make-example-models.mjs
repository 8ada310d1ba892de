// Writes the small ONNX graphs of the example repository (Triton's `simple`, `simple_int8`,
// `simple_string`, `simple_sequence`, `simple_dyna_sequence`) with the hand-rolled protobuf encoder of
// onnx-writer.mjs, so no Python or onnx package is needed.
// Run: node scripts/make-example-models.mjs [outdir=model_repository]
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { T, castTo, model, node, valueInfo } from './onnx-writer.mjs';

/** add_sub over `type`, with casts to and from INT32 when the type is not INT32. */
function addSub(name, type) {
  const dims = ['batch', 16];
  const io = (f, n) => valueInfo(f, n, type, dims);
  const nodes = [];
  let a = 'INPUT0';
  let b = 'INPUT1';
  if (type !== T.INT32) {
    nodes.push(node('Cast', ['INPUT0'], ['in0_i32'], 'cast_in0', [castTo(T.INT32)]));
    nodes.push(node('Cast', ['INPUT1'], ['in1_i32'], 'cast_in1', [castTo(T.INT32)]));
    a = 'in0_i32';
    b = 'in1_i32';
  }
  const sum = type === T.INT32 ? 'OUTPUT0' : 'sum_i32';
  const diff = type === T.INT32 ? 'OUTPUT1' : 'diff_i32';
  nodes.push(node('Add', [a, b], [sum], 'add'));
  nodes.push(node('Sub', [a, b], [diff], 'sub'));
  if (type !== T.INT32) {
    nodes.push(node('Cast', [sum], ['OUTPUT0'], 'cast_out0', [castTo(type)]));
    nodes.push(node('Cast', [diff], ['OUTPUT1'], 'cast_out1', [castTo(type)]));
  }
  return model(name, nodes, [io(11, 'INPUT0'), io(11, 'INPUT1')], [io(12, 'OUTPUT0'), io(12, 'OUTPUT1')]);
}

/**
 * Triton's stateless sequence examples, fed by the sequence batcher's control inputs:
 * simple_sequence:      OUTPUT = (INPUT + START) * READY
 * simple_dyna_sequence: OUTPUT = (INPUT + START + END * int32(CORRID)) * READY
 */
function sequenceModel(name, dyna) {
  const io = (f, n, t = T.INT32) => valueInfo(f, n, t, ['batch', 1]);
  const nodes = [node('Add', ['INPUT', 'START'], ['in_start'], 'add_start')];
  let sum = 'in_start';
  if (dyna) {
    nodes.push(node('Cast', ['CORRID'], ['corrid_i32'], 'cast_corrid', [castTo(T.INT32)]));
    nodes.push(node('Mul', ['END', 'corrid_i32'], ['end_corrid'], 'mul_end'));
    nodes.push(node('Add', ['in_start', 'end_corrid'], ['in_start_end'], 'add_end'));
    sum = 'in_start_end';
  }
  nodes.push(node('Mul', [sum, 'READY'], ['OUTPUT'], 'mul_ready'));
  const inputs = [io(11, 'INPUT'), io(11, 'START'), io(11, 'READY')];
  if (dyna) inputs.push(io(11, 'END'), io(11, 'CORRID', T.UINT64));
  return model(name, nodes, inputs, [io(12, 'OUTPUT')]);
}

const out = process.argv[2] ?? 'model_repository';
const models = [
  ['simple', addSub('simple', T.INT32)],
  ['simple_int8', addSub('simple_int8', T.INT8)],
  ['simple_string', addSub('simple_string', T.STRING)],
  ['simple_sequence', sequenceModel('simple_sequence', false)],
  ['simple_dyna_sequence', sequenceModel('simple_dyna_sequence', true)],
];
for (const [name, bytes] of models) {
  const dir = join(out, name, '1');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'model.onnx'), bytes);
  console.log(`wrote ${join(dir, 'model.onnx')}`);
}
