/** @module Health and server metadata routes. Triton: server/src/http_server.cc HandleServerHealth, HandleServerMetadata */
import { Hono } from 'hono';
import type { HttpDeps } from '../http-options.js';

/**
 * `GET /v2/health/live`, `GET /v2/health/ready` (200 or 400, empty body; while the server exits the
 * backplane refuses them, 503 `{"error":"Server exiting"}`) and `GET /v2`.
 */
export function healthRoutes({ backplane }: HttpDeps): Hono {
  const app = new Hono();
  app.get('/v2/health/live', async (c) => c.body('', (await backplane.isLive()) ? 200 : 400));
  app.get('/v2/health/ready', async (c) => c.body('', (await backplane.isReady()) ? 200 : 400));
  app.get('/v2', async (c) => c.json(await backplane.serverMetadata()));
  return app;
}
