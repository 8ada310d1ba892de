/**
 * @module gRPC requests a client stops sending: a call whose message was cut short (a prefix
 * announcing 1 GiB, then 10 MB, then nothing) kept what came of it for good, up to the message
 * limit (2 GiB) on each of 1,000 streams a connection (measured: 10 such ModelInfer or
 * ModelStreamInfer calls held 105 MB until their client left; review). A call whose request is
 * unfinished (a unary call not yet half-closed, or any call in the middle of a message) and has
 * received no byte for the limit is answered CANCELLED and closed, its bytes let go: the gRPC
 * counterpart of HTTP's request timeouts. A ModelStreamInfer stream between messages is idle, not
 * stalled, and is left alone.
 */
import { constants, type ServerHttp2Stream } from 'node:http2';
import type { Logger } from '@triode/core';

/** Default of GrpcServerOptions.requestStallTimeoutMs. */
export const DEFAULT_GRPC_REQUEST_STALL_TIMEOUT_MS = 60_000;

const GRPC_STATUS_CANCELLED = 1;
/** gRPC's message prefix: a compressed flag byte and a 4-byte big-endian length. */
const PREFIX_BYTES = 5;

/** A watched call's request side. */
export interface Reading {
  /** Bytes received so far: its watcher (or the caller of `track`) adds to it as they come. */
  received: number;
  /** `received` as of the last check, and since when it has not grown (or the call began). */
  seen: number;
  since: number;
  /** Set once the client half-closed. */
  ended: boolean;
  /** A unary call: unfinished until half-closed. A stream: unfinished only in the middle of a message. */
  unary: boolean;
  /** Bytes of the current message's prefix received (0-4), the length read so far, and bytes of its body still to come. */
  prefix: number;
  length: number;
  remaining: number;
}

/** Watches the request side of calls for clients that stop sending in the middle. */
export interface RequestStallGuard {
  /**
   * Watches `stream` (of `rpc`) until it closes. Install it outermost (after any other wrapper of
   * the stream's emit): it must see the bytes as the client sent them.
   */
  watch(stream: ServerHttp2Stream, rpc: string): void;
  /**
   * Watches a unary call whose reader counts its bytes itself (the ModelInfer fast path): its
   * caller adds to `received` as bytes come, sets `ended` at the half-close, and calls `untrack`
   * once the stream closes. Nothing of the stream is wrapped: wrapping its `emit` (a closure and
   * an own property on every stream) cost a `simple` call ~10% of its throughput (bench/RESULTS.md).
   */
  track(stream: ServerHttp2Stream): Reading;
  untrack(stream: ServerHttp2Stream): void;
  close(): void;
}

/** Counts `chunk` against the message framing of `r`. */
function frame(r: Reading, chunk: Buffer): void {
  let at = 0;
  while (at < chunk.byteLength) {
    if (r.remaining > 0) {
      const n = Math.min(r.remaining, chunk.byteLength - at);
      at += n;
      r.remaining -= n;
      continue;
    }
    // A prefix byte: a flag, then the body's length in four bytes, big-endian.
    const b = chunk[at++]!;
    r.length = r.prefix === 0 ? 0 : r.length * 256 + b;
    r.prefix++;
    if (r.prefix === PREFIX_BYTES) {
      r.prefix = 0;
      r.remaining = r.length;
    }
  }
}

/** A call's request side as it begins. */
const reading = (unary: boolean): Reading => ({ received: 0, seen: 0, since: Date.now(), ended: false, unary, prefix: 0, length: 0, remaining: 0 });

/** True while `r` is in the middle of its request (see Reading.unary). */
const unfinished = (r: Reading): boolean => !r.ended && (r.unary || r.prefix > 0 || r.remaining > 0);

/**
 * A guard that cancels calls whose unfinished request has received nothing for `stallMs`: one
 * that has not answered yet gets `refuse(stream, CANCELLED, why)` (a trailers-only status), one
 * that has is reset (RST_STREAM CANCEL).
 */
export function requestStallGuard(stallMs: number, logger: Logger, refuse: (stream: ServerHttp2Stream, code: number, message: string) => void): RequestStallGuard {
  const watched = new Map<ServerHttp2Stream, Reading>();
  const check = setInterval(() => {
    const now = Date.now();
    for (const [stream, r] of watched) {
      // Not read (paused by the server: a ModelStreamInfer stream whose requests wait on the
      // model; or bytes came that it has not read yet): the server waits, not the client.
      if (!unfinished(r) || r.received !== r.seen || stream.isPaused() || stream.readableLength > 0) {
        r.seen = r.received;
        r.since = now;
        continue;
      }
      if (now - r.since < stallMs) continue;
      watched.delete(stream);
      const peer = `${stream.session?.socket?.remoteAddress ?? '?'}:${stream.session?.socket?.remotePort ?? '?'}`;
      logger.verbose(1, `gRPC client ${peer} sent nothing of an unfinished request for ${stallMs} ms: call cancelled`);
      if (!stream.headersSent) {
        refuse(stream, GRPC_STATUS_CANCELLED, `the request was not received: no byte of it came for ${stallMs} ms`);
      } else {
        try {
          stream.close(constants.NGHTTP2_CANCEL);
        } catch {
          // closed meanwhile
        }
      }
    }
  }, Math.max(10, Math.min(1000, Math.floor(stallMs / 4))));
  check.unref();
  return {
    watch: (stream, rpc) => {
      const r = reading(rpc !== 'ModelStreamInfer');
      const emit = stream.emit;
      stream.emit = function (this: ServerHttp2Stream, event: string | symbol, ...args: unknown[]): boolean {
        if (event === 'data') {
          const chunk = args[0];
          r.received += Buffer.isBuffer(chunk) ? chunk.byteLength : 1;
          if (!r.unary && Buffer.isBuffer(chunk)) frame(r, chunk);
        } else if (event === 'end') {
          r.ended = true;
        }
        return emit.call(this, event, ...args);
      } as ServerHttp2Stream['emit'];
      watched.set(stream, r);
      stream.once('close', () => watched.delete(stream));
    },
    track: (stream) => {
      const r = reading(true);
      watched.set(stream, r);
      return r;
    },
    untrack: (stream) => {
      watched.delete(stream);
    },
    close: () => {
      clearInterval(check);
      watched.clear();
    },
  };
}
