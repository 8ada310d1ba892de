import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Backend } from './backend-api.js';
import { InferenceServer } from './server.js';

const echo: Backend = {
  name: 'echo',
  async modelInitialize() {
    return {
      async instanceInitialize() {
        return { async execute(requests) { return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) }; }, async finalize() {} };
      },
      async finalize() {},
    };
  },
};

const config = (mbs: number) => `backend: "echo"\nmax_batch_size: ${mbs}\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n`;

function addModel(root: string, name: string, text: string): void {
  mkdirSync(join(root, name, '1'), { recursive: true });
  writeFileSync(join(root, name, 'config.pbtxt'), text);
}

describe('model control mode POLL', () => {
  it('follows the repository: new models load, changed ones reload (a broken change keeps the old one), removed ones unload', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-poll-'));
    addModel(root, 'a', config(4));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'poll', repositoryPollMs: 3_600_000 });
    try {
      expect(s.modelReady('a')).toBe(true);
      addModel(root, 'b', config(2));
      await s.pollRepository();
      expect(s.modelReady('b')).toBe(true);
      // mtime granularity: make sure the rewrite is seen as a change.
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', 'config.pbtxt'), config(8));
      await s.pollRepository();
      expect(s.modelConfig('a')['max_batch_size']).toBe(8);
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', 'config.pbtxt'), 'max_batch_size: oops');
      await s.pollRepository();
      expect(s.modelReady('a')).toBe(true);
      expect(s.modelConfig('a')['max_batch_size']).toBe(8);
      rmSync(join(root, 'b'), { recursive: true });
      await s.pollRepository();
      expect(s.modelReady('b')).toBe(false);
      expect(s.repositoryIndex().find((r) => r.name === 'b')).toEqual({ name: 'b', state: 'UNAVAILABLE', reason: 'unloaded' });
      await expect(s.loadModel('a')).rejects.toThrow("failed to load 'a': explicit model load / unload is not allowed if polling is enabled");
    } finally {
      await s.stop(1000);
    }
  });
});

describe('model loading', () => {
  it('tries a failed load again --model-load-retry-count times, and loads at most --model-load-thread-count at once', async () => {
    let attempts = 0;
    let active = 0;
    let peak = 0;
    const flaky: Backend = {
      name: 'echo',
      async modelInitialize(ctx) {
        active++;
        peak = Math.max(peak, active);
        await new Promise((r) => setTimeout(r, 20));
        active--;
        if (ctx.name === 'flaky' && attempts++ < 2) throw new Error('not yet');
        return echo.modelInitialize(ctx);
      },
    };
    const root = mkdtempSync(join(tmpdir(), 'triode-retry-'));
    for (const n of ['flaky', 'm1', 'm2', 'm3']) addModel(root, n, config(1));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [flaky], modelLoadRetryCount: 2, modelLoadThreadCount: 2 });
    try {
      expect(s.modelReady('flaky')).toBe(true);
      expect(attempts).toBe(3);
      expect(peak).toBeLessThanOrEqual(2);
    } finally {
      await s.stop(1000);
    }
    attempts = 0;
    const s2 = await InferenceServer.create({ modelRepositories: [root], backends: [flaky], modelLoadRetryCount: 1 });
    try {
      expect(s2.repositoryIndex().find((r) => r.name === 'flaky')).toMatchObject({ state: 'UNAVAILABLE', reason: 'not yet' });
    } finally {
      await s2.stop(1000);
    }
  });
});

describe('instance-count-only changes', () => {
  /** An echo backend that counts live instances and delays each execution. */
  function countingBackend(live: { n: number; inits: number }, delayMs = 5): Backend {
    return {
      name: 'echo',
      async modelInitialize() {
        return {
          async instanceInitialize() {
            live.n++;
            live.inits++;
            return {
              async execute(requests) {
                await new Promise((r) => setTimeout(r, delayMs));
                return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
              },
              async finalize() { live.n--; },
            };
          },
          async finalize() {},
        };
      },
    };
  }
  const withCount = (n: number, mbs = 4) => `${config(mbs)}instance_group [ { count: ${n} kind: KIND_CPU } ]\n`;
  const req = (v: number) => ({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(v) }] });

  it('explicit load with only the instance count changed updates instances in place: no reload, no failed request', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-instances-'));
    addModel(root, 'a', withCount(1));
    const live = { n: 0, inits: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [countingBackend(live)], modelControlMode: 'explicit', startupModels: ['a'] });
    try {
      let stop = false;
      let failed = 0;
      let done = 0;
      const client = (async () => {
        while (!stop) {
          await s.infer(req(done)).then(() => { done++; }, () => { failed++; });
          await new Promise((r) => setImmediate(r));
        }
      })();
      await new Promise((r) => setTimeout(r, 30));
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(3));
      await s.loadModel('a');
      expect(live.n).toBe(3);
      expect(live.inits).toBe(3); // 1 + 2 new: the first instance was kept
      expect(s.modelConfig('a')['instance_group']).toMatchObject([{ count: 3 }]);
      await new Promise((r) => setTimeout(r, 30));
      await s.loadModel('a', { config: { ...s.modelConfig('a'), instance_group: [{ count: 2, kind: 'KIND_CPU' }] } as never });
      expect(live.n).toBe(2);
      await new Promise((r) => setTimeout(r, 30));
      stop = true;
      await client;
      expect(failed).toBe(0);
      // Statistics survive: the version was never replaced.
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(done);
      // Any other change still reloads (a new version object: statistics start again).
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(2, 8));
      await s.loadModel('a');
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(0);
      expect(live.inits).toBe(5);
    } finally {
      await s.stop(1000);
    }
  });

  it('poll mode does the same when only the count changed, and reloads when a model file changed too', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-instances-poll-'));
    addModel(root, 'a', withCount(2));
    const live = { n: 0, inits: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [countingBackend(live)], modelControlMode: 'poll', repositoryPollMs: 3_600_000 });
    try {
      await s.infer(req(1));
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(1));
      await s.pollRepository();
      expect(live.n).toBe(1);
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(1);
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', '1', 'weights.bin'), 'new');
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(2));
      await s.pollRepository();
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(0);
      await new Promise((r) => setTimeout(r, 50));
      expect(live.n).toBe(2);
    } finally {
      await s.stop(1000);
    }
  });
});
