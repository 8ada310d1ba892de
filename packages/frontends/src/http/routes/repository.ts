/**
 * @module The model repository extension: `POST /v2/repository/index`, and
 * `POST /v2/repository/models/{m}/load|unload` (explicit model control).
 * Triton: server/src/http_server.cc HandleRepositoryIndex, HandleRepositoryControl,
 * docs/protocol/extension_model_repository.md
 */
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { Errors, FILE_OVERRIDE_PREFIX, checkModelName, echo, type ModelIndexEntry } from '@triode/core';
import { readJson, type JsonValue } from '../json-reader.js';
import { MAX_LOAD_PARAMETERS, loadOptionsFrom, tooManyLoadParameters } from '../../control/load-parameters.js';
import type { HttpDeps } from '../http-options.js';
import { refuseRepositoryName } from '../../control/repository-name.js';

/** Bytes JSON allows around a document: a body of nothing else is no body. */
function isBlank(b: Uint8Array): boolean {
  for (let i = 0; i < b.length; i++) {
    const c = b[i];
    if (c !== 32 && c !== 9 && c !== 10 && c !== 13) return false;
  }
  return true;
}

/**
 * The request body as Triton's TritonJson reads it: empty is no body; a JSON value that is not an
 * object has no members, so it is read as an empty object (Triton's Find on it finds nothing).
 * Read with the infer route's reader, which caps nesting at 512 levels and what a document may
 * hold (json-reader.ts): a load body may be as large as `--http-max-input-size`, and JSON.parse
 * took 5.5 s of the event loop and 1.8 GB for 30 MB of `[[[...]]]` (review).
 */
async function body(c: Context): Promise<Record<string, unknown>> {
  const bytes = new Uint8Array(await c.req.arrayBuffer());
  if (isBlank(bytes)) return {};
  let doc: JsonValue;
  try {
    doc = readJson(bytes);
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${echo((err as Error).message)}`);
  }
  return isObject(doc) ? doc : {};
}

/** A JSON object as the reader gives one (not an array, nor an array of numbers, which it reads as a Float64Array). */
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);

/**
 * A load request's parameters as Triton's HandleRepositoryControl reads them, member by member in
 * the order sent: every value must be a string ("attempt to access JSON non-string as string"),
 * `config` is the config JSON, `file:<path>` the file's base64 contents, and any other name is
 * refused ("unexpected error on creating Triton parameter"). Triton answers these 500 (its JSON
 * reader's and its own INTERNAL); Triode 400, the client's mistake (README).
 */
function loadParameters(doc: Record<string, unknown>): Record<string, string> {
  const p = doc['parameters'];
  if (p === undefined) return {};
  if (!isObject(p)) throw Errors.invalidArg('attempt to get members for non-object');
  let n = 0;
  for (const k in p) if (Object.hasOwn(p, k) && ++n > MAX_LOAD_PARAMETERS) throw Errors.invalidArg(tooManyLoadParameters('a load request'));
  for (const [k, v] of Object.entries(p)) {
    if (typeof v !== 'string') throw Errors.invalidArg('attempt to access JSON non-string as string');
    if (k !== 'config' && !k.startsWith(FILE_OVERRIDE_PREFIX)) throw Errors.invalidArg('unexpected error on creating Triton parameter');
  }
  return p as Record<string, string>;
}

/**
 * An unload request's `unload_dependents`, as Triton reads it: looked up only when `parameters` is
 * an object, and then it must be a boolean (Triton: 500; Triode 400, README).
 */
function unloadDependents(doc: Record<string, unknown>): boolean {
  const p = doc['parameters'];
  if (!isObject(p) || !Object.hasOwn(p, 'unload_dependents')) return false;
  const v = p['unload_dependents'];
  if (typeof v !== 'boolean') throw Errors.invalidArg("Unable to parse 'unload_dependents': attempt to access JSON non-boolean as boolean");
  return v;
}

/** An index row as Triton writes it: `version` when the row has one, `reason` when not empty. */
function indexRow(e: ModelIndexEntry): Record<string, string> {
  const row: Record<string, string> = { name: e.name };
  if (e.version !== undefined) row['version'] = e.version;
  row['state'] = e.state;
  if (e.reason) row['reason'] = e.reason;
  return row;
}

/** A model load/unload path; group 1 is the model name as sent (percent-encoded). */
const MODEL_CONTROL_PATH = /^\/v2\/repository(?:\/[^/]+)?\/models\/([^/]+)\/(?:load|unload)$/;

/**
 * Refuses a load/unload whose model name is not a name (`checkModelName`: 400) before anything
 * reads the request body, which may be large. Mounted ahead of the body limit.
 */
export function modelNameGuard(): MiddlewareHandler {
  return async (c, next) => {
    const m = MODEL_CONTROL_PATH.exec(c.req.path);
    if (m) {
      let name = m[1]!;
      try {
        name = decodeURIComponent(name);
      } catch {
        // Not valid percent-encoding: checked as sent.
      }
      checkModelName(name);
    }
    await next();
  };
}

/** The repository routes (with or without a repository name in the path, as Triton). */
export function repositoryRoutes({ backplane }: HttpDeps): Hono {
  const app = new Hono();
  for (const prefix of ['/v2/repository', '/v2/repository/:repository']) {
    app.post(`${prefix}/index`, async (c) => {
      const doc = await body(c);
      const ready = doc['ready'];
      // Triton: AsBool's INTERNAL (500); Triode 400 (README).
      if (Object.hasOwn(doc, 'ready') && typeof ready !== 'boolean') throw Errors.invalidArg('attempt to access JSON non-boolean as boolean');
      return c.json((await backplane.repositoryIndex(ready === true)).map(indexRow));
    });
    app.post(`${prefix}/models/:model/load`, async (c) => {
      refuseRepositoryName(c.req.param('repository'));
      const name = c.req.param('model');
      // A hostile name is refused before the body (which may be large) is read.
      checkModelName(name);
      const params = loadParameters(await body(c));
      await backplane.loadModel(name, loadOptionsFrom(name, params));
      return c.body('', 200, { 'Content-Type': 'application/json' });
    });
    app.post(`${prefix}/models/:model/unload`, async (c) => {
      refuseRepositoryName(c.req.param('repository'));
      const name = c.req.param('model');
      checkModelName(name);
      const dependents = unloadDependents(await body(c));
      // A client that leaves gives up an unload still waiting for its turn (a cluster gateway's).
      await backplane.unloadModel(name, { unloadDependents: dependents, signal: c.req.raw.signal });
      return c.body('', 200, { 'Content-Type': 'application/json' });
    });
  }
  return app;
}
