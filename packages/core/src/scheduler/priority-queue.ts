/**
 * @module Priority levels and queue policies of the dynamic batcher.
 * Triton: core/src/scheduler_utils.cc (PriorityQueue, PolicyQueue)
 */
import { Errors } from '../errors.js';
import type { ModelDynamicBatching, ModelQueuePolicy } from '../model-config/model-config.js';

/** A queued item as the policy queue sees it. */
export interface QueueItem {
  /** Absolute deadline in ns (Clock.nowNs), or 0 for none. Set by `enqueue`. */
  deadlineNs: number;
  /** When the request reached the server, if before it reached this queue (Clock.nowNs). */
  delayFromNs?: number;
}

interface Level<T> {
  policy: Required<ModelQueuePolicy>;
  /** Requests in arrival order. */
  queue: T[];
  /** DELAY requests whose timeout expired: served after every other request of the level. */
  delayed: T[];
}

/** What `expire` returns when nothing expired (callers only read it). */
const NONE: readonly never[] = Object.freeze([]);

const DEFAULT_POLICY: Required<ModelQueuePolicy> = {
  timeout_action: 'REJECT',
  default_timeout_microseconds: 0,
  allow_timeout_override: false,
  max_queue_size: 0,
};

/**
 * Queues per priority level (1 is the highest), each with its queue policy. Iteration order is
 * level by level, and within a level arrival order, then the delayed requests.
 */
export class PriorityQueue<T extends QueueItem> {
  readonly #levels: Level<T>[];
  readonly #defaultLevel: number;
  #size = 0;
  /** Queued items with a deadline: while there are none, `expire` and `nextDeadline` scan nothing. */
  #timed = 0;

  constructor(config: Pick<ModelDynamicBatching, 'priority_levels' | 'default_priority_level' | 'default_queue_policy' | 'priority_queue_policy'> = {}) {
    const levels = Math.max(1, config.priority_levels ?? 0);
    const base = { ...DEFAULT_POLICY, ...withoutUndefined(config.default_queue_policy) };
    this.#levels = Array.from({ length: levels }, (_, i) => ({
      policy: { ...base, ...withoutUndefined(config.priority_queue_policy?.[String(i + 1)]) },
      queue: [],
      delayed: [],
    }));
    this.#defaultLevel = (config.priority_levels ?? 0) > 0 ? Math.max(1, config.default_priority_level ?? 1) : 1;
  }

  /** Items queued. */
  get size(): number {
    return this.#size;
  }

  /**
   * Queues an item at `priority` (0 or out of range: the default level) and sets its deadline
   * from the level's timeout, or the request's `timeoutUs` when the policy allows a shorter one.
   * @throws UNAVAILABLE "Exceeds maximum queue size" when the level is full.
   */
  enqueue(item: T, nowNs: number, priority = 0, timeoutUs = 0): void {
    const idx = (priority >= 1 && priority <= this.#levels.length ? priority : this.#defaultLevel) - 1;
    const level = this.#levels[idx]!;
    const { max_queue_size, default_timeout_microseconds, allow_timeout_override } = level.policy;
    if (max_queue_size > 0 && level.queue.length + level.delayed.length >= max_queue_size) {
      throw Errors.unavailable('Exceeds maximum queue size');
    }
    let timeout = default_timeout_microseconds;
    // Triton applies a request timeout only when overriding is allowed and it is shorter than the
    // level's (with no level timeout, the request's is ignored): scheduler_utils.cc PolicyQueue::Enqueue.
    if (allow_timeout_override && timeoutUs > 0 && timeoutUs < timeout) timeout = timeoutUs;
    // From when the request reached the server: in the cluster, when the gateway queued it
    // (delayFromNs), so time spent in Redis counts against the timeout as it would in one process.
    item.deadlineNs = timeout > 0 ? (item.delayFromNs ?? nowNs) + timeout * 1000 : 0;
    level.queue.push(item);
    this.#size++;
    if (item.deadlineNs > 0) this.#timed++;
  }

  /** Items in service order. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (const l of this.#levels) {
      yield* l.queue;
      yield* l.delayed;
    }
  }

  /** The first item in service order. */
  peek(): T | undefined {
    for (const l of this.#levels) {
      if (l.queue.length) return l.queue[0];
      if (l.delayed.length) return l.delayed[0];
    }
    return undefined;
  }

  /**
   * The item at `index` in service order (0: the first), or undefined. For scans of the head of
   * the queue, which the iterator (a generator) makes slower.
   */
  at(index: number): T | undefined {
    for (const l of this.#levels) {
      if (index < l.queue.length) return l.queue[index];
      index -= l.queue.length;
      if (index < l.delayed.length) return l.delayed[index];
      index -= l.delayed.length;
    }
    return undefined;
  }

  /** Queued items that have a deadline (a timeout). */
  get timedCount(): number {
    return this.#timed;
  }

  /** Removes and returns the first `n` items in service order. */
  take(n: number): T[] {
    const first = this.#levels[0]!;
    if (first.queue.length >= n) {
      // The common case (one level, nothing delayed ahead): one splice, no copies.
      const out = first.queue.splice(0, n);
      this.#size -= n;
      if (this.#timed > 0) for (const item of out) if (item.deadlineNs > 0) this.#timed--;
      return out;
    }
    const out: T[] = [];
    for (const l of this.#levels) {
      if (out.length >= n) break;
      out.push(...l.queue.splice(0, n - out.length));
      if (out.length >= n) break;
      out.push(...l.delayed.splice(0, n - out.length));
    }
    this.#size -= out.length;
    if (this.#timed > 0) for (const item of out) if (item.deadlineNs > 0) this.#timed--;
    return out;
  }

  /** Removes one item wherever it is (e.g. a cancelled request). */
  remove(item: T): boolean {
    for (const l of this.#levels) {
      for (const list of [l.queue, l.delayed]) {
        const i = list.indexOf(item);
        if (i >= 0) {
          list.splice(i, 1);
          this.#size--;
          if (item.deadlineNs > 0) this.#timed--;
          return true;
        }
      }
    }
    return false;
  }

  /**
   * Applies the timeout actions at `nowNs`: expired REJECT items are removed and returned; expired
   * DELAY items move behind the level's other requests and lose their deadline.
   */
  expire(nowNs: number): readonly T[] {
    if (this.#timed === 0) return NONE;
    let rejected: T[] | undefined;
    for (const l of this.#levels) {
      if (l.queue.length === 0) continue;
      const keep: T[] = [];
      for (const item of l.queue) {
        if (item.deadlineNs > 0 && item.deadlineNs <= nowNs) {
          this.#timed--;
          if (l.policy.timeout_action === 'DELAY') {
            item.deadlineNs = 0;
            l.delayed.push(item);
          } else {
            (rejected ??= []).push(item);
            this.#size--;
          }
        } else {
          keep.push(item);
        }
      }
      l.queue = keep;
    }
    return rejected ?? NONE;
  }

  /** The earliest deadline of a queued item, or 0 for none. */
  nextDeadline(): number {
    if (this.#timed === 0) return 0;
    let min = 0;
    for (const l of this.#levels) {
      for (const item of l.queue) if (item.deadlineNs > 0 && (min === 0 || item.deadlineNs < min)) min = item.deadlineNs;
    }
    return min;
  }
}

function withoutUndefined<T extends object>(o: T | undefined): Partial<T> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
