/**
 * @module Numbers JSON.parse and JSON.stringify cannot carry, as Triton writes and reads them:
 * bare `NaN`, `Infinity` and `-Infinity` tokens (rapidjson's kWriteNanAndInfFlag /
 * kParseNanAndInfFlag; Python's json does the same), and 64-bit integers past 2^53, which are
 * plain digit tokens on the wire but doubles (rounded) in JSON.parse and strings in a bigint's
 * JSON. tritonclient (Python's json, exact ints) keeps both.
 */
import { randomUUID } from 'node:crypto';

/** Options of `parseJson`. */
export interface ParseJsonOptions {
  /**
   * Read integer literals that are not safe integers (past 2^53) as exact bigints instead of
   * rounded doubles. @default false
   */
  exactIntegers?: boolean;
}

/**
 * JSON.parse, also of text holding bare NaN / Infinity / -Infinity tokens (read as those numbers),
 * and with `exactIntegers` reading integers past 2^53 as bigints.
 */
export function parseJson(text: string, options: ParseJsonOptions = {}): unknown {
  // A literal past 2^53 has at least 16 digits: text without such an integer parses as it is.
  // (A double's digits, as FP32/FP64 outputs have, follow a '.' or precede one, an 'e' or 'E':
  // those leave JSON.parse's fast path alone.)
  const ints = options.exactIntegers === true && hasLongInteger(text);
  if (!ints) {
    try {
      return JSON.parse(text);
    } catch (err) {
      if (!/NaN|Infinity/.test(text)) throw err;
    }
  }
  return JSON.parse(quoteSpecialNumbers(text, ints), (_key, v: unknown) => (typeof v === 'string' && v.startsWith(MARK) ? unmark(v.slice(MARK.length)) : v));
}

/**
 * A prefix no string of a request or response holds (it has a random UUID): a special number on
 * its way through JSON.parse or JSON.stringify is a string that starts with it.
 */
const MARK = `triode-json-number-${randomUUID()}:`;
const NON_FINITE: Record<string, number> = { 'NaN': NaN, 'Infinity': Infinity, '-Infinity': -Infinity };

function unmark(token: string): number | bigint {
  return NON_FINITE[token] ?? BigInt(token);
}

const isDigit = (c: number): boolean => c >= 48 && c <= 57;

/** A run of 16 or more digits that is a whole integer token (not part of a double's mantissa or exponent). */
const LONG_INTEGER = /(?<![\d.eE+]|[eE]-)\d{16,}(?![\d.eE])/;

/**
 * Whether `text` may hold an integer literal past 2^53 (outside strings or in: a string only costs
 * the slow path). FP32/FP64 outputs written as doubles (`0.6749623417854309`) do not count: their
 * 16 digits follow a '.', and with them every JSON response took the slow path (8-9x JSON.parse).
 */
export function hasLongInteger(text: string): boolean {
  return LONG_INTEGER.test(text);
}

/** A character of a number token after its integer digits: digits, '.', 'e', 'E', '+', '-'. */
const inNumber = (c: number): boolean => isDigit(c) || c === 46 || c === 101 || c === 69 || c === 43 || c === 45;

/**
 * The text with each bare NaN / Infinity / -Infinity token outside strings made a marked string,
 * and (with `ints`) each integer literal that is not a safe integer too.
 */
function quoteSpecialNumbers(text: string, ints: boolean): string {
  let out = '';
  let run = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // an escape: the next character is not the string's end
      else if (c === 34) inString = false;
      continue;
    }
    if (c === 34) {
      inString = true;
      continue;
    }
    if (ints && (isDigit(c) || (c === 45 && isDigit(text.charCodeAt(i + 1))))) {
      // A number token: outside strings, digits occur in nothing else.
      let j = i + 1;
      while (j < text.length && isDigit(text.charCodeAt(j))) j++;
      const next = text.charCodeAt(j);
      const integer = next !== 46 && next !== 101 && next !== 69; // no '.', 'e' or 'E' follows
      while (j < text.length && inNumber(text.charCodeAt(j))) j++;
      const literal = text.slice(i, j);
      if (integer && j - i > 15 && !Number.isSafeInteger(Number(literal)) && /^-?(0|[1-9]\d*)$/.test(literal)) {
        out += `${text.slice(run, i)}"${MARK}${literal}"`;
        run = j;
      }
      i = j - 1;
      continue;
    }
    if (c !== 78 && c !== 73 && c !== 45) continue; // N, I, -
    const word = text.startsWith('NaN', i) ? 'NaN' : text.startsWith('Infinity', i) ? 'Infinity' : text.startsWith('-Infinity', i) ? '-Infinity' : undefined;
    if (word === undefined) continue;
    out += `${text.slice(run, i)}"${MARK}${word}"`;
    i += word.length - 1;
    run = i + 1;
  }
  return out + text.slice(run);
}

/** A float array's values for JSON.stringify, non-finite ones marked (see `stringifyJson`). */
export function markNonFinite(values: readonly number[]): (number | string)[] {
  return values.map((x) => (Number.isFinite(x) ? x : `${MARK}${String(x)}`));
}

/**
 * An integer for JSON.stringify: a number when it is exact as one, else marked so that
 * `stringifyJson` writes its digits (a bigint has no JSON form of its own).
 */
export function markInteger(x: bigint): number | string {
  const n = Number(x);
  return Number.isSafeInteger(n) ? n : `${MARK}${x.toString()}`;
}

/** A marked value inside JSON text: its quotes and mark are dropped, the token stays. */
const MARKED = new RegExp(`"${MARK.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&')}(NaN|-?Infinity|-?\\d+)"`, 'g');

/** JSON.stringify, writing the values `markNonFinite` and `markInteger` marked as bare tokens. */
export function stringifyJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (!text.includes(MARK)) return text;
  return text.replace(MARKED, '$1');
}
