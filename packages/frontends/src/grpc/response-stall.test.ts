/**
 * gRPC answers a client stops taking (response-stall.ts): the stream is reset after
 * responseStallTimeoutMs, a connection whose client reads nothing at all is closed, and a client
 * that reads slowly but steadily, or a stream that is only idle, is left alone.
 */
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as http2Connect, constants as http2, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { createServer, connect as netConnect, type Server, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { type Backplane, type Logger } from '@triode/core';
import { MODEL_INFER, MODEL_STREAM_INFER, grpcHeaders, grpcResult, openSession, emptyInferFrame } from '../../../../test/helpers/grpc-attack.js';
import { startGrpcServer, type GrpcServerHandle } from './grpc-server.js';
import { WRITE_PIECE_BYTES } from './response-stall.js';

const MiB = 1 << 20;
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const WAIT = { timeout: 30_000, interval: 20 };

const tlsFile = (f: string) => readFileSync(new URL(`../../../../test/fixtures/tls/${f}`, import.meta.url));

/**
 * A client of the server on `to` (a port on 127.0.0.1, or a unix socket's path) behind a TCP relay, with windows as large as HTTP/2 allows (so
 * the server hands all its answers to its socket at once). `fillUnread` makes the relay's side
 * toward the server read nothing more: the server's socket fills, as with a client that
 * advertises large windows and never reads.
 */
async function throughRelay(to: number | { path: string }, secure = false): Promise<{ s: ClientHttp2Session; upstream: () => Socket; close(): void }> {
  let upstream: Socket | undefined;
  const relay: Server = createServer((c) => {
    const u = typeof to === 'number' ? netConnect(to, '127.0.0.1') : netConnect(to.path);
    upstream = u;
    c.pipe(u);
    u.pipe(c);
    c.on('error', () => undefined);
    u.on('error', () => undefined);
  });
  await new Promise<void>((res) => relay.listen(0, '127.0.0.1', res));
  const relayPort = (relay.address() as { port: number }).port;
  const settings = { initialWindowSize: 2 ** 31 - 1 };
  const s = secure
    ? http2Connect(`https://localhost:${relayPort}`, { settings, createConnection: () => tlsConnect({ port: relayPort, host: '127.0.0.1', servername: 'localhost', ca: tlsFile('server.crt'), ALPNProtocols: ['h2'] }) })
    : http2Connect(`http://127.0.0.1:${relayPort}`, { settings });
  s.on('error', () => undefined);
  if (s.connecting) await new Promise((res) => s.once('connect', res));
  s.setLocalWindowSize(2 ** 31 - 1);
  await new Promise<void>((res) => s.ping(() => res()));
  return { s, upstream: () => upstream!, close: () => { s.destroy(); relay.close(); } };
}

/**
 * Stops the relay reading toward the server, sends 20 calls for 4 MB answers, and waits until
 * they are held in the server (over 60 MB); resolves with the arrayBuffers before them.
 */
async function fillUnread(c: { s: ClientHttp2Session; upstream: () => Socket }): Promise<number> {
  c.upstream().unpipe();
  c.upstream().pause();
  gc();
  const start = process.memoryUsage().arrayBuffers;
  for (let i = 0; i < 20; i++) {
    const st = c.s.request(grpcHeaders(MODEL_INFER));
    st.on('error', () => undefined);
    st.end(frame());
  }
  // 80 MB of answers wait in the server (the client's side holds none: the relay does not read).
  await vi.waitFor(() => expect(process.memoryUsage().arrayBuffers - start).toBeGreaterThan(60 * MiB), WAIT);
  return start;
}

/** Waits until what `fillUnread` made the server hold has been let go. */
async function letGo(start: number): Promise<void> {
  await vi.waitFor(() => {
    gc();
    expect(process.memoryUsage().arrayBuffers - start).toBeLessThan(20 * MiB);
  }, WAIT);
}

const frame = emptyInferFrame;

/** Answers every request with one UINT8 output of `bytes` bytes (ModelInfer and ModelStreamInfer). */
function bigAnswers(bytes: number): Backplane {
  const answer = (r: { id?: string }) => ({ id: r.id, modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'UINT8', shape: [bytes], data: new Uint8Array(bytes) }] });
  return {
    isLive: async () => true,
    isReady: async () => true,
    infer: async (r: { id?: string }) => answer(r),
    inferStream: async (r: { id?: string }, on: (x: object) => void) => on(answer(r)),
  } as unknown as Backplane;
}

