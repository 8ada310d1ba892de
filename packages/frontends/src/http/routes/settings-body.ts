/**
 * @module The body of `POST /v2/logging` and `POST /v2[/models/{m}]/trace/setting`, read as
 * Triton reads it (http_server.cc HandleLogging, HandleTrace: EVBufferToJson, then Find on each
 * field): the body must be JSON (an empty one is rapidjson's "The document is empty."), and a
 * document that is not an object has no fields, so it changes nothing.
 */
import type { Context } from 'hono';
import { Errors, echo } from '@triode/core';

/** The settings update in a request body: its own fields, or none when it is JSON but not an object. */
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
  return typeof doc === 'object' && doc !== null && !Array.isArray(doc) ? (doc as Record<string, unknown>) : {};
}
