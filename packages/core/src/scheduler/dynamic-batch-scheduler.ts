/**
 * @module Dynamic batching, and the default scheduler as its batching-off case.
 * Triton: core/src/dynamic_batch_scheduler.cc (GetDynamicBatch)
 */
import { systemClock, type Clock } from '../clock.js';
import type { BatchRunner, Schedulable, Scheduler } from './scheduler.js';

/** Options of a DynamicBatchScheduler. */
export interface DynamicBatchSchedulerOptions {
  /** Largest batch in inferences; 1 turns batching off (Triton's default scheduler). @default 1 */
  maxBatchSize?: number;
  /** Batch sizes to execute as soon as the queue can form them. @default [] */
  preferredBatchSizes?: number[];
  /** How long the oldest request may wait for a fuller batch (µs). @default 0 */
  maxQueueDelayUs?: number;
  /** @default systemClock */
  clock?: Clock;
}

/**
 * Queues requests and hands batches to free instances. A batch is a prefix of the queue whose
 * requests share their non-batch dims and whose batch sizes sum to at most `maxBatchSize`; it is
 * sent at once when it reaches a preferred size or the max, otherwise when the oldest request has
 * waited `maxQueueDelayUs` (immediately when that is 0).
 */
export class DynamicBatchScheduler<T extends Schedulable> implements Scheduler<T> {
  readonly #runner: BatchRunner<T>;
  readonly #maxBatch: number;
  readonly #preferred: number[];
  readonly #delayNs: number;
  readonly #clock: Clock;
  readonly #free: number[];
  #queue: T[] = [];
  #inflight = 0;
  #timer: unknown = undefined;
  #timerDeadline = 0;
  #idleWaiters: (() => void)[] = [];
  #stopped = false;

  constructor(instanceCount: number, runner: BatchRunner<T>, options: DynamicBatchSchedulerOptions = {}) {
    if (!Number.isInteger(instanceCount) || instanceCount < 1) throw new RangeError('instanceCount must be an integer >= 1');
    this.#runner = runner;
    this.#maxBatch = Math.max(1, options.maxBatchSize ?? 1);
    this.#preferred = [...(options.preferredBatchSizes ?? [])].filter((p) => p <= this.#maxBatch).sort((a, b) => b - a);
    this.#delayNs = (options.maxQueueDelayUs ?? 0) * 1000;
    this.#clock = options.clock ?? systemClock;
    this.#free = Array.from({ length: instanceCount }, (_, i) => i);
  }

  enqueue(request: T): void {
    this.#queue.push(request);
    this.#schedule();
  }

  pendingCount(): number {
    return this.#queue.length;
  }

  inflightInferenceCount(): number {
    return this.#inflight;
  }

  idle(): Promise<void> {
    if (this.#queue.length === 0 && this.#inflight === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idleWaiters.push(resolve));
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clearTimer();
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #schedule(): void {
    while (this.#free.length > 0 && this.#queue.length > 0 && !this.#stopped) {
      const n = this.#batchLength();
      if (n === 0) return; // waiting for the delay; a timer is armed
      const batch = this.#queue.splice(0, n);
      const instance = this.#free.shift()!;
      this.#inflight += batch.length;
      this.#runner(instance, batch)
        .catch(() => undefined) // the runner answers its requests itself
        .finally(() => {
          this.#inflight -= batch.length;
          this.#free.push(instance);
          this.#free.sort((a, b) => a - b);
          this.#schedule();
          this.#notifyIdle();
        });
    }
  }

  /** How many queued requests form the next batch, or 0 to keep waiting. */
  #batchLength(): number {
    const q = this.#queue;
    const first = q[0]!;
    if (this.#maxBatch === 1) return 1;
    let size = first.batchSize;
    let n = 1;
    let preferredAt = this.#preferred.includes(size) ? n : 0;
    while (n < q.length) {
      const r = q[n]!;
      if (r.shapeKey !== first.shapeKey || size + r.batchSize > this.#maxBatch) break;
      size += r.batchSize;
      n++;
      if (this.#preferred.includes(size)) preferredAt = n;
    }
    // The queue can form a full batch (a request that does not fit, or has other shapes, ends it).
    const ended = n < q.length || size >= this.#maxBatch;
    if (preferredAt > 0) return preferredAt;
    if (ended || this.#delayNs === 0) return n;
    const deadline = first.enqueueNs + this.#delayNs;
    const now = this.#clock.nowNs();
    if (now >= deadline) return n;
    if (this.#timer === undefined || this.#timerDeadline !== deadline) {
      this.#clearTimer();
      this.#timerDeadline = deadline;
      this.#timer = this.#clock.setTimeout(() => {
        this.#timer = undefined;
        this.#schedule();
      }, (deadline - now) / 1e6);
    }
    return 0;
  }

  #notifyIdle(): void {
    if (this.#queue.length === 0 && this.#inflight === 0 && this.#idleWaiters.length > 0) {
      const w = this.#idleWaiters;
      this.#idleWaiters = [];
      for (const f of w) f();
    }
  }
}
