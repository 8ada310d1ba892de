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
