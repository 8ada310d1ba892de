/**
 * @module A direct path for unary ModelInfer calls on grpc-js's HTTP/2 server. grpc-js handles
 * sessions, keepalive, TLS, every other RPC and any call this path does not take; this path reads
 * plain (uncompressed) ModelInfer calls straight off their HTTP/2 stream and answers them with
 * gRPC's framing, skipping grpc-js's per-call machinery (interceptor chain, call objects, metadata
 * copies), which cost the server's main thread ~40% more CPU per call than the HTTP frontend
 * (bench/RESULTS.md, issue #7). Wire format: grpc/doc/PROTOCOL-HTTP2.md.
 * The message's size is checked from its 5-byte prefix before it is buffered (RESOURCE_EXHAUSTED
 * at once, the rest unread); a reset, GOAWAY or destroyed connection cancels the request and drops
 * its answer. Restricted protocols were refused from the headers before this path saw the call.
 */
import type { IncomingHttpHeaders, ServerHttp2Stream, ServerStreamResponseOptions } from 'node:http2';
import { gzipSync } from 'node:zlib';
import { CancelToken, TriodeError, messageType, type Backplane, type Logger } from '@triode/core';
import type { SharedMemoryFactory } from '../shared-memory/system-shared-memory.js';
import { inferRequestFromMessage, inferResponseToMessage, type ModelInferRequestMessage } from './grpc-infer.js';
import { checkInferRequestWire } from './infer-request-scan.js';
import { GRPC_STATUS, grpcError } from './grpc-status.js';
import { refuse } from './transport-guard.js';
import { traceNow, type Tracer } from '../control/tracer.js';
import { forwardHeaders } from '../control/header-forward.js';
import { grpcTimeoutMs } from './grpc-timeout.js';
import { endInPieces } from './response-stall.js';
import type { StallGuards } from './transport-guard.js';
import { versionNotFound } from '../model-version.js';

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
  /** Where errors the client is not shown (stacks, paths) go. */
  logger?: Logger;
  /** Makes a request's hold on the shared memory regions it names (GrpcServerOptions.sharedMemory). */
  sharedMemory?: SharedMemoryFactory;
}

const requestType = messageType('ModelInferRequest');
const responseType = messageType('ModelInferResponse');

/** Status codes not in Triton's mapping. */
const DEADLINE_EXCEEDED = 4;
const RESOURCE_EXHAUSTED = 8;

/** gRPC's message prefix: a compressed flag byte and a 4-byte big-endian length. */
const PREFIX_BYTES = 5;

/** True when this path may take the call: a ModelInfer call whose messages are not compressed. */
function eligible(headers: IncomingHttpHeaders): boolean {
  if (headers[':path'] !== MODEL_INFER_PATH || headers[':method'] !== 'POST') return false;
  const ct = headers['content-type'];
  if (typeof ct !== 'string' || !ct.startsWith('application/grpc')) return false;
  const enc = headers['grpc-encoding'];
  return enc === undefined || enc === 'identity';
}

/**
 * respond()'s options. No `date` header: gRPC's C++ server, Triton's, sends none, and Node's cost
 * the main thread ~5% of a `simple` call (bench/RESULTS.md, "Issue #18: what a gRPC call costs
 * the server, and ModelInfer without a date header"). Node's respond() hands its options to processHeaders, which reads `sendDate` (Node 20),
 * though @types/node leaves it out of ServerStreamResponseOptions; a wire test in
 * grpc-server.test.ts fails if Node stops reading it. respond() copies its options, so one object serves every call.
 */
const RESPOND_OPTIONS: ServerStreamResponseOptions & { sendDate: boolean } = { waitForTrailers: true, sendDate: false };

