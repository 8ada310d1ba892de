/**
 * @module Tensor data in KServe v2 JSON: `data` arrays (flat or nested, row-major) to typed arrays
 * and back. Triton: server/src/http_server.cc ReadDataFromJson, WriteDataToJson
 */
import {
  Errors, dataTypeByteSize, deserializeBytesTensor, echo, elementCountExact, serializeBytesTensor,
  type DataType, type TensorData,
} from '@triode/core';

const INT_LIMITS: Partial<Record<DataType, [number, number]>> = {
  INT8: [-128, 127], INT16: [-32768, 32767], INT32: [-2147483648, 2147483647],
  UINT8: [0, 255], UINT16: [0, 65535], UINT32: [0, 4294967295],
};

type NumericArray = Int8Array | Int16Array | Int32Array | Uint8Array | Uint16Array | Uint32Array | Float32Array | Float64Array;

/** The typed array of each numeric type that JSON carries as plain numbers. */
const NUMERIC: Partial<Record<DataType, new (n: number) => NumericArray>> = {
  INT8: Int8Array, INT16: Int16Array, INT32: Int32Array, UINT8: Uint8Array, UINT16: Uint16Array,
  UINT32: Uint32Array, FP32: Float32Array, FP64: Float64Array,
};

/**
 * Copies a flat array of numbers into `out`: false (`out` partly written) at the first value that
 * is not a number, or not an integer within `limits` when given.
 */
function flatNumbers(data: readonly unknown[], out: NumericArray, limits: [number, number] | undefined): boolean {
  for (let k = 0; k < data.length; k++) {
    const x = data[k];
    if (typeof x !== 'number') return false;
    if (limits && (!Number.isInteger(x) || x < limits[0] || x > limits[1])) return false;
    out[k] = x;
  }
  return true;
}

/** Number of leaf values in nested `data` (a Float64Array counts its elements). */
export function countLeaves(v: unknown): number {
  if (v instanceof Float64Array) return v.length;
  if (!Array.isArray(v)) return 1;
  let n = 0;
  for (const x of v) n += countLeaves(x);
  return n;
}

/** Calls `leaf` for every value of nested `data` in row-major order; Float64Array runs go to `run`. */
function walk(v: unknown, leaf: (x: unknown) => void, run: (a: Float64Array) => void): void {
  if (v instanceof Float64Array) run(v);
  else if (Array.isArray(v)) for (const x of v) walk(x, leaf, run);
  else leaf(v);
}

/**
 * Converts an input's JSON `data` (nested or flat; numeric arrays may be Float64Arrays from the
 * request reader) to a typed array of `datatype` holding `count` elements.
 * @param shape the input's shape, when `count` comes from one: the message prints its count
 *   exactly (past 2^53 the double `count` rounds)
 * @throws INVALID_ARG naming the input when a value has the wrong type or the count differs.
 */
export function jsonToTensorData(data: unknown, datatype: DataType, count: number, input: string, shape?: readonly number[]): TensorData {
  if (datatype === 'FP16' || datatype === 'BF16') {
    // Triton's text, the name unquoted (server src/http_server.cc ReadDataFromJson).
    throw Errors.invalidArg(`receiving ${datatype} data via JSON is not supported. Please use the binary data format for input ${echo(input)}`);
  }
  // A flat array of plain numbers (a small request's, as JSON.parse gives it) in one loop; anything
  // else, or a value this refuses, takes the general walk below, which names the element at fault.
  const Numeric = NUMERIC[datatype];
  if (Numeric && Array.isArray(data) && data.length === count) {
    const out = new Numeric(count);
    if (flatNumbers(data, out, INT_LIMITS[datatype])) return out;
  }
  const got = countLeaves(data);
  if (got !== count) {
    throw Errors.invalidArg(`Unable to parse 'data': Shape does not match true shape of 'data' field for input '${echo(input)}': expected ${shape ? elementCountExact(shape) : count} elements, got ${got}`);
  }
  let i = 0;
  const bad = (what: string) => Errors.invalidArg(`Unable to parse 'data': input '${echo(input)}' element ${i} is not ${what}`);
  if (datatype === 'BYTES') {
    const parts: string[] = [];
    walk(data, (x) => { if (typeof x !== 'string') throw bad('a string'); parts.push(x); i++; }, () => { throw bad('a string'); });
    return serializeBytesTensor(parts);
  }
  if (datatype === 'BOOL') {
    const out = new Uint8Array(count);
    walk(data, (x) => { if (typeof x !== 'boolean') throw bad('a boolean'); out[i++] = x ? 1 : 0; }, () => { throw bad('a boolean'); });
    return out;
  }
  if (datatype === 'INT64' || datatype === 'UINT64') {
    const out = datatype === 'INT64' ? new BigInt64Array(count) : new BigUint64Array(count);
    const [min, max] = datatype === 'INT64' ? [-(2n ** 63n), 2n ** 63n - 1n] : [0n, 2n ** 64n - 1n];
    // A double past 2^53 (1e19, 9.3e18) may not be the integer the client meant: only exact
    // integers (safe numbers, or bigints, which the reader makes of longer integer literals).
    const unsigned = datatype === 'UINT64';
    const one = (x: unknown) => {
      if (typeof x === 'number' && Number.isSafeInteger(x) && (x >= 0 || !unsigned)) out[i++] = BigInt(x);
      else if (typeof x === 'bigint' && x >= min && x <= max) out[i++] = x;
      else throw bad(`an integer of type ${datatype}`);
    };
    walk(data, one, (a) => { for (const x of a) one(x); });
    return out;
  }
  const Ctor = NUMERIC[datatype]!;
  const out = new Ctor(count);
  const limits = INT_LIMITS[datatype];
  const one = (x: unknown) => {
    // An integer literal too long for a double comes as a bigint: a float type takes it rounded,
    // an integer type of 32 bits or less is out of range anyway.
    if (typeof x === 'bigint') {
      if (limits) throw bad(`an integer of type ${datatype}`);
      x = Number(x);
    }
    if (typeof x !== 'number') throw bad('a number');
    if (limits && (!Number.isInteger(x) || x < limits[0] || x > limits[1])) throw bad(`an integer of type ${datatype}`);
    out[i++] = x;
  };
  walk(data, one, (a) => {
    if (limits) {
      for (const x of a) one(x);
    } else {
      // Floats: one bulk conversion of the whole run.
      out.set(a, i);
      i += a.length;
    }
  });
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
    return floatJoin(out);
  }
  if (datatype === 'FP32' || datatype === 'FP64') return floatJoin(data as Float32Array);
  // Integers (incl. BigInt arrays) print exactly with join. A small array is joined in a loop:
  // V8 (Node 20) makes TypedArray.prototype.join's string two-byte once "-1" has been a property
  // name anywhere (bench/RESULTS.md), and the whole response then goes out through a two-byte copy
  // and a UTF-8 conversion; a loop's string stays one-byte.
  if (data.length <= SMALL_JOIN) return smallIntJoin(data as ArrayLike<number | bigint>);
  return '[' + (data as Int32Array).join(',') + ']';
}

