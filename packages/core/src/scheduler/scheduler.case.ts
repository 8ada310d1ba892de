/**
 * @module The conformance suite every scheduler passes (run from each scheduler's test file).
 * Not a test file itself: `runSchedulerCases` registers the cases.
 */
import { describe, expect, it } from 'vitest';
import type { Clock } from '../clock.js';
import { Errors } from '../errors.js';
import type { BatchRunner, RejectHandler, Schedulable, Scheduler } from './scheduler.js';
import { manualClock } from './test-clock.js';

/** How a scheduler under test is built, and how its requests are made. */
export interface SchedulerCase<T extends Schedulable> {
  name: string;
  create(instances: number, runner: BatchRunner<T>, clock: Clock, onReject: RejectHandler<T>): Scheduler<T>;
  /** Request number `i` (batch size 1); requests of the suite may be run in any batches. */
  request(i: number, clock: Clock): T;
}

const flush = async () => { for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r)); };

/** Registers the shared scheduler cases. */
export function runSchedulerCases<T extends Schedulable>(c: SchedulerCase<T>): void {
  describe(`${c.name} (scheduler conformance)`, () => {
    it('runs every request exactly once and then reports idle', async () => {
      const clock = manualClock();
      const ran: T[] = [];
      const s = c.create(2, async (_i, batch) => { ran.push(...batch); }, clock, () => undefined);
      const reqs = Array.from({ length: 20 }, (_, i) => c.request(i, clock));
      for (const r of reqs) s.enqueue(r);
      for (let k = 0; k < 50 && ran.length < reqs.length; k++) {
        clock.advance(1_000_000);
        await flush();
      }
      await s.idle();
      expect(new Set(ran).size).toBe(20);
      expect(ran).toHaveLength(20);
      expect(s.pendingCount()).toBe(0);
      expect(s.inflightInferenceCount()).toBe(0);
    });

    it('never runs two batches on one instance at once', async () => {
      const clock = manualClock();
      const busy = new Set<number>();
      let overlap = false;
      const release: (() => void)[] = [];
      const s = c.create(2, (i, _b) => {
        if (busy.has(i)) overlap = true;
        busy.add(i);
        return new Promise<void>((r) => release.push(() => { busy.delete(i); r(); }));
      }, clock, () => undefined);
      for (let i = 0; i < 10; i++) s.enqueue(c.request(i, clock));
      for (let k = 0; k < 30; k++) {
        clock.advance(1_000_000);
        await flush();
        release.shift()?.();
        await flush();
      }
      expect(overlap).toBe(false);
    });

    it('rejectAll answers every queued request with the error; the running ones finish', async () => {
      const clock = manualClock();
      const rejected: T[] = [];
      let release!: () => void;
      const ran: T[] = [];
      const s = c.create(1, (_i, batch) => { ran.push(...batch); return new Promise<void>((r) => { release = r; }); }, clock, (r) => rejected.push(r));
      const reqs = Array.from({ length: 4 }, (_, i) => c.request(i, clock));
      s.enqueue(reqs[0]!);
      for (let k = 0; k < 5 && ran.length === 0; k++) {
        clock.advance(1_000_000);
        await flush();
      }
      for (const r of reqs.slice(1)) s.enqueue(r);
      await s.stop();
      s.rejectAll(Errors.unavailable('gone'));
      expect(new Set([...ran, ...rejected]).size).toBe(4);
      expect(rejected.length).toBe(4 - ran.length);
      expect(s.pendingCount()).toBe(0);
      release();
      await s.idle();
    });

    it('refuses new requests after stop()', async () => {
      const clock = manualClock();
      const s = c.create(1, async () => undefined, clock, () => undefined);
      await s.stop();
      expect(() => s.enqueue(c.request(0, clock))).toThrow('Server is stopping');
    });
  });
}
