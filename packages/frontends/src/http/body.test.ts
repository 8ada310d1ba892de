import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Backplane } from '@triode/core';
import { createHttpApp } from './http-server.js';
import { HttpLifecycle } from './lifecycle.js';
import { startHttpServer, type HttpServerHandle } from './listen.js';

const lifecycle = new HttpLifecycle();
let http: HttpServerHandle;

beforeAll(async () => {
  // The body is never complete, so the backplane is never reached.
  const backplane = {} as Backplane;
  http = await startHttpServer(createHttpApp(backplane, { lifecycle }), 0, '127.0.0.1');
});

afterAll(async () => {
  await http.close();
});

describe('request bodies over a socket', () => {
  it('a client that closes mid-body does not leave its request in flight', async () => {
    await new Promise<void>((resolve) => {
      const s = connect(http.port, '127.0.0.1', () => {
        s.write(`POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n${'{'.repeat(1000)}`);
        setTimeout(() => { s.destroy(); resolve(); }, 50);
      });
    });
    const deadline = Date.now() + 2000;
    while (lifecycle.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(lifecycle.inflight).toBe(0);
  });
});
