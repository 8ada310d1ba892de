/** @module The statistics extension. Triton: server/src/http_server.cc HandleModelStats */
import { Hono } from 'hono';
import type { HttpDeps } from '../http-options.js';
import { versionNumber } from '../../model-version.js';
import { modelPaths } from './model-params.js';

/** `GET /v2/models/stats` and `GET /v2/models/{m}[/versions/{v}]/stats`. */
export function statsRoutes({ backplane }: HttpDeps): Hono {
  const app = new Hono();
  app.get('/v2/models/stats', async (c) => c.json({ model_stats: await backplane.modelStatistics() }));
  for (const path of modelPaths('/stats')) {
    app.get(path, async (c) => {
      const version = versionNumber(c.req.param('version'));
      return c.json({ model_stats: await backplane.modelStatistics(c.req.param('model') ?? '', version) });
    });
  }
  return app;
}