function serve(stream: ServerHttp2Stream, headers: IncomingHttpHeaders, opts: FastPathOptions, stalls: StallGuards): void {
  const waitStart = opts.tracer ? traceNow() : 0;
  // A client that stops sending its request, or stops taking its answer, is cut off (the stall guards).
  const reading = stalls.request.track(stream);
  const sending = stalls.response.track(stream);
  const chunks: Buffer[] = [];
  let received = 0;
  /** The message length its prefix announces; -1 until the 5 prefix bytes are in. */
  let announced = -1;
  let answered = false;
  const abort = new CancelToken();
  let timer: NodeJS.Timeout | undefined;
  /** Ends the call with a status (once): the request is cancelled, the rest of the message unread. */
  const finish = (code: number, message: string): void => {
    if (answered) return;
    answered = true;
    clearTimeout(timer);
    chunks.length = 0;
    abort.cancel();
    refuse(stream, code, message);
  };
  // Reset, GOAWAY, destroyed session or socket: the request is cancelled and its answer dropped.
  stream.once('close', () => {
    stalls.request.untrack(stream);
    stalls.response.untrack(stream);
    clearTimeout(timer);
    chunks.length = 0;
    if (answered) return;
    answered = true;
    abort.cancel();
  });
  // (Zero was refused by the front door; Infinity, past what a timer holds, is no deadline.)
  const limitMs = grpcTimeoutMs(headers['grpc-timeout']);
  if (limitMs !== undefined && limitMs !== Infinity) timer = setTimeout(() => finish(DEADLINE_EXCEEDED, 'Deadline Exceeded'), limitMs);
  stream.on('data', (c: Buffer) => {
    reading.received += c.byteLength;
    if (answered) return;
    received += c.byteLength;
    chunks.push(c);
    if (announced < 0 && received >= PREFIX_BYTES) {
      // The prefix decides before the message is buffered: too large, or compressed without an encoding.
      const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      if (head[0] !== 0) {
        finish(GRPC_STATUS.INTERNAL, 'compressed gRPC message without a grpc-encoding header');
        return;
      }
      announced = head.readUInt32BE(1);
      if (announced > opts.maxMessageBytes) {
        finish(RESOURCE_EXHAUSTED, `Received message larger than max (${announced} vs. ${opts.maxMessageBytes})`);
        return;
      }
    }
    if (announced >= 0 && received > PREFIX_BYTES + announced) {
      finish(GRPC_STATUS.INTERNAL, 'malformed gRPC message frame (one uncompressed ModelInferRequest expected)');
    }
  });
  stream.on('end', () => {
    reading.ended = true;
    if (answered) return;
    void (async () => {
      if (announced < 0 || received !== PREFIX_BYTES + announced) {
        throw new TriodeError('INTERNAL', 'malformed gRPC message frame (one uncompressed ModelInferRequest expected)');
      }
      const body = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
      chunks.length = 0;
      // Counts no request has (inputs, dims, parameters) are refused before decoding makes them.
      checkInferRequestWire(body.subarray(PREFIX_BYTES));
      let message: ModelInferRequestMessage;
      try {
        message = requestType.decode(body.subarray(PREFIX_BYTES)) as unknown as ModelInferRequestMessage;
      } catch (err) {
        throw new TriodeError('INTERNAL', 'malformed ModelInferRequest (the message does not decode)', { cause: err });
      }
      const read = inferRequestFromMessage(message, opts.sharedMemory);
      if ('unknownVersion' in read) return versionNotFound(message.model_name, read.unknownVersion, opts.backplane);
      const { request, sharedMemory: shm } = read;
      try {
        // Large inputs in shared memory are read now, off the event loop.
        if (shm) await shm.load();
        request.signal = abort;
        if (opts.headerForwardPattern) {
          forwardHeaders(request, metadataOf(headers), opts.headerForwardPattern);
        }
        const t = opts.tracer?.start(request.modelName);
        if (!t) return responseType.encode(inferResponseToMessage(await opts.backplane.infer(request), undefined, shm)).finish();
        t.trace.timestamps.push({ name: 'GRPC_WAITREAD_START', ns: waitStart }, { name: 'GRPC_WAITREAD_END', ns: traceNow() });
        request.trace = t.trace;
        const response = await opts.backplane.infer(request).catch((err: unknown) => {
          opts.tracer!.failed(t, err, request.id ?? '', String(request.modelVersion ?? ''));
          throw err;
        });
        t.trace.timestamps.push({ name: 'GRPC_SEND_START', ns: traceNow() });
        let encoded: Uint8Array;
        try {
          encoded = responseType.encode(inferResponseToMessage(response, undefined, shm)).finish();
        } catch (err) {
          opts.tracer!.failed(t, err, request.id ?? '', response.modelVersion);
          throw err;
        }
        t.trace.timestamps.push({ name: 'GRPC_SEND_END', ns: traceNow() });
        opts.tracer!.finish(t, response.modelVersion, request.id ?? '');
        return encoded;
      } finally {
        // The regions it names are held until it is answered or failed.
        shm?.release();
      }
    })().then((encoded) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      if (stream.destroyed || stream.closed) return;
      // Response compression when the server is set to it and the client takes gzip.
      const accepts = String(headers['grpc-accept-encoding'] ?? '').split(',').map((x) => x.trim());
      const gzip = opts.compressionLevel !== undefined && accepts.includes('gzip');
      const payload = gzip ? gzipSync(encoded, { level: opts.compressionLevel }) : encoded;
      // As grpc-js refuses to send it: the message over the limit (its words give the length with the prefix).
      if (payload.byteLength > opts.maxMessageBytes) {
        refuse(stream, RESOURCE_EXHAUSTED, `Sent message larger than max (${PREFIX_BYTES + payload.byteLength} vs. ${opts.maxMessageBytes})`);
        return;
      }
      const frame = Buffer.allocUnsafe(PREFIX_BYTES + payload.byteLength);
      frame[0] = gzip ? 1 : 0;
      frame.writeUInt32BE(payload.byteLength, 1);
      frame.set(payload, PREFIX_BYTES);
      try {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc+proto', 'grpc-accept-encoding': 'identity,deflate,gzip', 'grpc-encoding': gzip ? 'gzip' : 'identity' }, RESPOND_OPTIONS);
        stream.once('wantTrailers', () => {
          try {
            stream.sendTrailers({ 'grpc-status': '0', 'grpc-message': '' });
          } catch {
            // the client went away before the trailers: nothing to tell it
          }
        });
        endInPieces(stream, sending, frame);
      } catch (err) {
        // The stream closed between the check and the answer (a reset in flight): the answer is dropped.
        opts.logger?.verbose(2, `gRPC ModelInfer answer dropped: ${(err as Error).message}`);
      }
    }, (err: unknown) => {
      const e = grpcError(err, opts.logger);
      finish(e.code, e.details);
    });
  });
}

/** Headers grpc-js keeps out of a call's metadata: transport, not the client's own. */
const TRANSPORT_HEADERS = new Set(['grpc-timeout', 'grpc-encoding', 'grpc-accept-encoding', 'accept-encoding', 'te', 'content-type']);

/** The call's metadata as grpc-js gives it to a handler: string headers, less pseudo and transport headers. */
function metadataOf(headers: IncomingHttpHeaders): [string, string][] {
  return Object.entries(headers).filter((e): e is [string, string] => typeof e[1] === 'string' && !e[0].startsWith(':') && !TRANSPORT_HEADERS.has(e[0]));
}

/**
 * The fast path as the transport front door (transport-guard.ts) calls it: takes and serves the
 * ModelInfer calls it can (returns true), leaves every other stream to grpc-js (returns false).
 */
export function inferFastPath(opts: FastPathOptions): (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, stalls: StallGuards) => boolean {
  return (stream, headers, stalls) => {
    if (!eligible(headers)) return false;
    serve(stream, headers, opts, stalls);
    return true;
  };
}
