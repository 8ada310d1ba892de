/**
 * @module Async inference endpoints (a Triode extension; request and response bodies are
 * Triton's): `POST /v2/models/{m}[/versions/{v}]/infer_async` -> 202 `{"job_id", "state"}`,
 * `GET /v2/jobs/{id}`, `GET /v2/jobs/{id}/result` (the infer response), `DELETE /v2/jobs/{id}`.
 */
import { Hono } from 'hono';
import { Errors, TriodeError, type AsyncInference } from '@triode/core';
import { clientMessage } from '../../error-mapping.js';
import type { HttpDeps } from '../http-options.js';
import { readInferRequest, writeInferResponse } from '../infer-http.js';
import { modelPaths } from './model-params.js';
import { forwardHeaders } from '../../control/header-forward.js';

const noJobs = () => Errors.unsupported('async inference needs cluster mode: start a gateway with --redis (triode gateway)');

/** The async routes; `jobs` absent (embedded mode) answers 501. */
export function asyncRoutes(deps: HttpDeps, jobs?: AsyncInference): Hono {
  const { maxJsonOutputSize, headerForwardPattern } = deps;
  const app = new Hono();
  for (const path of modelPaths('/infer_async')) {
    app.post(path, async (c) => {
      if (!jobs) throw noJobs();
      // A body whose tensor bytes alone cannot fit the async limit is refused before it is read.
      // The limit is on the request as queued (tensors as raw bytes): the binary section of an
      // uncompressed body is that already, but JSON text is no measure of it (a JSON FP32 tensor
      // takes two or three times its raw size), so a JSON body is measured once read, by submit.
      const length = Number(c.req.header('content-length') ?? 0);
      const headerLength = Number(c.req.header('inference-header-content-length') ?? Number.NaN);
      const identity = (c.req.header('content-encoding') || 'identity') === 'identity';
      if (identity && Number.isSafeInteger(headerLength) && headerLength >= 0 && length - headerLength > jobs.maxRequestBytes) {
        throw Errors.invalidArg(`async request of ${length - headerLength} tensor bytes is over the limit of ${jobs.maxRequestBytes} bytes (--async-max-request-bytes); send it to the infer endpoint instead`);
      }
      // A job outlives its request: a region it names could be gone (or reused) when it runs.
      const { request, encoding } = await readInferRequest(c, deps, asyncShmRefused);
      // The headers /infer forwards to the model go with the job (review: they were left out).
      if (headerForwardPattern) forwardHeaders(request, c.req.raw.headers.entries(), headerForwardPattern);
      const id = await jobs.submit(request, encoding);
      return c.json({ job_id: id, state: 'waiting' }, 202);
    });
  }
  app.get('/v2/jobs/:id', async (c) => {
    if (!jobs) throw noJobs();
    const status = await jobs.status(c.req.param('id'));
    // A failed job's reason is an error message like any other: the client gets what /infer
    // would have sent (first line, no paths), not the text as the worker logged it.
    if (status.error !== undefined) status.error = clientMessage(new TriodeError('INTERNAL', status.error));
    return c.json(status);
  });
  app.get('/v2/jobs/:id/result', async (c) => {
    if (!jobs) throw noJobs();
    const { response, encoding } = await jobs.result(c.req.param('id'));
    return writeInferResponse(c, response, encoding, maxJsonOutputSize);
  });
  app.delete('/v2/jobs/:id', async (c) => {
    if (!jobs) throw noJobs();
    const state = await jobs.cancel(c.req.param('id'));
    return c.json({ job_id: c.req.param('id'), state });
  });
  return app;
}

/** An async request naming a shared memory region is refused. */
const asyncShmRefused = (): never => {
  throw Errors.invalidArg('shared memory regions cannot be used by async inference requests: send the tensors in the request, or use the infer endpoint');
};
