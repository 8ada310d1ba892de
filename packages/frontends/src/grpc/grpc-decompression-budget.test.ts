/**
 * The server-wide budget of decompressed request bytes over gRPC: compressed ModelInfer messages
 * (inflated by the front door, served by grpc-js) count until their call ends, compressed
 * ModelStreamInfer messages until their request finishes; past the budget a unary call is
 * UNAVAILABLE and a stream's message is refused in-band (or UNAVAILABLE with triton_grpc_error),
 * the stream going on. Before the budget, 40 ModelInfer calls of 16 KB of gzip each, held by a
 * queued model, took the server to 4 GB.
 */
import { constants as http2, type ClientHttp2Session, type ClientHttp2Stream } from 'node:http2';
import { gzipSync } from 'node:zlib';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { status } from '@grpc/grpc-js';
import { messageType, type Backplane, type InferenceRequest, type InferenceResponse } from '@triode/core';
import { MODEL_INFER, MODEL_STREAM_INFER, grpcHeaders, grpcResult, openSession } from '../../../../test/helpers/grpc-attack.js';
import { DecompressionBudget } from '../decompression-budget.js';
import { startGrpcServer, type GrpcServerHandle } from './grpc-server.js';
import { memoryGrowth } from '../../../../test/helpers/memory.js';

const MiB = 1024 * 1024;
/** Two 16 MiB messages fit, a third does not. */
const BUDGET = 40 * MiB;
const TENSOR = 16 * MiB;
const WAIT = { timeout: 30_000, interval: 10 };
const REFUSAL = `the server holds too many decompressed request bytes (the requests in flight would hold more than ${BUDGET}): retry later, or send the request uncompressed`;

const started: string[] = [];
const held: (() => void)[] = [];
const releaseAll = (): void => { for (const h of held.splice(0)) h(); };
/** Waits while the request's id starts with "hold", until released or cancelled. */
const hold = (r: InferenceRequest): Promise<void> => {
  started.push(r.id ?? '');
  if (!(r.id ?? '').startsWith('hold')) return Promise.resolve();
  return new Promise<void>((resolve) => {
    held.push(resolve);
    r.signal?.addEventListener('abort', () => resolve());
  });
};
const answer = (r: InferenceRequest): InferenceResponse => ({ modelName: 'm', modelVersion: '1', ...(r.id ? { id: r.id } : {}), outputs: [] });
const backplane = {
  infer: async (r: InferenceRequest) => {
    await hold(r);
    return answer(r);
  },
  inferStream: async (r: InferenceRequest, on: (x: InferenceResponse) => void) => {
    await hold(r);
    on(answer(r));
  },
} as unknown as Backplane;

const requestType = messageType('ModelInferRequest');
/** A ModelInferRequest of `bytes` zeros (raw_input_contents), gzipped, as a gRPC frame (compressed flag set). */
function gzipFrame(id: string, bytes = TENSOR): Buffer {
  const msg = requestType.encode(requestType.fromObject({ model_name: 'm', id, inputs: [{ name: 'x', datatype: 'UINT8', shape: [bytes] }], raw_input_contents: [Buffer.alloc(bytes)] })).finish();
  const body = gzipSync(msg);
  const frame = Buffer.alloc(5 + body.byteLength);
  frame[0] = 1;
  frame.writeUInt32BE(body.byteLength, 1);
  frame.set(body, 5);
  return frame;
}

/** The ModelStreamInferResponse messages of a stream so far (read as they come). */
function streamResponses(st: ClientHttp2Stream): { id?: string; error_message?: string }[] {
  const out: { id?: string; error_message?: string }[] = [];
  const type = messageType('ModelStreamInferResponse');
  let pending = Buffer.alloc(0);
  st.on('data', (c: Buffer) => {
    pending = Buffer.concat([pending, c]);
    while (pending.byteLength >= 5 && pending.byteLength >= 5 + pending.readUInt32BE(1)) {
      const m = type.toObject(type.decode(pending.subarray(5, 5 + pending.readUInt32BE(1)))) as { error_message?: string; infer_response?: { id?: string } };
      out.push({ ...(m.infer_response?.id ? { id: m.infer_response.id } : {}), ...(m.error_message ? { error_message: m.error_message } : {}) });
      pending = pending.subarray(5 + pending.readUInt32BE(1));
    }
  });
  return out;
}

let grpc: GrpcServerHandle;
let budget: DecompressionBudget;
let session: ClientHttp2Session;

