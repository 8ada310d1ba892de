/**
 * The rate limiter wired into InferenceServer (`rateLimit: 'execution_count'`): models sharing a
 * resource take turns, by priority; a count that cannot be met fails the load.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest, ExecuteResult } from '../backend-api.js';
import type { InferenceRequest } from '../infer-request.js';
import { InferenceServer, type ServerOptions } from '../server.js';

/** Records every execution (model name) and the most executing at once; each takes a few event-loop turns. */
function recordingBackend(log: { order: string[]; active: number; maxActive: number }): Backend {
  return {
    name: 'testing',
    async modelInitialize(ctx) {
      return {
        async instanceInitialize() {
          return {
            async execute(requests: ExecuteRequest[]): Promise<ExecuteResult> {
              log.order.push(ctx.name);
              log.maxActive = Math.max(log.maxActive, ++log.active);
              for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
              log.active--;
              return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
            },
            async finalize() {},
          };
        },
        async finalize() {},
      };
    },
  };
}

const servers: InferenceServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop(1000)));
});

async function serve(models: Record<string, string>, backend: Backend, options: Partial<ServerOptions>): Promise<InferenceServer> {
  const repo = mkdtempSync(join(tmpdir(), 'triode-rate-'));
  for (const [name, extra] of Object.entries(models)) {
    mkdirSync(join(repo, name, '1'), { recursive: true });
    writeFileSync(join(repo, name, 'config.pbtxt'), `backend: "testing"\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n${extra}`);
  }
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [backend], ...options });
  servers.push(s);
  return s;
}

const req = (model: string, v: number): InferenceRequest => ({ modelName: model, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(v) }] });
const group = (count: number, rateLimiter: string) => `instance_group { count: ${count} kind: KIND_CPU rate_limiter { ${rateLimiter} } }`;

describe('InferenceServer with rateLimit: execution_count', () => {
  it('two models whose instances need the one copy of a resource never execute at the same time; all requests are answered', async () => {
    const log = { order: [] as string[], active: 0, maxActive: 0 };
    const s = await serve({ a: group(2, 'resources [ { name: "R" count: 1 } ]'), b: group(2, 'resources [ { name: "R" count: 1 } ]') }, recordingBackend(log), { rateLimit: 'execution_count' });
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => s.infer(req(i % 2 ? 'a' : 'b', i))));
    expect(answers.map((r) => Number(r.outputs[0]!.data[0]))).toEqual(Array.from({ length: 12 }, (_, i) => i));
    expect(log.maxActive).toBe(1);
    expect(new Set(log.order)).toEqual(new Set(['a', 'b']));
  });

  it('the same models run side by side with rateLimit off (rate_limiter ignored), or with enough copies of the resource', async () => {
    for (const options of [{ rateLimit: 'off' as const }, { rateLimit: 'execution_count' as const, rateLimitResources: [{ name: 'R', count: 4 }] }]) {
      const log = { order: [] as string[], active: 0, maxActive: 0 };
      const s = await serve({ a: group(2, 'resources [ { name: "R" count: 1 } ]'), b: group(2, 'resources [ { name: "R" count: 1 } ]') }, recordingBackend(log), options);
      await Promise.all(Array.from({ length: 8 }, (_, i) => s.infer(req(i % 2 ? 'a' : 'b', i))));
      expect(log.maxActive, JSON.stringify(options)).toBe(4);
    }
  });

  it('priority 2 gets half the executions of priority 1 while both always wait', async () => {
    const log = { order: [] as string[], active: 0, maxActive: 0 };
    const s = await serve({
      p1: group(1, 'resources [ { name: "R" count: 1 } ] priority: 1'),
      p2: group(1, 'resources [ { name: "R" count: 1 } ] priority: 2'),
    }, recordingBackend(log), { rateLimit: 'execution_count' });
    await Promise.all(Array.from({ length: 60 }, (_, i) => s.infer(req(i % 2 ? 'p1' : 'p2', i))));
    // The first 45 executions, while both models still have requests waiting.
    const first = log.order.slice(0, 45);
    const p1 = first.filter((m) => m === 'p1').length;
    expect(Math.abs(p1 - 30)).toBeLessThanOrEqual(1);
  });

  it("a model asking for more than --rate-limit-resource gives fails its load with Triton's message; the others load", async () => {
    const log = { order: [] as string[], active: 0, maxActive: 0 };
    const s = await serve({ big: group(1, 'resources [ { name: "R" count: 4 } ]'), small: group(1, 'resources [ { name: "R" count: 2 } ]') }, recordingBackend(log), {
      rateLimit: 'execution_count', rateLimitResources: [{ name: 'R', count: 3 }],
    });
    const rows = new Map(s.repositoryIndex().map((r) => [r.name, r]));
    expect(rows.get('small')!.state).toBe('READY');
    expect(rows.get('big')!.state).toBe('UNAVAILABLE');
    expect(rows.get('big')!.reason).toContain('Resource count for "R" is limited to 3 which will prevent scheduling of one or more model instances, the minimum required count is 4');
  });
});
