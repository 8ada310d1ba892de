/**
 * @module `GET/POST /v2/logging`: the log settings, readable and changeable while serving.
 * Triton: server/src/http_server.cc HandleLogging, docs/protocol/extension_logging.md
 */
import { Hono } from 'hono';
import { Errors, type LogSettings } from '@triode/core';
import { updateLogSettings } from '../../control/log-settings-update.js';
import { readSettingsBody } from './settings-body.js';

/** The logging routes; without settings (none given) they answer 501. */
export function loggingRoutes(settings?: LogSettings): Hono {
  const app = new Hono();
  app.get('/v2/logging', (c) => {
    if (!settings) throw Errors.unsupported('log settings are not available here');
    return c.json(settings.toJson());
  });
  app.post('/v2/logging', async (c) => {
    if (!settings) throw Errors.unsupported('log settings are not available here');
    updateLogSettings(settings, await readSettingsBody(c), 'http');
    return c.json(settings.toJson());
  });
  return app;
}
