import { describe, expect, it } from 'vitest';
import type { BatchInputKind, ModelConfig, Tensor } from '@triode/core';
import { batchInputShape, batchInputTensors, batchInputValues, collectBatchInputs } from './backend-input-collector.js';

const fp32 = (name: string, shape: number[], fill: number): Tensor => ({ name, datatype: 'FP32', shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(fill) });
/** qa/L0_batch_input's four requests: RAGGED_INPUT of shapes [1,2], [1,4], [1,1], [1,3]. */
const QA = [[1, 2], [1, 4], [1, 1], [1, 3]];

describe('batch input values and shapes (Triton BackendInputCollector)', () => {
  it.each<[BatchInputKind, number[][], number[], number[]]>([
    // docs/user_guide/ragged_batching.md: requests [1,3], [1,4], [1,5] -> INDEX [3, 7, 12].
    ['BATCH_ACCUMULATED_ELEMENT_COUNT', [[1, 3], [1, 4], [1, 5]], [3], [3, 7, 12]],
    // qa/L0_batch_input batch_input_test.py: test_element_count, test_accumulated_element_count(_with_zero).
    ['BATCH_ELEMENT_COUNT', QA, [4], [2, 4, 1, 3]],
    ['BATCH_ACCUMULATED_ELEMENT_COUNT', QA, [4], [2, 6, 7, 10]],
    ['BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO', QA, [5], [0, 2, 6, 7, 10]],
    // test_max_element_count_as_shape: the shape says 4, the values are not read.
    ['BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', QA, [4], [0, 0, 0, 0]],
    // test_batch_item_shape_flatten: [1,4,1], [1,1,2], [1,1,2], [1,2,2] -> [4,1, 1,2, 1,2, 2,2].
    ['BATCH_ITEM_SHAPE_FLATTEN', [[1, 4, 1], [1, 1, 2], [1, 1, 2], [1, 2, 2]], [8], [4, 1, 1, 2, 1, 2, 2, 2]],
    // test_batch_item_shape: [2,1,2], [1,1,2], [1,2,2]: a request of batch size 2 is two items.
    ['BATCH_ITEM_SHAPE', [[2, 1, 2], [1, 1, 2], [1, 2, 2]], [4, 2], [1, 2, 1, 2, 1, 2, 2, 2]],
    // Element counts take every dim, the batch dim included.
    ['BATCH_ELEMENT_COUNT', [[2, 3], [1, 5]], [2], [6, 5]],
    ['BATCH_ITEM_SHAPE_FLATTEN', [[2, 3], [1, 5]], [3], [3, 3, 5]],
  ])('%s of %j: shape %j, values %j', (kind, shapes, shape, values) => {
    expect(batchInputShape(kind, shapes)).toEqual(shape);
    expect(Array.from(batchInputValues(kind, shapes))).toEqual(values);
    expect(batchInputValues(kind, shapes)).toHaveLength(shape.reduce((a, b) => a * b, 1));
    expect(Array.from(batchInputValues(kind, shapes, 'FP32'))).toEqual(values);
  });

  it('writes the values straight into a typed array of the datatype, never a JS array as long as the element count', () => {
    // One ragged INT8 request of 40 MB (under the body limit): a 40-million-number JS array went to
    // V8's dictionary mode (the server peaked at 5 GB and took seconds).
    const shapes = [[1, 40_000_000]];
    const ints = batchInputValues('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', shapes);
    // (A boolean: printing a 40-million-element array that is not one takes a minute.)
    expect(ints instanceof Int32Array).toBe(true);
    expect(ints).toHaveLength(40_000_000);
    const floats = batchInputValues('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', shapes, 'FP32');
    expect(floats instanceof Float32Array).toBe(true);
    expect(floats).toHaveLength(40_000_000);
    expect(batchInputValues('BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO', [[1, 3], [1, 4]])).toBeInstanceOf(Int32Array);
    expect(batchInputValues('BATCH_ITEM_SHAPE', [[2, 1, 2]], 'FP32')).toBeInstanceOf(Float32Array);
  });

  it('gives a ragged batch\'s BATCH_MAX_ELEMENT_COUNT_AS_SHAPE as a zero-filled typed array of its datatype', () => {
    const n = 40_000_000;
    const [input, max] = collectBatchInputs([{ inputs: [{ name: 'RAGGED', datatype: 'INT8', shape: [1, n], data: new Int8Array(n) }] }], {
      max_batch_size: 8,
      input: [{ name: 'RAGGED', data_type: 'TYPE_INT8', dims: [-1], allow_ragged_batch: true }],
      batch_input: [{ kind: 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', target_name: ['MAX'], data_type: 'TYPE_INT32', source_input: ['RAGGED'] }],
    });
    expect(input!.shape).toEqual([n]);
    expect(max).toMatchObject({ name: 'MAX', datatype: 'INT32', shape: [n], owned: true });
    expect(max!.data).toBeInstanceOf(Int32Array);
    expect(max!.data).toHaveLength(n);
    expect((max!.data as Int32Array).every((v) => v === 0)).toBe(true);
  });

  it('makes one tensor per target name, INT32 or FP32 as configured, owned by the receiver', () => {
    const [a, b] = batchInputTensors({ kind: 'BATCH_ACCUMULATED_ELEMENT_COUNT', target_name: ['INDEX', 'INDEX2'], data_type: 'TYPE_FP32', source_input: ['INPUT'] }, [[1, 3], [1, 4], [1, 5]]);
    expect(a).toMatchObject({ name: 'INDEX', datatype: 'FP32', shape: [3], owned: true });
    expect(a!.data).toBeInstanceOf(Float32Array);
    expect(Array.from(a!.data as Float32Array)).toEqual([3, 7, 12]);
    expect(b!.name).toBe('INDEX2');
    const [n] = batchInputTensors({ target_name: ['N'], data_type: 'TYPE_INT32', source_input: ['INPUT'] }, [[1, 3], [1, 4]]);
    // kind left out is BATCH_ELEMENT_COUNT (the proto's 0).
    expect(n).toMatchObject({ name: 'N', datatype: 'INT32', shape: [2] });
    expect(Array.from(n!.data as Int32Array)).toEqual([3, 4]);
  });
});

describe('collectBatchInputs', () => {
  const config: ModelConfig = {
    max_batch_size: 16,
    input: [{ name: 'INPUT', data_type: 'TYPE_FP32', dims: [-1], allow_ragged_batch: true }, { name: 'SCALE', data_type: 'TYPE_FP32', dims: [1] }],
    batch_input: [{ kind: 'BATCH_ACCUMULATED_ELEMENT_COUNT', target_name: ['INDEX'], data_type: 'TYPE_FP32', source_input: ['INPUT'] }],
  };

  it('gives the ragged example of ragged_batching.md: INPUT [12] (3 + 4 + 5 elements) and INDEX [3, 7, 12]', () => {
    const requests = [3, 4, 5].map((n) => ({ inputs: [fp32('INPUT', [1, n], n), fp32('SCALE', [1, 1], n * 10)] }));
    const [input, scale, index] = collectBatchInputs(requests, config);
    expect(input).toMatchObject({ name: 'INPUT', datatype: 'FP32', shape: [12], owned: true });
    expect(Array.from(input!.data as Float32Array)).toEqual([3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5]);
    // A regular input is joined along the batch dim.
    expect(scale).toMatchObject({ name: 'SCALE', shape: [3, 1], owned: true });
    expect(Array.from(scale!.data as Float32Array)).toEqual([30, 40, 50]);
    expect(index).toMatchObject({ name: 'INDEX', shape: [3] });
    expect(Array.from(index!.data as Float32Array)).toEqual([3, 7, 12]);
  });

  it('flattens a lone request\'s ragged input without copying it, and passes a regular one on as it is', () => {
    const input = fp32('INPUT', [2, 3], 1);
    const scale = { ...fp32('SCALE', [2, 1], 1), owned: false };
    const [i, s, index] = collectBatchInputs([{ inputs: [input, scale] }], config);
    expect(i!.shape).toEqual([6]);
    expect(i!.data).toBe(input.data);
    expect(s).toBe(scale);
    expect(Array.from(index!.data as Float32Array)).toEqual([6]);
  });

  it('joins BYTES elements', () => {
    const bytes = (s: string[]): Tensor => {
      const parts = s.map((x) => { const b = new Uint8Array(4 + x.length); new DataView(b.buffer).setUint32(0, x.length, true); b.set(new TextEncoder().encode(x), 4); return b; });
      const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) { all.set(p, at); at += p.length; }
      return { name: 'T', datatype: 'BYTES', shape: [1, s.length], data: all };
    };
    const [t] = collectBatchInputs([{ inputs: [bytes(['a', 'bc'])] }, { inputs: [bytes(['def'])] }], { max_batch_size: 4, input: [{ name: 'T', data_type: 'TYPE_STRING', dims: [-1], allow_ragged_batch: true }] });
    expect(t!.shape).toEqual([3]);
    expect(t!.data.byteLength).toBe(4 + 1 + 4 + 2 + 4 + 3);
  });

  it('refuses a batch input whose source a request lacks', () => {
    expect(() => collectBatchInputs([{ inputs: [fp32('SCALE', [1, 1], 1)] }], config)).toThrow(expect.objectContaining({ code: 'INVALID_ARG' }));
  });
});
