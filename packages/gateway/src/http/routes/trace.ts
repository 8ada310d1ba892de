/**
 * @module Trace settings: `GET/POST /v2/trace/setting` (global) and
 * `/v2/models/{m}/trace/setting` (per model; `null` resets a field to the global value). The
 * settings are kept and reported with Triton's fields and string values; emitting traces is
 * not implemented yet.
 * Triton: server/src/http_server.cc HandleTrace, docs/protocol/extension_trace.md
 */
import { Hono } from 'hono';
import { Errors, type Backplane } from '@triode/core';

type TraceSettings = Record<string, string | string[]>;

const DEFAULTS: TraceSettings = { trace_file: '', trace_level: ['OFF'], trace_rate: '1000', trace_count: '-1', log_frequency: '0' };
const LEVELS = ['OFF', 'TIMESTAMPS', 'TENSORS'];

function check(update: Record<string, unknown>): void {
  for (const [k, v] of Object.entries(update)) {
    if (!(k in DEFAULTS)) throw Errors.invalidArg(`unknown trace setting '${k}'`);
    if (v === null) continue;
    if (k === 'trace_level') {
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && LEVELS.includes(x))) {
        throw Errors.invalidArg(`'trace_level' must be a list of ${LEVELS.join(', ')}`);
      }
    } else if (k === 'trace_file') {
      if (typeof v !== 'string') throw Errors.invalidArg(`'trace_file' must be a string`);
    } else if (typeof v !== 'string' || !/^-?\d+$/.test(v)) {
      throw Errors.invalidArg(`'${k}' must be an integer given as a string`);
    }
  }
}

/** The trace setting routes. */
export function traceRoutes(backplane: Backplane): Hono {
  const app = new Hono();
  const global: TraceSettings = { ...DEFAULTS };
  const perModel = new Map<string, TraceSettings>();
  const read = async (c: { req: { text(): Promise<string> } }) => {
    let body: unknown;
    try {
      body = JSON.parse((await c.req.text()) || '{}');
    } catch (err) {
      throw Errors.invalidArg(`failed to parse the request JSON buffer: ${(err as Error).message}`);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw Errors.invalidArg('trace settings must be a JSON object');
    check(body as Record<string, unknown>);
    return body as Record<string, string | string[] | null>;
  };
  app.get('/v2/trace/setting', (c) => c.json(global));
  app.post('/v2/trace/setting', async (c) => {
    for (const [k, v] of Object.entries(await read(c))) global[k] = v ?? DEFAULTS[k]!;
    return c.json(global);
  });
  app.get('/v2/models/:model/trace/setting', async (c) => {
    const model = c.req.param('model');
    await backplane.modelMetadata(model);
    return c.json({ ...global, ...perModel.get(model) });
  });
  app.post('/v2/models/:model/trace/setting', async (c) => {
    const model = c.req.param('model');
    await backplane.modelMetadata(model);
    const own = perModel.get(model) ?? {};
    for (const [k, v] of Object.entries(await read(c))) {
      if (v === null) delete own[k];
      else own[k] = v;
    }
    perModel.set(model, own);
    return c.json({ ...global, ...own });
  });
  return app;
}
