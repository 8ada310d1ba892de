/**
 * @module A lean gRPC unary call over node:http2 for the client's infer hot path. @grpc/grpc-js
 * spends ~130 µs of client CPU per call (interceptor chain, call objects, timers); this path does
 * one HTTP/2 request with gRPC's framing and reads the status from the trailers, ~3x cheaper,
 * which matters when the load generator shares the machine with the server (bench/RESULTS.md).
 * Used only for plaintext channels without compression; everything else goes through grpc-js.
 * Wire format: https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md
 */
import { connect, constants, type ClientHttp2Session, type ClientHttp2Stream, type IncomingHttpHeaders } from 'node:http2';
import { timerMs } from '@triode/core';
import { InferenceServerError } from './errors.js';
import { ResponseBuffer } from './response-buffer.js';

const WINDOW = 8 * 1024 * 1024;

/** gRPC status of a finished call, from trailers (or headers, for a trailers-only answer). */
function statusOf(h: IncomingHttpHeaders): { code: number; message: string } | undefined {
  const s = h['grpc-status'];
  if (s === undefined) return undefined;
  const raw = h['grpc-message'];
  let message = Array.isArray(raw) ? raw.join(',') : raw ?? '';
  try {
    message = decodeURIComponent(message);
  } catch {
    // not percent-encoded: keep as is
  }
  const text = Array.isArray(s) ? s[0] : s;
  // A status that is not a code (a broken proxy, a hostile server) is UNKNOWN, as grpc-js has it.
  if (text === undefined || !/^\d{1,2}$/.test(text)) return { code: 2, message: `malformed grpc-status '${String(text)}'${message ? `: ${message}` : ''}` };
  return { code: Number(text), message };
}

/**
 * The gRPC status of an HTTP status that came without a grpc-status (a proxy's or load balancer's
 * own answer): gRPC's HTTP-to-status mapping (doc/http-grpc-status-mapping.md), as grpc-js has it.
 */
export function statusOfHttp(httpStatus: number): number {
  switch (httpStatus) {
    case 400: return 13; // INTERNAL
    case 401: return 16; // UNAUTHENTICATED
    case 403: return 7; // PERMISSION_DENIED
    case 404: return 12; // UNIMPLEMENTED
    case 429: case 502: case 503: case 504: return 14; // UNAVAILABLE
    default: return 2; // UNKNOWN
  }
}

/**
 * Why response headers are not a gRPC answer, or undefined when they are: an HTTP status other
 * than 200 without a grpc-status, or a content-type other than application/grpc*. Read as gRPC,
 * a proxy's 503 page failed as a message "larger than 1073741824 bytes" (review).
 */
function notGrpc(h: IncomingHttpHeaders): { code: number; message: string } | undefined {
  const http = Number(h[constants.HTTP2_HEADER_STATUS]);
  if (h['grpc-status'] !== undefined) return undefined; // trailers-only: its status says it
  if (http !== 200) return { code: statusOfHttp(http), message: `Received HTTP status code ${http}` };
  const type = h[constants.HTTP2_HEADER_CONTENT_TYPE];
  if (typeof type !== 'string' || !/^application\/grpc(?:$|[+;])/.test(type)) return { code: 2, message: `Received a response of content-type '${String(type)}', not application/grpc` };
  return undefined;
}

/** Unary calls on one HTTP/2 connection (re-opened when it closes). */
export class H2Unary {
  readonly #authority: string;
  readonly #sessions: (ClientHttp2Session | undefined)[];
  #next = 0;
  /** Calls in flight per connection: a connection keeps the process alive only while it has some. */
  readonly #inflight = new WeakMap<ClientHttp2Session, number>();

  /**
   * @param address `host:port`
   * @param connections HTTP/2 connections calls are spread over (round robin).
   */
  constructor(address: string, connections = 1) {
    this.#authority = `http://${address}`;
    this.#sessions = new Array<ClientHttp2Session | undefined>(Math.max(1, connections)).fill(undefined);
  }

