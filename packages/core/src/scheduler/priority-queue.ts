/**
 * @module Priority levels and queue policies of the dynamic batcher.
 * Triton: core/src/scheduler_utils.cc (PriorityQueue, PolicyQueue)
 */
import { Errors } from '../errors.js';
import type { ModelDynamicBatching, ModelQueuePolicy } from '../model-config/model-config.js';
import { DeadlineHeap } from './deadline-heap.js';

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
  /** Items of `queue` and `delayed` removed but not yet cut out (see `PriorityQueue.remove`). */
  removed: number;
}

/** What `expire` returns when nothing expired (callers only read it). */
const NONE: readonly never[] = Object.freeze([]);

const DEFAULT_POLICY: Required<ModelQueuePolicy> = {
  timeout_action: 'REJECT',
  default_timeout_microseconds: 0,
  allow_timeout_override: false,
  max_queue_size: 0,
};

/** Up to this many expired items of a level are cut out one by one; more, in one pass over the level. */
const CUT_ONE_BY_ONE = 8;

/**
 * Queues per priority level (1 is the highest), each with its queue policy. Iteration order is
 * level by level, and within a level arrival order, then the delayed requests.
 * Deadlines are kept in a heap beside the levels: enqueueing, finding the next deadline and
 * expiring cost O(log n) an item, never a scan of the queue (30,000 queued requests with a
 * timeout used to scan all of them on every enqueue: 17 s of blocked event loop).
 */
export class PriorityQueue<T extends QueueItem> {
  readonly #levels: Level<T>[];
  readonly #defaultLevel: number;
  #size = 0;
  /** Queued items with a deadline, and their level's index. */
  readonly #timed = new Map<T, number>();
  /**
   * Every queued item's level index, so `remove` goes straight to its level (it walked every
   * level, copying an array per level: 20,000 cancels with 10,000 levels blocked the event loop
   * 2.8 s; review).
   */
  readonly #levelOf = new Map<T, number>();
  /** Their deadlines, and stale entries of items that left (skipped when popped). */
  readonly #deadlines = new DeadlineHeap<T>();
  /** No level before this index holds an item (a hint, moved on lazily). */
  #first = 0;
  /** Bumped by every change of the queue: `#atCursor` is valid only for its version. */
  #version = 0;
  /** Where the last `at` found its item: `index` lies in `level`, whose first item is at `base`. */
  readonly #atCursor = { version: -1, index: 0, level: 0, base: 0 };
  /**
   * Items removed (cancelled) but still in their level's lists: cut out in one pass per level
   * before the lists are next read. Searched for and spliced out one by one, the cancels of
   * 100,000 queued requests (a client's connection closing) blocked the event loop for seconds.
   */
  readonly #removed = new Set<T>();
  /** The levels that hold removed items. */
  readonly #dirty = new Set<number>();

