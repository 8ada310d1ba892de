// ppocr_cls's stand-in that answers at once, for the benches that measure what a ppocr_cls request
// costs outside its model (bench/cls-raw.mjs's `instant`, bench/shared-memory.mjs --model instant).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { T, int, model as onnxModel, msg, node, str, valueInfo } from '../scripts/onnx-writer.mjs';

/** ppocr_cls's input and output names, but one ReduceMax over each sample: an answer at once. */
export function instantModel() {
  const axes = msg(5, [str(1, 'axes'), ...[1, 2, 3].map((a) => int(8, a)), int(20, 7)]);
  const keep = msg(5, [str(1, 'keepdims'), int(3, 1), int(20, 2)]);
  const flat = msg(5, [str(1, 'axis'), int(3, 1), int(20, 2)]);
  return onnxModel('instant', [node('ReduceMax', ['x'], ['r'], 'max', [axes, keep]), node('Flatten', ['r'], ['softmax_0.tmp_0'], 'flat', [flat])],
    [valueInfo(11, 'x', T.FLOAT, ['b', 3, 48, 192])], [valueInfo(12, 'softmax_0.tmp_0', T.FLOAT, ['b', 1])]);
}

/** Turns a copy of model_repository/ppocr_cls at `dir` into the instant model (its output is one value a sample). */
export function makeInstant(dir) {
  writeFileSync(join(dir, '1', 'model.onnx'), instantModel());
  const config = join(dir, 'config.pbtxt');
  writeFileSync(config, readFileSync(config, 'utf8').replace('dims: [ 2 ]', 'dims: [ 1 ]'));
}
