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
  /** Batches each instance may hold at once (see BackendModelInstance.pipelineDepth). @default 1 */
  pipelineDepth?: number;
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
  /** Batches handed to each instance and not finished yet. */
  readonly #outstanding: number[];
  readonly #depth: number;
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
    this.#outstanding = new Array<number>(instanceCount).fill(0);
    this.#depth = Math.max(1, options.pipelineDepth ?? 1);
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

  /** The least busy instance with room for another batch (an idle one first), or -1. */
  #pickInstance(): number {
    let best = -1;
    for (let i = 0; i < this.#outstanding.length; i++) {
      const o = this.#outstanding[i]!;
      if (o < this.#depth && (best < 0 || o < this.#outstanding[best]!)) best = i;
      if (o === 0) break;
    }
    return best;
  }

  #schedule(): void {
    while (this.#queue.length > 0 && !this.#stopped) {
      const instance = this.#pickInstance();
      if (instance < 0) return;
      // A batch for an instance that is still busy is formed only when it is full or preferred:
      // waiting lets it grow while the instance works.
      const n = this.#batchLength(this.#outstanding[instance]! > 0);
      if (n === 0) return; // waiting for the delay (a timer is armed) or for the instance
      const batch = this.#queue.splice(0, n);
      this.#outstanding[instance]!++;
      this.#inflight += batch.length;
      this.#runner(instance, batch)
        .catch(() => undefined) // the runner answers its requests itself
        .finally(() => {
          this.#inflight -= batch.length;
          this.#outstanding[instance]!--;
          this.#schedule();
          this.#notifyIdle();
        });
    }
  }

  /**
   * How many queued requests form the next batch, or 0 to keep waiting. `ahead`: the batch would
   * wait behind another on a busy instance, so only a full or preferred batch is worth forming.
   */
  #batchLength(ahead: boolean): number {
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
    if (ahead) return ended ? n : 0;
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
