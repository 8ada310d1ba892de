/**
 * End to end: config fields Triode used to accept and then ignore (issue #15 scope 3), against
 * `triode serve`: output `reshape`, warmup on every instance, the checksum repository agent, an
 * unknown agent, ragged batching (loads on the javascript and onnxruntime backends; a backend without
 * it refuses it: core's unimplemented-config.test.ts), and a hint that loads with a warning in the log.
 * test/ragged-batching.e2e.test.ts and test/ragged-batching-onnx.e2e.test.ts run ragged batches.
 */
import { createHash } from 'node:crypto';
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';

let triode: Child;
let base: string;

const IDENTITY = `import { tensor } from 'triode';
export default class Identity {
  execute(requests) {
    return requests.map((r) => {
      const x = r.input('IN');
      // The shape the model sees (reshape.shape with the batch dim) is what it answers in.
      return { outputs: [tensor('OUT', 'INT32', x.shape, x.data), tensor('SEEN', 'INT32', [x.shape.length], Int32Array.from(x.shape))] };
    });
  }
}
`;

const COUNTING = `import { tensor, log } from 'triode';
export default class Counting {
  initialize(args) { this.name = args.model_instance_name; this.runs = 0; }
  execute(requests) {
    this.runs += requests.length;
    log.info(\`instance \${this.name} has run \${this.runs} requests\`);
    return requests.map((r) => ({ outputs: [tensor('OUT', 'INT32', r.input('IN').shape, r.input('IN').data)] }));
  }
}
`;

const IO = 'input { name: "IN" data_type: TYPE_INT32 dims: [ 2 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 2 ] }\n';
const md5 = (text: string) => createHash('md5').update(text).digest('hex');

function model(name: string, config: string, code = COUNTING): Record<string, string> {
  return { [`${name}/config.pbtxt`]: `name: "${name}"\nbackend: "javascript"\n${config}`, [`${name}/1/model.mjs`]: code };
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const repo = makeRepository(['simple'], {
    // Triton's "simple" ONNX graph ([-1,16] in and out) served as [-1,2,8] with reshape.
    'simple/config.pbtxt': `name: "simple"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } } ]
instance_group { count: 2 kind: KIND_CPU }
model_warmup { name: "w" batch_size: 2 inputs [ { key: "INPUT0" value: { data_type: TYPE_INT32 dims: [ 2, 8 ] zero_data: true } }, { key: "INPUT1" value: { data_type: TYPE_INT32 dims: [ 2, 8 ] random_data: true } } ] }`,
    ...model('flat_reshape', `max_batch_size: 4
input { name: "IN" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } }
output { name: "OUT" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } }
output { name: "SEEN" data_type: TYPE_INT32 dims: [ 2 ] }
instance_group { count: 1 kind: KIND_CPU }`, IDENTITY),
    ...model('warm3', `max_batch_size: 2\n${IO}instance_group { count: 3 kind: KIND_CPU }
model_warmup { name: "z" batch_size: 1 count: 2 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } } }`),
    ...model('checksum_good', `${IO}model_repository_agents { agents [ { name: "checksum", parameters [ { key: "MD5:1/model.mjs", value: "${md5(COUNTING)}" } ] } ] }`),
    ...model('checksum_bad', `${IO}model_repository_agents { agents [ { name: "checksum", parameters [ { key: "MD5:1/model.mjs", value: "d726e132f91f16ebee703d96f6f73cb1" } ] } ] }`),
    ...model('unknown_agent', `${IO}model_repository_agents { agents [ { name: "relocation" } ] }`),
    ...model('ragged', 'max_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ -1 ] }\n'),
    ...model('hinted', `${IO}instance_group { count: 1 kind: KIND_CPU rate_limiter { resources [ { name: "R1" count: 1 } ] priority: 1 } }\noptimization { cuda { graphs: true } }`),
    // "simple" with a ragged INPUT0: the onnxruntime backend implements ragged batching (issue #15).
    'ragged_onnx/config.pbtxt': `name: "ragged_onnx"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 16 ] allow_ragged_batch: true }, { name: "INPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 16 ] }, { name: "OUTPUT1" data_type: TYPE_INT32 dims: [ 16 ] } ]`,
  });
  cpSync(join(EXAMPLES, 'simple', '1'), join(repo, 'ragged_onnx', '1'), { recursive: true });
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false']);
});

