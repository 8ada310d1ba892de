import { describe, expect, it } from 'vitest';
import { TriodeError, type ExecuteRequest, type Logger } from '@triode/core';
import type { ExecuteReply, ExecuteTask } from './messages.js';
import { ExecutionThreadPolicy, type ExecutionThread } from './execution-thread-policy.js';
import { OnnxInstance, sharedPath, type ExecutionPathRunner } from './onnxruntime-instance.js';

/** A path whose runs finish when the test says, answering `reply(task)`; it logs what happens on it. */
class FakePath implements ExecutionPathRunner {
  readonly events: string[];
  readonly tasks: ExecuteTask[] = [];
  readonly #pending: (() => void)[] = [];
  readonly #name: string;
  auto = true;
  reply: (task: ExecuteTask) => ExecuteReply = (task) => ({
    responses: task.requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })),
    computeInputNs: 1000, computeInferNs: 10_000, computeOutputNs: 1000,
  });
  closed = false;

  constructor(name: string, events: string[]) {
    this.#name = name;
    this.events = events;
  }

  run(task: ExecuteTask): Promise<ExecuteReply> {
    this.tasks.push(task);
    this.events.push(`${this.#name} start`);
    return new Promise((resolve, reject) => {
      const finish = () => {
        this.events.push(`${this.#name} end`);
        try {
          resolve(this.reply(task));
        } catch (err) {
          reject(err as Error);
        }
      };
      if (this.auto) queueMicrotask(finish);
      else this.#pending.push(finish);
    });
  }

  /** Finishes the oldest held run. */
  finishOne(): void {
    this.#pending.shift()!();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.events.push(`${this.#name} closed`);
  }
}

const silent: Logger = { error() {}, warning() {}, info() {}, verbose() {} };
const request = (v = 1): ExecuteRequest => ({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 4], data: new Int32Array(4).fill(v) }], outputNames: ['OUT'], batchSize: 1, parameters: {} });

function setup(mode: ExecutionThread, opts: { openMain?: () => Promise<ExecutionPathRunner>; logger?: Logger } = {}) {
  const events: string[] = [];
  const thread = new FakePath('thread', events);
  const main = new FakePath('main', events);
  let opened = 0;
  const policy = new ExecutionThreadPolicy(mode, { warmup: 2, thresholdNs: 50_000 });
  const instance = new OnnxInstance({
    ...(mode === 'main' ? { main } : { thread }),
    ...(mode === 'auto' ? { openMain: opts.openMain ?? (async () => { opened++; return main; }) } : {}),
    policy, batching: true, logger: opts.logger ?? silent, label: 'model "m" instance 0', model: 'm',
  });
  return { events, thread, main, instance, policy, opened: () => opened };
}

/** Runs lone requests until the instance has moved to the main thread (its session opened). */
async function warmToMain(s: ReturnType<typeof setup>): Promise<void> {
  for (let i = 0; i < 10 && s.instance.ran.main === 0; i++) await s.instance.execute([request()]);
}

