/**
 * @module `GET/POST /v2/logging`: the log settings, readable and changeable while serving.
 * Triton: server/src/http_server.cc HandleLogging, docs/protocol/extension_logging.md
 */
import { Hono } from 'hono';
import { Errors, type LogSettings } from '@triode/core';

/** The logging routes; without settings (none given) they answer 501. */
export function loggingRoutes(settings?: LogSettings): Hono {
  const app = new Hono();
  app.get('/v2/logging', (c) => {
    if (!settings) throw Errors.unsupported('log settings are not available here');
    return c.json(settings.toJson());
  });
  app.post('/v2/logging', async (c) => {
    if (!settings) throw Errors.unsupported('log settings are not available here');
    let body: unknown;
    try {
      body = JSON.parse(await c.req.text() || '{}');
    } catch (err) {
      throw Errors.invalidArg(`failed to parse the request JSON buffer: ${(err as Error).message}`);
    }
    if (typeof body !== 'object' || body === null || Array.isArray(body)) throw Errors.invalidArg('log settings must be a JSON object');
    const update = body as Record<string, unknown>;
    // Check everything before changing anything.
    for (const [k, v] of Object.entries(update)) {
      switch (k) {
        case 'log_info':
        case 'log_warning':
        case 'log_error':
          if (typeof v !== 'boolean') throw Errors.invalidArg(`expect boolean for '${k}'`);
          break;
        case 'log_verbose_level':
          if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw Errors.invalidArg(`expect a non-negative integer for '${k}'`);
          break;
        case 'log_format':
          if (v !== 'default' && v !== 'ISO8601') throw Errors.invalidArg(`invalid log format '${String(v)}': expect 'default' or 'ISO8601'`);
          break;
        case 'log_file':
          if (v !== settings.log_file) throw Errors.unsupported('log_file cannot be changed while the server runs (start it with --log-file)');
          break;
        default:
          throw Errors.invalidArg(`unknown log setting '${k}'`);
      }
    }
    for (const [k, v] of Object.entries(update)) {
      if (k === 'log_info' || k === 'log_warning' || k === 'log_error') settings[k] = v as boolean;
      else if (k === 'log_verbose_level') settings.log_verbose_level = v as number;
      else if (k === 'log_format') settings.log_format = v as 'default' | 'ISO8601';
    }
    return c.json(settings.toJson());
  });
  return app;
}
