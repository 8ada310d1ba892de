/**
 * @module gRPC answers a client stops taking: HTTP/2 flow control lets a client hold the server's
 * answer by sending no WINDOW_UPDATE (or by not reading its socket), and node:http2 keeps the unsent
 * bytes for good: 50 unary calls for a 4 MB answer, never read, held 210 MB until the client left
 * (review). A stream with bytes unsent that has sent none for the stall limit is reset
 * (RST_STREAM ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED to gRPC clients), the gRPC counterpart of
 * HTTP's responseStallTimeoutMs (http/listen.ts). Bytes already handed to a socket that does not
 * drain stay with the connection, so its client is sent a PING too: a connection that does not
 * answer it within the stall limit is closed, its socket included (as is the socket of any session
 * destroyed that long ago and still open).
 */
import type { EventEmitter } from 'node:events';
import { constants, type Http2Session, type ServerHttp2Stream } from 'node:http2';
import type { Socket } from 'node:net';
import type { Logger } from '@triode/core';

/** Default of GrpcServerOptions.responseStallTimeoutMs: HTTP's (DEFAULT_HTTP_SERVER_OPTIONS). */
export const DEFAULT_GRPC_RESPONSE_STALL_TIMEOUT_MS = 60_000;

/** Watches the streams of a server for answers that stop going out. */
export interface ResponseStallGuard {
  /** Keeps the sockets of an HTTP/2 server's connections, to close one whose client reads nothing. */
  watchServer(h2: EventEmitter): void;
  /** Watches `stream` until it closes (its writes are made in pieces: sendInPieces). */
  watch(stream: ServerHttp2Stream): void;
  /**
   * Watches a stream whose writer writes through `endInPieces` (the ModelInfer fast path), until
   * `untrack`: nothing of the stream is wrapped (own `_write`/`_writev` closures on every stream
   * cost a `simple` call a few % of its throughput; bench/RESULTS.md).
   */
  track(stream: ServerHttp2Stream): SentBytes;
  untrack(stream: ServerHttp2Stream): void;
  /** True for a stream this guard reset (not a reset by its client). */
  resetHere(stream: ServerHttp2Stream): boolean;
  /** Stops watching (the server is closing). */
  close(): void;
}

/**
 * The most bytes one write hands node:http2 at a time. A write completes (and its bytes leave the
 * stream's writableLength) only once the socket has taken all of it, so a 4 MB answer read slowly
 * but steadily showed no progress until its last byte went: it is written in pieces, one after
 * the other, and each piece gone is progress. A client must take 256 KiB per stall limit.
 */
export const WRITE_PIECE_BYTES = 256 * 1024;

type WriteCallback = (error?: Error | null) => void;

/** A watched stream: the bytes it has sent, as of the last check, and since when that has not grown. */
export interface SentBytes {
  /** Bytes of its writes the socket has taken (counted by sendInPieces). */
  sent: number;
  seen: number;
  since: number;
}

/**
 * Makes `stream` hand its writes to node:http2 in pieces of at most WRITE_PIECE_BYTES, each once
 * the one before has gone, and count in `w.sent` the bytes gone. Node's Writable calls `_write`
 * (one chunk) or `_writev` (chunks buffered meanwhile) and waits for their callback before the
 * next: the callback is held until the last piece has gone, so the Writable sees one write as
 * before (fast path and grpc-js alike: grpc-js writes each message with write(), then end()).
 */
