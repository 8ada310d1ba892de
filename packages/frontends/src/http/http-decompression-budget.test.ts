/**
 * The server-wide budget of decompressed request bytes over HTTP, on a real socket (the bytes are
 * held until the response closes): gzip/deflate bodies held by a model count against it until
 * their answer has gone out or their client has gone; past it a compressed request is 503, while
 * uncompressed ones are served as before. Before the budget, each compressed body inflated to
 * `--http-max-input-size` whatever the others held: many connections each sending a 64 KB gzip
 * body took 64 MiB each.
 */
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { silentLogger, type Backplane, type InferenceRequest } from '@triode/core';
import { DecompressionBudget } from '../decompression-budget.js';
import { createHttpApp } from './http-server.js';
import { startHttpServer, type HttpServerHandle } from './listen.js';
import { memoryGrowth } from '../../../../test/helpers/memory.js';

const MiB = 1024 * 1024;
/** The budget of the servers under test: two 16 MiB bodies fit, a third does not. */
const BUDGET = 40 * MiB;
/** Tensor bytes of each request (zeros: a few KB of gzip). */
const TENSOR = 16 * MiB;
const WAIT = { timeout: 30_000, interval: 10 };
const REFUSAL = `the server holds too many decompressed request bytes (the requests in flight would hold more than ${BUDGET}): retry later, or send the request uncompressed`;

/** Ids of the requests the backplane has started, in order. */
const started: string[] = [];
const held: (() => void)[] = [];
const releaseAll = (): void => { for (const h of held.splice(0)) h(); };
/**
 * Holds requests whose id starts with "hold" until released (or cancelled: its client went away),
 * answers the others at once; each keeps its input tensor (a view of the decompressed body) meanwhile.
 */
const backplane = {
  infer: async (r: InferenceRequest) => {
    const id = r.id ?? '';
    started.push(id);
    if (id.startsWith('hold')) {
      await new Promise<void>((resolve) => {
        held.push(resolve);
        r.signal?.addEventListener('abort', () => resolve());
      });
    }
    return { modelName: 'm', modelVersion: '1', id, outputs: [{ name: 'n', datatype: 'INT64', shape: [1], data: BigInt64Array.of(BigInt(r.inputs[0]?.data.byteLength ?? 0)) }] };
  },
} as unknown as Backplane;

/** An infer body with one UINT8 input of `bytes` zeros in the binary extension, and its headers. */
function inferBody(id: string, bytes = TENSOR): { body: Buffer; headers: Record<string, string> } {
  const header = Buffer.from(JSON.stringify({ id, inputs: [{ name: 'x', datatype: 'UINT8', shape: [bytes], parameters: { binary_data_size: bytes } }] }));
  return { body: Buffer.concat([header, Buffer.alloc(bytes)]), headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': String(header.byteLength) } };
}

/** The same body compressed. */
function compressed(id: string, encoding: 'gzip' | 'deflate' = 'gzip', bytes = TENSOR): { body: Buffer; headers: Record<string, string> } {
  const { body, headers } = inferBody(id, bytes);
  return { body: encoding === 'gzip' ? gzipSync(body) : deflateSync(body), headers: { ...headers, 'Content-Encoding': encoding } };
}

interface Answer {
  status: number;
  body: string;
}

/** POSTs on a connection of its own (one request at a time a connection); never rejects. */
function post(port: number, req: { body: Buffer; headers: Record<string, string> }, path = '/v2/models/m/infer'): Promise<Answer> {
  return new Promise((resolve) => {
    const r = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { ...req.headers, 'Content-Length': String(req.body.byteLength) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('latin1') }));
      res.on('error', () => resolve({ status: -1, body: '' }));
    });
    r.on('error', () => resolve({ status: -1, body: '' }));
    r.end(req.body);
  });
}

const errorOf = (a: Answer): string => (JSON.parse(a.body) as { error: string }).error;

