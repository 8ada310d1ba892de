/**
 * @module Tensor data in KServe v2 JSON: `data` arrays (flat or nested, row-major) to typed arrays
 * and back. Triton: server/src/http_server.cc ReadDataFromJson, WriteDataToJson
 */
import {
  Errors, dataTypeByteSize, deserializeBytesTensor, serializeBytesTensor,
  type DataType, type TensorData,
} from '@triode/core';

const INT_LIMITS: Partial<Record<DataType, [number, number]>> = {
  INT8: [-128, 127], INT16: [-32768, 32767], INT32: [-2147483648, 2147483647],
  UINT8: [0, 255], UINT16: [0, 65535], UINT32: [0, 4294967295],
};

/** Flattens nested arrays of `data` (row-major) into `out`. */
function flatten(v: unknown, out: unknown[]): boolean {
  if (!Array.isArray(v)) {
    out.push(v);
    return true;
  }
  for (const x of v) if (!flatten(x, out)) return false;
  return true;
}

/**
 * Converts an input's JSON `data` to a typed array of `datatype` holding `count` elements.
 * @throws INVALID_ARG naming the input when a value has the wrong type or the count differs.
 */
export function jsonToTensorData(data: unknown, datatype: DataType, count: number, input: string): TensorData {
  if (datatype === 'FP16' || datatype === 'BF16') {
    throw Errors.invalidArg(`receiving ${datatype} data via JSON is not supported. Please use the binary data format for input '${input}'`);
  }
  const flat: unknown[] = [];
  flatten(data, flat);
  if (flat.length !== count) {
    throw Errors.invalidArg(`Unable to parse 'data': Shape does not match true shape of 'data' field for input '${input}': expected ${count} elements, got ${flat.length}`);
  }
  const bad = (i: number, what: string) => Errors.invalidArg(`Unable to parse 'data': input '${input}' element ${i} is not ${what}`);
  if (datatype === 'BYTES') {
    const parts = flat.map((x, i) => {
      if (typeof x !== 'string') throw bad(i, 'a string');
      return x;
    });
    return serializeBytesTensor(parts);
  }
  if (datatype === 'BOOL') {
    const out = new Uint8Array(count);
    for (let i = 0; i < count; i++) {
      const x = flat[i];
      if (typeof x !== 'boolean') throw bad(i, 'a boolean');
      out[i] = x ? 1 : 0;
    }
    return out;
  }
  if (datatype === 'INT64' || datatype === 'UINT64') {
    const out = datatype === 'INT64' ? new BigInt64Array(count) : new BigUint64Array(count);
    for (let i = 0; i < count; i++) {
      const x = flat[i];
      if (typeof x !== 'number' || !Number.isInteger(x) || (datatype === 'UINT64' && x < 0)) throw bad(i, `an integer of type ${datatype}`);
      out[i] = BigInt(x);
    }
    return out;
  }
  const Ctor = {
    INT8: Int8Array, INT16: Int16Array, INT32: Int32Array, UINT8: Uint8Array, UINT16: Uint16Array,
    UINT32: Uint32Array, FP32: Float32Array, FP64: Float64Array,
  }[datatype];
  const out = new Ctor(count);
  const limits = INT_LIMITS[datatype];
  for (let i = 0; i < count; i++) {
    const x = flat[i];
    if (typeof x !== 'number') throw bad(i, 'a number');
    if (limits && (!Number.isInteger(x) || x < limits[0] || x > limits[1])) throw bad(i, `an integer of type ${datatype}`);
    out[i] = x;
  }
  return out;
}

/** Writes tensor data as the text of a flat JSON array (Triton writes flat arrays). */
export function tensorDataToJson(data: TensorData, datatype: DataType): string {
  if (datatype === 'BYTES') {
    const dec = new TextDecoder();
    return JSON.stringify(deserializeBytesTensor(data as Uint8Array).map((b) => dec.decode(b)));
  }
  if (datatype === 'BOOL') {
    let s = '[';
    for (let i = 0; i < data.length; i++) s += (i ? ',' : '') + (data[i] ? 'true' : 'false');
    return s + ']';
  }
  if (datatype === 'FP16' || datatype === 'BF16') {
    const words = data as Uint16Array;
    const out = new Array<number>(words.length);
    for (let i = 0; i < words.length; i++) out[i] = datatype === 'FP16' ? halfToFloat(words[i]!) : bf16ToFloat(words[i]!);
    return finiteJoin(out);
  }
  if (datatype === 'FP32' || datatype === 'FP64') return finiteJoin(data as Float32Array);
  // Integers (incl. BigInt arrays) print exactly with join.
  return '[' + (data as Int32Array).join(',') + ']';
}

/** Joins floats; non-finite values (which JSON cannot hold) become null. */
function finiteJoin(a: ArrayLike<number>): string {
  let s = '[';
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    s += (i ? ',' : '') + (Number.isFinite(x) ? String(x) : 'null');
  }
  return s + ']';
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

function bf16ToFloat(w: number): number {
  u32[0] = w << 16;
  return f32[0]!;
}

function halfToFloat(h: number): number {
  const s = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const f = h & 0x3ff;
  if (e === 0) return s * f * 2 ** -24;
  if (e === 31) return f ? NaN : s * Infinity;
  return s * (1 + f / 1024) * 2 ** (e - 15);
}

/** Byte size a tensor of `count` elements of a fixed-size type must have. */
export function expectedByteSize(datatype: DataType, count: number): number {
  return count * dataTypeByteSize(datatype);
}
