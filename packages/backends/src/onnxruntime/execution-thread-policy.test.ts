import { describe, expect, it } from 'vitest';
import { ExecutionThreadPolicy, executionThreadSettings, type InstanceLoad } from './execution-thread-policy.js';

const US = 1000;
/** A lone small request on an idle instance: the only batch `auto` may run on the main thread. */
const idle: InstanceLoad = { threadBusy: 0, mainBusy: 0, requests: 1, inputBytes: 128 };

/** A policy (threshold 100 µs, warm-up 4, backoff 4) fed `n` batches of `ns` on `path`; the moves it made. */
function feed(p: ExecutionThreadPolicy, n: number, ns: number, path = p.choose(idle)) {
  const moves = [];
  for (let i = 0; i < n; i++) {
    const m = p.record(path, ns);
    if (m) moves.push(m);
  }
  return moves;
}
const policy = (mode: 'auto' | 'main' | 'instance' = 'auto') => new ExecutionThreadPolicy(mode, { thresholdNs: 100 * US, warmup: 4, backoff: 4 });

describe('executionThreadSettings()', () => {
  it("reads execution_thread and execution_thread_threshold_us, 'auto' and 100 µs by default", () => {
    expect(executionThreadSettings({})).toEqual({ mode: 'auto', thresholdNs: 100_000 });
    expect(executionThreadSettings({ parameters: { execution_thread: { string_value: 'instance' }, execution_thread_threshold_us: { string_value: '25.5' } } }))
      .toEqual({ mode: 'instance', thresholdNs: 25_500 });
    expect(executionThreadSettings({ parameters: { execution_thread: { string_value: 'main' } } }).mode).toBe('main');
  });

  it('refuses other values with INVALID_ARG, naming the parameter and the model', () => {
    expect(() => executionThreadSettings({ name: 'm', parameters: { execution_thread: { string_value: 'gpu' } } }))
      .toThrow("parameter 'execution_thread' of model 'm' must be 'auto', 'main' or 'instance', got 'gpu'");
    expect(() => executionThreadSettings({ name: 'm', parameters: { execution_thread_threshold_us: { string_value: '-1' } } }))
      .toThrow(expect.objectContaining({ code: 'INVALID_ARG' }));
  });
});

describe('ExecutionThreadPolicy', () => {
  it("'instance' never picks the main thread, 'main' always does, whatever they measure", () => {
    const inst = policy('instance');
    const main = policy('main');
    feed(inst, 100, 1 * US, 'thread');
    feed(main, 100, 10_000 * US, 'main');
    expect(inst.choose(idle)).toBe('thread');
    expect(main.choose({ ...idle, requests: 8, threadBusy: 1 })).toBe('main');
  });

  it("'auto' starts on the thread and moves to the main thread after the warm-up, at or under the threshold", () => {
    const p = policy();
    expect(p.choose(idle)).toBe('thread');
    expect(feed(p, 3, 30 * US, 'thread')).toEqual([]);
    expect(p.choose(idle)).toBe('thread');
    expect(feed(p, 1, 30 * US, 'thread')).toEqual([{ to: 'main', estimateNs: 30 * US, boundNs: 100 * US, lastNs: 30 * US }]);
    expect(p.choose(idle)).toBe('main');
  });

  it('a model slower than the threshold stays on its thread', () => {
    const p = policy();
    expect(feed(p, 1000, 150 * US, 'thread')).toEqual([]);
    expect(p.choose(idle)).toBe('thread');
  });

  it('on the main thread, only a lone small request on an idle instance runs there', () => {
    const p = policy();
    feed(p, 4, 30 * US, 'thread');
    expect(p.choose(idle)).toBe('main');
    // A batch: requests queued behind each other, where the thread and the batcher pay off.
    expect(p.choose({ ...idle, requests: 2 })).toBe('thread');
    // The instance holds a batch on either path: the next waits behind it, on the thread.
    expect(p.choose({ ...idle, threadBusy: 1 })).toBe('thread');
    expect(p.choose({ ...idle, mainBusy: 1 })).toBe('thread');
    // A large input (which would also grow the main thread's arena).
    expect(p.choose({ ...idle, inputBytes: 1024 * 1024 })).toBe('thread');
  });

  it('while batches keep meeting each other (concurrent load), lone requests go to the thread too', () => {
    const p = policy();
    feed(p, 4, 30 * US, 'thread');
    for (let i = 0; i < 50; i++) expect(p.choose({ ...idle, requests: i < 4 || i % 2 ? 3 : 1 })).toBe('thread');
    // Quiet again: back on the main thread once few recent batches met another.
    let n = 0;
    while (p.choose(idle) === 'thread') n++;
    expect(n).toBeGreaterThan(5);
    expect(n).toBeLessThan(40);
    // Once quiet for a while, one collision now and then (a client with two requests in flight) does not move it.
    for (let i = 0; i < 50; i++) p.choose(idle);
    expect(p.choose({ ...idle, mainBusy: 1 })).toBe('thread');
    expect(p.choose(idle)).toBe('main');
  });

  it('a model whose runs grow past twice the threshold moves back to its thread', () => {
    const p = policy();
    feed(p, 4, 30 * US, 'thread');
    // Noise a little over the threshold does not move it (the margin).
    expect(feed(p, 50, 150 * US, 'main')).toEqual([]);
    expect(p.choose(idle)).toBe('main');
    const moves = feed(p, 50, 400 * US, 'main');
    expect(moves).toHaveLength(1);
    expect(moves[0]).toMatchObject({ to: 'thread', boundNs: 200 * US, lastNs: 400 * US });
    expect(p.choose(idle)).toBe('thread');
  });

  it('after leaving the main thread it waits `backoff` batches before returning, twice as many each time', () => {
    const p = new ExecutionThreadPolicy('auto', { thresholdNs: 100 * US, warmup: 4, backoff: 16 });
    feed(p, 4, 30 * US, 'thread');
    const untilMoved = (path: 'main' | 'thread', ns: number) => {
      let n = 0;
      while (!p.record(path, ns)) n++;
      return n + 1;
    };
    for (const wait of [16, 32, 64]) {
      expect(p.choose(idle)).toBe('main');
      untilMoved('main', 400 * US);
      expect(p.choose(idle)).toBe('thread');
      // The estimate is back under the threshold after 7 fast batches; the backoff holds it longer.
      expect(untilMoved('thread', 10 * US)).toBe(wait);
    }
  });

  it('one outlier (a GC pause) does not move it; two main-thread batches over 20x the threshold in a row do', () => {
    const p = policy();
    feed(p, 4, 30 * US, 'thread');
    expect(p.record('main', 5000 * US)).toBeUndefined();
    expect(p.record('main', 30 * US)).toBeUndefined();
    expect(p.record('main', 5000 * US)).toBeUndefined();
    expect(p.choose(idle)).toBe('main');
    expect(p.record('main', 5000 * US)).toMatchObject({ to: 'thread', boundNs: 2000 * US, lastNs: 5000 * US });
    expect(p.estimateNs).toBe(5000 * US);
  });

  it('batches of several requests are not measured (they never run on the main thread)', () => {
    const p = policy();
    for (let i = 0; i < 100; i++) expect(p.record('thread', 30 * US, 8)).toBeUndefined();
    expect(p.estimateNs).toBe(0);
    expect(p.choose(idle)).toBe('thread');
  });

  it('disableMain() keeps it on the thread for good', () => {
    const p = policy();
    p.disableMain();
    expect(feed(p, 1000, 1 * US, 'thread')).toEqual([]);
    expect(p.choose(idle)).toBe('thread');
  });
});
