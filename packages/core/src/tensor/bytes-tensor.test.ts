import { describe, expect, it, vi } from 'vitest';
import { countBytesElements, deserializeBytesTensor, serializeBytesTensor } from './bytes-tensor.js';
import { configTypeToDataType, dataTypeByteSize, dataTypeToConfigType, elementCount, isDataType, viewBytesAs } from './data-type.js';

describe('BYTES tensors', () => {
  it('serializes with 4-byte little-endian length prefixes and keeps NUL bytes', () => {
    const buf = serializeBytesTensor(['he\0llo', new Uint8Array([0, 1, 2, 3]), '']);
    expect([...buf.subarray(0, 4)]).toEqual([6, 0, 0, 0]);
    const parts = deserializeBytesTensor(buf, 3);
    expect(Buffer.from(parts[0]!).toString()).toBe('he\0llo');
    expect([...parts[1]!]).toEqual([0, 1, 2, 3]);
    expect(parts[2]!.byteLength).toBe(0);
    expect(countBytesElements(buf)).toBe(3);
  });

  it('serializes any string as UTF-8, lone surrogates as U+FFFD, exactly as TextEncoder does', () => {
    const strings = ['', 'a', 'é', '日本', '😀', '\ud800', 'x\udc00y', 'mixed é 😀 \ud83d end'];
    const parts = deserializeBytesTensor(serializeBytesTensor(strings), strings.length);
    expect(parts.map((p) => [...p])).toEqual(strings.map((x) => [...new TextEncoder().encode(x)]));
  });

  it('attack: strings are written into one buffer, with no array made per element (20 million from a 60 MB JSON request ran the server out of heap)', () => {
    const encode = vi.spyOn(TextEncoder.prototype, 'encode');
    try {
      const many = new Array<string>(1_000_000).fill('').map((e, i) => (i % 2 ? e : 'ab'));
      const buf = serializeBytesTensor(many);
      expect(buf.byteLength).toBe(4_000_000 + 1_000_000);
      expect(countBytesElements(buf)).toBe(1_000_000);
      expect(encode).not.toHaveBeenCalled();
    } finally {
      encode.mockRestore();
    }
  });

  it('rejects a length that runs past the end, and a wrong element count', () => {
    const bad = new Uint8Array([5, 0, 0, 0, 1, 2]);
    expect(() => deserializeBytesTensor(bad)).toThrow('element 0 of 5 bytes runs past the end of the data');
    expect(countBytesElements(bad)).toBe(-1);
    expect(countBytesElements(new Uint8Array([1, 0]))).toBe(-1);
    expect(() => deserializeBytesTensor(serializeBytesTensor(['a']), 2)).toThrow('expected 2 string elements, got 1');
  });
});

describe('data types', () => {
  it('maps every Triton type between config and wire names with its size', () => {
    const sizes = { BOOL: 1, UINT8: 1, UINT16: 2, UINT32: 4, UINT64: 8, INT8: 1, INT16: 2, INT32: 4, INT64: 8, FP16: 2, BF16: 2, FP32: 4, FP64: 8, BYTES: 0 } as const;
    for (const [dt, size] of Object.entries(sizes)) {
      expect(isDataType(dt)).toBe(true);
      expect(dataTypeByteSize(dt as keyof typeof sizes)).toBe(size);
      expect(configTypeToDataType(dataTypeToConfigType(dt as keyof typeof sizes))).toBe(dt);
    }
    expect(dataTypeToConfigType('BYTES')).toBe('TYPE_STRING');
    expect(configTypeToDataType('TYPE_INVALID')).toBeUndefined();
    expect(isDataType('FLOAT')).toBe(false);
  });

  it('views little-endian bytes as typed arrays, copying only when unaligned', () => {
    const bytes = new Uint8Array([0, 1, 0, 0, 0, 2, 0, 0, 0]);
    const unaligned = viewBytesAs('INT32', bytes.subarray(1));
    expect([...unaligned]).toEqual([1, 2]);
    const aligned = new Uint8Array(8);
    aligned[0] = 7;
    const v = viewBytesAs('INT32', aligned);
    expect(v.buffer).toBe(aligned.buffer);
    expect([...viewBytesAs('INT64', new Uint8Array([1, 0, 0, 0, 0, 0, 0, 0]))]).toEqual([1n]);
    // A Node Buffer at an odd offset (Buffer#slice is a view, so it must not be used to copy).
    const b = Buffer.from([9, 2, 0, 0, 0, 3, 0, 0, 0]).subarray(1);
    expect([...viewBytesAs('INT32', b)]).toEqual([2, 3]);
    expect(elementCount([])).toBe(1);
    expect(elementCount([2, 0, 3])).toBe(0);
  });
});
