import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { PriorityQueue } from './priority-queue.js';

interface I { id: number; deadlineNs: number }
const item = (id: number): I => ({ id, deadlineNs: 0 });
const ids = (q: PriorityQueue<I>) => [...q].map((i) => i.id);

describe('PriorityQueue', () => {
  it('serves level 1 before level 2, arrival order within a level, and the default level for 0 or out of range', () => {
    const q = new PriorityQueue<I>({ priority_levels: 3, default_priority_level: 2 });
    q.enqueue(item(1), 0, 3);
    q.enqueue(item(2), 0, 0);
    q.enqueue(item(3), 0, 1);
    q.enqueue(item(4), 0, 9);
    q.enqueue(item(5), 0, 1);
    expect(ids(q)).toEqual([3, 5, 2, 4, 1]);
    expect(q.take(3).map((i) => i.id)).toEqual([3, 5, 2]);
    expect(q.size).toBe(2);
  });

  it('refuses a request when its level is full with "Exceeds maximum queue size"', () => {
    const q = new PriorityQueue<I>({ priority_levels: 2, default_priority_level: 1, priority_queue_policy: { '2': { max_queue_size: 1 } } });
    q.enqueue(item(1), 0, 2);
    expect(() => q.enqueue(item(2), 0, 2)).toThrow('Exceeds maximum queue size');
    q.enqueue(item(3), 0, 1);
    expect(q.size).toBe(2);
  });

  it('attack: a policy keyed "02" (a JSON config) applies to level 2, as Triton reads the key as a number (review: it was never applied)', () => {
    const q = new PriorityQueue<I>({ priority_levels: 2, default_priority_level: 1, priority_queue_policy: { '02': { max_queue_size: 1 } } });
    q.enqueue(item(1), 0, 2);
    expect(() => q.enqueue(item(2), 0, 2)).toThrow('Exceeds maximum queue size');
  });

  it('REJECT removes timed-out requests; DELAY moves them behind the level', () => {
    const q = new PriorityQueue<I>({ default_queue_policy: { default_timeout_microseconds: 100, timeout_action: 'DELAY' } });
    q.enqueue(item(1), 0);
    q.enqueue(item(2), 50_000);
    expect(q.nextDeadline()).toBe(100_000);
    expect(q.expire(100_000)).toEqual([]);
    expect(ids(q)).toEqual([2, 1]);
    const r = new PriorityQueue<I>({ default_queue_policy: { default_timeout_microseconds: 100 } });
    r.enqueue(item(1), 0);
    r.enqueue(item(2), 50_000);
    expect(r.expire(100_000).map((i) => i.id)).toEqual([1]);
    expect(ids(r)).toEqual([2]);
  });

  it('forgets the deadlines of requests taken, removed, rejected or delayed', () => {
    const q = new PriorityQueue<I>({ priority_levels: 2, default_priority_level: 1, priority_queue_policy: { '1': { default_timeout_microseconds: 100 }, '2': { default_timeout_microseconds: 300, timeout_action: 'DELAY' } } });
    const [a, b, c, d] = [item(1), item(2), item(3), item(4)];
    q.enqueue(a, 0, 1);
    q.enqueue(b, 10_000, 1);
    q.enqueue(c, 0, 2);
    q.enqueue(d, 0, 2);
    expect(q.nextDeadline()).toBe(100_000);
    expect(q.take(1)).toEqual([a]);
    expect(q.nextDeadline()).toBe(110_000);
    expect(q.remove(b)).toBe(true);
    expect(q.nextDeadline()).toBe(300_000);
    expect(q.expire(300_000)).toEqual([]);
    expect(ids(q)).toEqual([3, 4]);
    expect(q.nextDeadline()).toBe(0);
    q.enqueue(item(5), 0, 1);
    expect(q.expire(100_000).map((i) => i.id)).toEqual([5]);
    expect(q.nextDeadline()).toBe(0);
    expect(q.size).toBe(2);
  });

  it('lets a request shorten its timeout only when the policy allows an override', () => {
    const allow = new PriorityQueue<I>({ default_queue_policy: { default_timeout_microseconds: 1000, allow_timeout_override: true } });
    const a = item(1);
    allow.enqueue(a, 0, 0, 10);
    expect(a.deadlineNs).toBe(10_000);
    const b = item(2);
    allow.enqueue(b, 0, 0, 5000);
    expect(b.deadlineNs).toBe(1_000_000);
    const deny = new PriorityQueue<I>({ default_queue_policy: { default_timeout_microseconds: 1000 } });
    const c = item(3);
    deny.enqueue(c, 0, 0, 10);
    expect(c.deadlineNs).toBe(1_000_000);
    // With no level timeout, a request's timeout is ignored (Triton's PolicyQueue::Enqueue).
    const none = new PriorityQueue<I>({ default_queue_policy: { allow_timeout_override: true } });
    const d = item(4);
    none.enqueue(d, 0, 0, 10);
    expect(d.deadlineNs).toBe(0);
  });

  it('counts a timeout from when the request reached the server (a cluster gateway), not from when it reached this queue', () => {
    const q = new PriorityQueue<I & { delayFromNs?: number }>({ default_queue_policy: { default_timeout_microseconds: 1000 } });
    const queuedAtGateway = { ...item(1), delayFromNs: 400_000 };
    q.enqueue(queuedAtGateway, 900_000);
    expect(queuedAtGateway.deadlineNs).toBe(1_400_000);
    const local = item(2);
    q.enqueue(local, 900_000);
    expect(local.deadlineNs).toBe(1_900_000);
  });
});

