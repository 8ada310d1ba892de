/**
 * @module The shared-memory extension's paths. System shared memory is served when the server is
 * started with `--allow-client-shm=true` (`regions` given): status, register, unregister over a
 * SystemSharedMemory shared with the gRPC frontend. Without it, status lists no region and register
 * and unregister are refused as disabled. CUDA shared memory is not served (501 UNSUPPORTED, as
 * the gRPC service answers UNIMPLEMENTED): Node has no CUDA IPC. Status is GET, register and
 * unregister POST (others 405, as every known path).
 * Triton: server/src/http_server.cc (HandleSystemSharedMemory, HandleCudaSharedMemory)
 */
import { Hono, type Context } from 'hono';
import { Errors } from '@triode/core';
import { readSettingsBody } from './settings-body.js';
import { NO_REGIONS, clientShmDisabled, type SystemSharedMemory } from '../../shared-memory/system-shared-memory.js';

/** The paths Triton routes to its shared-memory handlers, with their method. */
export const SHARED_MEMORY_PATHS: readonly (readonly ['GET' | 'POST', string])[] = ['system', 'cuda'].flatMap((kind) => {
  const base = `/v2/${kind}sharedmemory`;
  return [
    ['GET', `${base}/status`], ['GET', `${base}/region/:region/status`],
    ['POST', `${base}/register`], ['POST', `${base}/region/:region/register`],
    ['POST', `${base}/unregister`], ['POST', `${base}/region/:region/unregister`],
  ] as const;
});

/** A uint64 field of a register body, as Triton's TritonJson AsUInt reads it (default when absent). */
function uintField(doc: Record<string, unknown>, key: string, missing: () => number): number {
  if (!Object.hasOwn(doc, key)) return missing();
  const v = doc[key];
  // Triton answers these 500 (its JSON reader's INTERNAL); the client's mistake is 400 here.
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw Errors.invalidArg('attempt to access JSON non-unsigned-integer as unsigned-integer');
  return v;
}

/** The shared-memory routes; `regions` when clients may use system shared memory. */
export function sharedMemoryRoutes(regions?: SystemSharedMemory): Hono {
  const app = new Hono();
  const base = '/v2/systemsharedmemory';
  const enabled = (): SystemSharedMemory => {
    if (!regions) throw clientShmDisabled();
    return regions;
  };
  const status = (c: Context, name?: string) => c.json((regions ?? NO_REGIONS).status(name));
  // Register and unregister answer as Triton's HandleSystemSharedMemory: its JSON Content-Type, no
  // body (Content-Length 0; a null body went out chunked).
  const done = (c: Context) => c.body('', 200, { 'Content-Type': 'application/json' });
  app.get(`${base}/status`, (c) => status(c));
  app.get(`${base}/region/:region/status`, (c) => status(c, c.req.param('region')));
  app.post(`${base}/register`, () => {
    enabled();
    throw Errors.invalidArg("'region name' is necessary to register system shared memory region");
  });
  app.post(`${base}/region/:region/register`, async (c) => {
    const shm = enabled();
    const doc = await readSettingsBody(c);
    if (!Object.hasOwn(doc, 'key')) throw Errors.invalidArg("Shared memory register request has no 'key' field");
    const key = doc['key'];
    if (typeof key !== 'string') throw Errors.invalidArg('attempt to access JSON non-string as string');
    const offset = uintField(doc, 'offset', () => 0);
    const byteSize = uintField(doc, 'byte_size', () => {
      throw Errors.invalidArg("Shared memory register request has no 'byte_size' field");
    });
    shm.register(c.req.param('region'), key, offset, byteSize);
    return done(c);
  });
  app.post(`${base}/unregister`, (c) => {
    enabled().unregister();
    return done(c);
  });
  app.post(`${base}/region/:region/unregister`, (c) => {
    enabled().unregister(c.req.param('region'));
    return done(c);
  });
  const cuda = () => {
    throw Errors.unsupported('CUDA shared memory is not supported by Triode: use system shared memory, or send tensors in the request body');
  };
  for (const [method, path] of SHARED_MEMORY_PATHS) {
    if (!path.startsWith('/v2/cuda')) continue;
    if (method === 'GET') app.get(path, cuda);
    else app.post(path, cuda);
  }
  return app;
}
