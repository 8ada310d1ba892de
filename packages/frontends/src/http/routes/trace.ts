/**
 * @module Trace settings: `GET/POST /v2/trace/setting` (global) and
 * `/v2/models/{m}/trace/setting` (per model; `null` resets a field to the global value). The
 * settings are kept and reported with Triton's fields and string values (control/tracer.ts
 * traces requests under them).
 * Triton: server/src/http_server.cc HandleTrace, docs/protocol/extension_trace.md
 */
import { Hono } from 'hono';
import type { Backplane } from '@triode/core';
import { TraceSettings, checkTraceModel } from '../../control/trace-settings.js';
import { readSettingsBody } from './settings-body.js';

/** The trace setting routes over one settings store (shared with the gRPC frontend). */
export function traceRoutes(backplane: Backplane, settings: TraceSettings = new TraceSettings()): Hono {
  const app = new Hono();
  app.get('/v2/trace/setting', (c) => c.json(settings.get()));
  app.post('/v2/trace/setting', async (c) => c.json(settings.update(await readSettingsBody(c))));
  app.get('/v2/models/:model/trace/setting', async (c) => {
    const model = c.req.param('model');
    await checkTraceModel(backplane, model);
    return c.json(settings.get(model));
  });
  app.post('/v2/models/:model/trace/setting', async (c) => {
    const model = c.req.param('model');
    await checkTraceModel(backplane, model);
    return c.json(settings.update(await readSettingsBody(c), model));
  });
  return app;
}
