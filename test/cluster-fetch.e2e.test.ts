/**
 * The tensor fetch under attack, end to end (redis-server, a worker and a gateway as `triode`
 * processes, with a cluster secret): whoever reaches a gateway's direct channel port can open
 * connections without authenticating. Before, a flood of them filled the channel's places, a
 * worker's next connection was refused, and every request it took whose tensors it had to fetch
 * (64 KiB or more, ppocr_cls-sized here) failed 503 naming the gateway's internal address.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const SECRET = 'the-cluster-secret';
/** INT32 elements of a request: 110,592 bytes, as ppocr_cls's input (over the 64 KiB fetch threshold). */
const ELEMENTS = 3 * 48 * 192;

let redis: RedisHandle;
let worker: Child;
let gateway: Child;
let base: string;
let directPort: number;

/** A binary request to custom_identity_int32 of ELEMENTS values from `k`; resolves with its status, body and the values back. */
async function infer(k: number): Promise<{ status: number; text: string; values?: Int32Array }> {
  const x = Int32Array.from({ length: ELEMENTS }, (_, i) => k + i);
  const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: [{ name: 'INPUT0', shape: [1, ELEMENTS], datatype: 'INT32', parameters: { binary_data_size: x.byteLength } }] }));
  const r = await fetch(`${base}/v2/models/custom_identity_int32/infer`, {
    method: 'POST', headers: { 'Inference-Header-Content-Length': String(header.length) }, body: Buffer.concat([header, Buffer.from(x.buffer)]),
  });
  const body = Buffer.from(await r.arrayBuffer());
  if (r.status !== 200) return { status: r.status, text: body.toString() };
  const at = Number(r.headers.get('inference-header-content-length'));
  return { status: 200, text: body.subarray(0, at).toString(), values: new Int32Array(body.buffer.slice(body.byteOffset + at)) };
}

beforeAll(async () => {
  redis = await startRedis();
  const repo = makeRepository(['custom_identity_int32']);
  worker = await startTriode(['worker', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', redis.url, '--model-repository', repo, '--cluster-secret', SECRET], /Started worker/);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  // Few places, and a short idle timeout: the worker's connection is closed while the flood holds
  // the places, so its next fetch needs a new one.
  gateway = await startTriode(['gateway', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', redis.url, '--http-port', String(port), '--http-address', '127.0.0.1',
    '--allow-grpc=false', '--cluster-secret', SECRET, '--advertise-address', '127.0.0.1', '--reply-max-connections', '16', '--reply-idle-timeout-secs', '1'],
  /direct replies at 127\.0\.0\.1:\d+[\s\S]*Started HTTPService/);
  directPort = Number(/direct replies at 127\.0\.0\.1:(\d+)/.exec(gateway.output())![1]);
  await until(async () => (await fetch(`${base}/v2/models/custom_identity_int32/ready`)).status === 200);
});

afterAll(async () => {
  await Promise.all([gateway?.stop(), worker?.stop()]);
  await redis?.stop();
});

describe('cluster: fetched tensors while the direct channel is flooded', () => {
  it('attack: a flood of connections that never authenticate on the gateway\'s direct port: every large request is still answered 200, and none names the gateway\'s address', async () => {
    // The worker reaches the direct channel (its first reply opens the connection); from then on
    // these requests leave their tensors at the gateway for the worker to fetch.
    for (let k = 0; k < 3; k++) expect((await infer(k)).status).toBe(200);

    // The flood: 24 connections that never send a byte, each opened again soon after it is closed.
    let flooding = true;
    const flood = new Set<Socket>();
    const openOne = (): void => {
      if (!flooding) return;
      const s = connect(directPort, '127.0.0.1');
      flood.add(s);
      s.on('error', () => undefined);
      s.once('close', () => {
        flood.delete(s);
        setTimeout(openOne, 10);
      });
    };
    for (let i = 0; i < 24; i++) openOne();
    try {
      // Past the gateway's idle timeout: the worker's connection is gone, its next fetch opens a new one.
      await new Promise((r) => setTimeout(r, 1800));
      const results: { status: number; text: string; values?: Int32Array }[] = [];
      for (let round = 0; round < 5; round++) {
        results.push(...await Promise.all([0, 1, 2, 3].map((i) => infer(100 * round + i))));
        // And idle again, so the worker reconnects through the flood more than once.
        if (round === 2) await new Promise((r) => setTimeout(r, 1500));
      }
      results.forEach((r, n) => {
        expect(r.status, r.text).toBe(200);
        const k = 100 * Math.floor(n / 4) + (n % 4);
        expect(r.values![0]).toBe(k);
        expect(r.values![ELEMENTS - 1]).toBe(k + ELEMENTS - 1);
        expect(r.text).not.toContain(String(directPort));
      });
    } finally {
      flooding = false;
      for (const s of flood) s.destroy();
    }
    // The gateway says what happened (once per 10 s at most).
    expect(gateway.output()).toMatch(/direct reply channel: at its limit of 16 connections \(--reply-max-connections\)/);
  });
});
