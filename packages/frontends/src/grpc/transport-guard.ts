/**
 * @module The gRPC frontend's HTTP/2 front door (issue #14): every stream and session of the
 * server, fast path and grpc-js alike, passes here first. Transport errors (RST_STREAM, GOAWAY,
 * destroyed sessions and sockets) are handled and logged, never thrown; a connection whose client
 * resets streams faster than a token bucket allows is closed with GOAWAY ENHANCE_YOUR_CALM (the
 * HTTP/2 rapid-reset defence of nghttp2, Go and Envoy after CVE-2023-44487); restricted protocols
 * are refused from the request headers alone, before a byte of the message is read.
 */
import type { EventEmitter } from 'node:events';
import { constants, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { TriodeError, type Logger } from '@triode/core';
import { GRPC_STATUS, clientMessage, encodeGrpcMessage } from './grpc-status.js';

/** Client stream resets a connection may make: a burst, refilled at a steady rate. */
export interface ResetBudget {
  // nghttp2 (1.57+, in Node) has a budget of its own, 1000 at once and 33/s, past which it ends the
  // connection with GOAWAY INTERNAL_ERROR: this one is meant to be tighter, so a client is told why.
  /** Resets allowed at once (the bucket's size). */
  burst: number;
  /** Resets per second the bucket refills with. */
  perSecond: number;
}

/** What the front door needs from the server. */
export interface StreamFrontOptions {
  resets: ResetBudget;
  logger: Logger;
  /** Throws (UNAVAILABLE) when `rpc` is restricted and the headers lack its key/value. */
  guard: (rpc: string, headers: IncomingHttpHeaders) => void;
  /** Takes the stream (and answers it) when the fast path serves it: returns true then. */
  fastPath?: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => boolean;
}

/** The RPC's method name from `:path` (`/package.Service/Method`); '' for anything else. */
export function rpcOf(path: unknown): string {
  if (typeof path !== 'string') return '';
  const m = /^\/(?:inference\.GRPCInferenceService|grpc\.health\.v1\.Health)\/([A-Za-z]+)$/.exec(path);
  return m ? m[1]! : '';
}

/**
 * Answers a stream with a status only (a "trailers-only" response) and stops reading it: the
 * stream is closed (RST_STREAM NO_ERROR once the answer is out), so a client still sending a
 * message is not read further. Safe on a stream that is already closed.
 */
export function refuse(stream: ServerHttp2Stream, code: number, message: string): void {
  try {
    if (!stream.destroyed && !stream.closed && !stream.headersSent) {
      stream.respond({
        ':status': 200, 'content-type': 'application/grpc+proto',
        'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message),
      }, { endStream: true });
    }
    if (!stream.closed) stream.close(constants.NGHTTP2_NO_ERROR);
  } catch {
    // the stream or its session went away meanwhile: nobody is left to answer
  }
}

/** The token bucket of one connection's client resets. */
class ResetBucket {
  #tokens: number;
  #at = Date.now();

  constructor(readonly budget: ResetBudget) {
    this.#tokens = budget.burst;
  }

  /** Counts one reset; false once the budget is spent. */
  take(): boolean {
    const now = Date.now();
    this.#tokens = Math.min(this.budget.burst, this.#tokens + ((now - this.#at) * this.budget.perSecond) / 1000);
    this.#at = now;
    this.#tokens -= 1;
    return this.#tokens >= 0;
  }
}

/**
 * Puts the front door on each of grpc-js's HTTP/2 servers: it sees every session and stream
 * first, then hands ModelInfer calls it may take to the fast path and everything else to grpc-js's
 * own 'stream' handlers, unchanged.
 */
export function installStreamFront(http2Servers: Iterable<EventEmitter>, opts: StreamFrontOptions): void {
  const { logger } = opts;
  const buckets = new WeakMap<Http2Session, ResetBucket>();
  /** Connections being closed for too many resets: streams still arriving on them are refused. */
  const calmed = new WeakSet<Http2Session>();
  const onSessionError = (err: Error) => logger.verbose(1, `gRPC connection error: ${err.message}`);
  const onStreamError = (err: Error) => logger.verbose(2, `gRPC stream error: ${err.message}`);

  /**
   * A stream aborted before its answer: when its client reset it (not a dying connection), it
   * spends budget. 'aborted' comes as nghttp2 reads the RST_STREAM, before the next frame of the
   * same read, so the budget is counted as fast as the client resets.
   */
  const onStreamAborted = (stream: ServerHttp2Stream): void => {
    const session = stream.session;
    if (stream.rstCode === undefined || stream.rstCode === constants.NGHTTP2_NO_ERROR) return;
    if (!session || session.destroyed) return;
    const bucket = buckets.get(session);
    if (!bucket || bucket.take()) return;
    buckets.delete(session);
    calmed.add(session);
    const peer = `${session.socket?.remoteAddress ?? '?'}:${session.socket?.remotePort ?? '?'}`;
    logger.warning(`gRPC client ${peer} reset more than ${bucket.budget.burst} streams at once (${bucket.budget.perSecond}/s allowed): connection closed with GOAWAY ENHANCE_YOUR_CALM`);
    try {
      // (With no error given, Node's destroy() takes its default error, 0, as the code: NO_ERROR.)
      session.destroy(new Error('too many stream resets'), constants.NGHTTP2_ENHANCE_YOUR_CALM);
    } catch {
      // already going away
    }
  };

  for (const h2 of http2Servers) {
    const grpcHandlers = h2.listeners('stream') as ((stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => void)[];
    h2.removeAllListeners('stream');
    h2.on('session', (session: Http2Session) => {
      session.on('error', onSessionError);
      buckets.set(session, new ResetBucket(opts.resets));
    });
    h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => {
      // Persistent: grpc-js listens with once('error') and the fast path has none of its own.
      stream.on('error', onStreamError);
      stream.once('aborted', () => onStreamAborted(stream));
      if (stream.session && calmed.has(stream.session)) {
        try {
          stream.close(constants.NGHTTP2_REFUSED_STREAM);
        } catch {
          // already gone with its connection
        }
        return;
      }
      const rpc = rpcOf(headers[':path']);
      if (rpc) {
        try {
          opts.guard(rpc, headers);
        } catch (err) {
          const e = TriodeError.from(err);
          refuse(stream, GRPC_STATUS[e.code], clientMessage(e));
          return;
        }
      }
      try {
        if (opts.fastPath?.(stream, headers)) return;
        for (const handler of grpcHandlers) handler.call(h2, stream, headers, flags);
      } catch (err) {
        // A throw here would reach nghttp2's callback and end the process: this call alone fails.
        logger.warning(`gRPC call failed to start: ${err instanceof Error && err.stack ? err.stack : String(err)}`);
        refuse(stream, GRPC_STATUS.INTERNAL, 'internal error: the call could not be started');
      }
    });
  }
}
