import { describe, expect, it } from 'vitest';
import { MAX_JSON_CONTAINERS, MAX_JSON_MEMBERS, readJson, type JsonValue } from './json-reader.js';

const enc = new TextEncoder();
const read = (s: string) => readJson(enc.encode(s));

/** An integer JSON.stringify writes as an integer literal past 2^53 - 1: the reader's bigint. */
const bigLiteral = (x: unknown): x is number => typeof x === 'number' && Number.isInteger(x) && !Number.isSafeInteger(x) && Math.abs(x) < 1e21;

/**
 * JSON.parse's result of JSON.stringify's text, as readJson reads it: number-only arrays as
 * Float64Arrays, integer literals past 2^53 - 1 as bigints (their arrays plain).
 */
function expected(v: unknown): JsonValue {
  if (bigLiteral(v)) return BigInt(String(v));
  if (Array.isArray(v)) {
    if (v.length > 0 && v.every((x) => typeof x === 'number' && !bigLiteral(x))) return Float64Array.from(v as number[]);
    return v.map(expected);
  }
  if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, expected(x)]));
  return v as JsonValue;
}

function randomValue(depth: number, rnd: () => number): unknown {
  const r = rnd();
  if (depth > 3 || r < 0.3) {
    const k = Math.floor(rnd() * 6);
    if (k === 0) return (rnd() - 0.5) * 10 ** Math.floor(rnd() * 40 - 20);
    if (k === 1) return Math.floor((rnd() - 0.5) * 2 ** 53);
    if (k === 2) return rnd() < 0.5;
    if (k === 3) return null;
    if (k === 4) return String.fromCharCode(...Array.from({ length: Math.floor(rnd() * 8) }, () => Math.floor(rnd() * 0x2fff)));
    return 'ascii "quoted" \\ text\n\t';
  }
  if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 5) }, () => randomValue(depth + 1, rnd));
  if (r < 0.75) return Array.from({ length: Math.floor(rnd() * 20) + 1 }, () => (rnd() - 0.5) * 10 ** Math.floor(rnd() * 10 - 5));
  return Object.fromEntries(Array.from({ length: Math.floor(rnd() * 4) }, (_, i) => [`k${i}`, randomValue(depth + 1, rnd)]));
}

