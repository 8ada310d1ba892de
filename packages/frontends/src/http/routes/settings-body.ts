/**
 * @module The body of `POST /v2/logging` and `POST /v2[/models/{m}]/trace/setting`, read as
 * Triton reads it (http_server.cc HandleLogging, HandleTrace: EVBufferToJson, then Find on each
 * field): the body must be JSON (an empty one is rapidjson's "The document is empty."), and a
 * document that is not an object has no fields, so it changes nothing.
 */
import type { Context } from 'hono';
import { Errors, echo, setOwn } from '@triode/core';

/**
 * A field's number written with a fraction or an exponent (`1.0`, `1e0`, `-0.0`). rapidjson reads
 * such a number as a double, and TritonJson's AsUInt and AsBool refuse a double, whole or not
 * (`"log_verbose_level": 1.0` is "attempt to access JSON non-unsigned-integer as unsigned-integer"
 * there); JSON.parse makes `1.0` the number 1, so the field holds this instead, which no setting
 * takes. Before, `1.0` set log_verbose_level to 1.
 */
export class JsonDouble {
  constructor(readonly value: number) {}
}

/** The index just after the string that starts (with its quote) at `i`. */
function stringEnd(text: string, i: number): number {
  let j = i + 1;
  while (j < text.length) {
    const c = text.charCodeAt(j);
    if (c === 0x5c) j += 2;
    else if (c === 0x22) return j + 1;
    else j++;
  }
  return j;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && ' \t\n\r'.includes(text[i]!)) i++;
  return i;
}

/** The index just after the JSON value that starts at `i` (no recursion: nesting is counted). */
function valueEnd(text: string, i: number): number {
  const first = text[i];
  if (first === '"') return stringEnd(text, i);
  if (first === '{' || first === '[') {
    let depth = 0;
    let j = i;
    while (j < text.length) {
      const c = text[j]!;
      if (c === '"') {
        j = stringEnd(text, j);
        continue;
      }
      if (c === '{' || c === '[') depth++;
      else if ((c === '}' || c === ']') && --depth === 0) return j + 1;
      j++;
    }
    return j;
  }
  let j = i;
  while (j < text.length && !',}] \t\n\r'.includes(text[j]!)) j++;
  return j;
}

/**
 * The keys of the top-level object in `text` (JSON that JSON.parse took) whose value, in the
 * last member of that name (the one JSON.parse keeps), is a number with a fraction or an exponent.
 */
function doubleMembers(text: string): Set<string> {
  const doubles = new Set<string>();
  let i = skipSpace(text, 0);
  if (text[i] !== '{') return doubles;
  i = skipSpace(text, i + 1);
  while (text[i] === '"') {
    const keyEnd = stringEnd(text, i);
    const key = JSON.parse(text.slice(i, keyEnd)) as string;
    const at = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const end = valueEnd(text, at);
    const c = text[at]!;
    let double = false;
    if (c === '-' || (c >= '0' && c <= '9')) {
      for (let k = at; k < end && !double; k++) double = '.eE'.includes(text[k]!);
    }
    if (double) doubles.add(key);
    else doubles.delete(key);
    i = skipSpace(text, end);
    if (text[i] !== ',') break;
    i = skipSpace(text, i + 1);
  }
  return doubles;
}

/**
 * The settings update in a request body: its own fields, or none when it is JSON but not an
 * object. A field whose number has a fraction or an exponent is a JsonDouble.
 */
export async function readSettingsBody(c: Context): Promise<Record<string, unknown>> {
  const text = await c.req.text();
  // rapidjson's words for a body of nothing but JSON whitespace, at the offset where it stopped.
  if (/^[ \t\n\r]*$/.test(text)) throw Errors.invalidArg(`failed to parse the request JSON buffer: The document is empty. at ${text.length}`);
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${echo((err as Error).message)}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return {};
  const fields = doc as Record<string, unknown>;
  for (const key of doubleMembers(text)) setOwn(fields, key, new JsonDouble(fields[key] as number));
  return fields;
}
