/** @module Small pieces the schedulers share: one re-armable timer, and idle waiters. */
import type { Clock } from '../clock.js';

/** A timer that fires `fn` at an absolute Clock time; re-arming replaces the previous time. */
export class WakeTimer {
  readonly #clock: Clock;
  readonly #fn: () => void;
  #handle: unknown = undefined;
  #at = 0;

  constructor(clock: Clock, fn: () => void) {
    this.#clock = clock;
    this.#fn = fn;
  }

  /** Fires at `atNs` (Clock.nowNs time); 0 disarms. */
  set(atNs: number): void {
    if (atNs === 0) {
      this.clear();
      return;
    }
    if (this.#handle !== undefined && this.#at === atNs) return;
    this.clear();
    this.#at = atNs;
    this.#handle = this.#clock.setTimeout(() => {
      this.#handle = undefined;
      this.#at = 0;
      this.#fn();
    }, Math.max(0, (atNs - this.#clock.nowNs()) / 1e6));
  }

  clear(): void {
    if (this.#handle !== undefined) this.#clock.clearTimeout(this.#handle);
    this.#handle = undefined;
    this.#at = 0;
  }
}

/** Promises that resolve the next time a scheduler has nothing queued or running. */
export class IdleWaiters {
  #waiters: (() => void)[] = [];

  /** Resolves at once when `idle`, else at the next `notify` with idle true. */
  wait(idle: boolean): Promise<void> {
    if (idle) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  notify(idle: boolean): void {
    if (!idle || this.#waiters.length === 0) return;
    for (const w of this.#waiters.splice(0)) w();
  }
}
