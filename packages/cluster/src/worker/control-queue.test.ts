import { describe, expect, it } from 'vitest';
import type { TriodeError } from '@triode/core';
import { ControlQueue, type ControlJob } from './control-queue.js';

/** A job whose apply waits until `release()`; what happened to it is pushed onto `log`. */
function job(log: string[], name: string, model: string, options: { action?: 'load' | 'unload'; scope?: string[]; same?: string } = {}) {
  let release!: () => void;
  let fail!: (err: Error) => void;
  const gate = new Promise<void>((r, j) => { release = r; fail = j; });
  let applied = 0;
  const j: ControlJob = {
    model,
    action: options.action ?? 'load',
    scope: () => options.scope ?? [model],
    same: options.same ?? '',
    apply: async () => {
      applied++;
      log.push(`start ${name}`);
      await gate;
    },
    answer: (error?: TriodeError) => { log.push(error ? `${name}: ${error.code} ${error.message}` : `${name}: ok`); },
  };
  return { job: j, release, fail, applied: () => applied };
}

/** Lets every promise callback queued so far run. */
const settle = () => new Promise((r) => setImmediate(r));

describe('ControlQueue', () => {
  it('runs commands that share no model at once: one that never ends holds up only those of its models (review: a stuck load held every other model\'s commands)', async () => {
    const log: string[] = [];
    const q = new ControlQueue();
    const stuck = job(log, 'A', 'a');
    const other = job(log, 'B', 'b', { action: 'unload' });
    q.add(stuck.job);
    q.add(other.job);
    await settle();
    expect(log).toEqual(['start A', 'start B']);
    other.release();
    await settle();
    expect(log).toEqual(['start A', 'start B', 'B: ok']);
    expect(q.size).toBe(1);
    stuck.release();
    await settle();
    expect(q.size).toBe(0);
  });

  it('runs commands that share a model in the order taken, scopes included (an ensemble\'s load and its step\'s unload)', async () => {
    const log: string[] = [];
    const q = new ControlQueue();
    const a = job(log, 'load a', 'a');
    const e = job(log, 'load e', 'e', { scope: ['e', 'a'] });
    const ue = job(log, 'unload e', 'e', { action: 'unload' });
    const ua = job(log, 'unload a', 'a', { action: 'unload', scope: ['a', 'e'] });
    for (const j of [a, e, ue, ua]) q.add(j.job);
    await settle();
    expect(log).toEqual(['start load a']);
    for (const j of [a, e, ue, ua]) {
      j.release();
      await settle();
    }
    expect(log).toEqual(['start load a', 'load a: ok', 'start load e', 'load e: ok', 'start unload e', 'unload e: ok', 'start unload a', 'unload a: ok']);
  });

  it('a failed command answers with its error and lets the next one run', async () => {
    const log: string[] = [];
    const q = new ControlQueue();
    const a = job(log, 'A', 'a');
    const b = job(log, 'B', 'a', { action: 'unload' });
    q.add(a.job);
    q.add(b.job);
    a.fail(new Error('boom'));
    await settle();
    b.release();
    await settle();
    expect(log).toEqual(['start A', 'A: INTERNAL boom', 'start B', 'B: ok']);
  });

  it('a command that asks what the last one waiting for the same models asks joins it: applied once, each answered (a flood of the same load holds one)', async () => {
    const log: string[] = [];
    const q = new ControlQueue();
    const running = job(log, 'R', 'a', { same: 'x' });
    q.add(running.job);
    const copies = Array.from({ length: 100 }, (_, k) => job(log, `L${k}`, 'a', { same: 'x' }));
    for (const c of copies) q.add(c.job);
    // One running, one waiting; the other 99 joined the waiting one.
    expect(q.size).toBe(101);
    running.release();
    await settle();
    copies[0]!.release();
    await settle();
    expect(copies.map((c) => c.applied())).toEqual([1, ...Array<number>(99).fill(0)]);
    expect(log.filter((l) => l.endsWith(': ok'))).toHaveLength(101);
    expect(q.size).toBe(0);
  });

  it('does not join a command that asks something else, nor one with a command of a shared model after it (that would reorder them)', async () => {
    const log: string[] = [];
    const q = new ControlQueue();
    const r = job(log, 'R', 'a');
    const l1 = job(log, 'L1', 'a', { same: 'c1' });
    const l2 = job(log, 'L2', 'a', { same: 'c2' });
    const e = job(log, 'E', 'e', { scope: ['e', 'a'] });
    const l3 = job(log, 'L3', 'a', { same: 'c2' });
    for (const j of [r, l1, l2, e, l3]) q.add(j.job);
    for (const j of [r, l1, l2, e, l3]) {
      j.release();
      await settle();
    }
    expect(log.filter((l) => l.startsWith('start'))).toEqual(['start R', 'start L1', 'start L2', 'start E', 'start L3']);
  });

  it('cancelLoads answers the waiting loads of a model at once and lets what they held up run; a running one and other models\' are left', async () => {
    const log: string[] = [];
    const q = new ControlQueue();
    const running = job(log, 'R', 'a');
    const waiting = job(log, 'W', 'a', { scope: ['a', 'b'] });
    const ensemble = job(log, 'E', 'e', { scope: ['e', 'a'] });
    const b = job(log, 'B', 'b');
    for (const j of [running, waiting, ensemble, b]) q.add(j.job);
    await settle();
    expect(log).toEqual(['start R']);
    q.cancelLoads('a');
    await settle();
    expect(log).toEqual(['start R', 'W: UNAVAILABLE failed to load \'a\': the load was cancelled by an unload of the model', 'start B']);
    expect(running.applied() + ensemble.applied()).toBe(1);
    running.release();
    await settle();
    expect(log).toContain('start E');
  });

  it('attack: holds at most `max` commands (joined ones count); past it a command is answered UNAVAILABLE at once, and room comes back as commands end', async () => {
    const log: string[] = [];
    const q = new ControlQueue(3);
    const jobs = [job(log, 'A', 'a'), job(log, 'B', 'b'), job(log, 'B2', 'b')];
    for (const j of jobs) q.add(j.job);
    q.add(job(log, 'C', 'c').job);
    q.add(job(log, 'B3', 'b').job);
    expect(log).toEqual(['start A', 'start B',
      'C: UNAVAILABLE failed to load \'c\': 3 load and unload commands are under way on this worker, try again when they end',
      'B3: UNAVAILABLE failed to load \'b\': 3 load and unload commands are under way on this worker, try again when they end']);
    jobs[0]!.release();
    await settle();
    q.add(job(log, 'D', 'd').job);
    expect(log.at(-1)).toBe('start D');
    expect(() => new ControlQueue(0)).toThrow(RangeError);
  });

  it('attack: a refusal repeats a junk model name escaped and cut (a control message\'s name is checked only when applied)', () => {
    const log: string[] = [];
    const q = new ControlQueue(1);
    q.add(job(log, 'A', 'a').job);
    q.add(job(log, 'J', `x\n${'y'.repeat(1000)}`).job);
    const refusal = log.at(-1)!;
    expect(refusal).toMatch(/^J: UNAVAILABLE failed to load 'x\\u000ay+\.\.\.': /);
    expect(refusal.length).toBeLessThan(500);
  });
});
