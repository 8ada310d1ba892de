/**
 * @module NaN and infinities in KServe v2 JSON, as Triton writes and reads them: bare `NaN`,
 * `Infinity` and `-Infinity` tokens (rapidjson's kWriteNanAndInfFlag / kParseNanAndInfFlag;
 * Python's json does the same). JSON.parse and JSON.stringify know neither.
 */
import { randomUUID } from 'node:crypto';

/** JSON.parse, also of text holding bare NaN / Infinity / -Infinity tokens (read as those numbers). */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    if (!/NaN|Infinity/.test(text)) throw err;
  }
  return JSON.parse(quoteNonFinite(text), (_key, v: unknown) => (typeof v === 'string' && v.startsWith(MARK) ? NON_FINITE[v.slice(MARK.length)] ?? v : v));
}

/**
 * A prefix no string of a request or response holds (it has a random UUID): a non-finite number on
 * its way through JSON.parse or JSON.stringify is a string that starts with it.
 */
const MARK = `triode-non-finite-${randomUUID()}:`;
const NON_FINITE: Record<string, number> = { 'NaN': NaN, 'Infinity': Infinity, '-Infinity': -Infinity };

/** The text with each bare NaN / Infinity / -Infinity token outside strings made a marked string. */
function quoteNonFinite(text: string): string {
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

/** JSON.stringify, writing the values `markNonFinite` marked as bare NaN / Infinity / -Infinity. */
export function stringifyJson(value: unknown): string {
  const text = JSON.stringify(value);
  if (!text.includes(MARK)) return text;
  return text.replaceAll(`"${MARK}NaN"`, 'NaN').replaceAll(`"${MARK}Infinity"`, 'Infinity').replaceAll(`"${MARK}-Infinity"`, '-Infinity');
}
