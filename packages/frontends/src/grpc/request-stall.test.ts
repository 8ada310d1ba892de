/**
 * gRPC requests a client stops sending (request-stall.ts): a call whose request is unfinished and
 * receives nothing for requestStallTimeoutMs is cancelled and what it sent let go; a stream idle
 * between messages, and a client sending slowly but steadily, are left alone.
 */
import { EventEmitter } from 'node:events';
import { constants as http2, type ClientHttp2Stream, type OutgoingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger, type Backplane } from '@triode/core';
import { MODEL_INFER, MODEL_STREAM_INFER, grpcHeaders, grpcResult, openSession, emptyInferFrame } from '../../../../test/helpers/grpc-attack.js';
import { startGrpcServer, type GrpcServerHandle } from './grpc-server.js';
import { requestStallGuard } from './request-stall.js';

const CANCELLED = 1;
const MESSAGE = /^the request was not received: no byte of it came for \d+ ms$/;

const frame = emptyInferFrame;

/** A prefix announcing `announced` bytes, then `sent` of them. */
function cutFrame(announced: number, sent: number): Buffer {
  const f = Buffer.alloc(5 + sent, 1);
  f[0] = 0;
  f.writeUInt32BE(announced, 1);
  return f;
}

const backplane = {
  isLive: async () => true,
  isReady: async () => true,
  infer: async (r: { id?: string }) => ({ id: r.id, modelName: 'm', modelVersion: '1', outputs: [] }),
  inferStream: async (r: { id?: string }, on: (x: object) => void) => on({ id: r.id, modelName: 'm', modelVersion: '1', outputs: [] }),
} as unknown as Backplane;

let h: GrpcServerHandle | undefined;
afterEach(async () => {
  await h?.close(500);
  h = undefined;
});

/** Opens a call on a fresh connection, sends `body` without ending it, and resolves with its outcome. */
async function stalled(port: number, path: string, body: Buffer, extra: OutgoingHttpHeaders = {}) {
  const s = await openSession(port);
  try {
    const st = s.request(grpcHeaders(path, extra), { endStream: false });
    const r = grpcResult(st);
    st.write(body);
    return await r;
  } finally {
    s.destroy();
  }
}

describe('a gRPC request its client stops sending (requestStallTimeoutMs)', () => {
  it.each([
    ['ModelInfer (fast path)', MODEL_INFER, {}, 1 << 30],
    ['ModelInfer (grpc-js)', MODEL_INFER, { 'grpc-encoding': 'gzip' }, 1 << 30],
    // A control call's message is at most 64 KiB.
    ['ServerLive', '/inference.GRPCInferenceService/ServerLive', {}, 60_000],
    ['ModelStreamInfer', MODEL_STREAM_INFER, {}, 1 << 30],
  ])('attack: %s cut short mid-message is cancelled, its bytes let go (before: held for good, up to the message limit)', async (_, path, extra, announced) => {
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', requestStallTimeoutMs: 300 });
    const r = await stalled(h.port, path, cutFrame(announced, Math.min(announced - 1, 1 << 20)), extra);
    expect(r.status).toBe(CANCELLED);
    expect(r.message).toMatch(MESSAGE);
  });

  it('attack: a unary call whose whole message came but which never half-closes is cancelled', async () => {
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', requestStallTimeoutMs: 300 });
    for (const extra of [{}, { 'grpc-encoding': 'gzip' }]) {
      const r = await stalled(h.port, MODEL_INFER, frame('whole'), extra);
      expect(r.status).toBe(CANCELLED);
    }
  });

  it('a ModelStreamInfer stream answered already, then cut short mid-message, is reset', async () => {
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', requestStallTimeoutMs: 300 });
    const s = await openSession(h.port);
    try {
      const st: ClientHttp2Stream = s.request(grpcHeaders(MODEL_STREAM_INFER), { endStream: false });
      const r = grpcResult(st);
      const answered = new Promise((res) => st.once('data', res));
      st.write(frame('first'));
      await answered;
      st.write(cutFrame(1000, 10));
      const done = await r;
      expect(done.rstCode).toBe(http2.NGHTTP2_CANCEL);
    } finally {
      s.destroy();
    }
  });

  it('a stream the server stopped reading (paused: its requests wait on the model) in the middle of a message is not cancelled; once read again and stalled, it is (review: paused reading looked like a client that stopped sending)', async () => {
    // A stand-in stream: the guard reads its events, isPaused() and readableLength.
    let paused = true;
    const refused: number[] = [];
    const stream = Object.assign(new EventEmitter(), {
      headersSent: false,
      session: undefined,
      isPaused: () => paused,
      readableLength: 0,
    }) as unknown as ServerHttp2Stream;
    const guard = requestStallGuard(100, silentLogger, (_s, code) => { refused.push(code); });
    try {
      guard.watch(stream, 'ModelStreamInfer');
      // A prefix announcing 100 bytes and 3 of them: in the middle of a message.
      const partial = Buffer.alloc(8);
      partial.writeUInt32BE(100, 1);
      stream.emit('data', partial);
      await new Promise((res) => setTimeout(res, 600));
      expect(refused).toEqual([]);
      // Read again, and nothing more comes: a client that stopped sending.
      paused = false;
      await new Promise((res) => setTimeout(res, 600));
      expect(refused).toEqual([CANCELLED]);
    } finally {
      guard.close();
    }
  });

  it('a ModelStreamInfer stream idle between messages for many times the limit is served on', async () => {
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', requestStallTimeoutMs: 200 });
    const s = await openSession(h.port);
    try {
      const st: ClientHttp2Stream = s.request(grpcHeaders(MODEL_STREAM_INFER), { endStream: false });
      const r = grpcResult(st);
      let answers = 0;
      st.on('data', () => { answers++; });
      st.write(frame('a'));
      await new Promise((res) => setTimeout(res, 1500));
      expect(st.closed).toBe(false);
      st.end(frame('b'));
      const done = await r;
      expect(done.status).toBe(0);
      expect(answers).toBeGreaterThanOrEqual(2);
    } finally {
      s.destroy();
    }
  });

  it('a client that sends its message slowly but steadily, over many times the limit, is answered', async () => {
    h = await startGrpcServer(backplane, { address: '127.0.0.1:0', requestStallTimeoutMs: 2000 });
    const s = await openSession(h.port);
    try {
      const st: ClientHttp2Stream = s.request(grpcHeaders(MODEL_INFER), { endStream: false });
      const r = grpcResult(st);
      const f = frame('slow');
      // A byte every 200 ms (a tenth of the limit), over about 2.5 x the limit.
      const step = Math.ceil(f.byteLength / 25);
      for (let at = 0; at < f.byteLength; at += step) {
        st.write(f.subarray(at, at + step));
        await new Promise((res) => setTimeout(res, 200));
      }
      st.end();
      expect((await r).status).toBe(0);
    } finally {
      s.destroy();
    }
  }, 30_000);

  it('refuses a requestStallTimeoutMs that is not a positive integer', async () => {
    await expect(startGrpcServer(backplane, { address: '127.0.0.1:0', requestStallTimeoutMs: -1 })).rejects.toThrow(RangeError);
  });
});
