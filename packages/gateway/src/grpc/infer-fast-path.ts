/**
 * @module A direct path for unary ModelInfer calls on grpc-js's HTTP/2 server. grpc-js handles
 * sessions, keepalive, TLS, every other RPC and any call this path does not take; this path reads
 * plain (uncompressed) ModelInfer calls straight off their HTTP/2 stream and answers them with
 * gRPC's framing, skipping grpc-js's per-call machinery (interceptor chain, call objects, metadata
 * copies), which cost the server's main thread ~40% more CPU per call than the HTTP frontend
 * (bench/RESULTS.md, issue #7). Wire format: grpc/doc/PROTOCOL-HTTP2.md.
 */
import type { EventEmitter } from 'node:events';
import type { IncomingHttpHeaders, ServerHttp2Stream } from 'node:http2';
import { gzipSync } from 'node:zlib';
import { CancelToken, TriodeError, messageType, type Backplane } from '@triode/core';
import { inferRequestFromMessage, inferResponseToMessage, type ModelInferRequestMessage } from './grpc-infer.js';
import { GRPC_STATUS } from './grpc-status.js';
import { traceNow, type Tracer } from '../control/tracer.js';
import { forwardHeaders } from '../control/header-forward.js';

/** The RPC this path serves. */
export const MODEL_INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';

/** What the fast path needs from the server it sits in. */
export interface FastPathOptions {
  backplane: Backplane;
  maxMessageBytes: number;
  /** zlib level for responses (`--grpc-infer-response-compression-level`); undefined: none. */
  compressionLevel?: number;
  tracer?: Tracer;
  /** `--grpc-header-forward-pattern`. */
  headerForwardPattern?: RegExp;
  /** Throws (UNAVAILABLE) when a restricted protocol's header is missing. */
  guard: (headers: IncomingHttpHeaders) => void;
}

const requestType = messageType('ModelInferRequest');
const responseType = messageType('ModelInferResponse');

/** Status codes not in Triton's mapping. */
const DEADLINE_EXCEEDED = 4;
const RESOURCE_EXHAUSTED = 8;

/** True when this path may take the call: a ModelInfer call whose messages are not compressed. */
function eligible(headers: IncomingHttpHeaders): boolean {
  if (headers[':path'] !== MODEL_INFER_PATH || headers[':method'] !== 'POST') return false;
  const ct = headers['content-type'];
  if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) return false;
  const enc = headers['grpc-encoding'];
  return enc === undefined || enc === 'identity';
}

/** `grpc-timeout` (e.g. `100m`, `5S`) in ms; undefined when absent or malformed. */
function timeoutMs(v: string | string[] | undefined): number | undefined {
  const m = typeof v === 'string' ? /^(\d{1,8})([HMSmun])$/.exec(v) : null;
  if (!m) return undefined;
  const n = Number(m[1]);
  const unit = { H: 3_600_000, M: 60_000, S: 1000, m: 1, u: 1e-3, n: 1e-6 }[m[2] as 'H'];
  return n * unit;
}

