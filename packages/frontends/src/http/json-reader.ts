/**
 * @module A JSON reader for infer request bodies. It returns what JSON.parse returns, except that
 * an array holding only numbers comes back as a Float64Array: tensor `data` then never becomes
 * a JS array of boxed values, which is what makes JSON.parse + conversion cost more than the
 * inference itself for image-sized tensors (PERF-BASELINE finding 4). An integer too large for
 * a double to hold exactly comes back as a bigint (INT64/UINT64 data, uint64 parameters), as
 * Triton's reader keeps it. As Triton's (rapidjson with kParseNanAndInfFlag), it reads `NaN`,
 * `Inf` and `Infinity` (signed or not) as numbers and refuses a number past the largest double.
 * See `readJson` for how exactly other numbers are read.
 */
import { echo, setOwn } from '@triode/core';

/** A JSON value as this reader returns it. */
export type JsonValue = null | boolean | number | bigint | string | Float64Array | JsonValue[] | { [k: string]: JsonValue };

const POW10 = Array.from({ length: 23 }, (_, i) => 10 ** i);
const MAX_DEPTH = 512;

/**
 * The most objects and arrays one document may hold (as the client reads a server's answer), and
 * the most members of all its objects. An infer request holds a few of each per tensor (its data
 * comes as arrays of numbers, read as one); 60 MB of `{}` took 2.4 GB and 5 s, and 6.5 million
 * parameter keys 7.6 s, before anything else could refuse them (review).
 */
export const MAX_JSON_CONTAINERS = 1 << 20;
export const MAX_JSON_MEMBERS = 1 << 16;
const utf8 = new TextDecoder('utf-8', { fatal: true });

class JsonError extends Error {}

// The number readers are plain functions over module state, not methods: this is the hot loop
// of a JSON tensor body (tens of thousands of numbers), where private-field access shows up.
let numberEnd = 0;
let numberError = '';
/** Set by `readNumber` when the number is an integer (no fraction, no exponent) beyond 2^53 - 1. */
let numberBig = false;
/** The document as a latin1 string, made once per document when a number needs Number(). */
let docBytes: Uint8Array | undefined;
/** Read every number exactly (Number()), at some cost for long mantissas. */
let exactNumbers = false;
let docText = '';

/** The text of bytes [from, to) (ASCII: a number). */
function textOf(b: Uint8Array, from: number, to: number): string {
  if (docBytes !== b) {
    docBytes = b;
    docText = Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');
  }
  return docText.slice(from, to);
}

/** Number() of bytes [from, to): exact for any length of mantissa. */
function slowNumber(b: Uint8Array, from: number, to: number): number {
  return Number(textOf(b, from, to));
}

const isDigit = (c: number | undefined): c is number => c !== undefined && c >= 48 && c <= 57;
const isWs = (c: number | undefined) => c === 32 || c === 10 || c === 13 || c === 9;

