/**
 * @module Graceful shutdown of the HTTP frontend: requests that arrived before shutdown began are
 * finished; inference requests that arrive after it are refused with 503.
 * Triton: server/src/main.cc (the exit timeout loop)
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { MiddlewareHandler } from 'hono';
import { settleWithin } from '@triode/core';

/** Counts the HTTP requests in flight and refuses new inference once shutting down. */
export class HttpLifecycle {
  #inflight = 0;
  #stopping = false;
  #waiters: (() => void)[] = [];
  readonly #bySocket = new WeakMap<Socket, Set<() => void>>();

  /** Requests received and not yet answered. */
  get inflight(): number {
    return this.#inflight;
  }

  get stopping(): boolean {
    return this.#stopping;
  }

  /** The Hono middleware that does the counting. */
  middleware(): MiddlewareHandler {
    return async (c, next) => {
      if (this.#stopping && c.req.method === 'POST') {
        return c.json({ error: 'Server is stopping, no new inference requests are accepted' }, 503);
      }
      this.begin();
      let counted = false;
      try {
        await next();
        // A response that streams (generate_stream's events) is in flight until it is written:
        // counted out when it closes, so shutdown waits for its last event, not just its start.
        const env = c.env as { incoming?: IncomingMessage; outgoing?: ServerResponse } | undefined;
        const out = env?.outgoing;
        const socket = env?.incoming?.socket;
        if (out && !out.writableFinished && !out.destroyed && !socket?.destroyed) {
          let done = false;
          const finish = () => {
            if (done) return;
            done = true;
            out.off('close', finish);
            if (socket) this.#bySocket.get(socket)?.delete(finish);
            this.end();
          };
          out.once('close', finish);
          // The socket's close too: a pipelined response still waiting behind another is never
          // closed itself when its client goes away.
          if (socket) this.#onSocketClose(socket).add(finish);
          counted = true;
        }
      } finally {
        if (!counted) this.end();
      }
    };
  }

  /**
   * What runs when `socket` closes: one listener a socket, however many requests it pipelines
   * (one each would pass the emitter's listener limit).
   */
  #onSocketClose(socket: Socket): Set<() => void> {
    let set = this.#bySocket.get(socket);
    if (!set) {
      const mine = new Set<() => void>();
      set = mine;
      this.#bySocket.set(socket, mine);
      socket.once('close', () => {
        this.#bySocket.delete(socket);
        for (const f of [...mine]) f();
      });
    }
    return set;
  }

  /** Counts a request in (the infer fast path, which does not run the middleware). */
  begin(): void {
    this.#inflight++;
  }

  /** Counts a request out; the last one out wakes a waiting shutdown. */
  end(): void {
    this.#inflight--;
    if (this.#inflight === 0 && this.#waiters.length) for (const w of this.#waiters.splice(0)) w();
  }

  /** Stops taking new inference requests; resolves when those in flight are answered or after `timeoutMs`. */
  async shutdown(timeoutMs: number): Promise<number> {
    this.#stopping = true;
    if (this.#inflight > 0) {
      await settleWithin(new Promise<void>((r) => this.#waiters.push(r)), timeoutMs);
    }
    return this.#inflight;
  }
}
