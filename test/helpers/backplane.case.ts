/**
 * The Backplane conformance suite (DESIGN section 2: "Both pass one shared conformance test
 * suite"): every protocol feature a frontend relies on, answered the same way by the in-process
 * LocalBackplane and by the cluster's RedisBackplane (gateway side, with workers behind Redis).
 * Not a test file itself: `runBackplaneCases` registers the cases; each backplane's test file
 * supplies a setup. Fault cases run only where the setup can cause the fault.
 *
 * The repository each setup serves (explicit model control, all loaded): simple, simple_sequence,
 * repeat_int32 (decoupled), sleepy, and `held` (sleepy waiting 1.5 s per execution, one instance,
 * a 10 s queue timeout that a request may shorten: Triton honours a request's timeout only so).
 */
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TriodeError, type Backplane, type InferenceRequest, type InferenceResponse } from '@triode/core';
import { makeRepository } from './repository.js';

/** What a backplane under test is. */
export interface BackplaneUnderTest {
  backplane: Backplane;
  stop(): Promise<void>;
  /** Kills one of several workers (SIGKILL) while requests run; others must answer them. */
  killWorker?(): Promise<void>;
  /** Stops Redis and starts it again on the same port. */
  restartRedis?(stopped: () => Promise<void>): Promise<void>;
  /** A second backplane (a restarted gateway) over the same cluster. */
  another?(): Promise<Backplane & { stop(): Promise<void> }>;
}

/** How a backplane under test is made over a repository. */
export interface BackplaneCase {
  name: string;
  setup(repository: string): Promise<BackplaneUnderTest>;
  /** Statistics may lag behind (workers publish them with their heartbeat). @default false */
  eventualStatistics?: boolean;
}

const HELD = `name: "held"
backend: "javascript"
max_batch_size: 1
dynamic_batching { default_queue_policy { default_timeout_microseconds: 10000000 allow_timeout_override: true } }
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
parameters { key: "delay_ms" value: { string_value: "1500" } }
`;

/** The suite's repository (a fresh copy). */
export function conformanceRepository(): string {
  const repo = makeRepository(['simple', 'simple_sequence', 'repeat_int32', 'sleepy'], { 'held/config.pbtxt': HELD });
  cpSync(join(repo, 'sleepy', '1'), join(repo, 'held', '1'), { recursive: true });
  return repo;
}

const simple = (k: number, extra: Partial<InferenceRequest> = {}): InferenceRequest => ({
  modelName: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(k) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
  ],
  ...extra,
});

const seq = (id: number, v: number, flags: { start?: boolean; end?: boolean } = {}): InferenceRequest => ({
  modelName: 'simple_sequence',
  inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(v) }],
  parameters: { sequence_id: id, ...(flags.start ? { sequence_start: true } : {}), ...(flags.end ? { sequence_end: true } : {}) },
});

const out = (r: InferenceResponse, name: string): number[] => Array.from(r.outputs.find((o) => o.name === name)!.data as Int32Array);

/** The error a promise rejects with, as {code, message}. */
async function failure(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(TriodeError);
    return { code: (err as TriodeError).code, message: (err as TriodeError).message };
  }
  throw new Error('expected a rejection');
}

async function eventually(f: () => Promise<boolean>, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('condition not met in time');
}