  constructor(config: Pick<ModelDynamicBatching, 'priority_levels' | 'default_priority_level' | 'default_queue_policy' | 'priority_queue_policy'> = {}) {
    const levels = Math.max(1, config.priority_levels ?? 0);
    const base = { ...DEFAULT_POLICY, ...withoutUndefined(config.default_queue_policy) };
    // By the level's number, as Triton reads the map's uint64 keys: a JSON config's "01" is level 1
    // (looked up as "1" it loaded and was never applied; review).
    const byLevel = new Map<number, ModelQueuePolicy>();
    for (const [k, v] of Object.entries(config.priority_queue_policy ?? {})) byLevel.set(Number(k), v);
    this.#levels = Array.from({ length: levels }, (_, i) => ({
      policy: { ...base, ...withoutUndefined(byLevel.get(i + 1)) },
      queue: [],
      delayed: [],
      removed: 0,
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
    if (this.#removed.size > 0 && this.#removed.has(item)) this.#cutRemoved();
    const idx = (priority >= 1 && priority <= this.#levels.length ? priority : this.#defaultLevel) - 1;
    const level = this.#levels[idx]!;
    const { max_queue_size, default_timeout_microseconds, allow_timeout_override } = level.policy;
    if (max_queue_size > 0 && level.queue.length + level.delayed.length - level.removed >= max_queue_size) {
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
    this.#version++;
    this.#levelOf.set(item, idx);
    this.#size++;
    if (idx < this.#first) this.#first = idx;
    if (item.deadlineNs > 0) {
      this.#timed.set(item, idx);
      this.#deadlines.push(item.deadlineNs, item);
    }
  }

  /** The first level that may hold an item (levels before it are empty); cuts out removed items first. */
  #firstLevel(): number {
    if (this.#removed.size > 0) this.#cutRemoved();
    const levels = this.#levels;
    while (this.#first < levels.length - 1 && levels[this.#first]!.queue.length === 0 && levels[this.#first]!.delayed.length === 0) this.#first++;
    return this.#first;
  }

  /** Items in service order. */
  *[Symbol.iterator](): IterableIterator<T> {
    for (let i = this.#firstLevel(); i < this.#levels.length; i++) {
      const l = this.#levels[i]!;
      yield* l.queue;
      yield* l.delayed;
    }
  }

  /** The first item in service order. */
  peek(): T | undefined {
    for (let i = this.#firstLevel(); i < this.#levels.length; i++) {
      const l = this.#levels[i]!;
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
    if (index >= this.#size) return undefined;
    // A scan asks for 0, 1, 2, ...: resume at the level the previous call ended in, so a scan
    // across many levels walks them once, not once an item (with the queue unchanged meanwhile).
    let i = this.#firstLevel();
    let base = 0;
    const c = this.#atCursor;
    if (c.version === this.#version && c.index <= index && c.level >= i) {
      i = c.level;
      base = c.base;
    }
    for (; i < this.#levels.length; i++) {
      const l = this.#levels[i]!;
      const n = l.queue.length + l.delayed.length;
      if (index - base < n) {
        c.version = this.#version;
        c.index = index;
        c.level = i;
        c.base = base;
        const k = index - base;
        return k < l.queue.length ? l.queue[k] : l.delayed[k - l.queue.length];
      }
      base += n;
    }
    return undefined;
  }

  /** Queued items that have a deadline (a timeout). */
  get timedCount(): number {
    return this.#timed.size;
  }

  /** Removes and returns the first `n` items in service order. */
  take(n: number): T[] {
    const first = this.#levels[this.#firstLevel()]!;
    let out: T[];
    if (first.queue.length >= n) {
      // The common case (one level, nothing delayed ahead): one splice, no copies.
      out = first.queue.splice(0, n);
    } else {
      out = [];
      for (let i = this.#first; i < this.#levels.length && out.length < n; i++) {
        const l = this.#levels[i]!;
        // Appended one by one: spread into push, a level of ~120k items (a queue emptied at
        // unload) threw RangeError (too many arguments).
        for (const item of l.queue.splice(0, n - out.length)) out.push(item);
        if (out.length >= n) break;
        for (const item of l.delayed.splice(0, n - out.length)) out.push(item);
      }
    }
    this.#size -= out.length;
    this.#version++;
    for (const item of out) this.#levelOf.delete(item);
    if (this.#timed.size > 0) for (const item of out) if (item.deadlineNs > 0) this.#timed.delete(item);
    this.#compact();
    return out;
  }

  /**
   * Removes one item wherever it is (e.g. a cancelled request), in O(1): it leaves its level's
   * lists when they are next read, with every other item removed meanwhile.
   */
  remove(item: T): boolean {
    const idx = this.#levelOf.get(item);
    if (idx === undefined) return false;
    this.#levels[idx]!.removed++;
    this.#removed.add(item);
    this.#dirty.add(idx);
    this.#version++;
    this.#levelOf.delete(item);
    this.#size--;
    if (this.#timed.delete(item)) this.#compact();
    // What the lists hold for removed items (a request and its inputs) is let go soon whether or
    // not the queue is read (while every instance is busy it is not): at once when nothing else
    // is queued, else once they outnumber the items queued (one pass for as many removals).
    if (this.#size === 0 || this.#removed.size > this.#size + 1024) this.#cutRemoved();
    return true;
  }

  /** Cuts the removed items out of their levels' lists: one pass over each level that holds some. */
  #cutRemoved(): void {
    const removed = this.#removed;
    const keep = (item: T): boolean => !removed.has(item);
    for (const idx of this.#dirty) {
      const l = this.#levels[idx]!;
      // A level of removed items only (a whole client's requests) is emptied without a pass.
      const all = l.removed === l.queue.length + l.delayed.length;
      l.queue = all ? [] : l.queue.filter(keep);
      l.delayed = all || l.delayed.length === 0 ? [] : l.delayed.filter(keep);
      l.removed = 0;
    }
    removed.clear();
    this.#dirty.clear();
    this.#version++;
  }

  /**
   * Applies the timeout actions at `nowNs`: expired REJECT items are removed and returned (in
   * queue order); expired DELAY items move behind the level's other requests, in queue order, and
   * lose their deadline.
   */
  expire(nowNs: number): readonly T[] {
    if (this.#timed.size === 0) {
      if (this.#deadlines.size > 0) this.#deadlines.reset([]);
      return NONE;
    }
    let byLevel: Map<number, Set<T>> | undefined;
    for (let top = this.#deadlines.peek(); top && top.at <= nowNs; top = this.#deadlines.peek()) {
      this.#deadlines.pop();
      const item = top.value;
      const idx = this.#timed.get(item);
      // A stale entry: the item left the queue, or was queued again with another deadline.
      if (idx === undefined || item.deadlineNs !== top.at) continue;
      this.#timed.delete(item);
      byLevel ??= new Map();
      let set = byLevel.get(idx);
      if (!set) byLevel.set(idx, (set = new Set()));
      set.add(item);
    }
    if (!byLevel) return NONE;
    this.#version++;
    let rejected: T[] | undefined;
    for (const [idx, expired] of [...byLevel].sort((a, b) => a[0] - b[0])) {
      const l = this.#levels[idx]!;
      let inOrder: T[];
      if (expired.size <= CUT_ONE_BY_ONE) {
        // Few, and usually at the head of the queue (the oldest expire first).
        const at = [...expired].map((item) => l.queue.indexOf(item)).filter((i) => i >= 0).sort((a, b) => a - b);
        inOrder = at.map((i) => l.queue[i]!);
        for (let k = at.length - 1; k >= 0; k--) l.queue.splice(at[k]!, 1);
      } else {
        inOrder = [];
        l.queue = l.queue.filter((item) => (expired.has(item) ? (inOrder.push(item), false) : true));
      }
      for (const item of inOrder) {
        if (l.policy.timeout_action === 'DELAY') {
          item.deadlineNs = 0;
          l.delayed.push(item);
        } else {
          (rejected ??= []).push(item);
          this.#levelOf.delete(item);
          this.#size--;
        }
      }
    }
    this.#compact();
    return rejected ?? NONE;
  }

  /** The earliest deadline of a queued item, or 0 for none. */
  nextDeadline(): number {
    if (this.#timed.size === 0) return 0;
    for (let top = this.#deadlines.peek(); top; top = this.#deadlines.peek()) {
      if (this.#timed.has(top.value) && top.value.deadlineNs === top.at) return top.at;
      this.#deadlines.pop();
    }
    return 0;
  }

  /** Rebuilds the deadlines when stale entries (items taken or removed) outnumber the live ones. */
  #compact(): void {
    if (this.#deadlines.size <= 2 * this.#timed.size + 1024) return;
    if (this.#timed.size === 0) {
      this.#deadlines.reset([]);
      return;
    }
    this.#deadlines.reset([...this.#timed.keys()].map((item) => ({ at: item.deadlineNs, value: item })));
  }
}

function withoutUndefined<T extends object>(o: T | undefined): Partial<T> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