  #connection(): ClientHttp2Session {
    const slot = this.#next++ % this.#sessions.length;
    const s = this.#sessions[slot];
    if (s && !s.closed && !s.destroyed) return s;
    // gRPC never uses server push: with it on, a hostile server could push streams that each
    // held a window of data here, without limit (150 pushes took 1.3 GB). Off, and any stream the
    // server still opens is refused.
    const session = connect(this.#authority, { settings: { initialWindowSize: WINDOW, enablePush: false } });
    session.on('stream', (pushed: ClientHttp2Stream) => pushed.close(constants.NGHTTP2_REFUSED_STREAM));
    session.on('error', () => undefined);
    session.on('close', () => {
      if (this.#sessions[slot] === session) this.#sessions[slot] = undefined;
    });
    session.once('remoteSettings', () => {
      try {
        session.setLocalWindowSize(WINDOW);
      } catch {
        // closed already
      }
    });
    session.unref();
    this.#sessions[slot] = session;
    return session;
  }

  /** A serialized message with gRPC's prefix (uncompressed flag, 4-byte big-endian length). */
  static frame(message: Uint8Array): Buffer {
    const frame = Buffer.allocUnsafe(5 + message.byteLength);
    frame[0] = 0;
    frame.writeUInt32BE(message.byteLength, 1);
    frame.set(message, 5);
    return frame;
  }

  /**
   * Calls `path` with a framed message (see `frame`); resolves with the serialized response.
   * `timeoutMs` is sent as grpc-timeout and also enforced here (a silent server fails the call
   * with DEADLINE_EXCEEDED); a response over `maxBytes` fails with RESOURCE_EXHAUSTED.
   * @throws InferenceServerError with the gRPC status code and message.
   */
  call(path: string, frame: Uint8Array, metadata: Record<string, string>, timeoutMs?: number, maxBytes = 2 ** 30): Promise<Buffer> {
    return new Promise<Buffer>((resolveCall, rejectCall) => {
      let timer: NodeJS.Timeout | undefined;
      let settled = false;
      const resolve = (b: Buffer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolveCall(b);
      };
      const reject = (err: InferenceServerError) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        rejectCall(err);
      };
      const headers: Record<string, string> = {
        ...metadata,
        [constants.HTTP2_HEADER_METHOD]: 'POST',
        [constants.HTTP2_HEADER_PATH]: path,
        [constants.HTTP2_HEADER_CONTENT_TYPE]: 'application/grpc',
        te: 'trailers',
      };
      if (timeoutMs) headers['grpc-timeout'] = `${Math.max(1, Math.ceil(timeoutMs))}m`;
      let req;
      let session: ClientHttp2Session;
      try {
        session = this.#connection();
        req = session.request(headers);
      } catch (err) {
        reject(new InferenceServerError(`gRPC call ${path} failed: ${(err as Error).message}`, { grpcCode: 14, cause: err }));
        return;
      }
      const n = this.#inflight.get(session) ?? 0;
      this.#inflight.set(session, n + 1);
      if (n === 0) session.ref();
      // Copied into one buffer as it comes (response-buffer.ts; review: kept chunk by chunk,
      // 1-byte DATA frames ran the client out of heap at ~38 MB of a 1 GiB limit).
      const body = new ResponseBuffer(maxBytes + 5);
      let status: { code: number; message: string } | undefined;
      if (timeoutMs) {
        timer = setTimeout(() => {
          reject(new InferenceServerError('Deadline Exceeded', { grpcCode: 4 }));
          req.close(constants.NGHTTP2_CANCEL);
        }, timerMs(timeoutMs));
      }
      req.on('response', (h) => {
        const wrong = notGrpc(h);
        if (wrong) {
          reject(new InferenceServerError(`gRPC call ${path}: ${wrong.message}`, { grpcCode: wrong.code }));
          req.close(constants.NGHTTP2_CANCEL);
          return;
        }
        status = statusOf(h);
      });
      req.on('trailers', (h) => { status = statusOf(h) ?? status; });
      req.on('data', (c: Buffer) => {
        let kept: boolean;
        try {
          kept = body.push(c);
        } catch (err) {
          reject(new InferenceServerError(`gRPC call ${path}: ${(err as Error).message}`, { grpcCode: 8, cause: err }));
          req.close(constants.NGHTTP2_CANCEL);
          return;
        }
        // The message's own length, once its prefix has come, may not pass the limit either.
        if (kept && (body.length < 5 || body.uint32At(1) <= maxBytes)) return;
        reject(new InferenceServerError(`gRPC call ${path}: the response is larger than ${maxBytes} bytes`, { grpcCode: 8 }));
        req.close(constants.NGHTTP2_CANCEL);
      });
      req.on('error', (err) => reject(new InferenceServerError(`gRPC call ${path} failed: ${err.message}`, { grpcCode: 14, cause: err })));
      req.on('close', () => {
        const left = (this.#inflight.get(session) ?? 1) - 1;
        this.#inflight.set(session, left);
        if (left === 0 && !session.destroyed) session.unref();
        if (!status) {
          reject(new InferenceServerError(`gRPC call ${path} ended without a status`, { grpcCode: 13 }));
          return;
        }
        if (status.code !== 0) {
          reject(new InferenceServerError(status.message, { grpcCode: status.code }));
          return;
        }
        const message = body.bytes();
        // One uncompressed message whose length prefix is exactly what came.
        if (message.byteLength < 5 || message[0] !== 0 || message.readUInt32BE(1) !== message.byteLength - 5) {
          reject(new InferenceServerError(`gRPC call ${path}: malformed or compressed response`, { grpcCode: 13 }));
          return;
        }
        resolve(message.subarray(5));
      });
      req.end(frame);
    });
  }

  close(): void {
    for (const s of this.#sessions) s?.close();
    this.#sessions.fill(undefined);
  }
}