for (const fast of [true, false]) {
  describe(`decompressed request bytes over HTTP (${fast ? 'infer fast path' : 'Hono routes'})`, () => {
    let http: HttpServerHandle;
    let budget: DecompressionBudget;

    beforeAll(async () => {
      budget = new DecompressionBudget(BUDGET);
      http = await startHttpServer(createHttpApp(backplane, { logger: silentLogger, decompressionBudget: budget }), 0, '127.0.0.1', { inferFastPath: fast });
    });

    afterEach(() => {
      releaseAll();
    });

    afterAll(async () => {
      releaseAll();
      await http.close(500);
    });

    it('attack: a burst of 24 gzip bodies (16 MiB each inflated, 16 KB sent) to a model that holds them takes at most the budget; the rest are 503; memory stays flat (before: 384 MiB held)', async () => {
      started.length = 0;
      const bodies = Array.from({ length: 24 }, (_, i) => compressed(`hold-burst-${i}`));
      let mostUsed = 0;
      const watch = setInterval(() => { mostUsed = Math.max(mostUsed, budget.used); }, 2);
      const { result: refused, grownBytes } = await memoryGrowth(async () => {
        const answers = bodies.map((b) => post(http.port, b));
        // Every request is either held by the model or answered (refused): then the peak is reached.
        const settled = answers.map(() => false);
        answers.forEach((a, i) => void a.then(() => { settled[i] = true; }));
        await vi.waitFor(() => expect(settled.filter(Boolean).length + started.length).toBe(24), WAIT);
        return { answers, refusedNow: settled.filter(Boolean).length };
      });
      clearInterval(watch);
      // At most two bodies of 16 MiB fit in 40 MiB: the others were refused.
      expect(started.length).toBeGreaterThanOrEqual(1);
      expect(started.length).toBeLessThanOrEqual(2);
      expect(refused.refusedNow).toBe(24 - started.length);
      expect(mostUsed).toBeLessThanOrEqual(BUDGET);
      expect(grownBytes).toBeLessThan(200 * MiB);
      releaseAll();
      const answers = await Promise.all(refused.answers);
      for (const a of answers) {
        if (a.status === 200) continue;
        expect(a.status).toBe(503);
        expect(errorOf(a)).toBe(REFUSAL);
      }
      expect(answers.filter((a) => a.status === 200)).toHaveLength(started.length);
      await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
    }, 60_000);

    it('attack: gzip and deflate requests held by a model count until answered: the one past the budget is 503 with its words, uncompressed ones are still served, and once the held ones end compressed ones are served again (nothing leaks)', async () => {
      started.length = 0;
      const a = post(http.port, compressed('hold-a'));
      await vi.waitFor(() => expect(started).toContain('hold-a'), WAIT);
      const b = post(http.port, compressed('hold-b', 'deflate'));
      await vi.waitFor(() => expect(started).toContain('hold-b'), WAIT);
      expect(budget.used).toBeGreaterThanOrEqual(2 * TENSOR);
      for (const encoding of ['gzip', 'deflate'] as const) {
        const c = await post(http.port, compressed('c', encoding));
        expect(c.status).toBe(503);
        expect(errorOf(c)).toBe(REFUSAL);
      }
      expect(started).not.toContain('c');
      // Uncompressed: what it holds is what its client sent; the budget does not apply.
      const plain = await post(http.port, inferBody('plain'));
      expect(plain.status).toBe(200);
      // A small compressed request that fits what is left is served.
      expect((await post(http.port, compressed('small', 'gzip', 1024))).status).toBe(200);
      releaseAll();
      expect((await a).status).toBe(200);
      expect((await b).status).toBe(200);
      await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
      for (let i = 0; i < 5; i++) expect((await post(http.port, compressed(`after-${i}`))).status).toBe(200);
      expect(budget.used).toBe(0);
    }, 60_000);

    it('attack: a client that goes away gives its bytes back: reset while its request is held, or mid-body', async () => {
      started.length = 0;
      // Held, then the connection is reset: the request is cancelled, its bytes go back.
      for (let i = 0; i < 3; i++) {
        const { body, headers } = compressed(`hold-reset-${i}`);
        const socket = connect(http.port, '127.0.0.1');
        socket.on('error', () => undefined);
        socket.write(`POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}Content-Length: ${body.byteLength}\r\n\r\n`);
        socket.write(body);
        await vi.waitFor(() => expect(started).toContain(`hold-reset-${i}`), WAIT);
        expect(budget.used).toBeGreaterThanOrEqual(TENSOR);
        socket.resetAndDestroy();
        await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
      }
      // Half a body, then gone: nothing was inflated, nothing is held.
      const { body, headers } = compressed('cut');
      const socket = connect(http.port, '127.0.0.1');
      socket.on('error', () => undefined);
      socket.write(`POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}Content-Length: ${body.byteLength}\r\n\r\n`);
      socket.write(body.subarray(0, body.byteLength >> 1));
      await new Promise((r) => setTimeout(r, 50));
      socket.destroy();
      await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
      // Everything still fits: two held at once again, a third refused.
      const a = post(http.port, compressed('hold-again-a'));
      const b = post(http.port, compressed('hold-again-b'));
      await vi.waitFor(() => expect(started.filter((s) => s.startsWith('hold-again'))).toHaveLength(2), WAIT);
      expect((await post(http.port, compressed('over'))).status).toBe(503);
      releaseAll();
      expect([(await a).status, (await b).status]).toEqual([200, 200]);
      await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
    }, 60_000);

    it('with the budget spent, a compressed request is 503 before its body is read (the client need not send it)', async () => {
      started.length = 0;
      const first = compressed('hold-full');
      const exact = new DecompressionBudget(inferBody('hold-full').body.byteLength);
      const own = await startHttpServer(createHttpApp(backplane, { logger: silentLogger, decompressionBudget: exact }), 0, '127.0.0.1', { inferFastPath: fast });
      try {
        const held = post(own.port, first);
        await vi.waitFor(() => expect(started).toContain('hold-full'), WAIT);
        expect(exact.full).toBe(true);
        // Headers and a few bytes of the body: the answer comes without the rest.
        const { body, headers } = compressed('late');
        const socket = connect(own.port, '127.0.0.1');
        socket.on('error', () => undefined);
        let reply = '';
        socket.on('data', (d: Buffer) => { reply += d.toString('latin1'); });
        socket.write(`POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}Content-Length: ${body.byteLength}\r\n\r\n`);
        socket.write(body.subarray(0, 10));
        await vi.waitFor(() => expect(reply).toMatch(/^HTTP\/1\.1 503 /), WAIT);
        expect(reply).toContain(JSON.stringify({ error: exact.refusal().message }));
        socket.destroy();
        releaseAll();
        expect((await held).status).toBe(200);
        await vi.waitFor(() => expect(exact.used).toBe(0), WAIT);
      } finally {
        await own.close(500);
      }
    });

    it('a body that fails (not gzip, over --http-max-input-size) gives back what it took at once', async () => {
      const bad = { body: Buffer.from('this is not gzip at all'), headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' } };
      expect((await post(http.port, bad)).status).toBe(400);
      // Truncated gzip: inflates some, then fails.
      const whole = compressed('truncated').body;
      const truncated = { body: whole.subarray(0, whole.byteLength - 100), headers: compressed('truncated').headers };
      expect((await post(http.port, truncated)).status).toBe(400);
      expect(budget.used).toBe(0);
    });
  });
}

describe('decompressed request bytes, in-process (app.request: no socket to wait for)', () => {
  it('a body that inflates past the budget is 503; the bytes go back once it is decoded', async () => {
    const budget = new DecompressionBudget(4 * MiB);
    const app = createHttpApp(backplane, { logger: silentLogger, decompressionBudget: budget });
    const big = compressed('big', 'gzip', 8 * MiB);
    const r = await app.request('/v2/models/m/infer', { method: 'POST', body: big.body, headers: big.headers });
    expect(r.status).toBe(503);
    expect((await r.json() as { error: string }).error).toContain('the server holds too many decompressed request bytes');
    const small = compressed('small', 'gzip', MiB);
    expect((await app.request('/v2/models/m/infer', { method: 'POST', body: small.body, headers: small.headers })).status).toBe(200);
    expect(budget.used).toBe(0);
  });
});