describe('OnnxInstance', () => {
  it("'instance' runs every batch on its thread and never opens a main-thread session", async () => {
    const s = setup('instance');
    for (let i = 0; i < 50; i++) await s.instance.execute([request()]);
    expect(s.instance.ran).toEqual({ main: 0, thread: 50 });
    expect(s.opened()).toBe(0);
  });

  it("'auto' moves a fast model to the main thread, opening its session once, with the same answers and statistics", async () => {
    const s = setup('auto');
    await warmToMain(s);
    expect(s.opened()).toBe(1);
    expect(s.instance.ran.main).toBe(1);
    const input = request(7);
    const r = await s.instance.execute([input]);
    expect(s.instance.ran.main).toBe(2);
    expect(Array.from(r.responses[0]!.outputs![0]!.data as Int32Array)).toEqual([7, 7, 7, 7]);
    expect(r.timings).toEqual({ computeInputNs: 1000, computeInferNs: 10_000, computeOutputNs: 1000 });
    // The main thread reads the request's own buffer: the same array, not a copy, not detached.
    expect(s.main.tasks.at(-1)!.requests[0]!.inputs[0]!.data).toBe(input.inputs[0]!.data);
    expect(input.inputs[0]!.data.byteLength).toBe(16);
  });

  it('a slow model does not stay on the main thread', async () => {
    const s = setup('auto');
    await warmToMain(s);
    s.main.reply = (task) => ({ responses: task.requests.map(() => ({ outputs: [] })), computeInputNs: 0, computeInferNs: 400_000, computeOutputNs: 0 });
    for (let i = 0; i < 100 && s.policy.preferred === 'main'; i++) await s.instance.execute([request()]);
    expect(s.policy.preferred).toBe('thread');
    const before = s.instance.ran.main;
    await s.instance.execute([request()]);
    expect(s.instance.ran.main).toBe(before);
  });

  it("a batch runs on the main thread when its size is measured cheap there, else on the thread; an instance's batches never overlap", async () => {
    const s = setup('auto');
    await warmToMain(s);
    s.events.length = 0;
    // A batch of two (a size not measured yet): the main thread, where it measures 12 µs; once
    // measured (a cold run, then four), it is placed there for good.
    for (let i = 0; i < 6; i++) await s.instance.execute([request(), request()]);
    expect(s.events.filter((e) => e === 'main start')).toHaveLength(6);
    expect(s.events).not.toContain('thread start');
    expect(s.policy.sizeEstimateNs(32)).toBeGreaterThan(0);
    s.events.length = 0;
    // A batch of four (64 bytes) that takes 200 µs on the main thread (over the 50 µs threshold): the
    // thread from then on, once measured there (its first run, cold, is not counted; then four).
    s.main.reply = (task) => ({ responses: task.requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })), computeInputNs: 0, computeInferNs: task.requests.length === 4 ? 200_000 : 10_000, computeOutputNs: 0 });
    const four = () => [request(), request(), request(), request()];
    s.events.length = 0;
    for (let i = 0; i < 5; i++) await s.instance.execute(four());
    expect(s.events.filter((e) => e === 'main start')).toHaveLength(5);
    s.events.length = 0;
    await s.instance.execute(four());
    expect(s.events).toEqual(['thread start', 'thread end']);
    // A cheap batch while the thread holds one: it runs on the main thread after it, not beside it.
    s.events.length = 0;
    s.thread.auto = false;
    const c = s.instance.execute(four());
    const d = s.instance.execute([request(), request()]);
    await new Promise((r) => setTimeout(r, 5));
    expect(s.events).toEqual(['thread start']);
    s.thread.finishOne();
    await Promise.all([c, d]);
    expect(s.events).toEqual(['thread start', 'thread end', 'main start', 'main end']);
    // A dear batch while the main thread holds one: it goes to the thread after it.
    s.events.length = 0;
    s.thread.auto = true;
    s.main.auto = false;
    const e = s.instance.execute([request(), request()]);
    const f = s.instance.execute(four());
    await new Promise((r) => setTimeout(r, 5));
    expect(s.events).toEqual(['main start']);
    s.main.finishOne();
    await Promise.all([e, f]);
    expect(s.events).toEqual(['main start', 'main end', 'thread start', 'thread end']);
  });

  it('errors keep their Triton codes on either path; a dead thread is INTERNAL', async () => {
    const s = setup('auto');
    await warmToMain(s);
    s.main.reply = () => ({ error: { code: 'UNAVAILABLE', message: 'the instance has no session (model not loaded)' } });
    await expect(s.instance.execute([request()])).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'the instance has no session (model not loaded)' });
    const t = setup('instance');
    t.thread.reply = () => { throw new Error('worker exited'); };
    const e = await t.instance.execute([request(), request()]).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(TriodeError);
    expect(e).toMatchObject({ code: 'INTERNAL', message: 'onnx runtime error: worker exited' });
  });

  it('finalize waits for the main-thread batch, then releases the main session and the thread', async () => {
    const s = setup('auto');
    await warmToMain(s);
    s.main.auto = false;
    const run = s.instance.execute([request()]);
    const done = s.instance.finalize();
    await new Promise((r) => setTimeout(r, 5));
    expect(s.main.closed).toBe(false);
    s.main.finishOne();
    await Promise.all([run, done]);
    expect(s.events.slice(-3)).toEqual(['main end', 'main closed', 'thread closed']);
  });

  it('a main-thread session that fails to load leaves the instance on its thread, with a warning', async () => {
    const warnings: string[] = [];
    const s = setup('auto', { openMain: () => Promise.reject(new Error('no memory')), logger: { ...silent, warning: (m) => warnings.push(m) } });
    for (let i = 0; i < 20; i++) await s.instance.execute([request()]);
    expect(s.instance.ran).toEqual({ main: 0, thread: 20 });
    expect(warnings).toEqual(['model "m" instance 0 stays on its thread: its main-thread session failed to load: no memory']);
  });

  it("'main' has no thread: every batch runs on the main thread", async () => {
    const s = setup('main');
    await s.instance.execute([request(), request()]);
    expect(s.instance.ran).toEqual({ main: 1, thread: 0 });
    await s.instance.finalize();
    expect(s.main.closed).toBe(true);
  });
});

describe('sharedPath', () => {
  it('opens the path once for every lease and closes it with the last one, each lease once', async () => {
    const events: string[] = [];
    let opened = 0;
    const lease = sharedPath(async () => { opened++; return new FakePath(`p${opened}`, events); });
    const [a, b] = await Promise.all([lease(), lease()]);
    const c = await lease();
    expect(opened).toBe(1);
    await a!.run({ op: 'execute', requests: [], outputNames: [], batching: false }, []);
    expect(events).toEqual(['p1 start', 'p1 end']);
    await a!.close();
    await a!.close(); // twice: still one lease's worth
    await b!.close();
    expect(events).not.toContain('p1 closed');
    await c.close();
    expect(events.at(-1)).toBe('p1 closed');
    // A lease after the last one closed opens anew.
    const d = await lease();
    expect(opened).toBe(2);
    await d.close();
    expect(events.at(-1)).toBe('p2 closed');
  });

  it('a failed open fails the leases waiting for it, and the next lease tries again', async () => {
    let tries = 0;
    const lease = sharedPath(async () => {
      tries++;
      if (tries === 1) throw new Error('no memory');
      return new FakePath('p', []);
    });
    const results = await Promise.allSettled([lease(), lease()]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    const ok = await lease();
    expect(tries).toBe(2);
    await ok.close();
  });
});
