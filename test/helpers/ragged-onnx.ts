/**
 * Test helper: a tiny ONNX model that takes a ragged batch, as Triton's ragged batching example
 * does (docs/user_guide/ragged_batching.md): INPUT, every request's elements one after another
 * ([total elements]), and INDEX, the BATCH_ACCUMULATED_ELEMENT_COUNT batch input ([requests]).
 * DOUBLED = INPUT * 2 ([total elements], scattered back with each request's input shape);
 * ACC = INDEX as [requests, 1] (a plain batch output: each request gets its row).
 * Written with the example repository's ONNX encoder (scripts/onnx-writer.mjs).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { T, int64Initializer, model, node, valueInfo } from '../../scripts/onnx-writer.mjs';

/** The model file's bytes. */
export function raggedOnnxModel(): Uint8Array {
  return model('ragged', [
    node('Add', ['INPUT', 'INPUT'], ['DOUBLED'], 'double'),
    node('Reshape', ['INDEX', 'column'], ['ACC'], 'acc'),
  ], [
    valueInfo(11, 'INPUT', T.FLOAT, ['total']),
    valueInfo(11, 'INDEX', T.FLOAT, ['requests']),
  ], [
    valueInfo(12, 'DOUBLED', T.FLOAT, ['total']),
    valueInfo(12, 'ACC', T.FLOAT, ['requests', 1]),
  ], [int64Initializer('column', [2], [-1, 1])]);
}

/** Its config: a batch forms only once `preferred` requests are queued (or after a minute). */
export function raggedOnnxConfig(name: string, preferred = 4): string {
  return `name: "${name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }
output { name: "DOUBLED" data_type: TYPE_FP32 dims: [ -1 ] }
output { name: "ACC" data_type: TYPE_FP32 dims: [ 1 ] }
batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX" data_type: TYPE_FP32 source_input: "INPUT" } ]
batch_output [ { target_name: "DOUBLED" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]
dynamic_batching { preferred_batch_size: [ ${preferred} ] max_queue_delay_microseconds: 60000000 }
instance_group { count: 1 kind: KIND_CPU }
`;
}

/** Writes the model (config and version 1) as `<repo>/<name>`, with extra config lines appended. */
export function writeRaggedOnnxModel(repo: string, name: string, options: { preferred?: number; extraConfig?: string } = {}): void {
  mkdirSync(join(repo, name, '1'), { recursive: true });
  writeFileSync(join(repo, name, 'config.pbtxt'), raggedOnnxConfig(name, options.preferred) + (options.extraConfig ?? ''));
  writeFileSync(join(repo, name, '1', 'model.onnx'), raggedOnnxModel());
}
