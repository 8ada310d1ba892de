/**
 * @module `POST /v2/models/{m}[/versions/{v}]/infer`: JSON and binary tensors, compression.
 * Triton: server/src/http_server.cc HandleInfer
 */
import { Hono } from 'hono';
import type { HttpDeps } from '../http-options.js';
import { readInferRequest, tracedInfer, writeInferResponse } from '../infer-http.js';
import { modelPaths } from './model-params.js';
import { traceNow } from '../../control/tracer.js';
import { forwardHeaders } from '../../control/header-forward.js';

/** The infer routes. */
export function inferRoutes(deps: HttpDeps): Hono {
  const { backplane, maxJsonOutputSize, tracer, headerForwardPattern, sharedMemory } = deps;
  const app = new Hono();
  for (const path of modelPaths('/infer')) {
    app.post(path, async (c) => {
      const recvStart = tracer?.active ? traceNow() : 0;
      const { request, encoding, sharedMemory: shm } = await readInferRequest(c, deps, sharedMemory);
      try {
        // Large inputs in shared memory are read now, off the event loop.
        if (shm) await shm.load();
        const t = tracer?.start(request.modelName);
        t?.trace.timestamps.push({ name: 'HTTP_RECV_START', ns: recvStart });
        if (headerForwardPattern) forwardHeaders(request, c.req.raw.headers.entries(), headerForwardPattern);
        // A client that goes away before its answer cancels the request (as on the fast path).
        request.signal = c.req.raw.signal;
        if (!t) return await writeInferResponse(c, await backplane.infer(request), encoding, maxJsonOutputSize, shm);
        return await tracedInfer(backplane, request, tracer!, t, (r) => writeInferResponse(c, r, encoding, maxJsonOutputSize, shm));
      } finally {
        // The regions it names are held until it is answered or failed.
        shm?.release();
      }
    });
  }
  return app;
}