let h: GrpcServerHandle | undefined;
afterEach(async () => {
  await h?.close(500);
  h = undefined;
});

describe('a gRPC answer its client stops taking (responseStallTimeoutMs)', () => {
  it.each([
    ['fast path', {}],
    // An uncompressed message may say grpc-encoding gzip: grpc-js serves it.
    ['grpc-js', { 'grpc-encoding': 'gzip' }],
  ])('attack: unary ModelInfer calls never read are reset, their answers let go; others on the connection go on (%s; before: 4 MB answers held for good)', async (_, extra) => {
    h = await startGrpcServer(bigAnswers(4 * MiB), { address: '127.0.0.1:0', responseStallTimeoutMs: 300 });
    const s = await openSession(h.port);
    try {
      const held: ClientHttp2Stream[] = [];
      for (let i = 0; i < 10; i++) {
        const st = s.request(grpcHeaders(MODEL_INFER, extra));
        st.pause();
        st.on('error', () => undefined);
        st.end(frame());
        held.push(st);
      }
      await vi.waitFor(() => expect(held.every((st) => st.closed)).toBe(true), WAIT);
      // RST_STREAM ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED to a gRPC client.
      for (const st of held) expect(st.rstCode).toBe(http2.NGHTTP2_ENHANCE_YOUR_CALM);
      // The connection answers PINGs: it stays, and serves the next call.
      const st = s.request(grpcHeaders(MODEL_INFER, extra));
      const r = grpcResult(st);
      st.end(frame('after'));
      expect((await r).status).toBe(0);
      expect(s.destroyed).toBe(false);
    } finally {
      s.destroy();
    }
  }, 40_000);

  it('a client that reads slowly but steadily gets its whole answer, however much longer than the limit it takes', async () => {
    h = await startGrpcServer(bigAnswers(MiB), { address: '127.0.0.1:0', responseStallTimeoutMs: 2000 });
    const s = await openSession(h.port);
    try {
      const st = s.request(grpcHeaders(MODEL_INFER));
      const r = grpcResult(st);
      st.pause();
      st.end(frame());
      // Paused for half the limit, then reads a piece and a little more at full speed (and pauses
      // again at once), and again: the answer takes about 4 x the limit, each piece far less.
      let got = 0;
      let until = 0;
      let rounds = 0;
      let reached: (() => void) | undefined;
      st.on('data', (c: Buffer) => {
        got += c.byteLength;
        if (got < until) return;
        st.pause();
        reached?.();
      });
      // Closed: 'close' (st.closed is true before the rest of the answer is read).
      let gone = false;
      st.once('close', () => {
        gone = true;
        reached?.();
      });
      while (!gone) {
        await new Promise((res) => setTimeout(res, 1000));
        rounds++;
        until = got + WRITE_PIECE_BYTES + 64 * 1024;
        await new Promise<void>((res) => {
          if (gone) return res();
          reached = res;
          st.resume();
        });
      }
      const done = await r;
      expect(done.status).toBe(0);
      expect(done.body.byteLength).toBeGreaterThan(MiB);
      expect(rounds).toBeGreaterThanOrEqual(4);
    } finally {
      s.destroy();
    }
  }, 60_000);

  it('attack: a ModelStreamInfer client that sends requests and reads none of their answers is reset; an idle stream is not', async () => {
    h = await startGrpcServer(bigAnswers(MiB), { address: '127.0.0.1:0', responseStallTimeoutMs: 300 });
    const s = await openSession(h.port);
    try {
      const idle = s.request(grpcHeaders(MODEL_STREAM_INFER));
      idle.on('error', () => undefined);
      const idleAnswers: Buffer[] = [];
      idle.on('data', (c: Buffer) => idleAnswers.push(c));
      const greedy = s.request(grpcHeaders(MODEL_STREAM_INFER));
      greedy.pause();
      greedy.on('error', () => undefined);
      for (let i = 0; i < 40; i++) greedy.write(frame(String(i)));
      await vi.waitFor(() => expect(greedy.closed).toBe(true), WAIT);
      expect(greedy.rstCode).toBe(http2.NGHTTP2_ENHANCE_YOUR_CALM);
      // Open all along with nothing to send: still served.
      expect(idle.closed).toBe(false);
      const r = grpcResult(idle);
      idle.end(frame('late'));
      const done = await r;
      expect(done.status).toBe(0);
      expect(Buffer.concat(idleAnswers).byteLength).toBeGreaterThan(MiB);
    } finally {
      s.destroy();
    }
  }, 40_000);

  it.each([['plain', false], ['TLS', true]])('attack: a connection whose client reads nothing at all (not even a PING) is closed, and what it held let go (%s; before: session.destroy() left its socket and 200 MB open)', async (_, secure) => {
    const warnings: string[] = [];
    const logger: Logger = { error() {}, info() {}, verbose() {}, warning: (m) => warnings.push(m) };
    h = await startGrpcServer(bigAnswers(4 * MiB), {
      address: '127.0.0.1:0', responseStallTimeoutMs: 300, logger,
      ...(secure ? { tls: { cert: tlsFile('server.crt'), key: tlsFile('server.key') } } : {}),
    });
    const c = await throughRelay(h.port, secure);
    try {
      const start = await fillUnread(c);
      await vi.waitFor(() => expect(warnings.some((w) => w.includes('answered no PING'))).toBe(true), WAIT);
      // Let go while the client still reads nothing (its socket closed, not left to finish its write).
      await letGo(start);
      // The server closed its socket: the relay, reading again, sees its end.
      const closed = new Promise<void>((res) => c.upstream().once('close', () => res()));
      c.upstream().resume();
      await closed;
    } finally {
      c.close();
    }
  }, 40_000);

  it('attack: on a unix socket, of two connections only the one whose client reads nothing is closed (before: every connection had the same address, and the latest one was closed instead)', async () => {
    const warnings: string[] = [];
    const logger: Logger = { error() {}, info() {}, verbose() {}, warning: (m) => warnings.push(m) };
    const path = join(tmpdir(), `triode-stall-${process.pid}-${Date.now()}.sock`);
    h = await startGrpcServer(bigAnswers(4 * MiB), { address: `unix:${path}`, responseStallTimeoutMs: 300, logger });
    const stalled = await throughRelay({ path });
    // Connected after the stalled one: the one an address-keyed lookup found for both.
    const healthy = await throughRelay({ path });
    try {
      const start = await fillUnread(stalled);
      await vi.waitFor(() => expect(warnings.some((w) => w.includes('answered no PING'))).toBe(true), WAIT);
      // The healthy connection still serves calls.
      const st = healthy.s.request(grpcHeaders(MODEL_INFER));
      const r = grpcResult(st);
      st.end(frame('healthy'));
      expect((await r).status).toBe(0);
      expect(healthy.s.destroyed).toBe(false);
      expect(healthy.upstream().destroyed).toBe(false);
      // The stalled one's socket was closed while its client still read nothing.
      await letGo(start);
      const closed = new Promise<void>((res) => stalled.upstream().once('close', () => res()));
      stalled.upstream().resume();
      await closed;
    } finally {
      stalled.close();
      healthy.close();
    }
  }, 40_000);

  it('attack: a connection closed by the server (--grpc-max-connection-age) while its client reads nothing has its socket closed too (before: 80 MB held for good)', async () => {
    const warnings: string[] = [];
    const logger: Logger = { error() {}, info() {}, verbose() {}, warning: (m) => warnings.push(m) };
    // grpc-js closes the connection (GOAWAY, then destroy) long before a stream would be seen stalled.
    h = await startGrpcServer(bigAnswers(4 * MiB), { address: '127.0.0.1:0', responseStallTimeoutMs: 1500, logger, keepalive: { maxConnectionAgeMs: 200, maxConnectionAgeGraceMs: 200 } });
    const c = await throughRelay(h.port);
    try {
      const start = await fillUnread(c);
      await vi.waitFor(() => expect(warnings.some((w) => w.includes('its closed connection'))).toBe(true), WAIT);
      await letGo(start);
    } finally {
      c.close();
    }
  }, 40_000);

  it('refuses a responseStallTimeoutMs that is not a positive integer', async () => {
    await expect(startGrpcServer(bigAnswers(1), { address: '127.0.0.1:0', responseStallTimeoutMs: 0 })).rejects.toThrow(RangeError);
  });
});