/** One compressed unary ModelInfer call on the test's connection. */
function infer(id: string, bytes = TENSOR): { stream: ClientHttp2Stream; done: ReturnType<typeof grpcResult> } {
  const stream = session.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
  const done = grpcResult(stream);
  stream.end(gzipFrame(id, bytes));
  return { stream, done };
}

beforeAll(async () => {
  budget = new DecompressionBudget(BUDGET);
  grpc = await startGrpcServer(backplane, { address: '127.0.0.1:0', decompressionBudget: budget });
  session = await openSession(grpc.port);
});

afterEach(() => {
  releaseAll();
});

afterAll(async () => {
  releaseAll();
  session?.destroy();
  await grpc?.close(1000);
});

describe('decompressed request bytes over gRPC', () => {
  it('attack: 24 compressed ModelInfer calls (16 MiB each inflated, 16 KB sent) to a model that holds them take at most the budget; the rest are UNAVAILABLE; memory stays flat (before: 384 MiB held)', async () => {
    started.length = 0;
    const frames = Array.from({ length: 24 }, (_, i) => gzipFrame(`hold-burst-${i}`));
    const { result: calls, grownBytes } = await memoryGrowth(async () => {
      const calls = frames.map((frame) => {
        const stream = session.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
        const done = grpcResult(stream);
        stream.end(frame);
        return { stream, done, settled: false };
      });
      for (const c of calls) void c.done.then(() => { c.settled = true; });
      await vi.waitFor(() => expect(calls.filter((c) => c.settled).length + started.length).toBe(24), WAIT);
      return calls;
    });
    expect(started.length).toBeGreaterThanOrEqual(1);
    expect(started.length).toBeLessThanOrEqual(2);
    expect(budget.used).toBeLessThanOrEqual(BUDGET);
    expect(grownBytes).toBeLessThan(200 * MiB);
    releaseAll();
    const results = await Promise.all(calls.map((c) => c.done));
    for (const r of results) {
      if (r.status === status.OK) continue;
      expect(r).toMatchObject({ status: status.UNAVAILABLE, message: REFUSAL });
    }
    expect(results.filter((r) => r.status === status.OK)).toHaveLength(started.length);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
  }, 60_000);

  it('attack: ModelInfer: the call past the budget is UNAVAILABLE with its words and never runs; uncompressed calls are still served; once the held calls end, compressed ones are served again (nothing leaks)', async () => {
    started.length = 0;
    const a = infer('hold-a');
    await vi.waitFor(() => expect(started).toContain('hold-a'), WAIT);
    const b = infer('hold-b');
    await vi.waitFor(() => expect(started).toContain('hold-b'), WAIT);
    expect(budget.used).toBeGreaterThanOrEqual(2 * TENSOR);
    expect(await infer('c').done).toMatchObject({ status: status.UNAVAILABLE, message: REFUSAL });
    expect(started).not.toContain('c');
    // Uncompressed (the fast path): not counted.
    const msg = requestType.encode(requestType.fromObject({ model_name: 'm', id: 'plain', inputs: [{ name: 'x', datatype: 'UINT8', shape: [TENSOR] }], raw_input_contents: [Buffer.alloc(TENSOR)] })).finish();
    const plain = Buffer.alloc(5 + msg.byteLength);
    plain.writeUInt32BE(msg.byteLength, 1);
    plain.set(msg, 5);
    const st = session.request(grpcHeaders(MODEL_INFER));
    const plainDone = grpcResult(st);
    st.end(plain);
    expect((await plainDone).status).toBe(status.OK);
    releaseAll();
    expect((await a.done).status).toBe(status.OK);
    expect((await b.done).status).toBe(status.OK);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
    for (let i = 0; i < 5; i++) expect((await infer(`after-${i}`).done).status).toBe(status.OK);
    expect(budget.used).toBe(0);
  }, 60_000);

  it('attack: typed contents count what they take once decoded (8 bytes an element): 1M int_contents zeros inflate to 1 MB but make a 4 MB tensor (before: counted as 1 MB, 40 calls of 16M zeros took 4 GB under a 1 GiB budget)', async () => {
    started.length = 0;
    const typedFrame = (id: string): Buffer => {
      const msg = requestType.encode(requestType.fromObject({ model_name: 'm', id, inputs: [{ name: 'x', datatype: 'INT32', shape: [1 << 20], contents: { int_contents: new Array<number>(1 << 20).fill(0) } }] })).finish();
      const body = gzipSync(msg);
      const frame = Buffer.alloc(5 + body.byteLength);
      frame[0] = 1;
      frame.writeUInt32BE(body.byteLength, 1);
      frame.set(body, 5);
      return frame;
    };
    const frame = typedFrame('hold-t');
    const calls: ReturnType<typeof grpcResult>[] = [];
    // 9 MiB each (1 MiB inflated, 8 MiB decoded): four fit in 40 MiB, a fifth does not.
    for (let i = 0; i < 4; i++) {
      const st = session.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
      calls.push(grpcResult(st));
      st.end(i === 0 ? frame : typedFrame(`hold-t${i}`));
      await vi.waitFor(() => expect(started).toHaveLength(i + 1), WAIT);
    }
    expect(budget.used).toBeGreaterThanOrEqual(4 * 9 * MiB);
    const over = session.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
    const overDone = grpcResult(over);
    over.end(typedFrame('t-over'));
    expect(await overDone).toMatchObject({ status: status.UNAVAILABLE, message: REFUSAL });
    expect(started).toHaveLength(4);
    releaseAll();
    for (const c of calls) expect((await c).status).toBe(status.OK);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
  }, 60_000);

  it('attack: ModelStreamInfer: each message counts until its request finishes, not until the stream ends; the one past the budget is refused in-band and the stream goes on', async () => {
    started.length = 0;
    const st = session.request(grpcHeaders(MODEL_STREAM_INFER, { 'grpc-encoding': 'gzip' }), { endStream: false });
    const responses = streamResponses(st);
    const done = grpcResult(st);
    // Many more messages than the budget holds, one after another, each answered before the next:
    // bytes held per stream until it ended would refuse the third.
    for (let i = 0; i < 6; i++) {
      st.write(gzipFrame(`s${i}`));
      await vi.waitFor(() => expect(responses).toHaveLength(i + 1), WAIT);
    }
    expect(responses.map((r) => r.error_message ?? r.id)).toEqual(['s0', 's1', 's2', 's3', 's4', 's5']);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
    st.write(gzipFrame('hold-s6'));
    st.write(gzipFrame('hold-s7'));
    await vi.waitFor(() => expect(started).toContain('hold-s7'), WAIT);
    st.write(gzipFrame('s8'));
    st.write(gzipFrame('s9', 1024));
    // s8 is refused (in order, after the held ones: a regular model answers in request order); s9
    // fits. s9 started: s8, before it, has been read and inflated (or refused).
    await vi.waitFor(() => expect(started).toContain('s9'), WAIT);
    releaseAll();
    await vi.waitFor(() => expect(responses).toHaveLength(10), WAIT);
    expect(responses.slice(6)).toEqual([{ id: 'hold-s6' }, { id: 'hold-s7' }, { error_message: REFUSAL }, { id: 's9' }]);
    expect(started).not.toContain('s8');
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
    st.write(gzipFrame('s10'));
    await vi.waitFor(() => expect(responses).toHaveLength(11), WAIT);
    st.end();
    expect((await done).status).toBe(status.OK);
    expect(responses[10]).toEqual({ id: 's10' });
  }, 60_000);

  it('attack: ModelStreamInfer with triton_grpc_error: the message past the budget ends the call UNAVAILABLE', async () => {
    started.length = 0;
    const a = infer('hold-x');
    const b = infer('hold-y');
    await vi.waitFor(() => expect(started).toEqual(expect.arrayContaining(['hold-x', 'hold-y'])), WAIT);
    const st = session.request(grpcHeaders(MODEL_STREAM_INFER, { 'grpc-encoding': 'gzip', triton_grpc_error: 'true' }), { endStream: false });
    const done = grpcResult(st);
    st.end(gzipFrame('z'));
    expect(await done).toMatchObject({ status: status.UNAVAILABLE, message: REFUSAL });
    releaseAll();
    expect([(await a.done).status, (await b.done).status]).toEqual([status.OK, status.OK]);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
  }, 60_000);

  it('attack: a client that goes away gives the bytes back: a held ModelInfer reset, a stream cancelled with held requests, a connection destroyed, a message cut short', async () => {
    started.length = 0;
    const a = infer('hold-reset');
    await vi.waitFor(() => expect(started).toContain('hold-reset'), WAIT);
    expect(budget.used).toBeGreaterThanOrEqual(TENSOR);
    a.stream.close(http2.NGHTTP2_CANCEL);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);

    const st = session.request(grpcHeaders(MODEL_STREAM_INFER, { 'grpc-encoding': 'gzip' }), { endStream: false });
    st.on('error', () => undefined);
    st.write(gzipFrame('hold-st-1'));
    st.write(gzipFrame('hold-st-2'));
    await vi.waitFor(() => expect(started).toContain('hold-st-2'), WAIT);
    expect(budget.used).toBeGreaterThanOrEqual(2 * TENSOR);
    st.close(http2.NGHTTP2_CANCEL);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);

    // A connection of its own, destroyed with a unary call and a stream held.
    const other = await openSession(grpc.port);
    const u = other.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
    u.on('error', () => undefined);
    u.end(gzipFrame('hold-conn-1'));
    const s = other.request(grpcHeaders(MODEL_STREAM_INFER, { 'grpc-encoding': 'gzip' }), { endStream: false });
    s.on('error', () => undefined);
    s.write(gzipFrame('hold-conn-2'));
    await vi.waitFor(() => expect(started).toEqual(expect.arrayContaining(['hold-conn-1', 'hold-conn-2'])), WAIT);
    other.destroy();
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);

    // Half a compressed message, then reset: nothing was inflated.
    const cut = session.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }), { endStream: false });
    cut.on('error', () => undefined);
    const frame = gzipFrame('cut');
    cut.write(frame.subarray(0, frame.byteLength >> 1));
    await new Promise((r) => setTimeout(r, 50));
    cut.close(http2.NGHTTP2_CANCEL);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);

    // The whole budget is there again: two held at once, a third refused.
    const x = infer('hold-again-1');
    const y = infer('hold-again-2');
    await vi.waitFor(() => expect(started).toEqual(expect.arrayContaining(['hold-again-1', 'hold-again-2'])), WAIT);
    expect((await infer('over').done).status).toBe(status.UNAVAILABLE);
    releaseAll();
    expect([(await x.done).status, (await y.done).status]).toEqual([status.OK, status.OK]);
    await vi.waitFor(() => expect(budget.used).toBe(0), WAIT);
  }, 60_000);

  it('with the budget spent, a compressed ModelInfer is UNAVAILABLE from its prefix, the message unread', async () => {
    started.length = 0;
    const msgBytes = requestType.encode(requestType.fromObject({ model_name: 'm', id: 'hold-full', inputs: [{ name: 'x', datatype: 'UINT8', shape: [TENSOR] }], raw_input_contents: [Buffer.alloc(TENSOR)] })).finish().byteLength;
    const exact = new DecompressionBudget(msgBytes);
    const own = await startGrpcServer(backplane, { address: '127.0.0.1:0', decompressionBudget: exact });
    const s = await openSession(own.port);
    try {
      const first = s.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
      const firstDone = grpcResult(first);
      first.end(gzipFrame('hold-full'));
      await vi.waitFor(() => expect(started).toContain('hold-full'), WAIT);
      expect(exact.full).toBe(true);
      // The prefix and a few bytes, the stream left open: the answer comes without the rest.
      const late = s.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }), { endStream: false });
      const lateDone = grpcResult(late);
      late.write(gzipFrame('late').subarray(0, 20));
      expect(await lateDone).toMatchObject({ status: status.UNAVAILABLE, message: exact.refusal().message });
      releaseAll();
      expect((await firstDone).status).toBe(status.OK);
      await vi.waitFor(() => expect(exact.used).toBe(0), WAIT);
    } finally {
      s.destroy();
      await own.close(500);
    }
  });

  it('a compressed message that fails to inflate, or inflates past --grpc-max-message-size, gives back what it took at once', async () => {
    const small = await startGrpcServer(backplane, { address: '127.0.0.1:0', decompressionBudget: budget, maxMessageBytes: 4 * MiB });
    const s = await openSession(small.port);
    try {
      const over = s.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
      const overDone = grpcResult(over);
      over.end(gzipFrame('over-limit', 8 * MiB));
      expect((await overDone).status).toBe(status.RESOURCE_EXHAUSTED);
      const whole = gzipFrame('truncated', 2 * MiB);
      const truncated = Buffer.from(whole.subarray(0, whole.byteLength - 100));
      truncated.writeUInt32BE(truncated.byteLength - 5, 1);
      const bad = s.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': 'gzip' }));
      const badDone = grpcResult(bad);
      bad.end(truncated);
      expect(await badDone).toMatchObject({ status: status.INTERNAL, message: 'Failed to decompress message' });
      expect(budget.used).toBe(0);
    } finally {
      s.destroy();
      await small.close(500);
    }
  });
});
