/**
 * End to end: ragged batching (issue #15 scope 3) against `triode serve`, with JavaScript models.
 * Requests of different shapes on an `allow_ragged_batch` input run in one execution; the model
 * sees them joined ([total elements]) with every kind of `batch_input`, and a `batch_output` is
 * scattered back with each request's input shape. Deterministic on any machine: the batch can only
 * go when its preferred size (all the requests) is queued, and the requests are sent one at a time,
 * each once the previous is seen queued (nv_inference_pending_request_count), so their order is known.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';
import { inferInOneBatch, inferInput, type JsonOutput } from './helpers/ragged.js';

let triode: Child;
let base: string;
let metricsBase: string;

const BATCH_INPUTS = ['INDEX', 'COUNTS', 'WITH_ZERO', 'MAX_AS_SHAPE', 'ITEMS', 'ITEMS_FLAT'];

/** Sums each batch item (cut by BATCH_ITEM_SHAPE), doubles every element, and says what it saw. */
const RAGGED_MODEL = `import { tensor } from 'triode';
export default class Ragged {
  initialize() { this.runs = 0; }
  executeBatch(batch) {
    this.runs++;
    const input = batch.input('INPUT');
    const items = batch.input('ITEMS');
    const sums = [];
    let at = 0;
    for (let i = 0; i < items.shape[0]; i++) {
      let s = 0;
      for (let k = 0; k < items.data[i]; k++) s += input.data[at + k];
      at += items.data[i];
      sums.push(s);
    }
    const seen = { run: this.runs, requests: batch.requests.length, input: { shape: input.shape, data: Array.from(input.data) } };
    for (const name of ${JSON.stringify(BATCH_INPUTS)}) {
      const t = batch.input(name);
      seen[name] = { datatype: t.datatype, shape: t.shape, data: Array.from(t.data) };
    }
    return { outputs: [
      tensor('SUM', 'FP32', [sums.length, 1], sums),
      tensor('DOUBLED', 'FP32', input.shape, input.data.map((v) => v * 2)),
      tensor('SEEN', 'BYTES', [sums.length, 1], sums.map(() => JSON.stringify(seen))),
    ] };
  }
}
`;

const RAGGED_CONFIG = `name: "ragged"
backend: "javascript"
max_batch_size: 8
input { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }
output { name: "SUM" data_type: TYPE_FP32 dims: [ 1 ] }
output { name: "DOUBLED" data_type: TYPE_FP32 dims: [ -1 ] }
output { name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }
batch_input [
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: "INDEX" data_type: TYPE_FP32 source_input: "INPUT" },
  { kind: BATCH_ELEMENT_COUNT target_name: "COUNTS" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO target_name: "WITH_ZERO" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_MAX_ELEMENT_COUNT_AS_SHAPE target_name: "MAX_AS_SHAPE" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ITEM_SHAPE target_name: "ITEMS" data_type: TYPE_INT32 source_input: "INPUT" },
  { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: "ITEMS_FLAT" data_type: TYPE_INT32 source_input: "INPUT" }
]
batch_output [ { target_name: "DOUBLED" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]
# 1 + 1 + 1 + 2: the batch forms only once all four requests are queued (or after a minute).
dynamic_batching { preferred_batch_size: [ 5 ] max_queue_delay_microseconds: 60000000 }
instance_group { count: 1 kind: KIND_CPU }
`;

/** The same model without ragged batching: per request, which execution ran it and with how many. */
const PLAIN_MODEL = `import { tensor } from 'triode';
export default class Plain {
  initialize() { this.runs = 0; }
  execute(requests) {
    this.runs++;
    return requests.map(() => ({ outputs: [tensor('RUN', 'INT32', [1, 2], [this.runs, requests.length])] }));
  }
}
`;

beforeAll(async () => {
  const port = await freePort();
  const metricsPort = await freePort();
  base = `http://127.0.0.1:${port}`;
  metricsBase = `http://127.0.0.1:${metricsPort}`;
  const repo = makeRepository([], {
    'ragged/config.pbtxt': RAGGED_CONFIG,
    'ragged/1/model.mjs': RAGGED_MODEL,
    'plain/config.pbtxt': `name: "plain"\nbackend: "javascript"\nmax_batch_size: 8
input { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] }
output { name: "RUN" data_type: TYPE_INT32 dims: [ 2 ] }
dynamic_batching { max_queue_delay_microseconds: 100000 }
instance_group { count: 1 kind: KIND_CPU }`,
    'plain/1/model.mjs': PLAIN_MODEL,
    // batch_input needs executeBatch: a model class with execute only cannot load.
    'execute_only/config.pbtxt': `name: "execute_only"\nbackend: "javascript"\nmax_batch_size: 8
input { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }
output { name: "RUN" data_type: TYPE_INT32 dims: [ 2 ] }
batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_INT32 source_input: "INPUT" } ]`,
    'execute_only/1/model.mjs': PLAIN_MODEL,
    // A batch output one element short of what the requests' shapes need.
    'short/config.pbtxt': `name: "short"\nbackend: "javascript"\nmax_batch_size: 8
input { name: "INPUT" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }
output { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }
batch_output [ { target_name: "OUT" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "INPUT" } ]`,
    'short/1/model.mjs': `import { tensor } from 'triode';
export default class Short {
  executeBatch(batch) {
    const x = batch.input('INPUT');
    return { outputs: [tensor('OUT', 'FP32', [x.shape[0] - 1], x.data.subarray(1))] };
  }
}
`,
  });
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false',
    '--metrics-port', String(metricsPort), '--strict-readiness=false']);
});

