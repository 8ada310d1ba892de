import { describe, expect, it } from 'vitest';
import { MAX_CLASSIFICATIONS, classify } from './classification.js';
import { deserializeBytesTensor } from './tensor/bytes-tensor.js';

const strings = (t: { data: ArrayBufferView }) =>
  deserializeBytesTensor(t.data as Uint8Array).map((b) => Buffer.from(b).toString());

describe('classify()', () => {
  it('returns the top-k of each batch item as value:index:label, highest first', () => {
    const t = classify({ name: 'p', datatype: 'FP32', shape: [2, 3], data: new Float32Array([0.1, 0.7, 0.2, 0.9, 0.05, 0.05]) }, 2, true, ['a', 'b', 'c']);
    expect(t.datatype).toBe('BYTES');
    expect(t.shape).toEqual([2, 2]);
    expect(strings(t)).toEqual(['0.700000:1:b', '0.200000:2:c', '0.900000:0:a', '0.050000:1:b']);
  });

  it('caps k at the elements per item and prints integers as integers, without labels', () => {
    const t = classify({ name: 'p', datatype: 'INT32', shape: [3], data: new Int32Array([5, 10, 1]) }, 10, false);
    expect(t.shape).toEqual([3]);
    expect(strings(t)).toEqual(['10:1', '5:0', '1:2']);
  });

  it('the heap (small k) and the sort (large k) agree, ties in index order', () => {
    const data = new Float32Array(1000).map((_, i) => (i * 37) % 101);
    const bySort = (k: number) => {
      const idx = Array.from({ length: data.length }, (_, i) => i);
      idx.sort((x, y) => (data[x]! < data[y]! ? 1 : data[x]! > data[y]! ? -1 : x - y));
      return idx.slice(0, k).map((j) => `${data[j]!.toFixed(6)}:${j}`);
    };
    for (const k of [1, 5, 100, 249, 250, 1000]) {
      expect(strings(classify({ name: 'p', datatype: 'FP32', shape: [1000], data }, k, false)), `k=${k}`).toEqual(bySort(k));
    }
  });

  it('NaN ranks after every number, in the sort and the heap alike (review: [1, NaN, 3] top 2 gave 1 and NaN, without 3)', () => {
    const top = (values: number[], k: number) => strings(classify({ name: 'p', datatype: 'FP32', shape: [values.length], data: new Float32Array(values) }, k, false));
    expect(top([1, NaN, 3], 3)).toEqual(['3.000000:2', '1.000000:0', 'nan:1']);
    expect(top([1, NaN, 3], 2)).toEqual(['3.000000:2', '1.000000:0']);
    // k small against the item: the heap.
    expect(top([1, NaN, 3, 0, NaN, 0, 0, 2], 1)).toEqual(['3.000000:2']);
    expect(top([NaN, NaN, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], 2)).toEqual(['1.000000:2', '0.000000:3']);
    expect(top([NaN, NaN], 2)).toEqual(['nan:0', 'nan:1']);
  });

  it('the top 1 of 16M elements (one pass, where a full sort of every index held the event loop ~10 s)', () => {
    const data = new Int32Array(16_000_000).map((_, i) => i % 1000);
    expect(strings(classify({ name: 'p', datatype: 'INT32', shape: [16_000_000], data }, 1, false))).toEqual(['999:999']);
    const withNaN = new Float32Array([1, Number.NaN, 3, 2]);
    expect(strings(classify({ name: 'p', datatype: 'FP32', shape: [4], data: withNaN }, 1, false))).toHaveLength(1);
  });

  it('attack: a class count that would give over MAX_CLASSIFICATIONS strings is refused before any sorting (class_count 1e9 on 8M elements held the server 20 s)', () => {
    const data = new Int32Array(8_000_000);
    expect(() => classify({ name: 'p', datatype: 'INT32', shape: [1, 8_000_000], data }, 1e9, true)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARG', message: "classification of 8000000 classes a batch item for output 'p' gives 8000000 results, over the limit of 100000" }) as Error,
    );
    // The limit counts every batch item's results: 2 x 50,000 passes, 2 x 50,001 does not.
    const two = new Float32Array(2 * 60_000);
    expect(classify({ name: 'p', datatype: 'FP32', shape: [2, 60_000], data: two }, MAX_CLASSIFICATIONS / 2, true).shape).toEqual([2, 50_000]);
    expect(() => classify({ name: 'p', datatype: 'FP32', shape: [2, 60_000], data: two }, MAX_CLASSIFICATIONS / 2 + 1, true)).toThrow(/over the limit of 100000/);
  });

  it('refuses BYTES outputs', () => {
    expect(() => classify({ name: 'p', datatype: 'BYTES', shape: [1], data: new Uint8Array(5) }, 1, false)).toThrow("class result not available for output due to unsupported type 'BYTES'");
  });

  it('refuses FP16 and BF16 outputs with Triton\'s text, which names no output (server src/classification.cc)', () => {
    for (const datatype of ['FP16', 'BF16'] as const) {
      expect(() => classify({ name: 'h', datatype, shape: [2], data: new Uint16Array(2) }, 1, false))
        .toThrow(new RegExp(`^class result not available for output due to unsupported type '${datatype}'$`));
    }
  });

  it('refuses BOOL outputs, as Triton (before: "1:0" strings)', () => {
    expect(() => classify({ name: 'b', datatype: 'BOOL', shape: [2], data: Uint8Array.of(0, 1) }, 1, false)).toThrow("class result not available for output due to unsupported type 'BOOL'");
  });
});
