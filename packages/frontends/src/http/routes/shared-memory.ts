/**
 * @module The shared-memory extension's paths: Triode does not serve shared memory, and says so
 * (501 UNSUPPORTED, as its gRPC service answers UNIMPLEMENTED) instead of a bare 404: a client
 * that registers or unregisters regions learns why. Status is GET, register and unregister POST.
 * Triton: server/src/http_server.cc (HandleSystemSharedMemory, HandleCudaSharedMemory)
 */
import { Hono } from 'hono';
import { Errors } from '@triode/core';

/** The paths Triton routes to its shared-memory handlers, with their method. */
export const SHARED_MEMORY_PATHS: readonly (readonly ['GET' | 'POST', string])[] = ['system', 'cuda'].flatMap((kind) => {
  const base = `/v2/${kind}sharedmemory`;
  return [
    ['GET', `${base}/status`], ['GET', `${base}/region/:region/status`],
    ['POST', `${base}/register`], ['POST', `${base}/region/:region/register`],
    ['POST', `${base}/unregister`], ['POST', `${base}/region/:region/unregister`],
  ] as const;
});

/** Every shared-memory path answers UNSUPPORTED. */
export function sharedMemoryRoutes(): Hono {
  const app = new Hono();
  const unsupported = () => {
    throw Errors.unsupported('shared memory is not supported by Triode: send tensors in the request body (binary tensor data extension)');
  };
  for (const [method, path] of SHARED_MEMORY_PATHS) {
    if (method === 'GET') app.get(path, unsupported);
    else app.post(path, unsupported);
  }
  return app;
}
