/**
 * The tensor-ownership cases (issue #15), run on `triode serve` and through a cluster gateway by
 * test/tensor-ownership*.e2e.test.ts: one tensor with several consumers, over real instance threads (the
 * onnxruntime backend's and the javascript backend's). Ensembles over `simple` that feed one
 * tensor to several steps (fan-out) or return an intermediate tensor (a tap), the same through
 * the response cache, a BLS model that reuses its inputs and the outputs it got, a decoupled model
 * that sends one array several times, a model that returns an array it keeps; and error codes
 * that cross the thread boundary as data.
 */
import { cpSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES, binaryBody, makeRepository } from './repository.js';
import { until } from './process.js';

const t16 = (name: string) => `{ name: "${name}" data_type: TYPE_INT32 dims: [ 16 ] }`;
const step = (model: string, ins: Record<string, string>, outs: Record<string, string>) =>
  `step { model_name: "${model}" model_version: -1 ${Object.entries(ins).map(([k, v]) => `input_map { key: "${k}" value: "${v}" }`).join(' ')} ${Object.entries(outs).map(([k, v]) => `output_map { key: "${k}" value: "${v}" }`).join(' ')} }`;
const ensemble = (inputs: string[], outputs: string[], steps: string[]) =>
  `platform: "ensemble"\nmax_batch_size: 8\ninput [ ${inputs.map(t16).join(', ')} ]\noutput [ ${outputs.map(t16).join(', ')} ]\nensemble_scheduling {\n${steps.join('\n')}\n}\n`;

/**
 * IN0 and IN1 each go to three steps; SUM = IN0 + IN1 goes to two.
 * DIFF = IN0 - IN1, SUM_PLUS = SUM + IN1, SUM_MINUS = SUM - IN0 (= IN1).
 */
const fanout = (model: string, tap: boolean) => ensemble(['IN0', 'IN1'], [...(tap ? ['SUM'] : []), 'DIFF', 'SUM_PLUS', 'SUM_MINUS'], [
  step(model, { INPUT0: 'IN0', INPUT1: 'IN1' }, { OUTPUT0: 'SUM' }),
  step(model, { INPUT0: 'IN0', INPUT1: 'IN1' }, { OUTPUT1: 'DIFF' }),
  step(model, { INPUT0: 'SUM', INPUT1: 'IN1' }, { OUTPUT0: 'SUM_PLUS' }),
  step(model, { INPUT0: 'SUM', INPUT1: 'IN0' }, { OUTPUT1: 'SUM_MINUS' }),
]);