afterAll(async () => {
  await triode?.stop();
});

type Output = JsonOutput;
const infer = (model: string, shape: number[], data: number[]): Promise<Output[]> => inferInput(base, model, shape, data);

describe('ragged batching (triode serve)', () => {
  it('runs requests of shapes [1,3], [1,4], [1,5], [2,2] in one execution; each gets its own answer', async () => {
    const requests: [number[], number[]][] = [
      [[1, 3], [1, 2, 3]],
      [[1, 4], [10, 20, 30, 40]],
      [[1, 5], [1, 1, 1, 1, 1]],
      [[2, 2], [5, 6, 7, 8]],
    ];
    // Each goes once the one before is queued: the batch's order is the order above.
    const results = await inferInOneBatch(base, metricsBase, 'ragged', requests);
    const get = (outs: Output[], name: string) => outs.find((o) => o.name === name)!;

    // Each request got its own sums (one per batch item) and its own elements doubled, in its shape.
    expect(results.map((o) => get(o, 'SUM'))).toMatchObject([
      { shape: [1, 1], data: [6] }, { shape: [1, 1], data: [100] }, { shape: [1, 1], data: [5] }, { shape: [2, 1], data: [11, 15] },
    ]);
    expect(results.map((o) => get(o, 'DOUBLED'))).toMatchObject(requests.map(([shape, data]) => ({ shape, data: data.map((v) => v * 2) })));

    // All four ran in the model's first execution, which saw the batch as Triton's backends give it.
    const seen = results.map((o) => JSON.parse(String(get(o, 'SEEN').data[0])) as Record<string, { datatype?: string; shape: number[]; data: number[] }> & { run: number; requests: number });
    expect(seen.map((s) => [s.run, s.requests])).toEqual([[1, 4], [1, 4], [1, 4], [1, 4]]);
    const s = seen[0]!;
    expect(s['input']).toEqual({ shape: [16], data: [1, 2, 3, 10, 20, 30, 40, 1, 1, 1, 1, 1, 5, 6, 7, 8] });
    expect(s['INDEX']).toEqual({ datatype: 'FP32', shape: [4], data: [3, 7, 12, 16] });
    expect(s['COUNTS']).toEqual({ datatype: 'INT32', shape: [4], data: [3, 4, 5, 4] });
    expect(s['WITH_ZERO']).toEqual({ datatype: 'INT32', shape: [5], data: [0, 3, 7, 12, 16] });
    expect(s['MAX_AS_SHAPE']).toMatchObject({ datatype: 'INT32', shape: [5] });
    expect(s['ITEMS']).toEqual({ datatype: 'INT32', shape: [5, 1], data: [3, 4, 5, 2, 2] });
    expect(s['ITEMS_FLAT']).toEqual({ datatype: 'INT32', shape: [5], data: [3, 4, 5, 2, 2] });
  });

  it('without allow_ragged_batch, requests of different shapes still never share an execution', async () => {
    const results = await Promise.all([[1, 3], [1, 4], [1, 5]].map((shape) => infer('plain', shape, new Array<number>(shape[1]!).fill(1))));
    const runs = results.map((o) => o[0]!.data as number[]);
    expect(runs.map((r) => r[1])).toEqual([1, 1, 1]);
    expect(new Set(runs.map((r) => r[0])).size).toBe(3);
  });

  it('a batch output that does not fit the requests\' shapes fails the batch with the reason', async () => {
    await expect(infer('short', [1, 3], [1, 2, 3])).rejects.toThrow("output 'OUT' has 2 elements, but the requests of the batch need 3 ([1,3])");
  });

  it('a model class without executeBatch cannot load a config with batch_input', async () => {
    const rows = (await (await fetch(`${base}/v2/repository/index`, { method: 'POST' })).json()) as { name: string; state: string; reason?: string }[];
    expect(rows.find((r) => r.name === 'ragged')).toMatchObject({ state: 'READY' });
    expect(rows.find((r) => r.name === 'execute_only')).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringContaining('has no executeBatch(batch) method, which a config with batch_input or batch_output needs') });
  });
});
