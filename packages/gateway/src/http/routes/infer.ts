/**
 * @module `POST /v2/models/{m}[/versions/{v}]/infer`: JSON and binary tensors, compression.
 * Triton: server/src/http_server.cc HandleInfer
 */
import { Hono } from 'hono';
import type { HttpDeps } from '../http-options.js';
import { readInferRequest, writeInferResponse } from '../infer-http.js';
import { modelPaths } from './model-params.js';

/** The infer routes. */
export function inferRoutes({ backplane, maxInputSize }: HttpDeps): Hono {
  const app = new Hono();
  for (const path of modelPaths('/infer')) {
    app.post(path, async (c) => {
      const { request, encoding } = await readInferRequest(c, backplane, maxInputSize);
      return writeInferResponse(c, await backplane.infer(request), encoding);
    });
  }
  return app;
}
