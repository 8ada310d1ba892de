/**
 * @module Model metadata, readiness and config routes.
 * Triton: server/src/http_server.cc HandleModelMetadata, HandleModelReady, HandleModelConfig
 */
import { Hono } from 'hono';
import type { HttpDeps } from '../http-options.js';
import { versionNumber } from '../../model-version.js';
import { modelParams, modelPaths } from './model-params.js';

/** `GET /v2/models/{m}[/versions/{v}]`, `.../ready` and `.../config`. */
export function modelRoutes({ backplane }: HttpDeps): Hono {
  const app = new Hono();
  for (const path of modelPaths('/ready')) {
    app.get(path, async (c) => {
      if (await backplane.modelReady(c.req.param('model') ?? '', versionNumber(c.req.param('version')))) return c.body('', 200);
      return c.json({ error: 'Model version not ready' }, 400);
    });
  }
  for (const path of modelPaths('/config')) {
    app.get(path, async (c) => {
      const { name, version } = await modelParams(c, backplane);
      return c.json(await backplane.modelConfig(name, version));
    });
  }
  for (const path of modelPaths('')) {
    app.get(path, async (c) => {
      const { name, version } = await modelParams(c, backplane);
      return c.json(await backplane.modelMetadata(name, version));
    });
  }
  return app;
}