/** Reads a JSON number at `start`; sets `numberEnd`, and `numberError` when malformed. */
function readNumber(b: Uint8Array, start: number): number {
  numberError = '';
  numberBig = false;
  let i = start;
  let c = b[i];
  const neg = c === 45;
  if (neg) c = b[++i];
  if (c === 78 || c === 73) return readNanOrInfinity(b, i, neg);
  let mant = 0;
  let digits = 0;
  let exp = 0;
  let long = false;
  let integer = true;
  if (c === 48) {
    c = b[++i];
    if (isDigit(c)) { numberEnd = i; numberError = 'Unexpected number (leading zero)'; return 0; }
  } else if (isDigit(c) && c !== 48) {
    while (isDigit(c)) {
      // Past 17 significant digits a double cannot tell them apart: scale instead.
      if (digits < 17) {
        mant = mant * 10 + (c - 48);
        digits++;
      } else {
        exp++;
        long = true;
      }
      c = b[++i];
    }
  } else {
    numberEnd = i;
    numberError = 'No number after minus sign';
    return 0;
  }
  if (c === 46) {
    integer = false;
    c = b[++i];
    if (!isDigit(c)) { numberEnd = i; numberError = 'Unterminated fractional number'; return 0; }
    while (isDigit(c)) {
      if (digits < 17) {
        // Leading zeros of a fraction are not significant digits.
        if (mant !== 0 || c !== 48) digits++;
        mant = mant * 10 + (c - 48);
        exp--;
      } else {
        long = true;
      }
      c = b[++i];
    }
  }
  if (c === 101 || c === 69) {
    integer = false;
    c = b[++i];
    let sign = 1;
    if (c === 45 || c === 43) {
      if (c === 45) sign = -1;
      c = b[++i];
    }
    if (!isDigit(c)) { numberEnd = i; numberError = 'Exponent part is missing a number'; return 0; }
    let e = 0;
    while (isDigit(c)) {
      if (e < 100000) e = e * 10 + (c - 48);
      c = b[++i];
    }
    exp += sign * e;
  }
  numberEnd = i;
  // An integer literal past 2^53 - 1 (17+ digits, or 16 whose value rounded up): the caller reads
  // it as a bigint. `mant` rounds monotonically, so a value within range is exact here.
  if (integer && (long || mant > Number.MAX_SAFE_INTEGER)) numberBig = true;
  if (exp >= -22 && exp <= 22) {
    // Up to 15 digits this is Clinger's fast path: an exact mantissa and an exact power of ten
    // round once, so the result is correctly rounded. With 16-17+ digits (what printing a
    // float32 as a double gives) the mantissa itself was rounded: the result is within 2 ulp of
    // the exact double, as with Triton's own JSON reader (rapidjson without full precision), and
    // exact once rounded to float32 for a value printed from a float32 (a 17-digit double within
    // 2 ulp of a float32 midpoint may round the other way). A request with FP64 tensors is read
    // with `exact` (infer-codec).
    if (digits <= 15 && !long) {
      const v = exp >= 0 ? mant * POW10[exp]! : mant / POW10[-exp]!;
      return neg ? -v : v;
    }
    if (!exactNumbers) {
      const v = exp >= 0 ? mant * POW10[exp]! : mant / POW10[-exp]!;
      return neg ? -v : v;
    }
  }
  const v = slowNumber(b, start, i);
  // Past the largest double: refused, as Triton's reader does (rapidjson's kParseErrorNumberTooBig).
  if (v === Infinity || v === -Infinity) numberError = 'Number too big to be stored in double';
  return v;
}

/**
 * `NaN`, `Inf` or `Infinity` at `i` (after an optional minus sign): Triton reads request JSON with
 * rapidjson's kParseNanAndInfFlag, so a client that writes NaN (Python's json does) is understood.
 */
function readNanOrInfinity(b: Uint8Array, i: number, neg: boolean): number {
  const word = b[i] === 78 ? 'NaN' : b[i + 3] === 105 ? 'Infinity' : 'Inf';
  for (let k = 0; k < word.length; k++, i++) {
    if (b[i] !== word.charCodeAt(k)) {
      numberEnd = i;
      numberError = 'Invalid value';
      return 0;
    }
  }
  numberEnd = i;
  return word === 'NaN' ? NaN : neg ? -Infinity : Infinity;
}

/**
 * Reads `n1, n2, ... ]` (the position is just after `[`) into doubles. Returns undefined when an
 * element is not a number, so the caller reads the array the general way.
 */
function readNumberArray(b: Uint8Array, start: number, scratch: Float64Array): { values: Float64Array; end: number; scratch: Float64Array } | undefined {
  let i = start;
  let n = 0;
  let buf = scratch;
  for (;;) {
    while (isWs(b[i])) i++;
    const c = b[i];
    if (!(c === 45 || isDigit(c) || c === 78 || c === 73)) return undefined;
    const v = readNumber(b, i);
    if (numberError || numberBig) return undefined;
    i = numberEnd;
    if (n === buf.length) {
      const bigger = new Float64Array(buf.length * 2);
      bigger.set(buf);
      buf = bigger;
    }
    buf[n++] = v;
    while (isWs(b[i])) i++;
    const d = b[i];
    if (d === 44) { i++; continue; }
    if (d === 93) return { values: buf.slice(0, n), end: i + 1, scratch: buf };
    return undefined;
  }
}

/**
 * Parses JSON from UTF-8 bytes. Numbers with up to 15 significant digits are always exact;
 * longer ones are within 2 ulp unless `exact` is set. An integer literal (no fraction, no
 * exponent) beyond 2^53 - 1 in magnitude is a bigint, exact, and its array a plain array.
 * @throws Error with the position of the first problem.
 */
