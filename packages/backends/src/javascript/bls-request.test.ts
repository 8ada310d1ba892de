import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { InferenceServer, deserializeBytesTensor, type InferenceRequest } from '@triode/core';
import { ROOT, makeRepository } from '../../../../test/helpers/repository.js';
import { blsControlsProblem, blsParameters } from './bls-request.js';
import { JavaScriptBackend, blsRequestProblem } from './javascript-backend.js';

describe('blsControlsProblem', () => {
  const base = { model: 'm', inputs: [] };
  it('takes a uint64 correlation id given exactly (a bigint, a safe integer) or a string, sequence flags and a uint64 timeout', () => {
    for (const correlationId of [0, 0n, 7, Number.MAX_SAFE_INTEGER, 2n ** 64n - 1n, '', 'session-1']) expect(blsControlsProblem({ ...base, correlationId })).toBeUndefined();
    for (const flags of [0, 1, 2, 3]) expect(blsControlsProblem({ ...base, flags })).toBeUndefined();
    for (const timeout of [0, 0n, 1500, 2n ** 64n - 1n]) expect(blsControlsProblem({ ...base, timeout })).toBeUndefined();
  });

  it('refuses a correlation id, flags or timeout of the wrong type or out of range, saying what it got', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ correlationId: 2 ** 60 }, "'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got 1152921504606847000: pass a bigint to keep it exact"],
      [{ correlationId: -1 }, "'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got -1"],
      [{ correlationId: 1.5 }, "'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got 1.5"],
      [{ correlationId: 2n ** 64n }, "'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got 18446744073709551616n"],
      [{ correlationId: -1n }, "'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got -1n"],
      [{ correlationId: true }, "'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got true"],
      [{ correlationId: null }, "'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got null"],
      [{ flags: 4 }, "'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got 4"],
      [{ flags: -1 }, "'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got -1"],
      [{ flags: 1.5 }, "'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got 1.5"],
      [{ flags: '1' }, "'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got \"1\""],
      [{ flags: true }, "'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got true"],
      [{ timeout: -1 }, "'timeout' must be a uint64 of microseconds (a bigint, or a number up to 2^53 - 1), got -1"],
      [{ timeout: 2.5 }, "'timeout' must be a uint64 of microseconds (a bigint, or a number up to 2^53 - 1), got 2.5"],
      [{ timeout: 2 ** 60 }, "'timeout' must be a uint64 of microseconds (a bigint, or a number up to 2^53 - 1), got 1152921504606847000"],
      [{ timeout: '10' }, "'timeout' must be a uint64 of microseconds (a bigint, or a number up to 2^53 - 1), got \"10\""],
      [{ timeout: Infinity }, "'timeout' must be a uint64 of microseconds (a bigint, or a number up to 2^53 - 1), got Infinity"],
    ];
    for (const [fields, want] of cases) expect(blsControlsProblem({ ...base, ...fields }), JSON.stringify(Object.keys(fields))).toBe(want);
  });

  it('refuses an option also set by its parameter, whatever the values (one way, not both)', () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ correlationId: 5, parameters: { sequence_id: 5 } }, "'correlationId' and parameter 'sequence_id' both set the request's correlation id: set one"],
      [{ correlationId: 0n, parameters: { sequence_id: 'a' } }, "'correlationId' and parameter 'sequence_id' both set the request's correlation id: set one"],
      [{ flags: 1, parameters: { sequence_start: true } }, "'flags' and parameter 'sequence_start' both set the request's sequence flags: set one"],
      [{ flags: 0, parameters: { sequence_end: false } }, "'flags' and parameter 'sequence_end' both set the request's sequence flags: set one"],
      [{ timeout: 10n, parameters: { timeout: 10 } }, "'timeout' and parameter 'timeout' both set the request's timeout: set one"],
    ];
    for (const [fields, want] of cases) expect(blsControlsProblem({ ...base, ...fields })).toBe(want);
    // Each with other parameters, or its parameter without the option: fine.
    expect(blsControlsProblem({ ...base, correlationId: 5, flags: 3, timeout: 9, parameters: { priority: 1, tenant: 't' } })).toBeUndefined();
    expect(blsControlsProblem({ ...base, parameters: { sequence_id: 5, sequence_start: true, timeout: 9 } })).toBeUndefined();
  });

  it('is part of blsRequestProblem, which the main thread runs on every BLS request', () => {
    expect(blsRequestProblem({ ...base, flags: 8 })).toBe("'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got 8");
  });
});

