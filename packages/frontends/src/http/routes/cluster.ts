/**
 * @module Cluster endpoints (a Triode extension): `GET /v2/cluster/workers` lists the live workers
 * (id, host, pid, device, loaded models and their state, requests in flight, last heartbeat).
 * In the `model-repository` group of `--http-restricted-api`; embedded mode answers 501.
 */
import { Hono } from 'hono';
import { Errors } from '@triode/core';
import type { HttpDeps } from '../http-options.js';

/** The message embedded mode answers the cluster endpoints with. */
export const NO_CLUSTER = 'the cluster endpoints need cluster mode: start a gateway with --redis (triode gateway)';

/** `GET /v2/cluster/workers` -> `{"workers": [...]}`. */
export function clusterRoutes({ backplane }: HttpDeps): Hono {
  const app = new Hono();
  app.get('/v2/cluster/workers', async (c) => {
    if (!backplane.clusterWorkers) throw Errors.unsupported(NO_CLUSTER);
    return c.json({ workers: await backplane.clusterWorkers() });
  });
  return app;
}
