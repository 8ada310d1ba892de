/**
 * @module Dynamic batching, and the default scheduler as its batching-off case: priority levels,
 * queue policies and timeouts included.
 * Triton: core/src/dynamic_batch_scheduler.cc (Enqueue, GetDynamicBatch)
 */
import { systemClock, type Clock } from '../clock.js';
import { Errors, type TriodeError } from '../errors.js';
import type { ModelDynamicBatching } from '../model-config/model-config.js';
import { PriorityQueue } from './priority-queue.js';
import { IdleWaiters, WakeTimer } from './wake-timer.js';
import type { BatchRunner, InstanceGate, RejectHandler, Schedulable, Scheduler } from './scheduler.js';

/** Options of a DynamicBatchScheduler. */
export interface DynamicBatchSchedulerOptions<T> {
  /** Largest batch in inferences; 1 turns batching off (Triton's default scheduler). @default 1 */
  maxBatchSize?: number;
  /** Batch sizes to execute as soon as the queue can form them. @default [] */
  preferredBatchSizes?: number[];
  /** How long the oldest request may wait for a fuller batch (µs). @default 0 */
  maxQueueDelayUs?: number;
  /** Priority levels and queue policies, as in `dynamic_batching { }`. @default one unbounded level */
  queuePolicy?: Pick<ModelDynamicBatching, 'priority_levels' | 'default_priority_level' | 'default_queue_policy' | 'priority_queue_policy'>;
  /** Called for requests that time out in the queue (REJECT). @default dropping them */
  onReject?: RejectHandler<T>;
  /** Batches each instance may hold at once (see BackendModelInstance.pipelineDepth). @default 1 */
  pipelineDepth?: number;
  /** @default systemClock */
  clock?: Clock;
  /**
   * Rate limiter seats, one per instance (`--rate-limit=execution_count`): an idle instance takes
   * a batch only once its seat is allocated, one batch at a time (`pipelineDepth` is then 1), and
   * cannot be resized. @default none (instances take batches as soon as they are free)
   */
  gates?: readonly InstanceGate[];
}

/**
 * Queues requests by priority and hands batches to free instances. A batch is a run of the queue
 * (in service order) whose requests share their non-batch dims and whose batch sizes sum to at
 * most `maxBatchSize`; it is sent at once when it reaches a preferred size or the max, otherwise
 * when the oldest request has waited `maxQueueDelayUs` (immediately when that is 0). A request
 * whose queue timeout expires is answered at that moment (REJECT) or moved back (DELAY), even
 * while every instance is busy.
 */
export class DynamicBatchScheduler<T extends Schedulable> implements Scheduler<T> {
  readonly #runner: BatchRunner<T>;
  readonly #maxBatch: number;
  /** A set: a config may list a size many times (200,000 copies made each batch decision scan them all, review). */
  readonly #preferred: ReadonlySet<number>;
  readonly #delayNs: number;
  readonly #clock: Clock;
  readonly #onReject: RejectHandler<T>;
  /** Batches handed to each instance and not finished yet. */
  readonly #outstanding: number[];
  readonly #depth: number;
  readonly #queue: PriorityQueue<T>;
  #inflight = 0;
  readonly #timer: WakeTimer;
  /** When the batch being held back for the delay must go (0: none held). */
  #batchDeadline = 0;
  readonly #idle = new IdleWaiters();
  #stopped = false;
  /** stopAccepting was called: new requests are refused, what it holds runs. */
  #refusing = false;
  /** Instances that get new batches: 0..active-1 (an instance count change moves it). */
  #active: number;
  /** Per instance: callbacks waiting for it to have nothing outstanding. */
  readonly #drainWaiters = new Map<number, (() => void)[]>();
  readonly #gates: readonly InstanceGate[] | undefined;
  /** Rate limited: instances waiting for their resources, and how many. */
  readonly #isStaged: boolean[];
  #staged = 0;

