/**
 * @module Graceful shutdown of the HTTP frontend: requests that arrived before shutdown began are
 * finished; inference requests that arrive after it are refused with 503.
 * Triton: server/src/main.cc (the exit timeout loop)
 */
import type { ServerResponse } from 'node:http';
import type { MiddlewareHandler } from 'hono';
import { settleWithin } from '@triode/core';

/** Counts the HTTP requests in flight and refuses new inference once shutting down. */
export class HttpLifecycle {
  #inflight = 0;
  #stopping = false;
  #waiters: (() => void)[] = [];

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
        const out = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
        if (out && !out.writableFinished && !out.destroyed) {
          out.once('close', () => this.end());
          counted = true;
        }
      } finally {
        if (!counted) this.end();
      }
    };
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
