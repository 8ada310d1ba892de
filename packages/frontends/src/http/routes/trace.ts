/**
 * @module Trace settings: `GET/POST /v2/trace/setting` (global) and
 * `/v2/models/{m}/trace/setting` (per model; `null` resets a field to the global value). The
 * settings are kept and reported with Triton's fields and string values; emitting traces is
 * not implemented yet.
 * Triton: server/src/http_server.cc HandleTrace, docs/protocol/extension_trace.md
 */
import { Hono, type Context } from 'hono';
import { Errors, echo, type Backplane } from '@triode/core';
import { TraceSettings, checkTraceModel } from '../../control/trace-settings.js';

async function read(c: Context): Promise<Record<string, unknown>> {
  let body: unknown;
  try {
    body = JSON.parse((await c.req.text()) || '{}');
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${echo((err as Error).message)}`);
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw Errors.invalidArg('trace settings must be a JSON object');
  return body as Record<string, unknown>;
}

/** The trace setting routes over one settings store (shared with the gRPC frontend). */
export function traceRoutes(backplane: Backplane, settings: TraceSettings = new TraceSettings()): Hono {
  const app = new Hono();
  app.get('/v2/trace/setting', (c) => c.json(settings.get()));
  app.post('/v2/trace/setting', async (c) => c.json(settings.update(await read(c))));
  app.get('/v2/models/:model/trace/setting', async (c) => {
    const model = c.req.param('model');
    await checkTraceModel(backplane, model);
    return c.json(settings.get(model));
  });
  app.post('/v2/models/:model/trace/setting', async (c) => {
    const model = c.req.param('model');
    await checkTraceModel(backplane, model);
    return c.json(settings.update(await read(c), model));
  });
  return app;
}