function sendInPieces(stream: ServerHttp2Stream, w: SentBytes): void {
  const write = stream._write;
  const writev = stream._writev;
  /** Writes `chunks` in order, each piece after the one before; `done` once all went (or one failed). */
  const pieces = (self: ServerHttp2Stream, chunks: { chunk: Buffer; encoding: BufferEncoding }[], done: WriteCallback): void => {
    let i = 0;
    let at = 0;
    const next = (err?: Error | null): void => {
      if (err) {
        done(err);
        return;
      }
      while (i < chunks.length && at >= chunks[i]!.chunk.byteLength) {
        i++;
        at = 0;
      }
      if (i >= chunks.length) {
        done();
        return;
      }
      const { chunk, encoding } = chunks[i]!;
      const piece = chunk.subarray(at, at + WRITE_PIECE_BYTES);
      at += piece.byteLength;
      write.call(self, piece, encoding, (e?: Error | null) => {
        if (!e) w.sent += piece.byteLength;
        next(e);
      });
    };
    next();
  };
  stream._write = function (this: ServerHttp2Stream, chunk: unknown, encoding: BufferEncoding, callback: WriteCallback): void {
    if (!Buffer.isBuffer(chunk) || chunk.byteLength <= WRITE_PIECE_BYTES) {
      write.call(this, chunk, encoding, (e?: Error | null) => {
        if (!e) w.sent += Buffer.isBuffer(chunk) ? chunk.byteLength : 1;
        callback(e);
      });
      return;
    }
    pieces(this, [{ chunk, encoding }], callback);
  };
  if (!writev) return;
  stream._writev = function (this: ServerHttp2Stream, chunks: { chunk: unknown; encoding: BufferEncoding }[], callback: WriteCallback): void {
    const buffers = chunks.every((c) => Buffer.isBuffer(c.chunk)) ? chunks as { chunk: Buffer; encoding: BufferEncoding }[] : undefined;
    const total = buffers?.reduce((n, c) => n + c.chunk.byteLength, 0) ?? 0;
    if (!buffers || total <= WRITE_PIECE_BYTES) {
      writev.call(this, chunks, (e?: Error | null) => {
        if (!e) w.sent += Math.max(1, total);
        callback(e);
      });
      return;
    }
    pieces(this, buffers, callback);
  };
}

/**
 * Ends `stream` with `frame`, written a piece of at most WRITE_PIECE_BYTES at a time, each once the
 * one before has gone (counted in `w.sent`): as sendInPieces, with the stream's public write().
 */
export function endInPieces(stream: ServerHttp2Stream, w: SentBytes, frame: Buffer): void {
  if (frame.byteLength <= WRITE_PIECE_BYTES) {
    stream.end(frame);
    return;
  }
  let at = 0;
  const next = (err?: Error | null): void => {
    if (err || stream.destroyed) return;
    if (at >= frame.byteLength) {
      stream.end();
      return;
    }
    const piece = frame.subarray(at, at + WRITE_PIECE_BYTES);
    at += piece.byteLength;
    stream.write(piece, (e?: Error | null) => {
      if (!e) w.sent += piece.byteLength;
      next(e);
    });
  };
  next();
}

/**
 * The socket itself, set on each socket a server accepts (mark) and read through its session's
 * `socket`, a Proxy that passes reads on to the socket but refuses destroy(): session.destroy()
 * leaves a socket whose write cannot finish open, with all it holds (measured: 210 MB, for good).
 * Sessions were once paired with sockets by their client's address and port, which every
 * connection to a unix socket shares: the wrong connection was closed (review).
 */
const OWN_SOCKET = Symbol('triode.ownSocket');

type Marked = Socket & { [OWN_SOCKET]?: Socket };

function mark(socket: Socket): void {
  (socket as Marked)[OWN_SOCKET] = socket;
}

/**
 * The socket `session` reads, as marked when its server accepted it (undefined: not marked; the
 * server's sockets are marked once `watchServer` has been called on it).
 */
export function socketOf(session: Http2Session): Socket | undefined {
  try {
    return (session.socket as Marked | undefined)?.[OWN_SOCKET];
  } catch {
    // a session whose socket is gone already
    return undefined;
  }
}

/**
 * A guard that resets a stream whose unsent bytes (its Writable's: node:http2 holds a write until
 * the socket has taken it) have sent nothing for `stallMs`, and closes a connection that then does
 * not answer a PING within `stallMs`.
 */
