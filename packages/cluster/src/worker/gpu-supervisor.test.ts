import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { GpuDevice } from '@triode/core';
import { GpuSupervisor, perGpuChildren, withoutGpusFlag, type SupervisedChild } from './gpu-supervisor.js';

const gpu = (i: number): GpuDevice => ({ index: i, cudaId: i, uuid: `GPU-uuid-${i}`, name: 'H100', memoryTotalBytes: 1, memoryUsedBytes: 0 });
const quiet = { error() {}, warning() {}, info() {}, verbose() {} };

// 30 s: the conditions wait on node children starting, slow on a loaded 2-core machine.
async function until(f: () => boolean, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  while (!f()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('perGpuChildren()', () => {
  it('one worker per GPU: its CUDA_VISIBLE_DEVICES (the UUID), device gpu:<index>, own worker id and metrics port', () => {
    const kids = perGpuChildren([gpu(0), gpu(2)], ['--redis', 'redis://r', '--gpus', 'all', '--model-repository', '/m'], { workerId: 'w', metricsPort: 9000 });
    expect(kids).toEqual([
      { id: 'gpu:0', args: ['worker', '--redis', 'redis://r', '--model-repository', '/m', '--worker-device', 'gpu:0', '--worker-id', 'w-gpu0', '--metrics-port', '9000'], env: { CUDA_VISIBLE_DEVICES: 'GPU-uuid-0' } },
      { id: 'gpu:2', args: ['worker', '--redis', 'redis://r', '--model-repository', '/m', '--worker-device', 'gpu:2', '--worker-id', 'w-gpu2', '--metrics-port', '9001'], env: { CUDA_VISIBLE_DEVICES: 'GPU-uuid-2' } },
    ]);
    // --metrics-port 0: each child picks a free port itself.
    expect(perGpuChildren([gpu(1)], ['--gpus=1'], { metricsPort: 0 })[0]!.args).toEqual(['worker', '--worker-device', 'gpu:1']);
    expect(withoutGpusFlag(['--gpus=0,2', '--x', '--gpus', '1', '--y'])).toEqual(['--x', '--y']);
  });
});

describe('GpuSupervisor', () => {
  let sup: GpuSupervisor | undefined;
  afterEach(async () => { await sup?.stop(); sup = undefined; });

  /**
   * A child that writes its CUDA_VISIBLE_DEVICES to <dir>/<id>.env, crashes on its first run when asked, else waits.
   * The file is renamed into place: once it exists it is whole, also while a restarted child writes it again.
   */
  const child = (dir: string, id: string, crashFirst: boolean): SupervisedChild => ({
    id,
    args: ['-e', `
      const fs = require('node:fs');
      const mark = ${JSON.stringify(join(dir, `${id}.ran`))};
      const env = ${JSON.stringify(join(dir, `${id}.env`))};
      fs.writeFileSync(env + '.' + process.pid, process.env.CUDA_VISIBLE_DEVICES ?? '');
      fs.renameSync(env + '.' + process.pid, env);
      if (${crashFirst} && !fs.existsSync(mark)) { fs.writeFileSync(mark, '1'); process.exit(3); }
      setInterval(() => {}, 1000);
    `],
    env: { CUDA_VISIBLE_DEVICES: `GPU-${id}` },
  });

  it('runs one child per GPU, each with its own CUDA_VISIBLE_DEVICES; restarts a crashed one after the backoff; stops all', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'triode-sup-'));
    const errors: string[] = [];
    sup = new GpuSupervisor([child(dir, 'a', false), child(dir, 'b', true)], {
      stdio: 'ignore', backoffMs: 200, logger: { ...quiet, error: (m: string) => { errors.push(m); } },
    });
    const t0 = Date.now();
    sup.start();
    // Child a may write its file after b's restart.
    await until(() => sup!.restarts().get('b') === 1 && sup!.pids().size === 2 && existsSync(join(dir, 'a.env')));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(200);
    expect(readFileSync(join(dir, 'a.env'), 'utf8')).toBe('GPU-a');
    expect(readFileSync(join(dir, 'b.env'), 'utf8')).toBe('GPU-b');
    expect(sup.restarts()).toEqual(new Map([['a', 0], ['b', 1]]));
    expect(errors).toEqual([expect.stringMatching(/^worker b exited \(code 3\) after \d+ ms: starting it again in 200 ms$/)]);
    const pids = [...sup.pids().values()];
    await sup.stop();
    expect(sup.pids().size).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  });

  it('doubles the delay for each exit in a row, up to the limit; a child that cannot be spawned is retried too', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'triode-sup-'));
    const errors: string[] = [];
    sup = new GpuSupervisor([{ id: 'x', args: ['-e', 'process.exit(1)'], env: {} }], {
      stdio: 'ignore', backoffMs: 50, maxBackoffMs: 100, logger: { ...quiet, error: (m: string) => { errors.push(m); } },
    });
    sup.start();
    await until(() => errors.length >= 3);
    expect(errors.slice(0, 3).map((e) => /again in (\d+) ms/.exec(e)?.[1])).toEqual(['50', '100', '100']);
    await sup.stop();
    const bad = new GpuSupervisor([{ id: 'y', args: [], env: {} }], { command: join(dir, 'missing-binary'), stdio: 'ignore', backoffMs: 50, logger: { ...quiet, error: (m: string) => { errors.push(m); } } });
    bad.start();
    await until(() => errors.some((e) => e.startsWith('worker y exited (error: spawn')));
    await bad.stop();
    expect(existsSync(join(dir, 'missing-binary'))).toBe(false);
  });
});
