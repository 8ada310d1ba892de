/**
 * @module A warning that may repeat for as long as a fault or an attack lasts (a flood of
 * connections, fetches that keep failing): logged at most once every 10 s, with how many were left
 * out since, so a flood cannot fill the log.
 */
import type { Logger } from './logger.js';

/** How often one warning is logged, at most. */
const WARN_EVERY_MS = 10_000;

export class RateLimitedWarning {
  readonly #logger: Logger | undefined;
  readonly #everyMs: number;
  #at = Number.NEGATIVE_INFINITY;
  #since = 0;

  constructor(logger: Logger | undefined, everyMs = WARN_EVERY_MS) {
    this.#logger = logger;
    this.#everyMs = everyMs;
  }

  /**
   * Logs `message` unless one was logged less than everyMs ago (then it is only counted); the count
   * of those left out goes after it, before `tail`.
   */
  warn(message: string, tail = ''): void {
    const now = Date.now();
    if (now - this.#at < this.#everyMs) {
      this.#since++;
      return;
    }
    const more = this.#since > 0 ? ` (and ${this.#since} more since the last warning)` : '';
    this.#at = now;
    this.#since = 0;
    this.#logger?.warning(message + more + tail);
  }
}
