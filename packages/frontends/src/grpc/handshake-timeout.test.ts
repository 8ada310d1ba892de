/**
 * gRPC connections whose client never completes the HTTP/2 handshake (handshake-timeout.ts):
 * closed once handshakeTimeoutMs has passed without the client's SETTINGS, on plain and TLS ports;
 * a client that completes it, late but in time, or long ago, keeps its connection.
 */
import { readFileSync } from 'node:fs';
import { connect as http2Connect } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { type Backplane } from '@triode/core';
import { MODEL_INFER, emptyInferFrame, grpcHeaders, grpcResult, openSession } from '../../../../test/helpers/grpc-attack.js';
import { startGrpcServer, type GrpcServerHandle } from './grpc-server.js';

const SERVER_LIVE = '/inference.GRPCInferenceService/ServerLive';
/** The client connection preface (RFC 9113 section 3.4), without the SETTINGS frame that must follow it. */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** An empty SETTINGS frame (no parameters changed) and a SETTINGS ACK. */
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
const SETTINGS_ACK = Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0]);

const tlsFile = (f: string) => readFileSync(new URL(`../../../../test/fixtures/tls/${f}`, import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const backplane = {
  isLive: async () => true,
  isReady: async () => true,
  infer: async (r: { id?: string }) => ({ id: r.id, modelName: 'm', modelVersion: '1', outputs: [] }),
} as unknown as Backplane;

let h: GrpcServerHandle | undefined;
afterEach(async () => {
  await h?.close(500);
  h = undefined;
});

/**
 * Resolves with whether the server closed `socket` within `ms` (30 s: far past every timeout
 * here, so only a server that keeps the connection reaches it); the socket is then destroyed.
 */
function closedWithin(socket: Socket, ms = 30_000): Promise<boolean> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => { socket.destroy(); resolve(false); }, ms);
    socket.on('data', () => undefined);
    socket.on('error', () => undefined);
    socket.once('close', () => { clearTimeout(timer); resolve(true); });
  });
}

describe('a gRPC client that never completes the HTTP/2 handshake (handshakeTimeoutMs)', () => {
  it('attack: a connection that sends nothing is closed (before: held for good; 20,000 of them shut everyone out)', async () => {
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', handshakeTimeoutMs: 300 });
    const silent = netConnect(h.port, '127.0.0.1');
    // A client that completed its handshake is served meanwhile, and long after the timeout: by
    // grpc-js (ServerLive) and by the fast path (ModelInfer) alike.
    const s = await openSession(h.port);
    const calls = async () => {
      expect((await grpcResult(s.request(grpcHeaders(SERVER_LIVE)).end(Buffer.alloc(5)))).status).toBe(0);
      expect((await grpcResult(s.request(grpcHeaders(MODEL_INFER)).end(emptyInferFrame('x')))).status).toBe(0);
    };
    try {
      await calls();
      expect(await closedWithin(silent)).toBe(true);
      await sleep(1000);
      await calls();
      expect(s.closed || s.destroyed).toBe(false);
    } finally {
      s.destroy();
    }
  });

  it('attack: a connection that sends the preface but never its SETTINGS is closed', async () => {
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', handshakeTimeoutMs: 300 });
    const socket = netConnect(h.port, '127.0.0.1', () => socket.write(PREFACE));
    expect(await closedWithin(socket)).toBe(true);
  });

  it('attack: a TLS connection that completes the TLS handshake and then sends nothing is closed; a TLS client that completes both is kept', async () => {
    h = await startGrpcServer(backplane, {
      address: '127.0.0.1:0', handshakeTimeoutMs: 300, tls: { cert: tlsFile('server.crt'), key: tlsFile('server.key') },
    });
    const socket = tlsConnect({ port: h.port, host: '127.0.0.1', ALPNProtocols: ['h2'], rejectUnauthorized: false });
    await new Promise((r) => socket.once('secureConnect', r));
    // Its preface comes with the end of the TLS handshake, possibly read before its session starts.
    const s = http2Connect(`https://127.0.0.1:${h.port}`, { rejectUnauthorized: false });
    s.on('error', () => undefined);
    try {
      expect(await closedWithin(socket)).toBe(true);
      await sleep(1000);
      expect((await grpcResult(s.request(grpcHeaders(SERVER_LIVE)).end(Buffer.alloc(5)))).status).toBe(0);
    } finally {
      s.destroy();
    }
  });

  it('a client that sends its preface and SETTINGS late, but within the timeout, keeps its connection past it', async () => {
    // Margins of seconds, so that a loaded machine cannot turn "in time" into "late".
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', handshakeTimeoutMs: 3000 });
    const socket = netConnect(h.port, '127.0.0.1');
    const closed = closedWithin(socket, 6000);
    await sleep(1000);
    socket.write(Buffer.concat([PREFACE, SETTINGS, SETTINGS_ACK]));
    // Still open at 6 s: twice the timeout.
    expect(await closed).toBe(false);
  });
});
