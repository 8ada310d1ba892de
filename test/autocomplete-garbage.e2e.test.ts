/**
 * A javascript model whose static autoCompleteConfig returns garbage, against a `triode serve`
 * child: the server starts and serves the other models; the bad model is UNAVAILABLE, and every
 * client-visible error names it and carries no raw TypeError text. Before: the process exited 1
 * with "((intermediate value) ?? []).map is not a function", or the model loaded READY and failed
 * every config read and request with 500.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

const IO = "c.input=[{name:'INPUT0',data_type:'TYPE_INT32',dims:[-1]}]; c.output=[{name:'OUTPUT0',data_type:'TYPE_INT32',dims:[-1]}];";
const jsModel = (body: string) => `export default class M { static autoCompleteConfig(c) { ${IO} ${body} return c; } execute(r) { return []; } }`;

/** The reviewer's shapes, each a model of its own. */
const BAD: Record<string, string> = {
  ac_ens: "c.platform='ensemble'; c.ensemble_scheduling={ step: 'x' };",
  ac_dims: "c.input[0].dims='abc';",
  ac_params: 'c.parameters={ a: 5, b: null };',
  ac_name: 'c.input[0].name=42;',
  ac_mbs: "c.max_batch_size='8x';",
  ac_input: 'c.input=5;',
  ac_pref: "c.max_batch_size=4; c.dynamic_batching={ preferred_batch_size: 'x' };",
  ac_proto: "return JSON.parse('{\"__proto__\": {\"max_batch_size\": 8}}');",
};
const RAW = /is not a function|is not iterable|Cannot read prop|intermediate value/;

const files: Record<string, string> = {};
for (const [name, body] of Object.entries(BAD)) {
  files[`${name}/config.pbtxt`] = `name: "${name}"\nbackend: "javascript"\n`;
  files[`${name}/1/model.mjs`] = jsModel(body);
}

const simpleInfer = {
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, (_, i) => i) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array.from({ length: 16 }, () => 1) },
  ],
};

async function start(extra: string[]): Promise<{ child: Child; base: string }> {
  const port = await freePort();
  const child = await startTriode(['serve', '--model-repository', makeRepository(['simple'], files), '--http-port', String(port), '--http-address', '127.0.0.1',
    '--allow-grpc=false', '--allow-metrics=false', ...extra]);
  return { child, base: `http://127.0.0.1:${port}` };
}

describe('a javascript model whose autoCompleteConfig returns garbage (default mode)', () => {
  let server: { child: Child; base: string };
  beforeAll(async () => { server = await start([]); }, 60_000);
  afterAll(async () => { await server?.child.stop(); });

  it('the server starts and serves the good model', async () => {
    const res = await fetch(`${server.base}/v2/models/simple/infer`, { method: 'POST', body: JSON.stringify(simpleInfer) });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { outputs: { name: string; data: number[] }[] };
    expect(body.outputs.find((o) => o.name === 'OUTPUT0')?.data).toEqual(Array.from({ length: 16 }, (_, i) => i + 1));
  });

  it('each bad model is UNAVAILABLE with a reason that names it; its config and infer answer a clear error, not 500', async () => {
    const index = (await (await fetch(`${server.base}/v2/repository/index`, { method: 'POST' })).json()) as { name: string; state: string; reason: string }[];
    for (const name of Object.keys(BAD)) {
      const row = index.find((r) => r.name === name);
      expect(row, name).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringContaining(`auto-complete of model '${name}' returned an invalid config: `) });
      expect(row!.reason).not.toMatch(RAW);
      expect((await fetch(`${server.base}/v2/models/${name}/ready`)).status).not.toBe(200);
      const infer = await fetch(`${server.base}/v2/models/${name}/infer`, { method: 'POST', body: JSON.stringify(simpleInfer) });
      // No ready version: 404 NOT_FOUND, as Triton answers a model that failed to load (its
      // GetModel: 'has no available versions', or 'is not found' when its config never got as far
      // as the lifecycle); before: 500, then 503.
      expect(infer.status, name).toBe(404);
      expect((await infer.json() as { error: string }).error).not.toMatch(RAW);
      expect((await fetch(`${server.base}/v2/models/${name}/config`)).status, name).not.toBe(500);
    }
    expect(server.child.output()).toContain("failed to load 'ac_ens'");
    expect(server.child.output()).not.toMatch(RAW);
  });
});

describe('a javascript model whose autoCompleteConfig returns garbage (explicit load)', () => {
  let server: { child: Child; base: string };
  beforeAll(async () => { server = await start(['--model-control-mode', 'explicit', '--load-model', 'simple']); }, 60_000);
  afterAll(async () => { await server?.child.stop(); });

  it('the load answers 400 naming the model, with no raw TypeError text; the server keeps serving', async () => {
    for (const name of Object.keys(BAD)) {
      const res = await fetch(`${server.base}/v2/repository/models/${name}/load`, { method: 'POST' });
      expect(res.status, name).toBe(400);
      const { error } = (await res.json()) as { error: string };
      expect(error).toContain(`auto-complete of model '${name}' returned an invalid config: `);
      expect(error).not.toMatch(RAW);
    }
    expect((await fetch(`${server.base}/v2/models/simple/infer`, { method: 'POST', body: JSON.stringify(simpleInfer) })).status).toBe(200);
  });
});
