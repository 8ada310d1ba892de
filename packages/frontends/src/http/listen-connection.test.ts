/**
 * One request at a time a connection, on a real socket: pipelined requests wait for the one
 * before them (and never run once their client has gone), and a client that stops taking its
 * answer loses its connection after responseStallTimeoutMs (review: resource exhaustion).
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { silentLogger, type Backplane, type InferenceRequest } from '@triode/core';
import { createHttpApp } from './http-server.js';
import { MAX_PIPELINED, startHttpServer, type HttpServerHandle } from './listen.js';
import { captureListens } from '../../../../test/helpers/servers.js';

let http: HttpServerHandle;
/** Request ids the backplane has started, in order. */
const started: string[] = [];
/** The cancel signal of each request started, by id: aborted once the server saw its client go. */
const signals = new Map<string, InferenceRequest['signal']>();
/** Releases the requests held so far. */
let releaseAll: () => void = () => undefined;
const held: (() => void)[] = [];
/** Answers 'big' with 16 MB of output; holds the others until released. */
const backplane = {
  infer: async (r: InferenceRequest) => {
    started.push(r.id ?? '');
    signals.set(r.id ?? '', r.signal);
    if (r.id === 'big') return { modelName: 'm', modelVersion: '1', id: 'big', outputs: [{ name: 'o', datatype: 'UINT8', shape: [16 << 20], data: new Uint8Array(16 << 20) }] };
    await new Promise<void>((res) => held.push(res));
    return { modelName: 'm', modelVersion: '1', id: r.id, outputs: [] };
  },
} as unknown as Backplane;
releaseAll = () => { for (const h of held.splice(0)) h(); };
/** The server's end of each connection, by the client's port: to see when the server closed one. */
const serverEnds = new Map<number, Socket>();

beforeAll(async () => {
  const { servers, stop } = captureListens();
  try {
    http = await startHttpServer(createHttpApp(backplane, { logger: silentLogger }), 0, '127.0.0.1', { responseStallTimeoutMs: 500 });
  } finally {
    stop();
  }
  servers[0]!.on('connection', (s: Socket) => serverEnds.set(s.remotePort!, s));
});

afterAll(async () => {
  releaseAll();
  await http.close(500);
});

