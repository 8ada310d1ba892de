import { connect, type Socket } from 'node:net';
import { Hono } from 'hono';
import { describe, expect, it, vi } from 'vitest';
import type { Backplane } from '@triode/core';
import { createHttpApp } from './http-server.js';
import { HttpLifecycle } from './lifecycle.js';
import { startHttpServer } from './listen.js';
import { captureListens } from '../../../../test/helpers/servers.js';

describe('HttpLifecycle', () => {
  it('finishes requests that arrived before shutdown and refuses inference after it with 503', async () => {
    const lc = new HttpLifecycle();
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const app = new Hono();
    app.use(lc.middleware());
    app.post('/slow', async (c) => { await gate; return c.text('done'); });
    app.get('/v2/health/live', (c) => c.body('', 200));

    const slow = app.request('/slow', { method: 'POST' });
    await new Promise((r) => setImmediate(r));
    expect(lc.inflight).toBe(1);
    let drained = false;
    const shutdown = lc.shutdown(10_000).then((left) => { drained = true; return left; });

    const refused = await app.request('/slow', { method: 'POST' });
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({ error: 'Server is stopping, no new inference requests are accepted' });
    expect((await app.request('/v2/health/live')).status).toBe(200);
    expect(drained).toBe(false);

    release();
    expect(await (await slow).text()).toBe('done');
    expect(await shutdown).toBe(0);
  });

  it('gives up after the timeout and reports what is left', async () => {
    const lc = new HttpLifecycle();
    const app = new Hono();
    app.use(lc.middleware());
    app.post('/never', () => new Promise<Response>(() => undefined));
    void app.request('/never', { method: 'POST' });
    await new Promise((r) => setImmediate(r));
    expect(await lc.shutdown(20)).toBe(1);
  });

  it('attack: a pipelined request whose client leaves before its turn is counted out (it kept every later shutdown waiting its full timeout)', async () => {
    const lc = new HttpLifecycle();
    let n = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const backplane = {
      async serverMetadata() {
        // The first is held until the test lets it end.
        if (n++ === 0) await gate;
        return { name: 'triton', version: '1', extensions: [] };
      },
    } as unknown as Backplane;
    const { servers, stop } = captureListens();
    const h = await startHttpServer(createHttpApp(backplane, { lifecycle: lc }), 0, '127.0.0.1').finally(stop);
    const serverEnd = new Promise<Socket>((r) => servers[0]!.once('connection', r));
    try {
      const s = connect(h.port, '127.0.0.1', () => s.write('GET /v2 HTTP/1.1\r\nHost: x\r\n\r\nGET /v2 HTTP/1.1\r\nHost: x\r\n\r\n'));
      s.on('error', () => undefined);
      // One request at a time a connection: the second waits its turn, and never runs once its client has gone.
      await vi.waitFor(() => expect(lc.inflight).toBe(1), { timeout: 30_000, interval: 20 });
      s.destroy();
      // Once the server has seen the client go, the first handler ends; its response cannot be written.
      const end = await serverEnd;
      await vi.waitFor(() => expect(end.destroyed).toBe(true), { timeout: 30_000, interval: 20 });
      release();
      await vi.waitFor(() => expect(lc.inflight).toBe(0), { timeout: 30_000, interval: 20 });
      expect(n).toBe(1);
    } finally {
      release();
      await h.close(100);
    }
  });
});