describe('blsParameters', () => {
  it('sets the parameters a client would (sequence_id, sequence_start, sequence_end, timeout), beside the custom ones', () => {
    expect(blsParameters({ correlationId: 2n ** 64n - 1n, flags: 3, timeout: 1500, parameters: { tenant: 't', priority: 2 } }))
      .toEqual({ tenant: 't', priority: 2, sequence_id: 2n ** 64n - 1n, sequence_start: true, sequence_end: true, timeout: 1500 });
    expect(blsParameters({ correlationId: 'a', flags: 2, timeout: 7n })).toEqual({ sequence_id: 'a', sequence_end: true, timeout: 7n });
    expect(blsParameters({ correlationId: 9, flags: 1 })).toEqual({ sequence_id: 9, sequence_start: true });
  });

  it('sets nothing for the defaults (0, "", no flags), and keeps the parameters route as it was', () => {
    expect(blsParameters({ correlationId: 0n, flags: 0, timeout: 0 })).toEqual({});
    expect(blsParameters({ correlationId: '', timeout: 0n })).toEqual({});
    const own = { sequence_id: 5, sequence_start: true, timeout: 9 };
    expect(blsParameters({ parameters: own })).toBe(own);
    expect(blsParameters({})).toEqual({});
  });
});

describe('a BLS call with correlationId, flags and timeout (Python\'s InferenceRequest(correlation_id=, flags=, timeout=))', () => {
  const fixture = join(ROOT, 'test', 'fixtures', 'models', 'request_fields');
  const describeUrl = JSON.stringify(pathToFileURL(join(fixture, '1', 'model.mjs')).href);
  const gate = mkdtempSync(join(tmpdir(), 'triode-bls-gate-'));
  const root = makeRepository([], {
    // The callee that says what it read: correlationId, flags, timeout.
    'fields/config.pbtxt': readFileSync(join(fixture, 'config.pbtxt'), 'utf8'),
    'fields/1/model.mjs': readFileSync(join(fixture, '1', 'model.mjs'), 'utf8'),
    // An accumulator per sequence (direct strategy): SUM, and what it read of the request.
    'acc/config.pbtxt': `backend: "javascript"
max_batch_size: 4
sequence_batching {
  control_input [
    { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "READY" control [ { kind: CONTROL_SEQUENCE_READY int32_false_true: [ 0, 1 ] } ] }
  ]
}
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "SUM" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "FIELDS" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
`,
    'acc/1/model.mjs': `
      import { tensor, TRITONSERVER_REQUEST_FLAG_SEQUENCE_END as END } from 'triode';
      import { describe } from ${describeUrl};
      export default class {
        initialize() { this.sums = new Map(); }
        execute(requests) {
          return requests.map((r) => {
            if (r.input('READY').data[0] !== 1) return { outputs: [tensor('SUM', 'INT32', [1, 1], [0]), tensor('FIELDS', 'BYTES', [1, 1], [''])] };
            const key = typeof r.correlationId + ':' + r.correlationId;
            const sum = (r.input('START').data[0] === 1 ? 0 : this.sums.get(key) ?? 0) + r.input('IN').data[0];
            if (r.flags & END) this.sums.delete(key); else this.sums.set(key, sum);
            return { outputs: [tensor('SUM', 'INT32', [1, 1], [sum]), tensor('FIELDS', 'BYTES', [1, 1], [describe(r)])] };
          });
        }
      }`,
    // The gate fixture (its first execution waits for <gate>/open), behind a queue policy that
    // takes a request's shorter timeout.
    'held/config.pbtxt': `backend: "javascript"
max_batch_size: 1
dynamic_batching { default_queue_policy { default_timeout_microseconds: 600000000 allow_timeout_override: true } }
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
parameters { key: "gate_dir" value { string_value: ${JSON.stringify(gate)} } }
`,
    'held/1/model.mjs': readFileSync(join(ROOT, 'test', 'fixtures', 'models', 'gate', '1', 'model.mjs'), 'utf8'),
    // Runs the BLS calls of the scenario its request names, one after another, and answers a line per call.
    'driver/config.pbtxt': 'backend: "javascript"\nmax_batch_size: 0\ninput [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_STRING dims: [ -1 ] } ]\n',
    'driver/1/model.mjs': `
      import { infer, strings, tensor, TRITONSERVER_REQUEST_FLAG_SEQUENCE_START as START, TRITONSERVER_REQUEST_FLAG_SEQUENCE_END as END } from 'triode';
      const IN = (name, v) => tensor(name, 'INT32', [1, 1], [v]);
      const step = (correlationId, v, flags) => ({ model: 'acc', inputs: [IN('IN', v)], correlationId, ...(flags === undefined ? {} : { flags }) });
      const big = 2n ** 64n - 2n;
      const scenarios = {
        uint64: () => [step(big, 3, START), step(big, 4, 0), step(big, 5, END)],
        interleaved: () => [step('a', 1, START), step(7, 10, START), step('a', 2), step(7n, 20), step('a', 3, END), step(7, 30, END)],
        noStart: () => [step(99, 1, 0)],
        params: () => [{ model: 'acc', inputs: [IN('IN', 2)], parameters: { sequence_id: 'p', sequence_start: true } }, { model: 'acc', inputs: [IN('IN', 3)], parameters: { sequence_id: 'p', sequence_end: true } }],
        forward: (r) => [{ model: 'fields', inputs: [IN('IN', 1)], correlationId: r.correlationId, flags: r.flags, timeout: r.timeout, parameters: r.parameters }],
        timeout: () => [{ model: 'held', inputs: [IN('INPUT0', 1)], timeout: 1000 }, { model: 'held', inputs: [IN('INPUT0', 1)], timeout: 1000n }, { model: 'held', inputs: [IN('INPUT0', 1)], parameters: { timeout: 1000 } }],
        refused: () => [step(2 ** 60, 1, START), step(1, 1, 4), { model: 'fields', inputs: [IN('IN', 1)], timeout: -1 }, { ...step(5, 1, START), parameters: { sequence_id: 5 } }, { ...step(5, 1, START), parameters: { sequence_end: true } }],
      };
      export default class {
        async execute(requests) {
          return Promise.all(requests.map(async (r) => {
            const lines = [];
            for (const call of scenarios[r.parameters.scenario](r)) {
              const res = await infer(call);
              lines.push(res.error ? 'error ' + res.code + ': ' + res.error : res.outputs.map((o) => o.datatype === 'BYTES' ? strings(o)[0] : String(o.data[0])).join(' '));
            }
            return { outputs: [tensor('OUT', 'BYTES', [lines.length], lines)] };
          }));
        }
      }`,
  });
  const server = InferenceServer.create({ modelRepositories: [root], backends: [new JavaScriptBackend()] });
  afterAll(async () => {
    writeFileSync(join(gate, 'open'), '');
    await (await server).stop(2000);
  });
  const drive = async (scenario: string, parameters: InferenceRequest['parameters'] = {}): Promise<string[]> => {
    const s = await server;
    const r = await s.infer({ modelName: 'driver', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(0) }], parameters: { scenario, ...parameters } });
    return deserializeBytesTensor(r.outputs[0]!.data as Uint8Array).map((b) => new TextDecoder().decode(b));
  };

  it('drives a sequence model: the sequence batcher keeps each sequence apart, and the callee reads its id (a uint64 exact) and flags', async () => {
    expect(await drive('uint64')).toEqual([
      '3 id=n18446744073709551614 start=true end=false flags=1 timeout=0 params=',
      '7 id=n18446744073709551614 start=false end=false flags=0 timeout=0 params=',
      '12 id=n18446744073709551614 start=false end=true flags=2 timeout=0 params=',
    ]);
    // A string id and a number id (7 and 7n are one sequence), interleaved.
    expect((await drive('interleaved')).map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual(['1 id=sa', '10 id=n7', '3 id=sa', '30 id=n7', '6 id=sa', '60 id=n7']);
  });

  it('the sequence batcher acts on the flags: a first request without START is refused, as a client\'s', async () => {
    expect(await drive('noStart')).toEqual(["error INVALID_ARG: inference request for sequence 99 to model 'acc' must specify the START flag on the first request of the sequence"]);
  });

  it('the parameters route works as before', async () => {
    expect((await drive('params')).map((l) => l.split(' ').slice(0, 4).join(' '))).toEqual(['2 id=sp start=true end=false', '5 id=sp start=false end=true']);
  });

  it('a model forwards its own request\'s correlationId, flags and timeout (0n / 0 when it has none) to its callee', async () => {
    expect(await drive('forward', { sequence_id: 'sess', sequence_start: true, timeout: 700, tenant: 't' })).toEqual(['id=ssess start=true end=false flags=1 timeout=700 params=scenario,tenant']);
    expect(await drive('forward')).toEqual(['id=n0 start=false end=false flags=0 timeout=0 params=scenario']);
  });

  it('the callee\'s queue policy applies the timeout: a call queued behind a busy instance expires (UNAVAILABLE)', async () => {
    const s = await server;
    // Holds the only instance of `held` until the gate opens; the calls queue behind it.
    const holding = s.infer({ modelName: 'held', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] });
    while (!existsSync(join(gate, 'started'))) await new Promise((r) => setTimeout(r, 5));
    expect(await drive('timeout')).toEqual(Array(3).fill('error UNAVAILABLE: Request timeout expired'));
    writeFileSync(join(gate, 'open'), '');
    expect(Array.from((await holding).outputs[0]!.data as Int32Array)).toEqual([2]);
  });

  it('a bad value or an option set twice fails that call with INVALID_ARG, as a value; the caller goes on', async () => {
    expect(await drive('refused')).toEqual([
      "error INVALID_ARG: BLS request refused: 'correlationId' must be a uint64 (a bigint, or a number up to 2^53 - 1) or a string, got 1152921504606847000: pass a bigint to keep it exact",
      "error INVALID_ARG: BLS request refused: 'flags' must be TRITONSERVER_REQUEST_FLAG_SEQUENCE_START (1) and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END (2), got 4",
      "error INVALID_ARG: BLS request refused: 'timeout' must be a uint64 of microseconds (a bigint, or a number up to 2^53 - 1), got -1",
      "error INVALID_ARG: BLS request refused: 'correlationId' and parameter 'sequence_id' both set the request's correlation id: set one",
      "error INVALID_ARG: BLS request refused: 'flags' and parameter 'sequence_end' both set the request's sequence flags: set one",
    ]);
  });
});