describe('PriorityQueue with many requests', () => {
  /** An item that counts how often its deadline is read (what a scan of the queue does). */
  const counted = (id: number, reads: { n: number }): I => {
    let d = 0;
    return { id, get deadlineNs() { reads.n++; return d; }, set deadlineNs(v: number) { d = v; } };
  };

  it('takes a whole queue of 300,000 over two levels at once (an unload empties it; spread into push threw RangeError)', () => {
    const q = new PriorityQueue<I>({ priority_levels: 2, default_priority_level: 2 });
    for (let i = 0; i < 300_000; i++) q.enqueue(item(i), 0, 2);
    q.enqueue(item(-1), 0, 1);
    const all = q.take(q.size);
    expect(all).toHaveLength(300_001);
    expect(all[0]!.id).toBe(-1);
    expect(all.at(-1)!.id).toBe(299_999);
    expect(q.size).toBe(0);
  });

  it('finds and expires deadlines without scanning the queue: 10,000 queued, 2,000 checks read a handful of deadlines', () => {
    const reads = { n: 0 };
    const q = new PriorityQueue<I>({ default_queue_policy: { default_timeout_microseconds: 60_000_000 } });
    for (let i = 0; i < 10_000; i++) q.enqueue(counted(i, reads), i);
    reads.n = 0;
    // What the batcher does on every enqueue and every finished batch while nothing has expired.
    for (let k = 0; k < 1000; k++) {
      expect(q.expire(k)).toEqual([]);
      expect(q.nextDeadline()).toBe(60_000_000_000);
    }
    // Before, each call read all 10,000: 20 million reads.
    expect(reads.n).toBeLessThan(10_000);
  });

  it('expires in queue order however deadlines interleave, many at once or few, and forgets the rest as they are taken', () => {
    const q = new PriorityQueue<I>({ default_queue_policy: { default_timeout_microseconds: 1000, allow_timeout_override: true } });
    // Odd ids ask for a shorter timeout (override): they expire first, out of arrival order.
    for (let i = 0; i < 40; i++) q.enqueue(item(i), i * 1000, 0, i % 2 ? 10 : 0);
    // A few (cut out one by one), then many (one pass over the level).
    expect(q.expire(20_000).map((x) => x.id)).toEqual([1, 3, 5, 7, 9]);
    expect(q.expire(100_000).map((x) => x.id)).toEqual(Array.from({ length: 15 }, (_, k) => 11 + 2 * k));
    expect(q.size).toBe(20);
    expect(q.take(5).map((x) => x.id)).toEqual([0, 2, 4, 6, 8]);
    expect(q.nextDeadline()).toBe(1_010_000);
    expect(q.expire(1_016_000).map((x) => x.id)).toEqual([10, 12, 14, 16]);
    expect(q.nextDeadline()).toBe(1_018_000);
    expect(ids(q)).toEqual([18, 20, 22, 24, 26, 28, 30, 32, 34, 36, 38]);
  });

  it('serves from a default level deep among 10,000 levels', () => {
    const q = new PriorityQueue<I>({ priority_levels: 10_000, default_priority_level: 5000 });
    for (let i = 0; i < 5; i++) q.enqueue(item(i), 0);
    q.enqueue(item(99), 0, 9000);
    expect([q.peek()?.id, q.at(4)?.id, q.at(5)?.id, q.at(6)]).toEqual([0, 4, 99, undefined]);
    expect(q.take(2).map((x) => x.id)).toEqual([0, 1]);
    q.enqueue(item(7), 0, 1);
    expect(ids(q)).toEqual([7, 2, 3, 4, 99]);
  });

  it('remove and at find items across levels, in the queue and among the delayed', () => {
    const q = new PriorityQueue<I>({ priority_levels: 4, default_priority_level: 2, priority_queue_policy: { '3': { default_timeout_microseconds: 1, timeout_action: 'DELAY' } } });
    const items = [1, 2, 3, 4, 5, 6].map(item);
    q.enqueue(items[0]!, 0, 4);
    q.enqueue(items[1]!, 0, 3);
    q.enqueue(items[2]!, 0, 1);
    q.enqueue(items[3]!, 0, 3);
    q.expire(10_000); // 2 and 4 are delayed at level 3
    q.enqueue(items[4]!, 0, 3);
    q.enqueue(items[5]!, 0, 4);
    expect(ids(q)).toEqual([3, 5, 2, 4, 1, 6]);
    expect([0, 1, 2, 3, 4, 5, 6].map((k) => q.at(k)?.id)).toEqual([3, 5, 2, 4, 1, 6, undefined]);
    expect(q.remove(items[3]!)).toBe(true);
    expect(q.remove(items[3]!)).toBe(false);
    expect(q.remove(item(9))).toBe(false);
    expect([0, 1, 2, 3, 4].map((k) => q.at(k)?.id)).toEqual([3, 5, 2, 1, 6]);
    expect(q.remove(items[2]!)).toBe(true);
    expect(q.at(0)?.id).toBe(5);
    expect(q.take(2).map((i) => i.id)).toEqual([5, 2]);
    expect(q.remove(items[4]!)).toBe(false); // taken
    expect([0, 1, 2].map((k) => q.at(k)?.id)).toEqual([1, 6, undefined]);
    expect(q.size).toBe(2);
  });

  it('attack: remove goes straight to the item\'s level and a scan with at walks the levels once (review: 20,000 cancels with 10,000 levels blocked 2.8 s)', () => {
    const levels = 2000;
    const q = new PriorityQueue<I>({ priority_levels: levels, default_priority_level: 1 });
    const items: I[] = [];
    for (let p = 1; p <= levels; p += 2) {
      const it = item(p);
      items.push(it);
      q.enqueue(it, 0, p);
    }
    // Counted, not timed: the lists searched for the item (it searched every level's two lists).
    let reads = 0;
    const target = items[items.length - 1]!;
    const indexOf = Array.prototype.indexOf;
    Array.prototype.indexOf = function (this: unknown[], ...args: Parameters<typeof indexOf>) {
      if (args[0] === target) reads++;
      return indexOf.apply(this, args);
    };
    try {
      expect(q.remove(target)).toBe(true);
    } finally {
      Array.prototype.indexOf = indexOf;
    }
    expect(reads).toBeLessThanOrEqual(2);
    // A scan of the whole queue: each `at` resumes where the last one ended.
    const levelsRead = new Set<number>();
    let scanned = 0;
    for (let k = 0, r = q.at(0); r; r = q.at(++k)) {
      levelsRead.add(r.id);
      scanned++;
    }
    expect(scanned).toBe(items.length - 1);
    expect(levelsRead.size).toBe(items.length - 1);
  });

  it('attack: the cancels of 5,000 of 20,000 queued requests (a client going away) touch the queue once, not once each (each searched and spliced the level: 100,000 blocked the event loop for seconds)', () => {
    const q = new PriorityQueue<I>({ default_queue_policy: { default_timeout_microseconds: 1_000_000, timeout_action: 'DELAY' } });
    const items = Array.from({ length: 20_000 }, (_, i) => item(i));
    for (const it of items) q.enqueue(it, 0);
    // Counted, not timed: the elements of the arrays searched, spliced or filtered meanwhile.
    let touched = 0;
    const proto = Array.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
    const originals = Object.fromEntries(['indexOf', 'lastIndexOf', 'splice', 'filter'].map((k) => [k, proto[k]!]));
    for (const [k, f] of Object.entries(originals)) {
      proto[k] = function (this: unknown[], ...args: unknown[]) {
        touched += this.length;
        return f.apply(this, args);
      };
    }
    let removed = 0;
    try {
      for (let i = items.length - 1; i >= 15_000; i--) if (q.remove(items[i]!)) removed++;
      expect(q.remove(items[19_999]!)).toBe(false);
      expect(q.take(1).map((i) => i.id)).toEqual([0]);
    } finally {
      for (const [k, f] of Object.entries(originals)) proto[k] = f;
    }
    expect(removed).toBe(5_000);
    expect(touched).toBeLessThanOrEqual(4 * items.length);
    expect(q.size).toBe(14_999);
    expect(q.timedCount).toBe(14_999);
    // What is left is served in order, its deadlines kept; removed items never come back.
    expect(q.at(0)!.id).toBe(1);
    expect(q.at(14_998)!.id).toBe(14_999);
    expect(q.at(14_999)).toBeUndefined();
    q.expire(1_000_000_000);
    expect(q.timedCount).toBe(0);
    expect(q.size).toBe(14_999);
    expect(q.take(20_000).map((i) => i.id)).toEqual(Array.from({ length: 14_999 }, (_, i) => i + 1));
  });

  it('a removed item no longer counts against max_queue_size, and a removed item queued again is served once', () => {
    const q = new PriorityQueue<I>({ default_queue_policy: { max_queue_size: 2 } });
    const [a, b, c] = [item(1), item(2), item(3)];
    q.enqueue(a, 0);
    q.enqueue(b, 0);
    expect(() => q.enqueue(c, 0)).toThrow('Exceeds maximum queue size');
    expect(q.remove(a)).toBe(true);
    q.enqueue(c, 0);
    expect(q.remove(b)).toBe(true);
    q.enqueue(b, 0);
    expect(ids(q)).toEqual([3, 2]);
  });

  it('lets go of removed items without being read (while every instance is busy nothing reads it): at once when it is left empty, else once they outnumber the rest by 1,024', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const q = new PriorityQueue<I>();
    const queue = (n: number): WeakRef<I>[] => Array.from({ length: n }, (_, i) => {
      const it = item(i);
      q.enqueue(it, 0);
      return new WeakRef(it);
    });
    // After the current job: a WeakRef's target, once deref'd, is kept alive until the job ends.
    const held = async (refs: WeakRef<I>[]): Promise<number> => {
      await new Promise((r) => setImmediate(r));
      gc();
      return refs.filter((r) => r.deref() !== undefined).length;
    };
    // All of them removed: the queue holds none.
    const first = queue(3);
    for (const r of first) q.remove(r.deref()!);
    expect(await held(first)).toBe(0);
    // One stays: of 3,000 removed after it, it holds at most 1 + 1,024 (it held all of them).
    const [keep] = queue(1);
    const rest = queue(3_000);
    for (const r of rest) q.remove(r.deref()!);
    expect(await held(rest)).toBeLessThanOrEqual(1 + 1_024);
    expect(q.size).toBe(1);
    expect(q.peek()).toBe(keep!.deref());
  });
});
