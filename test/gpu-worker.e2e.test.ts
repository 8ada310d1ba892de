/**
 * `triode worker --gpus all` with a stand-in nvidia-smi that lists two H100s: two worker processes
 * (CPU models), which a gateway lists with devices gpu:0 and gpu:1; SIGTERM stops them all.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const STAND_IN = join(ROOT, 'test', 'fixtures', 'gpu', 'nvidia-smi');

let redis: RedisHandle;
let supervisor: Child;
let gateway: Child;
let base: string;

beforeAll(async () => {
  redis = await startRedis();
  const repo = makeRepository(['simple']);
  supervisor = await startTriode(['worker', '--gpus', 'all', '--metrics-port', '0', '--redis', redis.url, '--model-repository', repo, '--worker-id', 'g'],
    /Started worker[\s\S]*Started worker/, 60_000, { TRIODE_NVIDIA_SMI: STAND_IN });
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  gateway = await startTriode(['gateway', '--metrics-port', '0', '--redis', redis.url, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--request-timeout-secs', '10']);
});

afterAll(async () => {
  await gateway?.stop();
  await supervisor?.stop();
  await redis?.stop();
});

interface WorkerInfo { id: string; pid: number; device: string; models: { name: string; state: string }[] }
const workers = async () => ((await (await fetch(`${base}/v2/cluster/workers`)).json()) as { workers?: WorkerInfo[] } | WorkerInfo[]);
const list = async (): Promise<WorkerInfo[]> => {
  const w = await workers();
  return Array.isArray(w) ? w : w.workers ?? [];
};

describe('triode worker --gpus all', () => {
  it('runs one worker per GPU; the gateway lists them with devices gpu:0 and gpu:1', async () => {
    await until(async () => (await list()).length === 2);
    const ws = (await list()).sort((a, b) => a.device.localeCompare(b.device));
    expect(ws.map((w) => [w.id, w.device])).toEqual([['g-gpu0', 'gpu:0'], ['g-gpu1', 'gpu:1']]);
    expect(new Set(ws.map((w) => w.pid)).size).toBe(2);
    expect(ws.every((w) => w.pid !== supervisor.proc.pid)).toBe(true);
    expect(supervisor.output()).toMatch(/started worker gpu:0 \(pid \d+, CUDA_VISIBLE_DEVICES=GPU-5f0c1e2a-1111-2222-3333-444455556666\)/);
  });

  it('each worker sees only its GPU (its startup table) and serves requests', async () => {
    // One GPU table per child, each with one row: CUDA id 0 is nvidia-smi index 0 in one, 1 in the other.
    expect(supervisor.output()).toMatch(/\| 0 +\| 0 +\| NVIDIA H100 80GB HBM3 \| 81559 MiB \|/);
    expect(supervisor.output()).toMatch(/\| 1 +\| 0 +\| NVIDIA H100 80GB HBM3 \| 81559 MiB \|/);
    await until(async () => (await fetch(`${base}/v2/models/simple/ready`)).status === 200);
    const input = (name: string) => ({ name, shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) });
    const r = await fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: JSON.stringify({ inputs: [input('INPUT0'), input('INPUT1')] }) });
    expect(r.status).toBe(200);
  });

  it('SIGTERM to the supervisor stops every worker', async () => {
    const pids = (await list()).map((w) => w.pid);
    expect(await supervisor.stop()).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  });
});
