/**
 * A failed load answers alike wherever it is answered (issue #15 scope 2, DESIGN: errors cross
 * processes and Redis as data and are mapped once per transport): `triode serve` and a cluster
 * gateway (one worker behind Redis) over the same repository, over HTTP and gRPC, and a request
 * to the failed model through /infer and the gateway's infer_async. Same status, same code, same
 * message, byte for byte.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, InferenceServerError } from '@triode/client';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

/** A model whose config names an input type that does not exist: its load fails. */
const BROKEN = {
  'broken/config.pbtxt': `name: "broken"
backend: "javascript"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_NOPE dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]
`,
  'broken/1/model.mjs': 'export default class M { execute(r) { return r.map(() => ({ outputs: [] })); } }\n',
};

let redis: RedisHandle;
const children: Child[] = [];
const ends: Record<'serve' | 'gateway', { http: string; grpc: string }> = { serve: { http: '', grpc: '' }, gateway: { http: '', grpc: '' } };

beforeAll(async () => {
  const repo = makeRepository(['simple'], BROKEN);
  redis = await startRedis();
  const [sh, sg, gh, gg] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  ends.serve = { http: `http://127.0.0.1:${sh}`, grpc: `127.0.0.1:${sg}` };
  ends.gateway = { http: `http://127.0.0.1:${gh}`, grpc: `127.0.0.1:${gg}` };
  const explicit = ['--model-repository', repo, '--model-control-mode', 'explicit', '--load-model', 'simple'];
  children.push(await startTriode(['serve', ...explicit, '--http-port', String(sh), '--http-address', '127.0.0.1', '--grpc-port', String(sg), '--grpc-address', '127.0.0.1', '--allow-metrics=false']));
  children.push(await startTriode(['worker', ...explicit, '--redis', redis.url, '--metrics-port', '0'], /Started worker/));
  children.push(await startTriode(['gateway', '--redis', redis.url, '--http-port', String(gh), '--http-address', '127.0.0.1', '--grpc-port', String(gg), '--grpc-address', '127.0.0.1', '--metrics-port', '0']));
  await until(async () => (await fetch(`${ends.gateway.http}/v2/models/simple/ready`)).status === 200);
}, 90_000);

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await redis?.stop();
});

async function http(base: string, path: string, body = ''): Promise<{ status: number; body: string }> {
  const r = await fetch(`${base}${path}`, { method: 'POST', body });
  return { status: r.status, body: await r.text() };
}

async function grpcLoad(target: string, model: string): Promise<{ code: number | undefined; message: string }> {
  const c = new GrpcClient(target);
  try {
    await c.loadModel(model);
    return { code: 0, message: '' };
  } catch (err) {
    return { code: (err as InferenceServerError).grpcCode, message: (err as Error).message };
  } finally {
    c.close();
  }
}

describe('a failed load, answered alike everywhere', () => {
  it.each(['broken', 'nope'])('load of %s: the same status/code and message embedded and through the gateway, over HTTP and gRPC', async (model) => {
    const serve = await http(ends.serve.http, `/v2/repository/models/${model}/load`);
    const gateway = await http(ends.gateway.http, `/v2/repository/models/${model}/load`);
    expect(serve.status).not.toBe(200);
    expect(gateway).toEqual(serve);
    const gs = await grpcLoad(ends.serve.grpc, model);
    const gg = await grpcLoad(ends.gateway.grpc, model);
    expect(gs.code).not.toBe(0);
    expect(gg).toEqual(gs);
    // The HTTP and gRPC messages are the same error.
    expect(gs.message).toContain(JSON.parse(serve.body).error as string);
  });

  it('a request to the model that failed: the same answer from /infer embedded and through the gateway, and from infer_async', async () => {
    const body = JSON.stringify({ inputs: [{ name: 'X', shape: [1], datatype: 'INT32', data: [1] }] });
    const serve = await http(ends.serve.http, '/v2/models/broken/infer', body);
    const gateway = await http(ends.gateway.http, '/v2/models/broken/infer', body);
    const job = await http(ends.gateway.http, '/v2/models/broken/infer_async', body);
    expect(serve.status).not.toBe(200);
    expect(gateway).toEqual(serve);
    expect(job).toEqual(serve);
  });
});
