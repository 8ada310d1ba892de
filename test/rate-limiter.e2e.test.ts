/**
 * End to end: `triode serve --rate-limit=execution_count` (issue #15 scope 3). Two javascript
 * models, two instances each, whose instance groups need the one copy of resource "R": no two
 * executions ever overlap, across models and instances. Each execution holds a lock directory
 * (mkdir is atomic) for a while; one that finds the lock taken records an overlap.
 */
import { mkdtempSync, readFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

let triode: Child;
let base: string;
const work = mkdtempSync(join(tmpdir(), 'triode-rate-e2e-'));
const LOCK = join(work, 'running');
const OVERLAPS = join(work, 'overlaps');
const RUNS = join(work, 'runs');

const RECORDING = `import { tensor } from 'triode';
import { appendFileSync, mkdirSync, rmdirSync } from 'node:fs';
export default class Recording {
  initialize(args) { this.name = args.model_name; }
  async execute(requests) {
    let held = true;
    try { mkdirSync(${JSON.stringify(LOCK)}); } catch { held = false; appendFileSync(${JSON.stringify(OVERLAPS)}, this.name + '\\n'); }
    await new Promise((r) => setTimeout(r, 15));
    appendFileSync(${JSON.stringify(RUNS)}, this.name + '\\n');
    if (held) rmdirSync(${JSON.stringify(LOCK)});
    return requests.map((r) => ({ outputs: [tensor('OUT', 'INT32', r.input('IN').shape, r.input('IN').data)] }));
  }
}
`;

function model(name: string): Record<string, string> {
  return {
    [`${name}/config.pbtxt`]: `name: "${name}"\nbackend: "javascript"
input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }
output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }
instance_group { count: 2 kind: KIND_CPU rate_limiter { resources [ { name: "R" count: 1 } ] priority: 1 } }`,
    [`${name}/1/model.mjs`]: RECORDING,
  };
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const repo = makeRepository([], { ...model('left'), ...model('right') });
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--rate-limit=execution_count']);
});

afterAll(async () => {
  await triode?.stop();
});

async function infer(name: string, v: number): Promise<number> {
  const res = await fetch(`${base}/v2/models/${name}/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [v] }] }) });
  const body = (await res.json()) as { outputs: { data: number[] }[] };
  return body.outputs[0]!.data[0]!;
}

describe('triode serve --rate-limit=execution_count', () => {
  it('two models sharing the one copy of a resource never execute at the same time, and answer every request', async () => {
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => infer(i % 2 ? 'left' : 'right', i)));
    expect(answers).toEqual(Array.from({ length: 16 }, (_, i) => i));
    const runs = readFileSync(RUNS, 'utf8').trim().split('\n');
    expect([runs.filter((m) => m === 'left').length, runs.filter((m) => m === 'right').length]).toEqual([8, 8]);
    expect(existsSync(OVERLAPS) ? readFileSync(OVERLAPS, 'utf8') : '').toBe('');
  });

  it('the rate_limiter field loads with no "not implemented" warning', () => {
    expect(triode.output()).not.toContain('rate_limiter is not implemented');
  });
});