/** `grpc-message` encoding: printable ASCII except '%' as is, everything else as %XX of its UTF-8 bytes. */
function encodeGrpcMessage(message: string): string {
  let out = '';
  for (const b of Buffer.from(message, 'utf8')) {
    out += b >= 0x20 && b <= 0x7e && b !== 0x25 ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Answers with a status only (a "trailers-only" response). */
function fail(stream: ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({
    ':status': 200, 'content-type': 'application/grpc+proto',
    'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message),
  }, { endStream: true });
}

function serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, opts: FastPathOptions): void {
  const waitStart = opts.tracer ? traceNow() : 0;
  const chunks: Buffer[] = [];
  let size = 0;
  let tooBig = false;
  const abort = new CancelToken();
  let answered = false;
  stream.on('close', () => {
    if (!answered) abort.cancel();
  });
  const limitMs = timeoutMs(headers['grpc-timeout']);
  const timer = limitMs !== undefined ? setTimeout(() => {
    if (answered) return;
    answered = true;
    abort.cancel();
    fail(stream, DEADLINE_EXCEEDED, 'Deadline Exceeded');
  }, limitMs) : undefined;
  stream.on('data', (c: Buffer) => {
    size += c.byteLength;
    if (size > opts.maxMessageBytes + 5) tooBig = true;
    else chunks.push(c);
  });
  stream.on('end', () => {
    void (async () => {
      if (tooBig) throw new TriodeError('UNKNOWN', `Received message larger than max (${size - 5} vs. ${opts.maxMessageBytes})`);
      opts.guard(headers);
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (body.byteLength < 5 || body[0] !== 0 || body.readUInt32BE(1) !== body.byteLength - 5) {
        throw new TriodeError('INTERNAL', 'malformed gRPC message frame (one uncompressed ModelInferRequest expected)');
      }
      const message = requestType.decode(body.subarray(5)) as unknown as ModelInferRequestMessage;
      const { request } = inferRequestFromMessage(message);
      request.signal = abort;
      if (opts.headerForwardPattern) {
        forwardHeaders(request, Object.entries(headers).filter((e): e is [string, string] => typeof e[1] === 'string'), opts.headerForwardPattern);
      }
      const t = opts.tracer?.start(request.modelName);
      if (!t) return responseType.encode(inferResponseToMessage(await opts.backplane.infer(request))).finish();
      t.trace.timestamps.push({ name: 'GRPC_WAITREAD_START', ns: waitStart }, { name: 'GRPC_WAITREAD_END', ns: traceNow() });
      request.trace = t.trace;
      const response = await opts.backplane.infer(request);
      t.trace.timestamps.push({ name: 'GRPC_SEND_START', ns: traceNow() });
      const encoded = responseType.encode(inferResponseToMessage(response)).finish();
      t.trace.timestamps.push({ name: 'GRPC_SEND_END', ns: traceNow() });
      opts.tracer!.finish(t, response.modelVersion, request.id ?? '');
      return encoded;
    })().then((encoded) => {
      if (answered || stream.destroyed) return;
      answered = true;
      clearTimeout(timer);
      // Response compression when the server is set to it and the client takes gzip.
      const accepts = String(headers['grpc-accept-encoding'] ?? '').split(',').map((x) => x.trim());
      const gzip = opts.compressionLevel !== undefined && accepts.includes('gzip');
      const payload = gzip ? gzipSync(encoded, { level: opts.compressionLevel }) : encoded;
      const frame = Buffer.allocUnsafe(5 + payload.byteLength);
      frame[0] = gzip ? 1 : 0;
      frame.writeUInt32BE(payload.byteLength, 1);
      frame.set(payload, 5);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-accept-encoding': 'identity,deflate,gzip', 'grpc-encoding': gzip ? 'gzip' : 'identity' }, { waitForTrailers: true });
      stream.once('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': '' }));
      stream.end(frame);
    }, (err: unknown) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      const e = TriodeError.from(err);
      const tooLarge = /larger than max/.test(e.message);
      fail(stream, tooLarge ? RESOURCE_EXHAUSTED : GRPC_STATUS[e.code], e.message);
    });
  });
}

/**
 * Puts the fast path in front of grpc-js on each of its HTTP/2 servers: ModelInfer calls it can
 * take go to it, every other stream to grpc-js's own handlers, unchanged.
 */
export function installInferFastPath(http2Servers: Iterable<EventEmitter>, opts: FastPathOptions): void {
  for (const h2 of http2Servers) {
    const grpcHandlers = h2.listeners('stream') as ((stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => void)[];
    h2.removeAllListeners('stream');
    h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => {
      if (eligible(headers)) {
        serve(stream, headers, opts);
        return;
      }
      for (const handler of grpcHandlers) handler.call(h2, stream, headers, flags);
    });
  }
}
