/**
 * The cluster's control plane while workers come and go (review of 2026-11-28): a load through a
 * gateway while a worker is killed, a worker that joins while a load is under way, a load that
 * never ends beside other models' commands, and an ensemble's load racing the unload of one of
 * its steps. Real redis-server, gateway and workers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

/** A JavaScript model whose load never ends (until an unload gives it up). */
const stuckModel = (name: string): Record<string, string> => ({
  [`${name}/config.pbtxt`]: `name: "${name}"\nbackend: "javascript"\nmax_batch_size: 0\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\n`,
  [`${name}/1/model.mjs`]: `export default class Stuck {\n  initialize() { return new Promise(() => {}); }\n  execute() { return []; }\n}\n`,
});

/** A JavaScript model whose load takes `ms`: a load is still under way while the test acts. */
const slowModel = (name: string, ms: number): Record<string, string> => ({
  [`${name}/config.pbtxt`]: `name: "${name}"\nbackend: "javascript"\nmax_batch_size: 0\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\n`,
  [`${name}/1/model.mjs`]: `import { tensor } from 'triode';\nexport default class Slow {\n  async initialize() { await new Promise((r) => setTimeout(r, ${ms})); }\n  execute(requests) { return requests.map((r) => ({ outputs: [tensor('OUTPUT0', 'INT32', [1], r.input('INPUT0').data)] })); }\n}\n`,
});

let redis: RedisHandle;
let repo: string;
let gateway: Child;
let base: string;
const workers = new Map<string, Child>();

const startWorker = async (id: string) => {
  workers.set(id, await startTriode(['worker', '--metrics-port', '0', '--redis', redis.url, '--model-repository', repo, '--worker-id', id,
    '--model-control-mode', 'explicit', '--load-model', 'simple'], /Started worker/));
};
/** What each live worker has READY, by worker id. */
const readyOn = async (): Promise<Record<string, string[]>> => {
  const { workers: list } = await (await fetch(`${base}/v2/cluster/workers`)).json() as { workers: { id: string; models: { name: string; state: string }[] }[] };
  return Object.fromEntries(list.map((w) => [w.id, w.models.filter((m) => m.state === 'READY').map((m) => m.name).sort()]));
};
const load = (model: string) => fetch(`${base}/v2/repository/models/${model}/load`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(60_000) });

beforeAll(async () => {
  redis = await startRedis();
  repo = makeRepository(['simple', 'identity_chain', 'custom_identity_int32'], { ...slowModel('slow_a', 3000), ...slowModel('slow_b', 3000), ...slowModel('slow_c', 2000), ...stuckModel('stuck') });
  await startWorker('w0');
  await startWorker('w1');
  const port = await freePort();
  gateway = await startTriode(['gateway', '--metrics-port', '0', '--redis', redis.url, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false']);
  base = `http://127.0.0.1:${port}`;
  await until(async () => (await fetch(`${base}/v2/health/ready`)).status === 200);
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([...workers.values()].map((w) => w.stop()));
  await redis?.stop();
});

describe('cluster control while workers come and go', () => {
  it('a load is answered by the workers still there when one is killed during it, and recorded for a worker that joins later (before: 503 after 120 s, never recorded)', async () => {
    const answer = load('slow_a');
    await new Promise((r) => setTimeout(r, 500));
    await workers.get('w1')!.stop(0);
    workers.delete('w1');
    const r = await answer;
    expect(r.status).toBe(200);
    await startWorker('w2');
    await until(async () => (await readyOn())['w2']?.includes('slow_a') === true, 20_000);
  }, 60_000);

  it('a worker that joins while a load is under way gets the model once the load is recorded (before: never)', async () => {
    const answer = load('slow_b');
    await new Promise((r) => setTimeout(r, 300));
    await startWorker('w3');
    expect((await answer).status).toBe(200);
    // The worker reads the loaded set again 5 s after it joined.
    await until(async () => (await readyOn())['w3']?.includes('slow_b') === true, 20_000);
  }, 60_000);

  it('a load that never ends holds up neither the load nor the unload of another model; the unload of its own model gives it up (before: every later command waited behind it, on every worker)', async () => {
    let stuckAnswer: string | undefined;
    const stuck = fetch(`${base}/v2/repository/models/stuck/load`, { method: 'POST', body: '{}' }).then(async (r) => { stuckAnswer = `${r.status} ${await r.text()}`; }, (e: Error) => { stuckAnswer = e.message; });
    const loadingOn = async () => {
      const { workers: list } = await (await fetch(`${base}/v2/cluster/workers`)).json() as { workers: { models: { name: string; state: string }[] }[] };
      return list.filter((w) => w.models.some((m) => m.name === 'stuck' && m.state === 'LOADING')).length;
    };
    await until(async () => (await loadingOn()) === workers.size);
    expect((await load('slow_c')).status).toBe(200);
    expect((await fetch(`${base}/v2/repository/models/slow_a/unload`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(60_000) })).status).toBe(200);
    expect(stuckAnswer).toBeUndefined();
    expect((await fetch(`${base}/v2/repository/models/stuck/unload`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(60_000) })).status).toBe(200);
    await stuck;
    expect(stuckAnswer).toMatch(/^503 .*the load was cancelled by an unload of the model/);
  }, 60_000);

  it('an ensemble\'s load racing the unload of one of its steps leaves every worker in the same state (before: workers applied the commands in different orders and disagreed for good)', async () => {
    const unload = (model: string) => fetch(`${base}/v2/repository/models/${model}/unload`, { method: 'POST', body: '{}', signal: AbortSignal.timeout(60_000) });
    // Rounds that overlap, as the review's clients sent them.
    const calls: Promise<Response>[] = [];
    for (let round = 0; round < 12; round++) {
      calls.push(load('identity_chain'), unload('custom_identity_int32'), load('identity_chain'), unload('custom_identity_int32'));
      await new Promise((r) => setTimeout(r, 100));
    }
    await Promise.all(calls);
    const states = Object.values(await readyOn()).map((ready) => ready.filter((m) => m === 'identity_chain' || m === 'custom_identity_int32').join(','));
    expect(states.length).toBeGreaterThan(1);
    expect(new Set(states).size).toBe(1);
  }, 120_000);
});