export interface ReadJsonOptions {
  /** Read every number exactly (see above). */
  exact?: boolean;
  /**
   * A document small enough for JSON.parse (up to 4 KiB) may keep its number arrays as plain
   * arrays, for a caller that takes both: it is then JSON.parse's result as is, not walked again
   * to make them Float64Arrays (`simple`'s JSON request: ~4 µs of ~25 µs to read it). Larger
   * documents still give Float64Arrays.
   */
  plainArrays?: boolean;
  /**
   * Called for every member of every object, in document order, duplicates included (the object
   * keeps the last value of a duplicated key, as JSON.parse does). For a caller that must see
   * what the object cannot hold: the generate route refuses an input named twice, as Triton does.
   * The document then always goes through the reader, never JSON.parse.
   */
  onMember?: (object: object, key: string, value: JsonValue) => void;
}

/** See ReadJsonOptions. */
export function readJson(bytes: Uint8Array, options: ReadJsonOptions = {}): JsonValue {
  if (bytes.byteLength <= NATIVE_MAX_BYTES && !options.onMember) {
    const v = readSmall(bytes, options.plainArrays ?? false);
    if (v !== undefined) return v;
  }
  exactNumbers = options.exact ?? false;
  try {
    return new Reader(bytes, options.onMember).document();
  } finally {
    docBytes = undefined;
    docText = '';
  }
}

/**
 * Documents up to this size go through JSON.parse when `readSmall` can vouch for the result: for
 * a small infer body (a JSON header of binary tensors, a tiny JSON tensor) it is 3-7x faster than
 * the reader below, whose gains are on large numeric arrays.
 */
const NATIVE_MAX_BYTES = 4096;
const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * What `Reader` would return for `b`, through JSON.parse, or undefined when the two could differ:
 * invalid JSON or UTF-8 (the reader's error message is wanted), possibly deeper than MAX_DEPTH
 * (more brackets than that), or a number of 16+ digits (read to within 2 ulp by the reader, exactly
 * by JSON.parse; an integer past 2^53 - 1 is a bigint to the reader: counted conservatively,
 * digits of strings and exponents too).
 */
function readSmall(b: Uint8Array, plainArrays: boolean): JsonValue | undefined {
  let brackets = 0;
  let digits = 0;
  // An `e` or `E` just after a digit or a point: maybe an exponent, so maybe a number past the
  // largest double (1e999), which JSON.parse makes Infinity (and the reader refuses).
  let exponent = false;
  for (let i = 0; i < b.length; i++) {
    const c = b[i]!;
    if (c >= 48 && c <= 57) {
      if (++digits >= 16) return undefined;
    } else if (c !== 46) {
      if ((c === 101 || c === 69) && i > 0 && ((b[i - 1]! >= 48 && b[i - 1]! <= 57) || b[i - 1] === 46)) exponent = true;
      digits = 0;
      if ((c === 91 || c === 123) && ++brackets > MAX_DEPTH) return undefined;
    }
  }
  let doc: unknown;
  try {
    doc = JSON.parse(strictUtf8.decode(b));
  } catch {
    return undefined;
  }
  // No number of 16 digits or more (none past 2^53), none with an exponent: JSON.parse read them
  // all as the reader would, and none overflowed.
  if (plainArrays && !exponent) return doc as JsonValue;
  overflowed = false;
  const shaped = readerShape(doc);
  // JSON.parse reads a number past the largest double as Infinity; the reader refuses it.
  return overflowed ? undefined : shaped;
}

/** Set by `readerShape` when JSON.parse gave a number an infinity (it overflowed a double). */
let overflowed = false;

/** Turns the non-empty arrays of numbers only of a parsed document into Float64Arrays, as the reader does. */
function readerShape(v: unknown): JsonValue {
  if (Array.isArray(v)) {
    let numbers = v.length > 0;
    for (let i = 0; numbers && i < v.length; i++) numbers = typeof v[i] === 'number';
    if (numbers) {
      const a = new Float64Array(v as number[]);
      for (let i = 0; i < a.length; i++) if (a[i] === Infinity || a[i] === -Infinity) overflowed = true;
      return a;
    }
    for (let i = 0; i < v.length; i++) v[i] = readerShape(v[i]);
    return v as JsonValue[];
  }
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    for (const k in o) o[k] = readerShape(o[k]);
    return o as JsonValue;
  }
  if (v === Infinity || v === -Infinity) overflowed = true;
  return v as JsonValue;
}