afterAll(async () => {
  await triode?.stop();
});

async function index(): Promise<Map<string, { state: string; reason?: string }>> {
  const rows = (await (await fetch(`${base}/v2/repository/index`, { method: 'POST' })).json()) as { name: string; state: string; reason?: string }[];
  return new Map(rows.map((r) => [r.name, r]));
}

describe('config fields are applied or refused, never ignored (triode serve)', () => {
  it('output reshape: metadata says [-1,2,8], the model makes [1,16], the response is [1,2,8]', async () => {
    const meta = (await (await fetch(`${base}/v2/models/flat_reshape`)).json()) as { outputs: { name: string; shape: number[] }[] };
    expect(meta.outputs.find((o) => o.name === 'OUT')!.shape).toEqual([-1, 2, 8]);
    const data = Array.from({ length: 32 }, (_, i) => i);
    const r = await fetch(`${base}/v2/models/flat_reshape/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [2, 2, 8], data }] }),
    });
    expect(r.status).toBe(200);
    const out = ((await r.json()) as { outputs: { name: string; shape: number[]; data: number[] }[] }).outputs;
    expect(out.find((o) => o.name === 'SEEN')!.data).toEqual([2, 16]);
    const o = out.find((x) => x.name === 'OUT')!;
    expect(o.shape).toEqual([2, 2, 8]);
    expect(o.data).toEqual(data);
  });

  it('output reshape on onnxruntime: simple\'s [1,16] outputs come back as [1,2,8] (after a reshaped warmup on both instances)', async () => {
    const a = Array.from({ length: 16 }, (_, i) => i);
    const b = Array.from({ length: 16 }, () => 1);
    const r = await fetch(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2, 8], data: a }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 2, 8], data: b }] }),
    });
    expect(r.status).toBe(200);
    const out = ((await r.json()) as { outputs: { name: string; shape: number[]; data: number[] }[] }).outputs;
    expect(out.map((o) => [o.name, o.shape])).toEqual([['OUTPUT0', [1, 2, 8]], ['OUTPUT1', [1, 2, 8]]]);
    expect(out[0]!.data).toEqual(a.map((x) => x + 1));
    expect(out[1]!.data).toEqual(a.map((x) => x - 1));
  });

  it('warmup runs each sample on each of 3 instances before READY', async () => {
    expect((await fetch(`${base}/v2/models/warm3/ready`)).status).toBe(200);
    await until(async () => [0, 1, 2].every((i) => triode.output().includes(`instance warm3_0_${i} has run 2 requests`)));
    expect(triode.output()).not.toMatch(/instance warm3_0_\d has run 3 requests/);
  });

  it('checksum agent: a right MD5 loads, a wrong one is UNAVAILABLE with Triton\'s message', async () => {
    const rows = await index();
    expect(rows.get('checksum_good')!.state).toBe('READY');
    expect(rows.get('checksum_bad')).toMatchObject({
      state: 'UNAVAILABLE',
      reason: `Mismatched MD5 hash for file 1/model.mjs, expect: d726e132f91f16ebee703d96f6f73cb1, got: ${md5(COUNTING)}`,
    });
    expect((await fetch(`${base}/v2/models/checksum_bad/ready`)).status).toBe(400);
  });

  it('an unknown repository agent fails the load with the reason; ragged batching loads on javascript and on onnxruntime', async () => {
    const rows = await index();
    expect(rows.get('unknown_agent')).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringContaining("unable to find 'libtritonrepoagent_relocation.so' for repo agent 'relocation'") });
    expect(rows.get('ragged_onnx')!.state).toBe('READY');
    expect(rows.get('ragged')!.state).toBe('READY');
    // execute() gets each request's ragged input as it was sent.
    const r = await fetch(`${base}/v2/models/ragged/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 3], data: [1, 2, 3] }] }) });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { outputs: { shape: number[] }[] }).outputs[0]!.shape).toEqual([1, 3]);
  });

  it('a hint Triode does not apply (optimization.cuda) loads, with a warning naming the field in the log; rate_limiter (implemented, ignored with --rate-limit=off as in Triton) gets none', async () => {
    expect((await fetch(`${base}/v2/models/hinted/ready`)).status).toBe(200);
    expect(triode.output()).not.toContain('rate_limiter is not implemented');
    expect(triode.output()).toContain("model 'hinted': optimization.cuda is not implemented by Triode and is ignored");
  });
});