/** Arrays up to this many integers are joined in a loop (measured as fast as `join` up to 4,096). */
const SMALL_JOIN = 1024;

function smallIntJoin(a: ArrayLike<number | bigint>): string {
  if (a.length === 0) return '[]';
  let s = '[' + a[0]!;
  for (let i = 1; i < a.length; i++) s += ',' + a[i]!;
  return s + ']';
}

/** Elements per piece of a large float array: each piece is joined natively into one flat string. */
const JOIN_PIECE = 16384;

/** A finite whole number (±0 included): what rapidjson writes with `.0`. */
const isIntegral = (x: number): boolean => x === Math.trunc(x) && Number.isFinite(x);

/**
 * A double as rapidjson writes it, from JS's shortest round-trip digits (rapidjson's Grisu2 gives
 * the same digits but in rare cases): an integral value with `.0` (`1.0`, `100.0`), an exponent
 * without `+` (`1e21`), `-0.0` for negative zero, and `NaN`, `Infinity`, `-Infinity` bare
 * (kWriteNanAndInfFlag).
 */
function rapidjsonNumber(x: number): string {
  if (!isIntegral(x)) return String(x);
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  return Math.abs(x) < 1e21 ? `${x}.0` : String(x).replace('e+', 'e');
}

/**
 * Floats joined, each written as rapidjsonNumber writes it. Most outputs (probabilities, logits)
 * hold no integral value, and then JS's native join is that text already (an exponent with `+`
 * needs a value of 1e21 or more, which is integral): a scan that allocates nothing decides.
 */
function joinAsRapidjson(a: Float32Array | Float64Array | number[]): string {
  for (let i = 0; i < a.length; i++) {
    if (isIntegral(a[i]!)) return Array.from(a, rapidjsonNumber).join(',');
  }
  return a.join(',');
}

/**
 * Joins floats as Triton writes them (joinAsRapidjson). Piece by piece with the native join:
 * appending one string per element builds a rope of millions of small strings, several times the
 * size of the text (a multi-GB heap for a large output).
 */
function floatJoin(a: Float32Array | Float64Array | number[]): string {
  if (a.length <= JOIN_PIECE) return `[${joinAsRapidjson(a)}]`;
  let s = '[';
  for (let from = 0; from < a.length; from += JOIN_PIECE) {
    const piece = a instanceof Array ? a.slice(from, from + JOIN_PIECE) : a.subarray(from, from + JOIN_PIECE);
    s += from ? `,${joinAsRapidjson(piece)}` : joinAsRapidjson(piece);
  }
  return s + ']';
}


/**
 * Bytes of `data` written as a JSON array by `tensorDataToJson`, or a little more (never less):
 * computed from the element count (and, for BYTES, the bytes) without writing anything, so a
 * response too large to build can be refused before it costs memory.
 */
export function jsonSizeBound(data: TensorData, datatype: DataType): number {
  const n = data.length;
  if (datatype === 'BYTES') {
    const bytes = data as Uint8Array;
    // Each element: quotes and a comma; each byte: at most 6 ("\u00XX").
    const rough = 2 + 3 * (bytes.byteLength / 4) + 6 * bytes.byteLength;
    if (rough <= 1 << 20) return rough;
    let size = 2;
    for (const b of bytes) size += b < 32 ? 6 : b === 34 || b === 92 ? 2 : b >= 128 ? 3 : 1;
    // The 4-byte length prefixes counted as bytes above cover each element's quotes and comma.
    return size;
  }
  return 2 + n * (JSON_CHARS_PER_ELEMENT[datatype] ?? 26);
}

/**
 * The most characters one element takes, comma included. Floats print as the shortest double
 * text: up to 17 digits, a sign, a point and an exponent ("-1.2345678901234567e-308"), or
 * fixed notation down to 1e-7 ("-0.0000012345678901234567"): 25 characters.
 */
const JSON_CHARS_PER_ELEMENT: Partial<Record<DataType, number>> = {
  BOOL: 6, INT8: 5, UINT8: 4, INT16: 7, UINT16: 6, INT32: 12, UINT32: 11, INT64: 21, UINT64: 21,
  FP16: 26, BF16: 26, FP32: 26, FP64: 26,
};

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