const files: Record<string, string> = {
  'simple_cached/config.pbtxt': [
    'platform: "onnxruntime_onnx"', 'max_batch_size: 8', `input [ ${t16('INPUT0')}, ${t16('INPUT1')} ]`,
    `output [ ${t16('OUTPUT0')}, ${t16('OUTPUT1')} ]`, 'dynamic_batching { }', 'response_cache { enable: true }',
  ].join('\n'),
  'fanout/config.pbtxt': fanout('simple', false),
  'fanout/1/.keep': '',
  'tap/1/.keep': '',
  'tap_cached/1/.keep': '',
  // SUM is an ensemble output and both inputs of the next step (SUM2 = 2 SUM).
  'tap/config.pbtxt': ensemble(['IN0', 'IN1'], ['SUM', 'SUM2'], [
    step('simple', { INPUT0: 'IN0', INPUT1: 'IN1' }, { OUTPUT0: 'SUM' }),
    step('simple', { INPUT0: 'SUM', INPUT1: 'SUM' }, { OUTPUT0: 'SUM2' }),
  ]),
  'tap_cached/config.pbtxt': fanout('simple_cached', true),
  'bls_reuse/config.pbtxt': `backend: "javascript"\nmax_batch_size: 8\ninput [ ${t16('INPUT0')}, ${t16('INPUT1')} ]\noutput [ ${['SUM', 'TWICE', 'ECHO', 'SUM2', 'DIFF'].map(t16).join(', ')} ]\n`,
  'bls_reuse/1/model.mjs': `
    import { infer, tensor } from 'triode';
    export default class {
      async execute(requests) {
        return Promise.all(requests.map(async (r) => {
          const a = r.input('INPUT0');
          const b = r.input('INPUT1');
          // The same input tensors to three models at once.
          const [s, f, t] = await Promise.all([
            infer({ model: 'simple', inputs: [a, b] }),
            infer({ model: 'fanout', inputs: [{ ...a, name: 'IN0' }, { ...b, name: 'IN1' }] }),
            infer({ model: 'tap', inputs: [{ ...a, name: 'IN0' }, { ...b, name: 'IN1' }] }),
          ]);
          for (const x of [s, f, t]) if (x.error) return x;
          // An output it got, fed back twice in one call, then returned too.
          const sum = s.output('OUTPUT0');
          const twice = await infer({ model: 'simple', inputs: [{ ...sum, name: 'INPUT0' }, { ...sum, name: 'INPUT1' }] });
          if (twice.error) return twice;
          return { outputs: [
            tensor('SUM', 'INT32', sum.shape, sum.data), tensor('TWICE', 'INT32', sum.shape, twice.output('OUTPUT0').data),
            tensor('ECHO', 'INT32', a.shape, a.data), tensor('SUM2', 'INT32', a.shape, t.output('SUM2').data),
            tensor('DIFF', 'INT32', a.shape, f.output('DIFF').data),
          ] };
        }));
      }
    }`,
  // Decoupled: sends its input back three times, the same array each time.
  'echo_thrice/config.pbtxt': 'backend: "javascript"\nmax_batch_size: 0\nmodel_transaction_policy { decoupled: true }\ninput [ { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_INT32 dims: [ -1 ] } ]\n',
  'echo_thrice/1/model.mjs': `
    import { tensor } from 'triode';
    export default class {
      execute(requests) {
        for (const r of requests) {
          const x = r.input('IN');
          for (let i = 0; i < 3; i++) r.sender.send({ outputs: [tensor('OUT', 'INT32', x.shape, x.data)] });
          r.sender.close();
        }
      }
    }`,
  // Returns an array it keeps between calls; a negative IN is refused with INVALID_ARG.
  'constant/config.pbtxt': 'backend: "javascript"\nmax_batch_size: 0\ninput [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_INT32 dims: [ 4 ] } ]\n',
  'constant/1/model.mjs': `
    import { tensor, TritonModelError } from 'triode';
    export default class {
      initialize() { this.table = Int32Array.of(0, 10, 20, 30); }
      execute(requests) {
        return requests.map((r) => r.input('IN').data[0] < 0
          ? new TritonModelError('IN must not be negative', 'INVALID_ARG')
          : { outputs: [tensor('OUT', 'INT32', [4], this.table)] });
      }
    }`,
  // Error codes through BLS and out of a thread: 1 calls a model that does not exist, 2 sends simple
  // a wrong shape, 3 throws UNAVAILABLE for the whole batch.
  'codes/config.pbtxt': 'backend: "javascript"\nmax_batch_size: 0\ninput [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_INT32 dims: [ 16 ] } ]\n',
  'codes/1/model.mjs': `
    import { infer, tensor, TritonModelError } from 'triode';
    export default class {
      async execute(requests) {
        const v = requests[0].input('IN').data[0];
        if (v === 3) throw new TritonModelError('codes is busy', 'UNAVAILABLE');
        const x = tensor('INPUT0', 'INT32', [1, v === 2 ? 3 : 16], new Array(v === 2 ? 3 : 16).fill(1));
        const res = await infer({ model: v === 1 ? 'no_such_model' : 'simple', inputs: [x, { ...x, name: 'INPUT1' }] });
        return [res.error ? res : { outputs: [tensor('OUT', 'INT32', [16], res.output('OUTPUT0').data)] }];
      }
    }`,
};

/** Where the cases run: a server (or a gateway with workers) over `repo`, its HTTP base URL. */
export interface OwnershipSetup {
  name: string;
  /** Starts what serves `repo`, with the response cache on (local,size=1048576). */
  start(repo: string): Promise<{ base: string; stop(): Promise<void> }>;
}

let base: string;

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i);
const IN1 = Int32Array.from({ length: 16 }, (_, i) => 100 + i);
const plus = (k: number) => Array.from(IN0, (i) => i * k);

type Outputs = Record<string, number[]>;

/** Both inputs in one binary body (one buffer, as a client sends them); outputs as JSON. */
async function infer(model: string, inputs: Record<string, Int32Array>, json = false): Promise<{ status: number; outputs: Outputs; error?: string }> {
  const entries = Object.entries(inputs);
  let r: Response;
  if (json) {
    const body = JSON.stringify({ inputs: entries.map(([name, d]) => ({ name, datatype: 'INT32', shape: [1, d.length], data: Array.from(d) })) });
    r = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body });
  } else {
    const header = { inputs: entries.map(([name, d]) => ({ name, datatype: 'INT32', shape: [1, d.length], parameters: { binary_data_size: d.byteLength } })) };
    const { body, headerLength } = binaryBody(header, entries.map(([, d]) => d));
    r = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body, headers: { 'Inference-Header-Content-Length': String(headerLength) } });
  }
  const out = await r.json() as { outputs?: { name: string; data: number[] }[]; error?: string };
  return { status: r.status, outputs: Object.fromEntries((out.outputs ?? []).map((o) => [o.name, o.data])), ...(out.error !== undefined ? { error: out.error } : {}) };
}

const FANOUT: Outputs = { DIFF: new Array(16).fill(-100), SUM_PLUS: Array.from(IN0, (i) => 200 + 3 * i), SUM_MINUS: Array.from(IN1) };

