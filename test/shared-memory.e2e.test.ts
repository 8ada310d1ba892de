/**
 * System shared memory through the `triode` bin, as a client on the server's host uses it: an
 * object in /dev/shm (what shm_open makes), registered over HTTP, named by an infer request's
 * inputs and outputs. `triode serve` and a gateway (with a worker and Redis) started with
 * --allow-client-shm=true; the gateway reads the inputs and writes the outputs on its host, the
 * worker sees ordinary tensors. Without the flag (Triton's default since 26.04) registering is refused.
 */
import { closeSync, existsSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const KEY = `/triode-e2e-shm-${process.pid}`;
const FILE = `/dev/shm${KEY}`;
const IN0 = Int32Array.from({ length: 16 }, (_, i) => i * 5);
const IN1 = Int32Array.from({ length: 16 }, (_, i) => 100 - i);

let redis: RedisHandle;
let serve: Child;
let plain: Child;
let worker: Child;
let gateway: Child;
const ports = { serve: 0, plain: 0, gateway: 0 };

beforeAll(async () => {
  // The client's side: shm_open + ftruncate + write (a page: registered offsets are page aligned).
  const object = Buffer.alloc(4096);
  object.set(Buffer.from(IN0.buffer), 0);
  object.set(Buffer.from(IN1.buffer), 64);
  writeFileSync(FILE, object);
  const repo = makeRepository(['simple']);
  [ports.serve, ports.plain, ports.gateway] = [await freePort(), await freePort(), await freePort()];
  redis = await startRedis();
  [serve, plain, worker] = await Promise.all([
    startTriode(['serve', '--model-repository', repo, '--http-port', String(ports.serve), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--allow-client-shm=true']),
    startTriode(['serve', '--model-repository', repo, '--http-port', String(ports.plain), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false']),
    startTriode(['worker', '--allow-metrics=false', '--redis', redis.url, '--model-repository', repo], /Started worker/),
  ]);
  gateway = await startTriode(['gateway', '--allow-metrics=false', '--redis', redis.url, '--http-port', String(ports.gateway), '--http-address', '127.0.0.1',
    '--allow-grpc=false', '--advertise-address', '127.0.0.1', '--allow-client-shm=true']);
  await until(async () => (await fetch(`http://127.0.0.1:${ports.gateway}/v2/models/simple/ready`)).status === 200);
}, 120_000);

afterAll(async () => {
  await Promise.all([serve?.stop(), plain?.stop(), gateway?.stop(), worker?.stop()]);
  await redis?.stop();
  if (existsSync(FILE)) rmSync(FILE);
});

const post = (port: number, path: string, body: unknown) => fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', body: JSON.stringify(body) });
const window = (offset: number) => ({ shared_memory_region: 'io', shared_memory_offset: offset, shared_memory_byte_size: 64 });
const request = {
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: window(0) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: window(64) },
  ],
  outputs: [{ name: 'OUTPUT0', parameters: window(128) }, { name: 'OUTPUT1', parameters: window(192) }],
};

/** The outputs' bytes in the object, read as the client reads its mapping. */
function outputs(): number[][] {
  const b = readFileSync(FILE);
  return [128, 192].map((at) => Array.from(new Int32Array(b.buffer.slice(b.byteOffset + at, b.byteOffset + at + 64))));
}

describe('system shared memory through the bin (--allow-client-shm=true)', () => {
  it.each([['triode serve', () => ports.serve], ['a gateway and a worker', () => ports.gateway]])('%s: register, infer with inputs and outputs in /dev/shm, unregister', async (_what, port) => {
    const fd = openSync(FILE, 'r+');
    writeSync(fd, Buffer.alloc(128), 0, 128, 128);
    closeSync(fd);
    const meta = (await (await fetch(`http://127.0.0.1:${port()}/v2`)).json()) as { extensions: string[] };
    expect(meta.extensions).toContain('system_shared_memory');
    expect(meta.extensions).not.toContain('cuda_shared_memory');
    expect((await post(port(), '/v2/systemsharedmemory/region/io/register', { key: KEY, offset: 0, byte_size: 4096 })).status).toBe(200);
    const r = await post(port(), '/v2/models/simple/infer', request);
    expect(r.status).toBe(200);
    expect(((await r.json()) as { outputs: object[] }).outputs).toEqual([
      { name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] },
    ]);
    expect(outputs()).toEqual([Array.from(IN0, (x, i) => x + IN1[i]!), Array.from(IN0, (x, i) => x - IN1[i]!)]);
    expect((await post(port(), '/v2/systemsharedmemory/unregister', {})).status).toBe(200);
    expect(await (await fetch(`http://127.0.0.1:${port()}/v2/systemsharedmemory/status`)).json()).toEqual([]);
  });

  it('without the flag: no region can be registered (501, why), and the metadata does not list the extension', async () => {
    const r = await post(ports.plain, '/v2/systemsharedmemory/region/io/register', { key: KEY, offset: 0, byte_size: 4096 });
    expect(r.status).toBe(501);
    expect(((await r.json()) as { error: string }).error).toMatch(/--allow-client-shm=true/);
    const meta = (await (await fetch(`http://127.0.0.1:${ports.plain}/v2`)).json()) as { extensions: string[] };
    expect(meta.extensions).not.toContain('system_shared_memory');
    const infer = await post(ports.plain, '/v2/models/simple/infer', request);
    expect([infer.status, await infer.json()]).toEqual([404, { error: "Unable to find shared memory region: 'io'" }]);
  });
});