describe('readJson()', () => {
  it('attack: refuses a document of more than MAX_JSON_CONTAINERS objects and arrays, or MAX_JSON_MEMBERS members, as it reads (60 MB of {} took 2.4 GB and 5 s)', () => {
    const doc = (s: string) => Buffer.from(s);
    const empties = (n: number) => doc(`[${new Array<string>(n).fill('{}').join(',')}]`);
    // The outer array counts: n + 1 containers.
    expect((readJson(empties(MAX_JSON_CONTAINERS - 1)) as unknown[]).length).toBe(MAX_JSON_CONTAINERS - 1);
    expect(() => readJson(empties(MAX_JSON_CONTAINERS))).toThrow(`JSON holds more than ${MAX_JSON_CONTAINERS} objects and arrays`);
    const keys = (n: number) => doc(`{${Array.from({ length: n }, (_, i) => `"${i}":0`).join(',')}}`);
    expect(Object.keys(readJson(keys(MAX_JSON_MEMBERS)) as object)).toHaveLength(MAX_JSON_MEMBERS);
    expect(() => readJson(keys(MAX_JSON_MEMBERS + 1))).toThrow(`JSON objects hold more than ${MAX_JSON_MEMBERS} members`);
    // Arrays of numbers are one container each, however long.
    expect((readJson(doc(`[${new Array<number>(2_000_000).fill(1).join(',')}]`)) as Float64Array).length).toBe(2_000_000);
  });

  it('reads what JSON.parse reads, with number-only arrays as Float64Arrays', () => {
    let seed = 42;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let n = 0; n < 300; n++) {
      const text = JSON.stringify(randomValue(0, rnd), null, n % 3 === 0 ? 2 : undefined);
      expect(readJson(enc.encode(text), { exact: true })).toEqual(expected(JSON.parse(text)));
    }
  });

  it('{ plainArrays: true }: the same values, number arrays of a small document as plain arrays', () => {
    /** Float64Arrays as plain arrays: what a caller that takes both sees. */
    const plain = (v: unknown): unknown => {
      if (v instanceof Float64Array) return Array.from(v);
      if (Array.isArray(v)) return v.map(plain);
      if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, plain(x)]));
      return v;
    };
    let seed = 43;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    /** Numbers of a few digits, no exponent: documents the JSON.parse path takes as they are. */
    const short = (x: unknown): unknown => {
      if (typeof x === 'number') return Math.round(x * 1000) / 1000;
      if (Array.isArray(x)) return x.map(short);
      if (x && typeof x === 'object') return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, short(v)]));
      return x;
    };
    let taken = 0;
    for (let n = 0; n < 600; n++) {
      const v = randomValue(0, rnd);
      const text = JSON.stringify(n % 2 ? short(v) : v, null, n % 3 === 0 ? 2 : undefined);
      const got = readJson(enc.encode(text), { plainArrays: true });
      expect(plain(got), text).toEqual(plain(read(text)));
      // No run of 16 digits (a point between them too) and no exponent: JSON.parse's result as it is.
      if (!/(?:\d\.?){16}|[\d.][eE]/.test(text) && text.length <= 4096) {
        expect(got, text).toEqual(JSON.parse(text));
        if (/\[-?\d/.test(text)) taken++;
      }
    }
    // The JSON.parse path was taken by documents with number arrays.
    expect(taken).toBeGreaterThan(50);
    const small = readJson(enc.encode('{"shape":[1,16],"data":[1,2,3]}'), { plainArrays: true }) as { shape: unknown; data: unknown };
    expect(Array.isArray(small.shape) && Array.isArray(small.data)).toBe(true);
    // Big integers stay exact, overflows and non-JSON numbers are the reader's, in small documents too.
    expect(readJson(enc.encode('{"id":18446744073709551615,"a":[1,2]}'), { plainArrays: true })).toEqual({ id: 2n ** 64n - 1n, a: Float64Array.of(1, 2) });
    for (const text of ['[1e400]', '{"x": -1.8e308}', '[1.5E999]']) {
      expect(() => readJson(enc.encode(text), { plainArrays: true }), text).toThrow(/^Number too big to be stored in double at position/);
    }
    expect(readJson(enc.encode('[NaN, 1]'), { plainArrays: true })).toEqual(Float64Array.of(NaN, 1));
    // Larger documents still give Float64Arrays.
    expect(readJson(enc.encode(`[1,2]${' '.repeat(5000)}`), { plainArrays: true })).toEqual(Float64Array.of(1, 2));
  });

  it('reads numbers within 2 ulp of Number(), exactly up to 15 digits, and exactly with { exact: true }', () => {
    const samples = ['0', '-0', '1e308', '2.2250738585072014e-308', '5e-324', '0.1', '1.7976931348623157e308', '12345678901234567890.5', '9007199254740993e0', '3.141592653589793238462643', '-1.5E+3', '1e-7', '0.30000000000000004', '4.35', '0.000123456789'];
    let seed = 7;
    const rnd = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 2000; i++) samples.push(String((rnd() - 0.5) * 10 ** Math.floor(rnd() * 60 - 30)), ((rnd() - 0.5) * 100).toFixed(Math.floor(rnd() * 8)));
    // An integer literal past 2^53 - 1 is a bigint (tested below): here it is written as a double.
    samples.forEach((s, i) => { if (/^-?\d+$/.test(s) && !Number.isSafeInteger(Number(s))) samples[i] = `${s}.0`; });
    const text = `[${samples.join(',')}]`;
    const exact = readJson(enc.encode(text), { exact: true }) as Float64Array;
    samples.forEach((s, i) => expect(Object.is(exact[i], Number(s))).toBe(true));
    const fast = read(text) as Float64Array;
    samples.forEach((s, i) => {
      const want = Number(s);
      const significant = s.replace(/^-?0*\.?0*|[eE].*$|\./g, '').length;
      if (significant <= 15) expect(Object.is(fast[i], want)).toBe(true);
      else expect(Math.abs(fast[i]! - want)).toBeLessThanOrEqual(2 * Math.abs(want) * Number.EPSILON);
    });
  });

  it('reads an integer literal past 2^53 - 1 exactly, as a bigint; its array is a plain array', () => {
    expect(read('[9007199254740991,-9007199254740991]')).toEqual(Float64Array.of(2 ** 53 - 1, -(2 ** 53 - 1)));
    expect(read('[9007199254740992, 1]')).toEqual([2n ** 53n, 1]);
    expect(read('{"a":-9223372036854775808,"b":18446744073709551615,"c":123456789012345678901234567890}')).toEqual({
      a: -(2n ** 63n), b: 2n ** 64n - 1n, c: 123456789012345678901234567890n,
    });
    // With a fraction or an exponent it is a double, however long.
    expect(read('[1e20, 100000000000000000000.0, 9007199254740993e0]')).toEqual(Float64Array.of(1e20, 1e20, 2 ** 53));
  });

  it('reads float32 values printed as doubles back to the same float32', () => {
    const f = Float32Array.from({ length: 5000 }, (_, i) => Math.sin(i) * 10 ** ((i % 9) - 4));
    const got = read(`[${Array.from(f).join(',')}]`) as Float64Array;
    expect(Float32Array.from(got)).toEqual(f);
  });

  it('keeps __proto__ as an own property', () => {
    const v = read('{"__proto__": {"x": 1}, "a": 2}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.keys(v)).toEqual(['__proto__', 'a']);
  });

  it('decodes escapes and UTF-8', () => {
    expect(read(String.raw`["a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00", "héllo ✓"]`)).toEqual(['a"b\\c/d\b\f\n\r\té😀', 'héllo ✓']);
  });

  it.each([
    ['', 'Unexpected end of JSON input at position 0'],
    ['{"a":1,}', 'Expected property name at position 7'],
    ['[1,2', "Expected ',' or ']' after array element at position 4"],
    ['[01]', 'Unexpected number (leading zero) at position 2'],
    ['[1.]', 'Unterminated fractional number at position 3'],
    ['[-]', 'No number after minus sign at position 2'],
    ['[1e]', 'Exponent part is missing a number at position 3'],
    ['"abc', 'Unterminated string in JSON at position 4'],
    ['"a\u0001"', 'Bad control character in string literal at position 2'],
    ['"\\x"', 'Bad escaped character in JSON at position 1'],
    ['{} x', 'Unexpected non-whitespace character after JSON at position 3'],
    ['tru', 'Unexpected token at position 0'],
    ['['.repeat(1000), 'JSON nested too deeply'],
  ])('rejects %j', (text, message) => {
    expect(() => read(text)).toThrow(message);
  });

  it('reads NaN, Inf and Infinity (signed) as Triton\'s reader does (rapidjson kParseNanAndInfFlag)', () => {
    // Small documents go through JSON.parse first, large ones through the reader: both.
    const pad = ' '.repeat(5000);
    for (const p of ['', pad]) {
      expect(read(`[NaN, 1, -Infinity, Inf, -Inf, Infinity, -NaN]${p}`)).toEqual(Float64Array.from([NaN, 1, -Infinity, Infinity, -Infinity, Infinity, NaN]));
      expect(read(`{"a": NaN, "b": [1, "x", -Infinity]}${p}`)).toEqual({ a: NaN, b: [1, 'x', -Infinity] });
      expect(() => read(`[Infinit]${p}`)).toThrow('Invalid value at position');
      expect(() => read(`[Nan]${p}`)).toThrow('Invalid value at position');
      expect(() => read(`[-I]${p}`)).toThrow('Invalid value at position');
    }
  });

  it('refuses a number past the largest double, which JSON.parse reads as Infinity (Triton: "Number too big to be stored in double")', () => {
    const pad = ' '.repeat(5000);
    for (const p of ['', pad]) {
      for (const text of ['[1e400]', '{"x": -1.8e308}', '[1, 2, 17976931348623159' + '0'.repeat(292) + ']', '5e999999']) {
        expect(() => read(text + p), text).toThrow(/^Number too big to be stored in double at position/);
      }
      // The largest double and underflow to zero are fine.
      expect(read(`[1.7976931348623157e308, 1e-400]${p}`)).toEqual(Float64Array.from([1.7976931348623157e308, 0]));
    }
  });

  it('rejects invalid UTF-8', () => {
    expect(() => readJson(new Uint8Array([0x22, 0xff, 0xfe, 0x22]))).toThrow('Invalid UTF-8 in string');
  });

  it('reads long strings (past 256 bytes, read with native scans) as short ones: escapes, UTF-8, and errors where they are', () => {
    const a = 'a'.repeat(300);
    const pad = ' '.repeat(5000);
    for (const s of [a, `${a}é✓😀`, `${a}"\\/\n${a}`, `${a}\u001f`.slice(0, -1), 'x'.repeat(100_000)]) {
      expect(read(`[${JSON.stringify(s)}, ${JSON.stringify(s)}]${pad}`)).toEqual([s, s]);
    }
    expect(() => read(`["${a}\u0001${a}"]${pad}`)).toThrow('Bad control character in string literal at position 302');
    expect(() => read(`["${a}\\x"]${pad}`)).toThrow('Bad escaped character in JSON at position 302');
    expect(() => read(`["${a}${pad}`)).toThrow(`Unterminated string in JSON at position ${2 + a.length + pad.length}`);
    expect(() => readJson(Buffer.concat([Buffer.from(`["${a}`), Buffer.from([0xff]), Buffer.from(`"]${pad}`)]))).toThrow('Invalid UTF-8 in string at position 2');
  });
});

describe('readJson onMember', () => {
  it('sees every member in document order, duplicates included, small documents too', () => {
    const seen: [unknown, string, JsonValue][] = [];
    const doc = readJson(new TextEncoder().encode('{"a":1,"p":{"x":"y"},"a":[2,3]}'), { onMember: (o, k, v) => seen.push([o, k, v]) }) as Record<string, JsonValue>;
    expect(doc['a']).toEqual(new Float64Array([2, 3]));
    expect(seen.map(([o, k, v]) => [o === doc ? 'top' : o === doc['p'] ? 'p' : '?', k, v])).toEqual([
      ['top', 'a', 1], ['p', 'x', 'y'], ['top', 'p', { x: 'y' }], ['top', 'a', new Float64Array([2, 3])],
    ]);
  });
});