/** Past this many bytes, a string is read with native scans (Reader.#longString). */
const LONG_STRING_BYTES = 256;
// eslint-disable-next-line no-control-regex -- what a JSON string may not hold unescaped
const CONTROL_CHARACTER = /[\u0000-\u001f]/;

class Reader {
  readonly #b: Uint8Array;
  #i = 0;
  #containers = 0;
  #members = 0;
  #scratch: Float64Array = new Float64Array(64);
  readonly #onMember: ReadJsonOptions['onMember'];

  constructor(b: Uint8Array, onMember?: ReadJsonOptions['onMember']) {
    this.#b = b;
    this.#onMember = onMember;
  }

  document(): JsonValue {
    const v = this.#value(0);
    this.#ws();
    if (this.#i < this.#b.length) this.#fail('Unexpected non-whitespace character after JSON');
    return v;
  }

  #fail(what: string): never {
    throw new JsonError(`${what} at position ${this.#i}`);
  }

  #ws(): void {
    const b = this.#b;
    let i = this.#i;
    for (;;) {
      const c = b[i];
      if (c === 32 || c === 10 || c === 13 || c === 9) i++;
      else break;
    }
    this.#i = i;
  }

  #value(depth: number): JsonValue {
    this.#ws();
    const c = this.#b[this.#i];
    switch (c) {
      case 123: return this.#object(depth + 1);
      case 91: return this.#array(depth + 1);
      case 34: return this.#string();
      case 116: return this.#literal('true', true);
      case 102: return this.#literal('false', false);
      case 110: return this.#literal('null', null);
      case undefined: return this.#fail('Unexpected end of JSON input');
      default:
        // N and I: NaN, Inf, Infinity (readNanOrInfinity).
        if (c === 45 || (c >= 48 && c <= 57) || c === 78 || c === 73) return this.#number();
        return this.#fail(`Unexpected token '${echo(String.fromCharCode(c))}'`);
    }
  }

  #literal<T>(word: string, v: T): T {
    for (let k = 0; k < word.length; k++) {
      if (this.#b[this.#i + k] !== word.charCodeAt(k)) this.#fail('Unexpected token');
    }
    this.#i += word.length;
    return v;
  }

  #object(depth: number): JsonValue {
    if (depth > MAX_DEPTH) this.#fail('JSON nested too deeply');
    if (++this.#containers > MAX_JSON_CONTAINERS) this.#fail(`JSON holds more than ${MAX_JSON_CONTAINERS} objects and arrays`);
    this.#i++;
    const out: { [k: string]: JsonValue } = {};
    this.#ws();
    if (this.#b[this.#i] === 125) { this.#i++; return out; }
    for (;;) {
      this.#ws();
      if (this.#b[this.#i] !== 34) this.#fail('Expected property name');
      if (++this.#members > MAX_JSON_MEMBERS) this.#fail(`JSON objects hold more than ${MAX_JSON_MEMBERS} members`);
      const key = this.#string();
      this.#ws();
      if (this.#b[this.#i] !== 58) this.#fail("Expected ':' after property name");
      this.#i++;
      const v = this.#value(depth);
      // Like JSON.parse, "__proto__" is an own property, never the prototype.
      if (key === '__proto__') setOwn(out, key, v);
      else out[key] = v;
      if (this.#onMember) this.#onMember(out, key, v);
      this.#ws();
      const c = this.#b[this.#i];
      if (c === 44) { this.#i++; continue; }
      if (c === 125) { this.#i++; return out; }
      this.#fail("Expected ',' or '}' after property value");
    }
  }

  #array(depth: number): JsonValue {
    if (depth > MAX_DEPTH) this.#fail('JSON nested too deeply');
    if (++this.#containers > MAX_JSON_CONTAINERS) this.#fail(`JSON holds more than ${MAX_JSON_CONTAINERS} objects and arrays`);
    this.#i++;
    this.#ws();
    const c = this.#b[this.#i];
    if (c === 93) { this.#i++; return []; }
    if (c === 45 || c === 78 || c === 73 || (c !== undefined && c >= 48 && c <= 57)) {
      const nums = this.#numberArray();
      if (nums) return nums;
    }
    const out: JsonValue[] = [];
    for (;;) {
      out.push(this.#value(depth));
      this.#ws();
      const d = this.#b[this.#i];
      if (d === 44) { this.#i++; continue; }
      if (d === 93) { this.#i++; return out; }
      this.#fail("Expected ',' or ']' after array element");
    }
  }

  /** An array of numbers only, read straight into doubles; undefined (position restored) otherwise. */
  #numberArray(): Float64Array | undefined {
    const r = readNumberArray(this.#b, this.#i, this.#scratch);
    if (r === undefined) return undefined;
    if (r.scratch !== this.#scratch) this.#scratch = r.scratch;
    this.#i = r.end;
    return r.values;
  }

  #number(): number | bigint {
    const start = this.#i;
    const v = readNumber(this.#b, start);
    if (numberError) {
      this.#i = numberEnd;
      this.#fail(numberError);
    }
    this.#i = numberEnd;
    return numberBig ? BigInt(textOf(this.#b, start, numberEnd)) : v;
  }

  #string(): string {
    const b = this.#b;
    const start = ++this.#i;
    let i = start;
    for (;;) {
      const c = b[i];
      if (c === 34) {
        this.#i = i + 1;
        return this.#decode(start, i);
      }
      if (c === 92) return this.#escapedString(start);
      if (c === undefined) { this.#i = i; this.#fail('Unterminated string in JSON'); }
      if (c < 32) { this.#i = i; this.#fail('Bad control character in string literal'); }
      if (++i - start === LONG_STRING_BYTES) {
        const long = this.#longString(start, i);
        if (long !== undefined) return long;
      }
    }
  }

  /**
   * The string at `start`, plain up to `from`, read with native scans (a base64 file of a model
   * load, a large BYTES element): 3-4x faster than the byte loop. Undefined when the rest holds an
   * escape, a control character or invalid UTF-8: the byte loop then reads on from `from`, and
   * reports an error where it is.
   */
  #longString(start: number, from: number): string | undefined {
    const b = this.#b;
    const end = b.indexOf(34, from);
    if (end < 0) return undefined;
    const bytes = b.subarray(start, end);
    if (bytes.indexOf(92, from - start) >= 0) return undefined;
    let s: string;
    try {
      s = utf8.decode(bytes);
    } catch {
      return undefined;
    }
    if (CONTROL_CHARACTER.test(s)) return undefined;
    this.#i = end + 1;
    return s;
  }

  #decode(from: number, to: number): string {
    const b = this.#b;
    let ascii = true;
    for (let k = from; k < to; k++) if (b[k]! >= 128) { ascii = false; break; }
    if (ascii) {
      if (to - from < 64) {
        let s = '';
        for (let k = from; k < to; k++) s += String.fromCharCode(b[k]!);
        return s;
      }
      return utf8.decode(b.subarray(from, to));
    }
    try {
      return utf8.decode(b.subarray(from, to));
    } catch {
      this.#i = from;
      return this.#fail('Invalid UTF-8 in string');
    }
  }

  #escapedString(start: number): string {
    const b = this.#b;
    let i = start;
    let out = '';
    let run = start;
    for (;;) {
      const c = b[i];
      if (c === undefined) { this.#i = i; this.#fail('Unterminated string in JSON'); }
      if (c === 34) {
        out += this.#decode(run, i);
        this.#i = i + 1;
        return out;
      }
      if (c < 32) { this.#i = i; this.#fail('Bad control character in string literal'); }
      if (c !== 92) { i++; continue; }
      out += this.#decode(run, i);
      const e = b[i + 1];
      switch (e) {
        case 34: out += '"'; break;
        case 92: out += '\\'; break;
        case 47: out += '/'; break;
        case 98: out += '\b'; break;
        case 102: out += '\f'; break;
        case 110: out += '\n'; break;
        case 114: out += '\r'; break;
        case 116: out += '\t'; break;
        case 117: {
          let code = 0;
          for (let k = 2; k < 6; k++) {
            const h = b[i + k];
            const d = h === undefined ? -1 : h >= 48 && h <= 57 ? h - 48 : h >= 97 && h <= 102 ? h - 87 : h >= 65 && h <= 70 ? h - 55 : -1;
            if (d < 0) { this.#i = i; this.#fail('Bad Unicode escape in JSON'); }
            code = code * 16 + d;
          }
          out += String.fromCharCode(code);
          i += 4;
          break;
        }
        default:
          this.#i = i;
          this.#fail('Bad escaped character in JSON');
      }
      i += 2;
      run = i;
    }
  }
}