/** Registers the shared Backplane cases. */
export function runBackplaneCases(c: BackplaneCase): void {
  describe(`${c.name} (Backplane conformance)`, () => {
    let t: BackplaneUnderTest;
    let b: Backplane;

    beforeAll(async () => {
      t = await c.setup(conformanceRepository());
      b = t.backplane;
      await eventually(async () => (await b.isReady()) && (await b.repositoryIndex(true)).length >= 5, 60_000);
    }, 90_000);

    afterAll(async () => {
      await t?.stop();
    });

    it('health, server metadata and the repository index', async () => {
      expect(await b.isLive()).toBe(true);
      expect(await b.isReady()).toBe(true);
      expect((await b.serverMetadata()).name).toBe('triton');
      const ready = (await b.repositoryIndex(true)).map((r) => `${r.name}/${r.version ?? ''}:${r.state}`);
      expect(ready).toEqual(['held/1:READY', 'repeat_int32/1:READY', 'simple/1:READY', 'simple_sequence/1:READY', 'sleepy/1:READY']);
      expect(await b.modelReady('simple')).toBe(true);
      expect(await b.modelReady('simple', 1)).toBe(true);
      expect(await b.modelReady('nope')).toBe(false);
    });

    it('model metadata and config, and Triton\'s answer for an unknown model', async () => {
      const m = await b.modelMetadata('simple');
      expect(m.name).toBe('simple');
      expect(m.versions).toEqual(['1']);
      expect(m.inputs.map((i) => [i.name, i.datatype, i.shape])).toEqual([['INPUT0', 'INT32', [-1, 16]], ['INPUT1', 'INT32', [-1, 16]]]);
      expect((await b.modelConfig('simple'))['max_batch_size']).toBe(8);
      const nope = { code: 'NOT_FOUND', message: "Request for unknown model: 'nope' is not found" };
      expect(await failure(b.modelMetadata('nope'))).toEqual(nope);
      expect(await failure(b.modelConfig('nope'))).toEqual(nope);
      expect(await failure(b.infer({ ...simple(1), modelName: 'nope' }))).toEqual(nope);
    });

    it('infers: 32 requests at once, each answered with its own result', async () => {
      const rs = await Promise.all(Array.from({ length: 32 }, (_, k) => b.infer(simple(k, { id: `r${k}` }))));
      rs.forEach((r, k) => {
        expect(r.modelName).toBe('simple');
        expect(r.modelVersion).toBe('1');
        expect(r.id).toBe(`r${k}`);
        expect(out(r, 'OUTPUT0')).toEqual(new Array(16).fill(k + 1));
        expect(out(r, 'OUTPUT1')).toEqual(new Array(16).fill(k - 1));
      });
    });

    it('requested outputs only, and Triton\'s errors for bad inputs and outputs', async () => {
      const r = await b.infer(simple(2, { outputs: [{ name: 'OUTPUT1' }] }));
      expect(r.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
      const bad = simple(1);
      bad.inputs[0] = { name: 'INPUT0', datatype: 'INT32', shape: [1, 3], data: Int32Array.of(1, 2, 3) };
      const e = await failure(b.infer(bad));
      expect(e.code).toBe('INVALID_ARG');
      expect(e.message).toMatch(/^unexpected shape for input 'INPUT0' for model 'simple'\. Expected \[-1,16\], got \[1,3\]\. NOTE: Setting a non-zero max_batch_size/);
      expect((await failure(b.infer(simple(1, { outputs: [{ name: 'NOPE' }] })))).code).toBe('INVALID_ARG');
    });

    it('sequences: interleaved ones keep their own state; a sequence must start with START', async () => {
      const ids = [101, 102, 103];
      const results = await Promise.all(ids.map(async (id, k) => [
        out(await b.infer(seq(id, k, { start: true })), 'OUTPUT')[0],
        out(await b.infer(seq(id, 10 + k)), 'OUTPUT')[0],
        out(await b.infer(seq(id, 20 + k, { end: true })), 'OUTPUT')[0],
      ]));
      // simple_sequence: OUTPUT = (INPUT + START) * READY
      expect(results).toEqual(ids.map((_, k) => [k + 1, 10 + k, 20 + k]));
      const e = await failure(b.infer(seq(199, 5)));
      expect(e.code).toBe('INVALID_ARG');
      expect(e.message).toContain('must specify the START flag on the first request of the sequence');
    });

    it('decoupled: a stream of responses in order, announced before the first; the non-streaming call is refused', async () => {
      const got: (number | 'decoupled')[] = [];
      await b.inferStream({
        modelName: 'repeat_int32',
        inputs: [
          { name: 'IN', datatype: 'INT32', shape: [3], data: Int32Array.of(4, 5, 6) },
          { name: 'DELAY', datatype: 'UINT32', shape: [3], data: Uint32Array.of(1, 1, 1) },
          { name: 'WAIT', datatype: 'UINT32', shape: [1], data: Uint32Array.of(0) },
        ],
      }, (r) => { if (r.outputs.length) got.push(out(r, 'OUT')[0]!); }, { onDecoupled: () => got.push('decoupled') });
      expect(got).toEqual(['decoupled', 4, 5, 6]);
      // A regular model's request is not announced.
      let announced = false;
      await b.inferStream(simple(1), () => undefined, { onDecoupled: () => { announced = true; } });
      expect(announced).toBe(false);
      const e = await failure(b.infer({ modelName: 'repeat_int32', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }] }));
      expect(e.code).toBe('UNSUPPORTED');
    });

    it('cancellation: a request cancelled while it waits answers CANCELLED; the others run', async () => {
      const running = b.infer({ modelName: 'held', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] });
      await new Promise((r) => setTimeout(r, 200));
      const ac = new AbortController();
      const cancelled = b.infer({ modelName: 'held', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(2) }], signal: ac.signal });
      await new Promise((r) => setTimeout(r, 100));
      ac.abort();
      expect((await failure(cancelled)).code).toBe('CANCELLED');
      expect(out(await running, 'OUTPUT0')).toEqual([1]);
    });

    it('deadlines: a request whose timeout passes while it waits gets Triton\'s answer', async () => {
      // Four requests fill every instance and every place a worker reads ahead (held batches one
      // request at a time); the fifth waits (in the scheduler, or in Redis) past its 200 ms.
      const held = (k: number, parameters?: InferenceRequest['parameters']) => b.infer({
        modelName: 'held', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(k) }], ...(parameters ? { parameters } : {}),
      });
      const running: Promise<InferenceResponse>[] = [];
      for (let k = 0; k < 4; k++) {
        running.push(held(k));
        await new Promise((r) => setTimeout(r, 30));
      }
      expect(await failure(held(9, { timeout: 200_000 }))).toEqual({ code: 'UNAVAILABLE', message: 'Request timeout expired' });
      expect((await Promise.all(running)).map((r) => out(r, 'OUTPUT0')[0])).toEqual([0, 1, 2, 3]);
    }, 30_000);

    it('statistics count what ran', async () => {
      const before = (await b.modelStatistics('sleepy'))[0]!.inference_stats.success.count;
      await Promise.all(Array.from({ length: 5 }, (_, k) => b.infer({ modelName: 'sleepy', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(k) }] })));
      const count = async () => (await b.modelStatistics('sleepy'))[0]!.inference_stats.success.count;
      if (c.eventualStatistics) await eventually(async () => (await count()) === before + 5);
      expect(await count()).toBe(before + 5);
      // Triton's TRITONSERVER_ServerModelStatistics words (INVALID_ARG) for a model or version with nothing ready.
      expect(await failure(b.modelStatistics('nope'))).toEqual({ code: 'INVALID_ARG', message: "requested model 'nope' is not available" });
      expect(await failure(b.modelStatistics('sleepy', 7))).toEqual({ code: 'INVALID_ARG', message: "requested model version is not available for model 'sleepy'" });
    });

    it('load and unload: Triton\'s answers, readiness follows', async () => {
      await b.unloadModel('sleepy');
      await eventually(async () => !(await b.modelReady('sleepy')));
      // Unloaded models do not make the server unready (Triton's strict readiness).
      expect(await b.isReady()).toBe(true);
      await b.loadModel('sleepy');
      await eventually(async () => b.modelReady('sleepy'));
      expect(await failure(b.loadModel('nope'))).toEqual({ code: 'INTERNAL', message: "failed to load 'nope', failed to poll from model repository" });
      expect((await failure(b.loadModel('../escape'))).code).toBe('INVALID_ARG');
    });

    it('faults: a worker killed while requests run; every request is still answered right', async () => {
      if (!t.killWorker) return; // in-process: there is no worker to kill
      const pending = Array.from({ length: 40 }, (_, k) => b.infer({ modelName: 'sleepy', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(k) }] }));
      await new Promise((r) => setTimeout(r, 50));
      await t.killWorker();
      const rs = await Promise.all(pending);
      rs.forEach((r, k) => expect(out(r, 'OUTPUT0')).toEqual([k]));
    }, 60_000);

    it('faults: Redis away answers UNAVAILABLE; everything recovers when it is back', async () => {
      if (!t.restartRedis) return; // in-process: there is no Redis
      await t.restartRedis(async () => {
        expect((await failure(b.infer(simple(1)))).code).toBe('UNAVAILABLE');
      });
      await eventually(async () => out(await b.infer(simple(3)), 'OUTPUT0')[0] === 4, 30_000);
    }, 60_000);

    it('faults: a restarted gateway answers over the same cluster', async () => {
      if (!t.another) return; // in-process: there is no gateway
      const g = await t.another();
      try {
        await eventually(async () => g.isReady());
        expect(out(await g.infer(simple(7)), 'OUTPUT0')).toEqual(new Array(16).fill(8));
      } finally {
        await g.stop();
      }
    }, 60_000);
  });
}