/** Registers the cases over `c`'s server. */
export function runOwnershipCases(c: OwnershipSetup): void {
  describe(c.name, () => {
    let stop: (() => Promise<void>) | undefined;

    beforeAll(async () => {
      const repo = makeRepository(['simple'], files);
      cpSync(join(EXAMPLES, 'simple/1'), join(repo, 'simple_cached/1'), { recursive: true });
      const started = await c.start(repo);
      base = started.base;
      stop = started.stop;
    }, 120_000);

    afterAll(async () => {
      await stop?.();
    });

    describe('one tensor, several consumers, real threads', () => {
      it('fan-out: request inputs and an intermediate tensor each feed several steps', async () => {
        for (const json of [false, true]) {
          const r = await infer('fanout', { IN0, IN1 }, json);
          expect(r).toEqual({ status: 200, outputs: FANOUT });
        }
        // Concurrent requests: `simple` batches them, so steps get views of one batch output buffer.
        const many = await Promise.all(Array.from({ length: 12 }, () => infer('fanout', { IN0, IN1 })));
        for (const r of many) expect(r).toEqual({ status: 200, outputs: FANOUT });
      });

      it('tap: an intermediate tensor is an ensemble output and the input of another step', async () => {
        const want = { SUM: Array.from(IN0, (i) => 100 + 2 * i), SUM2: Array.from(IN0, (i) => 200 + 4 * i) };
        const all = await Promise.all(Array.from({ length: 8 }, (_, k) => infer('tap', { IN0, IN1 }, k % 2 === 1)));
        for (const r of all) expect(r).toEqual({ status: 200, outputs: want });
      });

      it('response cache: a fan-out and tap ensemble over a cached model, answered again from the cache', async () => {
        const want = { SUM: Array.from(IN0, (i) => 100 + 2 * i), ...FANOUT };
        for (let round = 0; round < 3; round++) {
          const all = await Promise.all(Array.from({ length: 4 }, (_, k) => infer('tap_cached', { IN0, IN1 }, k === 3)));
          for (const r of all) expect(r).toEqual({ status: 200, outputs: want });
        }
        // Through a gateway, statistics arrive with the workers' heartbeat.
        const hits = async () => ((await (await fetch(`${base}/v2/models/simple_cached/stats`)).json()) as { model_stats: { inference_stats: { cache_hit: { count: number } } }[] }).model_stats[0]!.inference_stats.cache_hit.count;
        await until(async () => (await hits()) > 0, 5000);
      });

      it('BLS: a model sends its inputs to three models at once, feeds an output back, and returns them', async () => {
        const want = {
          SUM: Array.from(IN0, (i) => 100 + 2 * i), TWICE: Array.from(IN0, (i) => 200 + 4 * i), ECHO: plus(1),
          SUM2: Array.from(IN0, (i) => 200 + 4 * i), DIFF: new Array(16).fill(-100),
        };
        const all = await Promise.all(Array.from({ length: 6 }, (_, k) => infer('bls_reuse', { INPUT0: IN0, INPUT1: IN1 }, k % 2 === 0)));
        for (const r of all) expect(r).toEqual({ status: 200, outputs: want });
      });

      it('decoupled: one array sent three times arrives whole three times', async () => {
        const r = await fetch(`${base}/v2/models/echo_thrice/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [7, 8, 9] }) });
        expect(r.status).toBe(200);
        const events = (await r.text()).split('\n').filter((l) => l.startsWith('data:')).map((l) => JSON.parse(l.slice(5)) as Record<string, unknown>);
        expect(events).toHaveLength(3);
        for (const e of events) expect(e).toMatchObject({ OUT: [7, 8, 9] });
      });

      it('a model that returns an array it keeps answers the same every time', async () => {
        for (let i = 0; i < 3; i++) {
          const r = await fetch(`${base}/v2/models/constant/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [i] }] }) });
          expect(await r.json()).toMatchObject({ outputs: [{ name: 'OUT', data: [0, 10, 20, 30] }] });
        }
      });
    });

    describe('error codes cross the thread boundary as data', () => {
      const call = async (model: string, v: number) => {
        const r = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [v] }] }) });
        return { status: r.status, body: await r.json() as { error?: string } };
      };

      it("a model's TritonModelError keeps its code (INVALID_ARG: 400, UNAVAILABLE for a whole batch: 503)", async () => {
        expect(await call('constant', -1)).toEqual({ status: 400, body: { error: 'IN must not be negative' } });
        expect(await call('codes', 3)).toEqual({ status: 503, body: { error: 'codes is busy' } });
      });

      it('a failed BLS call hands the model its code, and returned as it is, the client gets it', async () => {
        expect(await call('codes', 1)).toEqual({ status: 404, body: { error: "Request for unknown model: 'no_such_model' is not found" } });
        const bad = await call('codes', 2);
        expect(bad.status).toBe(400);
        expect(bad.body.error).toMatch(/^unexpected shape for input 'INPUT0' for model 'simple'/);
        expect(await call('codes', 0)).toMatchObject({ status: 200 });
      });
    });
  });
}
