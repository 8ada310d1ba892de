/**
 * A model instance whose GPU is lost mid-run (issue #17), over HTTP, with a stand-in backend whose
 * instance reports the lost device as core's Backend seam says (`Errors.instanceLost`): the
 * request fails 503 with the clear message, the model is not ready (400, index UNAVAILABLE with
 * the reason) and the server keeps running; loading the model again recovers.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Errors, InferenceServer, LocalBackplane, type Backend } from '@triode/core';
import { createHttpApp } from './http-server.js';

const LOST = 'Cannot run the model: GPU 0 (Fake GPU) was lost (the model is not ready until it is loaded again): device lost';

/** OUT = IN; a request holding -3 loses its instance's GPU. */
const losing: Backend = {
  name: 'testing',
  async modelInitialize() {
    return {
      async instanceInitialize() {
        return {
          async execute(requests) {
            if (requests.some((r) => (r.inputs[0]!.data as Int32Array)[0] === -3)) throw Errors.instanceLost(LOST);
            return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
          },
          async finalize() {},
        };
      },
      async finalize() {},
    };
  },
};

let server: InferenceServer;
let app: ReturnType<typeof createHttpApp>;

beforeAll(async () => {
  const repo = mkdtempSync(join(tmpdir(), 'triode-lost-'));
  mkdirSync(join(repo, 'm', '1'), { recursive: true });
  writeFileSync(join(repo, 'm', 'config.pbtxt'), 'backend: "testing"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [losing], modelControlMode: 'explicit', startupModels: ['m'] });
  app = createHttpApp(new LocalBackplane(server));
});

afterAll(async () => {
  await server?.stop(2000);
});

const infer = (v: number) => app.request('/v2/models/m/infer', { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: [v] }] }) });
const index = async () => (await (await app.request('/v2/repository/index', { method: 'POST' })).json()) as unknown[];

describe('a lost GPU mid-run (HTTP)', () => {
  it('fails the request 503 with the clear message, marks the model not ready until it is loaded again', async () => {
    expect((await infer(1)).status).toBe(200);
    const r = await infer(-3);
    expect(r.status).toBe(503);
    expect(await r.json()).toEqual({ error: LOST });
    expect((await app.request('/v2/models/m/ready')).status).toBe(400);
    expect((await app.request('/v2/models/m/versions/1/ready')).status).toBe(400);
    expect(await index()).toEqual([{ name: 'm', version: '1', state: 'UNAVAILABLE', reason: LOST }]);
    // The server is still live; the model answers why it is not ready.
    expect((await app.request('/v2/health/live')).status).toBe(200);
    const refused = await infer(1);
    expect(refused.status).toBe(404);
    expect(await refused.json()).toEqual({ error: `Request for unknown model: 'm' has no available versions: ${LOST}` });
    // Named, the version is not at ready state (503).
    const named = await app.request('/v2/models/m/versions/1/infer', { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: [1] }] }) });
    expect([named.status, await named.json()]).toEqual([503, { error: `Request for unknown model: 'm' version 1 is not at ready state: ${LOST}` }]);

    expect((await app.request('/v2/repository/models/m/load', { method: 'POST' })).status).toBe(200);
    expect((await app.request('/v2/models/m/ready')).status).toBe(200);
    expect(await index()).toEqual([{ name: 'm', version: '1', state: 'READY' }]);
    expect((await infer(2)).status).toBe(200);
  });
});