export function responseStallGuard(stallMs: number, logger: Logger): ResponseStallGuard {
  const watched = new Map<ServerHttp2Stream, SentBytes>();
  const reset = new WeakSet<ServerHttp2Stream>();
  /** Connections sent a PING after a stall, not yet answered. */
  const probing = new WeakSet<Http2Session>();
  const peerOf = (session: Http2Session | undefined): string =>
    `${session?.socket?.remoteAddress ?? '?'}:${session?.socket?.remotePort ?? '?'}`;

  /** A PING behind the bytes the connection holds: no answer within stallMs, and it is closed. */
  const probe = (session: Http2Session): void => {
    if (session.destroyed || probing.has(session)) return;
    probing.add(session);
    const socket = sessions.get(session)?.socket;
    const timer = setTimeout(() => {
      if (socket?.destroyed ?? session.destroyed) return;
      logger.warning(`gRPC client ${peerOf(session)} answered no PING within ${stallMs} ms of a stalled answer: connection closed`);
      try {
        session.destroy(new Error('the client takes no data'), constants.NGHTTP2_ENHANCE_YOUR_CALM);
      } catch {
        // already going away
      }
      socket?.destroy();
    }, stallMs);
    timer.unref();
    const answered = (): void => {
      clearTimeout(timer);
      probing.delete(session);
    };
    try {
      // false: too many PINGs unanswered already (the callback is then not called).
      if (!session.ping(answered)) answered();
    } catch {
      answered();
    }
  };

  const stalled = (stream: ServerHttp2Stream): void => {
    const session = stream.session;
    logger.verbose(1, `gRPC client ${peerOf(session)} took none of an answer for ${stallMs} ms: stream reset (ENHANCE_YOUR_CALM)`);
    reset.add(stream);
    try {
      stream.close(constants.NGHTTP2_ENHANCE_YOUR_CALM);
    } catch {
      // closed meanwhile
    }
    if (session) probe(session);
  };

  /**
   * Every session, until its 'close' (which node:http2 emits only once its socket is gone), with
   * its socket and since when it has been destroyed: a session destroyed by anyone (grpc-js after
   * --grpc-max-connection-age or a failed keepalive, the rapid-reset defence) leaves its socket
   * open while a write to it cannot finish, and its streams are gone, so no stall is seen.
   */
  const sessions = new Map<Http2Session, { socket: Socket | undefined; peer: string; since: number }>();

  /** Destroys the socket of each session destroyed for stallMs whose socket is still open. */
  const reap = (now: number): void => {
    for (const [session, s] of sessions) {
      if (!session.destroyed) continue;
      if (s.since === 0) {
        s.since = now;
        continue;
      }
      if (now - s.since < stallMs) continue;
      sessions.delete(session);
      const socket = s.socket;
      if (!socket || socket.destroyed) continue;
      logger.warning(`gRPC client ${s.peer} took none of what its closed connection still had to send for ${stallMs} ms: socket closed`);
      socket.destroy();
    }
  };

  const check = setInterval(() => {
    const now = Date.now();
    reap(now);
    for (const [stream, w] of watched) {
      // Nothing unsent, or bytes sent since the last check: progress.
      if (stream.writableLength === 0 || w.sent !== w.seen) {
        w.seen = w.sent;
        w.since = now;
      } else if (now - w.since >= stallMs) {
        watched.delete(stream);
        stalled(stream);
      }
    }
  }, Math.max(10, Math.min(1000, Math.floor(stallMs / 4))));
  check.unref();

  return {
    watchServer: (h2) => {
      // Ahead of node:http2's own listener, which makes the connection's session and emits
      // 'session' at once: the socket is marked before its session is seen. TLS: the TLS socket
      // (the one the session reads); plain: the TCP socket (or a unix socket's).
      h2.prependListener('connection', mark);
      h2.prependListener('secureConnection', mark);
      h2.on('session', (session: Http2Session) => {
        sessions.set(session, { socket: socketOf(session), peer: peerOf(session), since: 0 });
        session.once('close', () => sessions.delete(session));
      });
    },
    watch: (stream) => {
      const w: SentBytes = { sent: 0, seen: 0, since: Date.now() };
      sendInPieces(stream, w);
      watched.set(stream, w);
      stream.once('close', () => watched.delete(stream));
    },
    track: (stream) => {
      const w: SentBytes = { sent: 0, seen: 0, since: Date.now() };
      watched.set(stream, w);
      return w;
    },
    untrack: (stream) => {
      watched.delete(stream);
    },
    resetHere: (stream) => reset.has(stream),
    close: () => {
      clearInterval(check);
      watched.clear();
      sessions.clear();
    },
  };
}