  constructor(instanceCount: number, runner: BatchRunner<T>, options: DynamicBatchSchedulerOptions<T> = {}) {
    if (!Number.isInteger(instanceCount) || instanceCount < 1) throw new RangeError('instanceCount must be an integer >= 1');
    this.#runner = runner;
    this.#maxBatch = Math.max(1, options.maxBatchSize ?? 1);
    this.#preferred = new Set((options.preferredBatchSizes ?? []).filter((p) => p <= this.#maxBatch));
    this.#delayNs = (options.maxQueueDelayUs ?? 0) * 1000;
    this.#clock = options.clock ?? systemClock;
    this.#onReject = options.onReject ?? (() => undefined);
    this.#outstanding = new Array<number>(instanceCount).fill(0);
    this.#active = instanceCount;
    this.#gates = options.gates;
    if (this.#gates && this.#gates.length !== instanceCount) throw new RangeError('options.gates must hold one gate per instance');
    this.#isStaged = new Array<boolean>(this.#gates ? instanceCount : 0).fill(false);
    this.#depth = this.#gates ? 1 : Math.max(1, options.pipelineDepth ?? 1);
    this.#queue = new PriorityQueue<T>(options.queuePolicy ?? {});
    this.#timer = new WakeTimer(this.#clock, () => this.#schedule());
  }

  enqueue(request: T): void {
    if (this.#stopped || this.#refusing) throw Errors.schedulerStopping();
    const now = this.#clock.nowNs();
    this.#queue.enqueue(request, now, request.priority ?? 0, request.timeoutUs ?? 0);
    this.#schedule(now);
  }

  cancel(request: T): boolean {
    const removed = this.#queue.remove(request);
    if (removed) this.#notifyIdle();
    return removed;
  }

  pendingCount(): number {
    return this.#queue.size;
  }

  inflightInferenceCount(): number {
    return this.#inflight;
  }

  idle(): Promise<void> {
    return this.#idle.wait(this.#queue.size === 0 && this.#inflight === 0);
  }

  stopAccepting(): void {
    this.#refusing = true;
  }

  quiesced(): Promise<void> {
    return this.idle();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timer.clear();
  }

  rejectAll(error: TriodeError): void {
    for (const r of this.#queue.take(this.#queue.size)) this.#onReject(r, error);
    this.#notifyIdle();
  }

  /**
   * Changes how many instances get work: new ones (indices up to n-1) get batches at once;
   * instances n and above get no new batch and finish what they hold (see `drained`).
   */
  resize(instanceCount: number): void {
    if (this.#gates) throw new Error('a rate-limited scheduler cannot be resized');
    if (!Number.isInteger(instanceCount) || instanceCount < 1) throw new RangeError('instanceCount must be an integer >= 1');
    while (this.#outstanding.length < instanceCount) this.#outstanding.push(0);
    this.#active = instanceCount;
    this.#schedule();
  }

  /** Resolves once instance `i` has no batch outstanding. */
  drained(instance: number): Promise<void> {
    if ((this.#outstanding[instance] ?? 0) === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.#drainWaiters.get(instance) ?? [];
      list.push(resolve);
      this.#drainWaiters.set(instance, list);
    });
  }


  /** Rejects or delays what has timed out. */
  #expire(now: number): void {
    for (const r of this.#queue.expire(now)) this.#onReject(r, Errors.requestTimeout());
  }

  /** The least busy instance with room for another batch (an idle one first), or -1. */
  #pickInstance(): number {
    let best = -1;
    for (let i = 0; i < this.#active; i++) {
      const o = this.#outstanding[i]!;
      if (o < this.#depth && (best < 0 || o < this.#outstanding[best]!)) best = i;
      if (o === 0) break;
    }
    return best;
  }

  /** Expires, then hands out what the free instances can take; `now`: the caller's reading of the clock. */
  #schedule(now?: number): void {
    if (this.#stopped) return;
    if (this.#queue.timedCount > 0) this.#expire(now ?? this.#clock.nowNs());
    this.#batchDeadline = 0;
    if (this.#gates) {
      this.#stageIdle(this.#gates);
    } else {
      while (this.#queue.size > 0) {
        const instance = this.#pickInstance();
        if (instance < 0) break;
        // A batch for an instance that is still busy is formed only when it is full or preferred:
        // waiting lets it grow while the instance works.
        const n = this.#batchLength(this.#outstanding[instance]! > 0);
        if (n === 0) break; // waiting for the delay, or for the instance
        this.#dispatch(instance, this.#queue.take(n));
      }
    }
    this.#armTimer();
    this.#notifyIdle();
  }

  #dispatch(instance: number, batch: T[]): void {
    this.#outstanding[instance]!++;
    this.#inflight += batch.length;
    const done = (): void => {
      this.#inflight -= batch.length;
      if (--this.#outstanding[instance]! === 0 && this.#drainWaiters.has(instance)) {
        for (const f of this.#drainWaiters.get(instance)!) f();
        this.#drainWaiters.delete(instance);
      }
      if (this.#gates) this.#release(this.#gates[instance]!, instance);
      this.#schedule();
      this.#notifyIdle();
    };
    // Either way (the runner answers its requests itself): one reaction, not catch + finally's three.
    this.#runner(instance, batch).then(done, done);
  }

  /**
   * Rate limited: each idle instance asks for its resources while the queue holds a batch it could
   * take (requests stay queued, and the batch keeps growing, until the resources are granted).
   */
  #stageIdle(gates: readonly InstanceGate[]): void {
    for (let i = 0; i < this.#active && this.#queue.size > this.#staged; i++) {
      if (this.#outstanding[i]! > 0 || this.#isStaged[i]) continue;
      if (this.#batchLength(false) === 0) break;
      this.#isStaged[i] = true;
      this.#staged++;
      gates[i]!.stage(() => this.#allocated(i));
    }
  }

  /** Rate limited: instance `i` got its resources; it takes the batch the queue forms now. */
  #allocated(i: number): void {
    this.#isStaged[i] = false;
    this.#staged--;
    const n = this.#stopped ? 0 : this.#batchLength(false);
    if (n === 0) {
      // The requests it was staged for were cancelled or timed out meanwhile.
      this.#gates![i]!.release(false);
    } else {
      this.#dispatch(i, this.#queue.take(n));
    }
    this.#armTimer();
  }

  /** Rate limited: instance `i` finished a batch; it stays staged if there is more for it. */
  #release(gate: InstanceGate, i: number): void {
    const more = !this.#stopped && i < this.#active && this.#queue.size > this.#staged && this.#batchLength(false) > 0;
    if (!more) {
      gate.release(true);
      return;
    }
    this.#isStaged[i] = true;
    this.#staged++;
    gate.release(true, () => this.#allocated(i));
  }

  /** One timer for whichever comes first: a queue timeout or the end of the batching delay. */
  #armTimer(): void {
    const queue = this.#queue.nextDeadline();
    const batch = this.#batchDeadline;
    this.#timer.set(queue > 0 && batch > 0 ? Math.min(queue, batch) : queue > 0 ? queue : Math.max(batch, 0));
  }

  /**
   * How many queued requests (in service order) form the next batch, or 0 to keep waiting.
   * `ahead`: the batch would wait behind another on a busy instance, so only a full or preferred
   * batch is worth forming now, and none holding a request with a queue timeout: once handed to
   * the instance a request has left the queue, and its timeout would no longer be applied (review:
   * REJECT at 100 ms answered 200 after 474 ms). Such a batch stays queued until an instance is
   * free, as in Triton.
   */
  #batchLength(ahead: boolean): number {
    if (this.#maxBatch === 1) return ahead && this.#queue.at(0)!.deadlineNs > 0 ? 0 : 1;
    let first: T | undefined;
    let size = 0;
    let n = 0;
    let preferredAt = 0;
    let ended = false;
    /** How many requests up to and including the first with a queue deadline (0: none). */
    let timedAt = 0;
    // By index, not with the queue's iterator: this runs for every request.
    for (let i = 0, r = this.#queue.at(0); r; r = this.#queue.at(++i)) {
      if (!first) {
        first = r;
      } else if (r.shapeKey !== first.shapeKey || size + r.batchSize > this.#maxBatch) {
        // A request that does not fit, or has other shapes, ends the batch.
        ended = true;
        break;
      }
      size += r.batchSize;
      n++;
      if (timedAt === 0 && r.deadlineNs > 0) timedAt = n;
      if (this.#preferred.has(size)) preferredAt = n;
      if (size >= this.#maxBatch) {
        ended = true;
        break;
      }
    }
    if (!first) return 0;
    if (ahead) {
      const len = preferredAt > 0 ? preferredAt : ended ? n : 0;
      return timedAt > 0 && timedAt <= len ? 0 : len;
    }
    // The largest preferred size the queue can form goes at once.
    if (preferredAt > 0) return preferredAt;
    if (ended || this.#delayNs === 0) return n;
    const deadline = (first.delayFromNs ?? first.enqueueNs) + this.#delayNs;
    if (this.#clock.nowNs() >= deadline) return n;
    this.#batchDeadline = deadline;
    return 0;
  }

  #notifyIdle(): void {
    this.#idle.notify(this.#queue.size === 0 && this.#inflight === 0);
  }
}
