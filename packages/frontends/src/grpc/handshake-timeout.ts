/**
 * @module gRPC connections whose client never completes the HTTP/2 handshake. gRPC C++ (Triton's
 * gRPC server) closes a connection that has not received the client's HTTP/2 SETTINGS within
 * GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS (120 s) of being accepted ("Did not receive HTTP/2 settings
 * before handshake timeout"); node:http2 has no such limit, and a connection that sent nothing was
 * kept for good: ~20,000 of them (the file descriptor limit) and the server accepted no one (review).
 * Triton: grpc core/ext/transport/chttp2/server/chttp2_server.cc (HandshakingState::OnTimeout)
 */
import type { Http2Session } from 'node:http2';
import type { Logger } from '@triode/core';
import { socketOf } from './response-stall.js';

/** Default of GrpcServerOptions.handshakeTimeoutMs: gRPC C++'s GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS. */
export const DEFAULT_GRPC_HANDSHAKE_TIMEOUT_MS = 120_000;

/** Watches new sessions until their client's first SETTINGS frame. */
export interface HandshakeGuard {
  /** Watches `session` from now on (call it at the server's 'session'). */
  watch(session: Http2Session): void;
  /** Stops watching (the server is closing). */
  close(): void;
}

/**
 * A guard that closes a session, and its socket, whose client has sent no SETTINGS frame (the
 * HTTP/2 connection preface ends with one) within `timeoutMs` of the session's start. On TLS the
 * session starts once the TLS handshake is done, which Node's TLS server bounds at 120 s itself.
 * One sweep over the sessions still waiting, not a timer each.
 */
export function handshakeGuard(timeoutMs: number, logger: Logger): HandshakeGuard {
  /** Sessions whose client has not sent its SETTINGS yet, with when they started. */
  const waiting = new Map<Http2Session, number>();
  const check = setInterval(() => {
    const now = Date.now();
    for (const [session, since] of waiting) {
      if (session.destroyed) {
        waiting.delete(session);
        continue;
      }
      if (now - since < timeoutMs) continue;
      waiting.delete(session);
      // Marked by the response-stall guard's watchServer: node:http2's session.socket refuses destroy().
      const socket = socketOf(session);
      logger.verbose(1, `gRPC client ${socket?.remoteAddress ?? '?'}:${socket?.remotePort ?? '?'} did not send its HTTP/2 settings within ${timeoutMs} ms: connection closed`);
      try {
        session.destroy();
      } catch {
        // already going away
      }
      socket?.destroy();
    }
  }, Math.max(10, Math.min(1000, Math.floor(timeoutMs / 4))));
  check.unref();
  return {
    watch: (session) => {
      waiting.set(session, Date.now());
      // node:http2 calls into JS for a SETTINGS frame only while a 'remoteSettings' listener is
      // on: `once` leaves none for the frames after. Data the socket held when the session started
      // is handed to nghttp2 on the next tick (node#35981), after this listener is on.
      session.once('remoteSettings', () => waiting.delete(session));
    },
    close: () => {
      clearInterval(check);
      waiting.clear();
    },
  };
}