const request = (id: string, binary = false, pad = 0) => {
  const body = JSON.stringify({ id, inputs: [], ...(binary ? { parameters: { binary_data_output: true } } : {}), ...(pad ? { pad: ' '.repeat(pad) } : {}) });
  return `POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
};
const until = async (f: () => boolean, ms = 30_000) => {
  for (const end = Date.now() + ms; !f() && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
};

describe('one request at a time a connection', () => {
  it('pipelined requests run one after another, in order, each answered (before: all 50 started at once)', async () => {
    started.length = 0;
    const socket = connect(http.port, '127.0.0.1');
    let reply = '';
    socket.on('data', (d) => { reply += d.toString('latin1'); });
    socket.write(Array.from({ length: 50 }, (_, i) => request(`p${i}`)).join(''));
    await until(() => started.length > 0);
    await new Promise((r) => setTimeout(r, 200));
    expect(started).toEqual(['p0']);
    for (let i = 0; i < 50; i++) {
      await until(() => held.length > 0);
      releaseAll();
    }
    await until(() => (reply.match(/HTTP\/1\.1 200/g) ?? []).length === 50);
    expect(started).toEqual(Array.from({ length: 50 }, (_, i) => `p${i}`));
    expect([...reply.matchAll(/"id":"(p\d+)"/g)].map((m) => m[1])).toEqual(started);
    socket.destroy();
  });

  it('attack: pipelined requests still waiting when their client goes away never run (before: thousands ran for nobody)', async () => {
    started.length = 0;
    const socket = connect(http.port, '127.0.0.1');
    socket.on('error', () => undefined);
    socket.write(Array.from({ length: 200 }, (_, i) => request(`q${i}`)).join(''));
    await until(() => started.length > 0);
    socket.destroy();
    // The server has seen the close once q0's answer was given up (its request cancelled): only
    // then is "its client has gone" what releasing q0 tests (before that, q1 would rightly start).
    await vi.waitFor(() => expect(signals.get('q0')?.aborted).toBe(true), { timeout: 30_000, interval: 20 });
    releaseAll();
    // Nothing else starts: a negative check, a fixed wait is enough (a slow machine only passes it).
    await new Promise((r) => setTimeout(r, 300));
    releaseAll();
    expect(started).toEqual(['q0']);
  });

  it('attack: a client that stops taking its answer loses the connection after responseStallTimeoutMs (before: held for good)', async () => {
    const socket: Socket = connect(http.port, '127.0.0.1');
    socket.on('error', () => undefined);
    let received = 0;
    socket.on('data', (d: Buffer) => { received += d.byteLength; });
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    // Not read: 16 MB of answer fill the socket's buffers and stop; the server gives up after
    // 500 ms. Only once it has closed its end is the socket read again (reading earlier would end
    // the stall): the client gets what the kernel still held, then the close.
    socket.pause();
    socket.write(request('big', true));
    await vi.waitFor(() => expect(serverEnds.get(socket.localPort!)?.destroyed).toBe(true), { timeout: 30_000, interval: 20 });
    socket.resume();
    await closed;
    expect(received).toBeLessThan(16 << 20);
  });

  it('attack: pipelined requests past MAX_PIPELINED close the connection, and none of them runs while the first is served (review: 100,000 were read into the queue)', async () => {
    started.length = 0;
    const socket = connect(http.port, '127.0.0.1');
    socket.on('error', () => undefined);
    const closed = new Promise<boolean>((resolve) => {
      socket.once('close', () => resolve(true));
      setTimeout(() => resolve(false), 5000);
    });
    socket.write(Array.from({ length: MAX_PIPELINED + 500 }, (_, i) => request(`r${i}`)).join(''));
    expect(await closed).toBe(true);
    releaseAll();
    await new Promise((r) => setTimeout(r, 200));
    releaseAll();
    expect(started).toEqual(['r0']);
  });

  describe('Node\'s request and header timeouts of a request held back behind another', () => {
    let timed: HttpServerHandle;
    /** The clientError events the server emitted, by code. */
    const clientErrors: string[] = [];
    beforeAll(async () => {
      const { servers, stop } = captureListens();
      try {
        timed = await startHttpServer(createHttpApp(backplane, { logger: silentLogger }), 0, '127.0.0.1', {
          headersTimeoutMs: 300, requestTimeoutMs: 600, connectionsCheckingIntervalMs: 50,
        });
      } finally {
        stop();
      }
      // Seen without a listener of its own (one would stand in for the server's, or for Node's default).
      const server = servers[0]!;
      const emit = server.emit.bind(server);
      server.emit = (event: string | symbol, ...args: unknown[]) => {
        if (event === 'clientError') clientErrors.push((args[0] as NodeJS.ErrnoException).code ?? '');
        return emit(event, ...args);
      };
    });
    afterAll(async () => {
      releaseAll();
      await timed.close(500);
    });

    it.each([
      // Its body does not fit the socket's buffers, which are not read while it waits: it cannot be whole in time.
      ['a request whose body the server has not read', () => request('big-body', false, 1 << 20)],
      // Past its first bytes, its head waits in the socket, which is not read.
      ['the start of a request head', () => 'GET /v2 HTTP/1.1\r\nHost: x\r\nX-Slow: '],
    ])('attack: do not cut off the answer being made: %s is answered 408 after it, then the connection closed (review: the 408 went out in its place)', async (_, behind) => {
      started.length = 0;
      clientErrors.length = 0;
      const socket = connect(timed.port, '127.0.0.1');
      socket.on('error', () => undefined);
      let reply = '';
      socket.on('data', (d) => { reply += d.toString('latin1'); });
      const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
      socket.write(request('held') + behind());
      // Node has timed the second request out while the first is held (no wait on the machine's speed).
      await vi.waitFor(() => expect(clientErrors.length).toBeGreaterThan(0), { timeout: 30_000, interval: 20 });
      expect(reply).toBe('');
      releaseAll();
      await closed;
      expect(started).toEqual(['held']);
      expect(reply).toMatch(/^HTTP\/1\.1 200 OK\r\n[^]*"id":"held"[^]*HTTP\/1\.1 408 Request Timeout\r\nConnection: close\r\n\r\n$/);
    });
  });
});

