/**
 * ModelVersion with a test-only backend: what the schedulers do once wired to a model
 * (execution errors, ordering, queue policy over requests, sequence controls and state).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest, ExecuteResult } from './backend-api.js';
import { Errors } from './errors.js';
import type { InferenceRequest } from './infer-request.js';
import { MAX_STATE_BYTES } from './model-config/validate-model-config.js';
import { InferenceServer } from './server.js';
import { backendWith, serveOneModel as serve, servers, stopOneModelServers } from './one-model-server.case.js';

/**
 * A backend named "testing": OUT = IN (+ STATE_IN when the model has state, + 1000 * START), after
 * `delayMs` per batch. A request whose IN holds -1 fails alone; one holding -2 fails its batch.
 */
function testingBackend(delayMs = 0, executions: number[][] = []): Backend {
  return backendWith(async (requests) => {
    executions.push(requests.map((r) => Number((r.inputs.find((t) => t.name === 'IN')!.data as Int32Array)[0])));
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    if (requests.some((r) => (r.inputs[0]!.data as Int32Array)[0] === -2)) throw new Error('batch poisoned');
    return {
      responses: requests.map((r) => {
        const input = r.inputs.find((t) => t.name === 'IN')!;
        if ((input.data as Int32Array)[0] === -1) return { error: Errors.invalidArg('value -1 refused') };
        const state = r.inputs.find((t) => t.name === 'STATE_IN');
        const start = r.inputs.find((t) => t.name === 'START');
        const out = Int32Array.from(input.data as Int32Array, (v, i) => v + (state ? (state.data as Int32Array)[i]! : 0) + (start ? 1000 * (start.data as Int32Array)[0]! : 0));
        const outputs = [{ name: 'OUT', datatype: 'INT32' as const, shape: input.shape, data: out }];
        if (r.outputNames.includes('STATE_OUT')) outputs.push({ name: 'STATE_OUT', datatype: 'INT32', shape: input.shape, data: out.slice() });
        return { outputs };
      }),
    };
  });
}

afterEach(() => stopOneModelServers(1000));

const req = (v: number, parameters: InferenceRequest['parameters'] = {}): InferenceRequest => ({
  modelName: 'm', parameters, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(v) }],
});
const out = async (p: Promise<{ outputs: { data: ArrayLike<number | bigint> }[] }>) => Number((await p).outputs[0]!.data[0]);

describe('ModelVersion', () => {
  it('asks the backend how many instances a group gets (KIND_GPU: count on each listed GPU), and makes that many', async () => {
    const made: number[] = [];
    const inner = testingBackend();
    const backend: Backend = {
      name: 'testing',
      async modelInitialize(ctx) {
        const m = await inner.modelInitialize(ctx);
        return {
          instanceCount: async (g) => (g.count ?? 1) * (g.gpus?.length ?? 1),
          instanceInitialize: async (g, index) => { made.push(index); return m.instanceInitialize(g, index); },
          finalize: () => m.finalize(),
        };
      },
    };
    const s = await serve('max_batch_size: 1 instance_group { count: 2 kind: KIND_GPU gpus: [ 0, 1 ] }', backend);
    expect(made).toEqual([0, 1, 2, 3]);
    expect(await out(s.infer(req(5)))).toBe(5);
  });

  it('tells an instance whose finalize outlives the release time to stop: its signal aborts (review: a javascript thread spun for good)', async () => {
    const signals: (AbortSignal | undefined)[] = [];
    const backend: Backend = {
      name: 'testing',
      async modelInitialize() {
        return {
          async instanceInitialize() {
            return {
              execute: () => new Promise<ExecuteResult>(() => undefined),
              // Settles only when told to stop (as one waiting on a model's code that never returns).
              finalize: (signal?: AbortSignal) => new Promise<void>((resolve) => { signals.push(signal); signal?.addEventListener('abort', () => resolve()); }),
            };
          },
          async finalize() {},
        };
      },
    };
    const s = await serve('', backend);
    s.infer(req(1)).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 50));
    servers.splice(servers.indexOf(s), 1);
    // The stop waits 100 ms for the request, then at least 1 s for the release.
    await s.stop(100);
    expect(signals).toHaveLength(1);
    expect(signals[0]?.aborted).toBe(true);
    expect(signals[0]?.reason).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('not released in time') as unknown });
  });

  it('refuses GPU ids on a group that is not KIND_GPU, as Triton does', async () => {
    await expect(serve('instance_group { count: 1 kind: KIND_CPU gpus: [ 0 ] }', testingBackend())).rejects.toThrow('has kind KIND_CPU but specifies one or more GPUs');
  });

  it('statistics under batching: per request vs per execution counts add up (Triton\'s rules)', async () => {
    const executions: number[][] = [];
    const s = await serve('max_batch_size: 4 dynamic_batching { max_queue_delay_microseconds: 20000 } instance_group { count: 1 kind: KIND_CPU }', testingBackend(10, executions));
    // 10 requests, two of them batch-2: 12 inferences.
    await Promise.all(Array.from({ length: 10 }, (_, i) => s.infer(i < 2
      ? { modelName: 'm', inputs: [{ name: 'IN', datatype: 'INT32', shape: [2, 1], data: Int32Array.of(i, i) }] }
      : req(i))));
    const st = s.modelStatistics('m')[0]!;
    const sizes = executions.map((e) => e.length);
    expect(st.inference_stats.success.count).toBe(10);
    for (const k of ['queue', 'compute_input', 'compute_infer', 'compute_output'] as const) expect(st.inference_stats[k].count).toBe(10);
    expect(st.execution_count).toBe(executions.length);
    expect(executions.length).toBeLessThan(10);
    expect(st.inference_count).toBe(12);
    expect(st.batch_stats.reduce((a, b) => a + b.compute_infer.count, 0)).toBe(st.execution_count);
    expect(st.batch_stats.reduce((a, b) => a + b.batch_size * b.compute_infer.count, 0)).toBe(st.inference_count);
    expect(st.batch_stats.map((b) => b.batch_size)).toEqual([...new Set(st.batch_stats.map((b) => b.batch_size))].sort((a, b) => a - b));
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(10);
    expect(st.inference_stats.success.ns).toBeGreaterThanOrEqual(st.inference_stats.queue.ns);
  });

  it('an aborted signal takes a queued request out of the queue (CANCELLED); a running one finishes', async () => {
    const executions: number[][] = [];
    const s = await serve('max_batch_size: 1 instance_group { count: 1 kind: KIND_CPU }', testingBackend(100, executions));
    const running = new AbortController();
    const queued = new AbortController();
    const first = s.infer({ ...req(1), signal: running.signal });
    // Handled at once: it rejects while the test still waits for the first.
    const secondSettled = s.infer({ ...req(2), signal: queued.signal }).then(() => 'resolved', (e: { code: string }) => e.code);
    await new Promise((r) => setTimeout(r, 20));
    running.abort();
    queued.abort();
    await expect(out(first)).resolves.toBe(1);
    expect(await secondSettled).toBe('CANCELLED');
    expect(executions).toEqual([[1]]);
    const already = new AbortController();
    already.abort();
    await expect(s.infer({ ...req(3), signal: already.signal })).rejects.toMatchObject({ code: 'CANCELLED' });
    expect(s.modelStatistics('m')[0]!.inference_stats.fail.count).toBe(2);
  });

  it('an error for one request fails only that request; a thrown execute fails exactly its batch', async () => {
    const s = await serve('max_batch_size: 4 dynamic_batching { max_queue_delay_microseconds: 50000 } instance_group { count: 1 kind: KIND_CPU }', testingBackend(0));
    const [a, b, c] = await Promise.allSettled([s.infer(req(1)), s.infer(req(-1)), s.infer(req(3))]);
    expect(a).toMatchObject({ status: 'fulfilled' });
    expect(b).toMatchObject({ status: 'rejected', reason: { message: 'value -1 refused', code: 'INVALID_ARG' } });
    expect(c).toMatchObject({ status: 'fulfilled' });
    const poisoned = await Promise.allSettled([s.infer(req(5)), s.infer(req(-2))]);
    expect(poisoned.map((p) => p.status)).toEqual(['rejected', 'rejected']);
    expect((poisoned[0] as PromiseRejectedResult).reason.message).toBe('batch poisoned');
    expect(await out(s.infer(req(7)))).toBe(7);
    expect(s.modelStatistics('m')[0]!.inference_stats.fail.count).toBe(3);
  });

  it('preserve_ordering releases responses in arrival order across instances', async () => {
    const order: number[] = [];
    const s = await serve('max_batch_size: 1 dynamic_batching { preserve_ordering: true } instance_group { count: 2 kind: KIND_CPU }', {
      ...testingBackend(),
      async modelInitialize(ctx) {
        const inner = await testingBackend().modelInitialize(ctx);
        let n = 0;
        return {
          async instanceInitialize(g, i) {
            const inst = await inner.instanceInitialize(g, i);
            // Instance 0 is slow: without ordering, the second request would answer first.
            const delay = n++ === 0 ? 60 : 0;
            return { ...inst, execute: async (r) => { await new Promise((x) => setTimeout(x, delay)); return inst.execute(r); } };
          },
          finalize: () => inner.finalize(),
        };
      },
    });
    await Promise.all([1, 2, 3].map((v) => s.infer(req(v)).then(() => order.push(v))));
    expect(order).toEqual([1, 2, 3]);
  });

  it('preserve_ordering: a request rejected in the queue (timeout) or cancelled there is answered at once, not behind the running one (review: held until it finished, as Triton does not)', async () => {
    // The first request's run holds until the test lets it go: answers held behind it never come.
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    const inner = testingBackend();
    const s = await serve('max_batch_size: 1 dynamic_batching { preserve_ordering: true default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 10000 } } instance_group { count: 1 kind: KIND_CPU }', {
      ...inner,
      async modelInitialize(ctx) {
        const model = await inner.modelInitialize(ctx);
        return {
          async instanceInitialize(g, i) {
            const inst = await model.instanceInitialize(g, i);
            return { ...inst, execute: async (r) => { await held; return inst.execute(r); } };
          },
          finalize: () => model.finalize(),
        };
      },
    });
    // Held answers would never come while the run holds: give up on them after 2 s (they take ~10 ms).
    const unheld = <T>(p: Promise<T>) => Promise.race([p, new Promise<never>((_, no) => setTimeout(() => no(new Error('held behind the running request')), 2000))]);
    const first = s.infer(req(1));
    try {
      await new Promise((r) => setTimeout(r, 20));
      const timedOut = s.infer(req(2));
      const cancel = new AbortController();
      const cancelled = s.infer({ ...req(3), signal: cancel.signal });
      cancel.abort();
      await expect(unheld(cancelled)).rejects.toMatchObject({ code: 'CANCELLED' });
      await expect(unheld(timedOut)).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'Request timeout expired' });
    } finally {
      release();
    }
    expect(await out(first)).toBe(1);
  });

  it('preserve_ordering: a batch that fails inside enqueue (a backend that throws at once) does not hold every later answer', async () => {
    const s = await serve('max_batch_size: 1 dynamic_batching { preserve_ordering: true } instance_group { count: 1 kind: KIND_CPU }', {
      ...testingBackend(),
      async modelInitialize(ctx) {
        const inner = await testingBackend().modelInitialize(ctx);
        return {
          async instanceInitialize(g, i) {
            const inst = await inner.instanceInitialize(g, i);
            // Not async: throws while the scheduler dispatches, inside enqueue.
            return { ...inst, execute: (r) => { if (Number(r[0]!.inputs[0]!.data[0]) === 0) throw new Error('bad input'); return inst.execute(r); } };
          },
          finalize: () => inner.finalize(),
        };
      },
    });
    await expect(s.infer(req(0))).rejects.toThrow('bad input');
    // Before (review): never answered, its turn waited for a number that was never given out.
    expect(await out(s.infer(req(1)))).toBe(1);
  });

  it('preserve_ordering on a decoupled model: a failure after a success is answered (it waited for a turn the success never took)', async () => {
    const decoupled = backendWith(async (requests) => {
      for (const r of requests) {
        const v = Number((r.inputs[0]!.data as Int32Array)[0]);
        if (v < 0) void r.respond!({ error: Errors.invalidArg('negative') }, true);
        else void r.respond!({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] }, true);
      }
      return { responses: [] };
    });
    const s = await serve('max_batch_size: 1 dynamic_batching { preserve_ordering: true } model_transaction_policy { decoupled: true } instance_group { count: 1 kind: KIND_CPU }', decoupled);
    const got: string[] = [];
    await s.inferStream(req(1), () => { got.push('a'); });
    await expect(s.inferStream(req(-1), () => undefined)).rejects.toThrow('negative');
    expect(got).toEqual(['a']);
  });

  it('queue policy: 503-style UNAVAILABLE when full, "Request timeout expired" from a request timeout', async () => {
    const s = await serve('max_batch_size: 1 dynamic_batching { default_queue_policy { max_queue_size: 1 default_timeout_microseconds: 10000000 allow_timeout_override: true } } instance_group { count: 1 kind: KIND_CPU }', testingBackend(300));
    const settled: string[] = [];
    const first = s.infer(req(1)).then((r) => { settled.push('first'); return r; });
    const second = s.infer(req(2, { timeout: 20000 })).catch((e: unknown) => { settled.push('second'); throw e; });
    await expect(s.infer(req(3))).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'Exceeds maximum queue size' });
    await expect(second).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'Request timeout expired' });
    expect(await out(first)).toBe(1);
    // Answered when it timed out (20 ms), not after the running execution (300 ms).
    expect(settled).toEqual(['second', 'first']);
  });

  it('dynamic_batching on a model that does not batch (max_batch_size 0) loads, as in Triton: its queue policy applies, one request per execution (it was refused at load)', async () => {
    const executions: number[][] = [];
    const s = await serve('max_batch_size: 0 dynamic_batching { default_queue_policy { max_queue_size: 1 } } instance_group { count: 1 kind: KIND_CPU }', testingBackend(100, executions));
    const flat = (v: number): InferenceRequest => ({ modelName: 'm', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(v) }] });
    const first = s.infer(flat(1));
    const second = s.infer(flat(2));
    await expect(s.infer(flat(3))).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'Exceeds maximum queue size' });
    expect([await out(first), await out(second)]).toEqual([1, 2]);
    expect(executions).toEqual([[1], [2]]);
  });

  it('priority levels: a priority 1 request overtakes queued default ones', async () => {
    const executions: number[][] = [];
    const s = await serve('max_batch_size: 1 dynamic_batching { priority_levels: 2 default_priority_level: 2 } instance_group { count: 1 kind: KIND_CPU }', testingBackend(20, executions));
    await Promise.all([s.infer(req(1)), s.infer(req(2)), s.infer(req(3)), s.infer(req(4, { priority: 1 }))]);
    expect(executions.flat()).toEqual([1, 4, 2, 3]);
  });

  it('rejects bad priority and timeout parameters', async () => {
    const s = await serve('max_batch_size: 1 dynamic_batching { }', testingBackend());
    await expect(s.infer(req(1, { priority: -1 }))).rejects.toThrow("parameter 'priority' must be a non-negative integer");
    await expect(s.infer(req(1, { timeout: 'soon' }))).rejects.toThrow("parameter 'timeout' must be a non-negative integer");
  });

  it('a backend gets a request\'s correlation id, flags and timeout, whatever the scheduler (Triton: TRITONBACKEND_RequestCorrelationId, RequestFlags, InferenceRequestTimeoutMicroseconds), each only when set', async () => {
    const seen: Pick<ExecuteRequest, 'parameters' | 'correlationId' | 'flags' | 'timeoutUs'>[] = [];
    const record = backendWith(async (requests) => {
      for (const r of requests) {
        const fields: Pick<ExecuteRequest, 'parameters' | 'correlationId' | 'flags' | 'timeoutUs'> = { parameters: r.parameters };
        for (const k of ['correlationId', 'flags', 'timeoutUs'] as const) if (Object.hasOwn(r, k)) Object.assign(fields, { [k]: r[k] });
        seen.push(fields);
      }
      return { responses: requests.map(() => ({ outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(0) }] })) };
    });
    const plain = await serve('max_batch_size: 4\ndynamic_batching { }', record);
    await plain.infer(req(1));
    await plain.infer(req(1, { tenant: 'a', priority: 0, binary_data_output: true }));
    await plain.infer(req(1, { sequence_id: 2n ** 64n - 1n, sequence_start: true, timeout: 250 }));
    await plain.infer(req(1, { sequence_id: 'abc', sequence_start: false, sequence_end: true, timeout: 0 }));
    await plain.infer(req(1, { sequence_id: 0, sequence_end: true }));
    await plain.infer(req(1, { sequence_id: '' }));
    const sequenced = await serve('max_batch_size: 4\nsequence_batching { }\ninstance_group { count: 1 kind: KIND_CPU }', record);
    await sequenced.infer(req(1, { sequence_id: 7, sequence_start: true }));
    await sequenced.infer(req(1, { sequence_id: 7, sequence_end: true, tenant: 'b' }));
    expect(seen).toEqual([
      { parameters: {} },
      { parameters: { tenant: 'a' } },
      { parameters: {}, correlationId: 18446744073709551615n, flags: 1, timeoutUs: 250 },
      { parameters: {}, correlationId: 'abc', flags: 2 },
      { parameters: {}, flags: 2 },
      { parameters: {} },
      { parameters: {}, correlationId: 7n, flags: 1 },
      { parameters: { tenant: 'b' }, correlationId: 7n, flags: 2 },
    ]);
    // Checked as the frontends check them, for every model (a model without sequence batching ignored them).
    await expect(plain.infer(req(1, { sequence_start: 'yes' }))).rejects.toMatchObject({ code: 'INVALID_ARG', message: "parameter 'sequence_start' must be a boolean" });
    await expect(plain.infer(req(1, { sequence_id: -5 }))).rejects.toMatchObject({ code: 'INVALID_ARG', message: "parameter 'sequence_id' must be a non-negative integer, got -5" });
  });

  it('sequences: control tensors, and implicit state kept apart between interleaved sequences', async () => {
    const s = await serve([
      'max_batch_size: 4',
      'sequence_batching {',
      '  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]',
      '  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] initial_state { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true name: "z" } } ]',
      '}',
      'instance_group { count: 1 kind: KIND_CPU }',
    ].join('\n'), testingBackend(5));
    const seq = async (id: number, values: number[]) => {
      const got: number[] = [];
      for (let i = 0; i < values.length; i++) {
        got.push(await out(s.infer(req(values[i]!, { sequence_id: id, sequence_start: i === 0, sequence_end: i === values.length - 1 }))));
      }
      return got;
    };
    // Running sums per sequence; START adds 1000 to the first output (and so to the state).
    const [a, b] = await Promise.all([seq(1, [1, 2, 3]), seq(2, [10, 20, 30])]);
    expect(a).toEqual([1001, 1003, 1006]);
    expect(b).toEqual([1010, 1030, 1060]);
    // An ended id starts again from the initial state.
    expect(await seq(1, [5])).toEqual([1005]);
  });
});

describe('sequence settings read at load, as Triton reads them', () => {
  const seqConfig = (state: string, controls = 'control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]') => [
    'backend: "testing"', 'max_batch_size: 4',
    'input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }',
    `sequence_batching { ${controls} ${state} }`, 'instance_group { count: 1 kind: KIND_CPU }',
  ].join('\n');
  const load = async (config: string, files: Record<string, Uint8Array> = {}) => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-seqload-'));
    mkdirSync(join(repo, 'm', '1'), { recursive: true });
    mkdirSync(join(repo, 'm', 'initial_state'), { recursive: true });
    writeFileSync(join(repo, 'm', 'config.pbtxt'), config);
    for (const [name, data] of Object.entries(files)) writeFileSync(join(repo, 'm', 'initial_state', name), data);
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [testingBackend()], strictReadiness: false });
    servers.push(s);
    return s;
  };
  const first = (s: InferenceServer, v: number) => out(s.infer(req(v, { sequence_id: 9, sequence_start: true })));

  it('initial_state data_file: a sequence starts from the file (it started from zeros)', async () => {
    const s = await load(seqConfig('state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] initial_state { data_type: TYPE_INT32 dims: [ 1 ] data_file: "s.bin" name: "f" } } ]'),
      { 's.bin': new Uint8Array(Int32Array.of(500).buffer) });
    expect(await first(s, 2)).toBe(1502);
  });

  it('a state with a variable dim and no initial_state starts as zeros with that dim 1 (every request failed)', async () => {
    const s = await load(seqConfig('state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ -1 ] } ]'));
    expect(await first(s, 2)).toBe(1002);
  });

  it.each([
    ['initial_state { data_type: TYPE_FP32 dims: [ 1 ] zero_data: true name: "z" }', "The data type used for 'initial_state' field of state 'STATE_IN' does not match the state data type."],
    ['initial_state { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true }', "Field 'name' must be set when using initial_state for state input 'STATE_IN'."],
    ['initial_state { data_type: TYPE_INT32 dims: [ 1, 1 ] zero_data: true name: "z" }', "Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input 'STATE_IN'. 2 != 1"],
    ['initial_state { data_type: TYPE_INT32 dims: [ 3 ] zero_data: true name: "z" }', "'initial_state' dim for input name 'STATE_IN' doesn't match 'state' dim description. 3 != 1"],
    ['initial_state { data_type: TYPE_INT32 dims: [ 1 ] data_file: "short.bin" name: "z" }', 'initial_state setting expects 4 bytes, but the data provided from short.bin only has 2 bytes.'],
  ])('an initial_state that does not fit its state fails the load (it loaded READY): %s', async (init, reason) => {
    const s = await load(seqConfig(`state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] ${init} } ]`), { 'short.bin': Uint8Array.of(1, 2) });
    expect(s.repositoryIndex()[0]).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringContaining(reason) });
  });

  it(`BYTES initial_state files count by their real size against MAX_STATE_BYTES (review: 4 bytes an element was counted; 20 states of 40 MiB each loaded)`, async () => {
    // Three states of one 90 MiB element each: 270 MiB, over the 256 MiB limit; two of them fit.
    const len = 90 << 20;
    const blob = new Uint8Array(len + 4).fill(0x61);
    new DataView(blob.buffer).setUint32(0, len, true);
    const state = (k: number) => `{ input_name: "S${k}" output_name: "SO${k}" data_type: TYPE_STRING dims: [ 1 ] initial_state { data_type: TYPE_STRING dims: [ 1 ] data_file: "blob" name: "i${k}" } }`;
    const s = await load(seqConfig(`state [ ${[0, 1, 2].map(state).join(', ')} ]`), { blob });
    expect(s.repositoryIndex()[0]).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringContaining(`implicit state 'S2' starts with ${len + 4} bytes (initial_state file 'blob'): its states would start with over the limit of ${MAX_STATE_BYTES} bytes a sequence`),
    });
    const t = await load(seqConfig(`state [ ${[0, 1].map(state).join(', ')} ]`), { blob });
    expect(t.repositoryIndex()[0]!.state).toBe('READY');
  });

  it.each([
    ['control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START } ] } ]', "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for CONTROL_SEQUENCE_START for m"],
    ['control_input [ { name: "CORRID" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_FP32 } ] } ]', 'sequence batching CORRID data type FP32 is not supported for m'],
    // Review: these loaded; named like a model input, the control replaced the client's tensor in every request.
    ['control_input [ { name: "IN" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]', "sequence batching control input 'IN' of model 'm' has the name of a model input"],
    ['control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }, { name: "S" control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [ 0, 1 ] } ] } ]', "sequence batching control tensor 'S' is specified for multiple control kinds for m"],
    ['control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }, { name: "T" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]', 'sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for m'],
    ['control_input [ { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] fp32_false_true: [ 0, 1 ] } ] } ]', "sequence batching specifies both 'int32_false_true' and 'fp32_false_true' for CONTROL_SEQUENCE_START for m"],
    ['control_input [ { name: "C" control [ { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 int32_false_true: [ 0, 1 ] } ] } ]', "sequence batching must not specify either 'int32_false_true' nor 'fp32_false_true' for CONTROL_SEQUENCE_CORRID for m"],
    ['control_input [ { control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]', 'sequence batching control tensor must have a name for m'],
  ])('a control it cannot make fails the load (it loaded READY and failed every batch): %s', async (controls, reason) => {
    const s = await load(seqConfig('', controls));
    expect(s.repositoryIndex()[0]).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringContaining(reason) });
  });
});

describe('response cache', () => {
  /** A repository with model "m" (testing backend) that enables the response cache. */
  const cachedModelRepo = (prefix: string): string => {
    const repo = mkdtempSync(join(tmpdir(), prefix));
    mkdirSync(join(repo, 'm', '1'), { recursive: true });
    writeFileSync(join(repo, 'm', 'config.pbtxt'), 'backend: "testing"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\nresponse_cache { enable: true }\n');
    return repo;
  };

  it('answers a repeated request from the cache (no execution), counts hits and misses, evicts by size', async () => {
    const executions: number[][] = [];
    const repo = mkdtempSync(join(tmpdir(), 'triode-cache-'));
    mkdirSync(join(repo, 'm', '1'), { recursive: true });
    writeFileSync(join(repo, 'm', 'config.pbtxt'), 'backend: "testing"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\nresponse_cache { enable: true }\n');
    mkdirSync(join(repo, 'n', '1'), { recursive: true });
    writeFileSync(join(repo, 'n', 'config.pbtxt'), 'backend: "testing"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    // Room for two entries (each: a 4-byte output padded to 8, its name and shape, TENSOR_OVERHEAD_BYTES, a 44-character key and ENTRY_OVERHEAD_BYTES: 999 bytes).
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [testingBackend(0, executions)], responseCacheBytes: 2000 });
    servers.push(s);
    const ask = (v: number, id?: string) => s.infer({ ...req(v), ...(id ? { id } : {}) });
    expect(await out(ask(7))).toBe(7);
    const again = await ask(7, 'second');
    expect(Number(again.outputs[0]!.data[0])).toBe(7);
    expect(again.id).toBe('second');
    expect(executions).toEqual([[7]]);
    await ask(8);
    await ask(9); // evicts 7 (least recently used)
    await ask(7);
    expect(executions.flat()).toEqual([7, 8, 9, 7]);
    const st = s.modelStatistics('m')[0]!;
    expect(st.inference_stats.cache_hit.count).toBe(1);
    expect(st.inference_stats.cache_miss.count).toBe(4);
    expect(st.inference_stats.success.count).toBe(5);
    // As Triton's statistics: queue and compute counts are the success count, hits included (they were 4).
    for (const k of ['queue', 'compute_input', 'compute_infer', 'compute_output'] as const) expect(st.inference_stats[k].count).toBe(5);
    expect(st.inference_count).toBe(4);
    expect(s.responseCacheStats()).toMatchObject({ entries: 2, hits: 1, misses: 4, evictions: 2 });
    // A model that does not enable it is never cached.
    await s.infer({ ...req(1), modelName: 'n' });
    await s.infer({ ...req(1), modelName: 'n' });
    expect(executions.flat().slice(-2)).toEqual([1, 1]);
  });

  it('attack: requests that differ only in custom parameters do not share an answer; scheduling parameters do not split the cache', async () => {
    const executions: number[][] = [];
    const repo = cachedModelRepo('triode-cache-params-');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [testingBackend(0, executions)], responseCacheBytes: 1 << 20 });
    servers.push(s);
    await s.infer({ ...req(5), parameters: { tenant: 'alice' } });
    await s.infer({ ...req(5), parameters: { tenant: 'bob' } });
    await s.infer({ ...req(5), parameters: { tenant: 'alice', priority: 0, timeout: 0 } });
    expect(executions.flat()).toEqual([5, 5]);
    expect(s.responseCacheStats()).toMatchObject({ hits: 1, misses: 2 });
  });

  it('a model sees only the custom parameters, not those Triton reads into the request; the cache key covers the correlation id, flags and timeout it reads instead (a model that read its correlation id was answered from another id\'s entry)', async () => {
    const seen: Record<string, unknown>[] = [];
    const backend = backendWith(async (requests) => {
      seen.push(...requests.map((r) => ({ ...r.parameters })));
      // OUT: what the model read of the request (its correlation id, flags and timeout).
      return { responses: requests.map((r) => ({ outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(Number(r.correlationId ?? 0) + 100 * (r.flags ?? 0) + (typeof r.correlationId === 'string' ? 1000 : 0) + (r.timeoutUs ?? 0)) }] })) };
    });
    const s = await InferenceServer.create({ modelRepositories: [cachedModelRepo('triode-cache-seen-')], backends: [backend], responseCacheBytes: 1 << 20 });
    servers.push(s);
    const flags = { sequence_start: true, sequence_end: true };
    expect(await out(s.infer(req(5, { tenant: 'alice', sequence_id: 1, ...flags, priority: 0, timeout: 0, binary_data_output: true })))).toBe(301);
    // What no model reads (priority, binary_data_output) does not split the cache; a bigint id is the same id.
    expect(await out(s.infer(req(5, { tenant: 'alice', sequence_id: 1n, ...flags })))).toBe(301);
    expect(s.responseCacheStats()).toMatchObject({ hits: 1, misses: 1 });
    // Each of what it reads does: another id, a string id, other flags, a timeout.
    expect(await out(s.infer(req(5, { tenant: 'alice', sequence_id: 2, ...flags })))).toBe(302);
    expect(await out(s.infer(req(5, { tenant: 'alice', sequence_id: '1', ...flags })))).toBe(1301);
    expect(await out(s.infer(req(5, { tenant: 'alice', sequence_id: 1, sequence_start: true })))).toBe(101);
    expect(await out(s.infer(req(5, { tenant: 'alice', sequence_id: 1, ...flags, timeout: 7 })))).toBe(308);
    expect(await out(s.infer(req(5, { tenant: 'alice' })))).toBe(0);
    expect(s.responseCacheStats()).toMatchObject({ hits: 1, misses: 6 });
    expect(seen).toEqual(Array.from({ length: 6 }, () => ({ tenant: 'alice' })));
  });

  it('attack: a cached model hashes a 64 MiB input a slice at a time, other work served between (in one go: 55 ms a 64 MiB, so a 2 GiB gRPC input held the event loop about 1.7 s)', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-cache-big-'));
    mkdirSync(join(repo, 'm', '1'), { recursive: true });
    writeFileSync(join(repo, 'm', 'config.pbtxt'), 'backend: "testing"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\nresponse_cache { enable: true }\n');
    // Event loop turns, counted from the request's start to its execution.
    let turns = 0;
    let spinning = true;
    const spin = (): void => { turns++; if (spinning) setImmediate(spin); };
    const atExecute: number[] = [];
    const backend = backendWith(async (requests) => {
      atExecute.push(turns);
      return { responses: requests.map(() => ({ outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(1) }] })) };
    });
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [backend], responseCacheBytes: 1 << 20 });
    servers.push(s);
    const big = (): InferenceRequest => ({ modelName: 'm', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 16 << 20], data: new Int32Array(16 << 20) }] });
    try {
      setImmediate(spin);
      turns = 0;
      await s.infer(big());
      turns = 0;
      await s.infer(big()); // a hit: hashed the same way
    } finally {
      spinning = false;
    }
    // 64 MiB in slices of KEY_HASH_CHUNK_BYTES (8 MiB): the event loop turned between them.
    expect(atExecute).toHaveLength(1);
    expect(atExecute[0]).toBeGreaterThanOrEqual(64 / 8 - 1);
    expect(turns).toBeGreaterThanOrEqual(64 / 8 - 1);
    expect(s.responseCacheStats()).toMatchObject({ hits: 1, misses: 1 });
  });

  it('a cached request whose large input is still being hashed when its model stops is refused, not answered from the cache (review: the stop checks came before the wait)', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-cache-stop-'));
    mkdirSync(join(repo, 'm', '1'), { recursive: true });
    writeFileSync(join(repo, 'm', 'config.pbtxt'), 'backend: "testing"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\nresponse_cache { enable: true }\n');
    const backend = backendWith(async (requests) => ({ responses: requests.map(() => ({ outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(1) }] })) }));
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [backend], responseCacheBytes: 1 << 20 });
    const big = (): InferenceRequest => ({ modelName: 'm', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 16 << 20], data: new Int32Array(16 << 20) }] });
    await s.infer(big());
    const hit = s.infer(big());
    hit.catch(() => undefined);
    // Its hashing under way (a slice at a time), the server stops.
    await new Promise((r) => setImmediate(r));
    const stopped = s.stop(5000);
    await expect(hit).rejects.toThrow(Errors.schedulerStopping().message);
    await stopped;
    expect(s.responseCacheStats()).toMatchObject({ hits: 0, misses: 1 });
  });

  it('a streamed request (gRPC stream, generate) to a cached model is looked up and stored like any other (before, it always ran)', async () => {
    const executions: number[][] = [];
    const repo = cachedModelRepo('triode-cache-stream-');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [testingBackend(0, executions)], responseCacheBytes: 1 << 20 });
    servers.push(s);
    const got: number[] = [];
    for (let k = 0; k < 3; k++) await s.inferStream(req(7), (r) => { got.push((r.outputs[0]!.data as Int32Array)[0]!); });
    await s.infer(req(7));
    expect(executions.flat()).toEqual([7]);
    expect(got).toHaveLength(3);
    expect(s.responseCacheStats()).toMatchObject({ hits: 3, misses: 1 });
  });

  it('a reload of the same version does not answer from the old load\'s entries', async () => {
    const executions: number[][] = [];
    const repo = cachedModelRepo('triode-cache-reload-');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [testingBackend(0, executions)], responseCacheBytes: 1 << 20, modelControlMode: 'explicit', startupModels: ['m'] });
    servers.push(s);
    await s.infer(req(5));
    await s.infer(req(5));
    expect(executions.flat()).toEqual([5]);
    // The reloaded model may compute something else (new weights, a new config): its own entries.
    await s.loadModel('m', { config: { ...s.modelConfig('m'), parameters: { v: { string_value: '2' } } } as never });
    await s.infer(req(5));
    expect(executions.flat()).toEqual([5, 5]);
  });

  it('attack: a load whose config names a 5,000-character backend says so in at most MAX_ECHO_CHARS of it (fuzz seed 2031 case 11247)', async () => {
    const repo = cachedModelRepo('triode-long-backend-');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [testingBackend()], modelControlMode: 'explicit', startupModels: ['m'] });
    servers.push(s);
    const long = 'x'.repeat(5000);
    for (const field of ['backend', 'platform']) {
      const { backend: _b, platform: _p, ...rest } = s.modelConfig('m') as unknown as Record<string, unknown>;
      const err = await s.loadModel('m', { config: { ...rest, [field]: long } as never }).then(() => undefined, (e: Error) => e);
      expect(err?.message, field).toContain(`backend 'xxxx`);
      expect(err!.message.length, field).toBeLessThan(600);
    }
  });

  it('attack: an invalid request is refused on a hit as on a miss (the hit skipped the checks)', async () => {
    const executions: number[][] = [];
    const repo = cachedModelRepo('triode-cache-check-');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [testingBackend(0, executions)], responseCacheBytes: 1 << 20 });
    servers.push(s);
    await s.infer(req(3));
    await expect(s.infer({ ...req(3), parameters: { priority: -1 } })).rejects.toThrow("parameter 'priority' must be a non-negative integer");
    await expect(s.infer({ ...req(3), inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, 1], data: Float32Array.of(3) }] })).rejects.toMatchObject({ code: 'INVALID_ARG' });
    expect(executions.flat()).toEqual([3]);
  });
});

/**
 * A backend named "flat" that sees every input as the config's `reshape.shape` and answers in that
 * shape: OUT = IN, shape as received (what an ONNX graph with a flat output does).
 */
function flatBackend(seen: number[][]): Backend {
  return {
    name: 'flat',
    async modelInitialize() {
      return {
        async instanceInitialize() {
          return {
            async execute(requests: ExecuteRequest[]): Promise<ExecuteResult> {
              return {
                responses: requests.map((r) => {
                  const input = r.inputs[0]!;
                  seen.push([...input.shape]);
                  return { outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [...input.shape], data: input.data }] };
                }),
              };
            },
            async finalize() {},
          };
        },
        async finalize() {},
      };
    },
  };
}

async function serveFlat(config: string, seen: number[][]): Promise<InferenceServer> {
  const repo = mkdtempSync(join(tmpdir(), 'triode-reshape-'));
  mkdirSync(join(repo, 'm', '1'), { recursive: true });
  writeFileSync(join(repo, 'm', 'config.pbtxt'), `backend: "flat"\n${config}`);
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [flatBackend(seen)] });
  servers.push(s);
  const row = s.repositoryIndex()[0]!;
  if (row.state !== 'READY') throw new Error(row.reason);
  return s;
}

describe('ModelVersion output reshape (Triton: the backend makes reshape.shape, clients see dims)', () => {
  it('answers [batch, ...dims] for an output the model makes as [batch, 16], as metadata says', async () => {
    const seen: number[][] = [];
    const s = await serveFlat('max_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 2, 8 ] reshape { shape: [ 16 ] } }', seen);
    expect(s.modelMetadata('m').outputs[0]!.shape).toEqual([-1, 2, 8]);
    const data = Int32Array.from({ length: 32 }, (_, i) => i);
    const one = await s.infer({ modelName: 'm', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 2, 8], data: data.slice(0, 16) }] });
    expect(one.outputs[0]!.shape).toEqual([1, 2, 8]);
    const two = await s.infer({ modelName: 'm', inputs: [{ name: 'IN', datatype: 'INT32', shape: [2, 2, 8], data }] });
    expect(two.outputs[0]!.shape).toEqual([2, 2, 8]);
    expect(Array.from(two.outputs[0]!.data as Int32Array)).toEqual(Array.from(data));
    // The backend saw the reshaped inputs.
    expect(seen).toEqual([[1, 16], [2, 16]]);
  });

  it('fills a variable dim of dims from the backend\'s shape (no batching)', async () => {
    const seen: number[][] = [];
    const s = await serveFlat('max_batch_size: 0\ninput { name: "IN" data_type: TYPE_INT32 dims: [ -1, 2, 2 ] reshape { shape: [ -1, 4 ] } }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ -1, 2, 2 ] reshape { shape: [ -1, 4 ] } }', seen);
    const r = await s.infer({ modelName: 'm', inputs: [{ name: 'IN', datatype: 'INT32', shape: [3, 2, 2], data: new Int32Array(12) }] });
    expect(seen).toEqual([[3, 4]]);
    expect(r.outputs[0]!.shape).toEqual([3, 2, 2]);
  });

  it('a classification request reads the reshaped output', async () => {
    const s = await serveFlat('max_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 4 ] reshape { shape: [ 2, 2 ] } }', []);
    const r = await s.infer({ modelName: 'm', outputs: [{ name: 'OUT', classCount: 1 }], inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 4], data: Int32Array.of(1, 9, 3, 4) }] });
    expect(r.outputs[0]!.shape).toEqual([1, 1]);
    expect(new TextDecoder().decode(r.outputs[0]!.data as Uint8Array)).toMatch(/9[.0-9]*:1$/);
  });
});

describe('ModelVersion with a lost instance (issue #17: a GPU lost mid-run)', () => {
  const LOST = 'Cannot run the model: GPU 0 (Fake GPU) was lost (the model is not ready until it is loaded again): device lost';

  /**
   * Two instances; a request holding -3 makes its instance report a lost device (thrown when
   * `how` is 'throw', as its response's error when 'response'); every batch waits for `gate`.
   */
  function losingBackend(how: 'throw' | 'response', executions: number[], gate: { open: Promise<void> }): Backend {
    return {
      name: 'testing',
      async modelInitialize() {
        return {
          async instanceInitialize() {
            return {
              async execute(requests: ExecuteRequest[]): Promise<ExecuteResult> {
                const values = requests.map((r) => Number((r.inputs[0]!.data as Int32Array)[0]));
                executions.push(...values);
                await gate.open;
                if (how === 'throw' && values.includes(-3)) throw Errors.instanceLost(LOST);
                return {
                  responses: requests.map((r, i) => (values[i] === -3 ? { error: Errors.instanceLost(LOST) } : { outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })),
                };
              },
              async finalize() {},
            };
          },
          async finalize() {},
        };
      },
    };
  }

  async function serveExplicit(backend: Backend): Promise<InferenceServer> {
    const repo = mkdtempSync(join(tmpdir(), 'triode-model-'));
    mkdirSync(join(repo, 'm', '1'), { recursive: true });
    writeFileSync(join(repo, 'm', 'config.pbtxt'), 'backend: "testing"\nmax_batch_size: 8\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\ninstance_group { count: 2 kind: KIND_CPU }\n');
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [backend], modelControlMode: 'explicit', startupModels: ['m'] });
    servers.push(s);
    return s;
  }

  it.each(['throw', 'response'] as const)('fails the request with the clear error, marks the version not ready (index UNAVAILABLE with the reason), stops every instance, and a load recovers (%s)', async (how) => {
    const executions: number[] = [];
    let open!: () => void;
    const gate = { open: new Promise<void>((r) => { open = r; }) };
    const s = await serveExplicit(losingBackend(how, executions, gate));
    expect(s.modelReady('m')).toBe(true);

    // -3 and 1 run on the two instances; 2 and 4 wait in the queue behind them.
    const lost = s.infer(req(-3)).catch((e: unknown) => e);
    const running = s.infer(req(1));
    const queued = [s.infer(req(2)).catch((e: unknown) => e), s.infer(req(4)).catch((e: unknown) => e)];
    await new Promise((r) => setImmediate(r));
    open();

    const e = await lost;
    expect(e).toMatchObject({ code: 'UNAVAILABLE', message: LOST });
    // The flag stays with the version that lost its instance: a BLS caller rethrowing the error does not go not ready too.
    expect(e).toMatchObject({ instanceLost: false });
    // The batch that ran on the other instance finished; what was queued fails with why.
    expect(await out(running)).toBe(1);
    for (const q of await Promise.all(queued)) {
      expect(q).toMatchObject({ code: 'UNAVAILABLE', message: `Request for unknown model: 'm' version 1 is not at ready state: ${LOST}` });
    }
    expect(executions.sort()).toEqual([-3, 1]);

    // Not ready: model ready, the repository index, strict server readiness; new requests are refused before any instance.
    expect(s.modelReady('m')).toBe(false);
    expect(s.modelReady('m', 1)).toBe(false);
    expect(s.isReady()).toBe(false);
    expect(s.repositoryIndex()).toEqual([{ name: 'm', version: '1', state: 'UNAVAILABLE', reason: LOST }]);
    await expect(s.infer(req(5))).rejects.toMatchObject({ code: 'NOT_FOUND', message: `Request for unknown model: 'm' has no available versions: ${LOST}` });
    await expect(s.infer({ ...req(5), modelVersion: 1 })).rejects.toMatchObject({ code: 'UNAVAILABLE', message: `Request for unknown model: 'm' version 1 is not at ready state: ${LOST}` });
    expect(executions).toHaveLength(2);

    // Loading it again makes new instances: ready again.
    await s.loadModel('m');
    expect(s.modelReady('m')).toBe(true);
    expect(s.repositoryIndex()).toEqual([{ name: 'm', version: '1', state: 'READY', reason: '' }]);
    expect(await out(s.infer(req(6)))).toBe(6);
  });

  it('other errors leave the version ready', async () => {
    const s = await serve('max_batch_size: 8', testingBackend());
    await expect(s.infer(req(-2))).rejects.toThrow('batch poisoned');
    await expect(s.infer(req(-1))).rejects.toThrow('value -1 refused');
    expect(s.modelReady('m')).toBe(true);
    expect(await out(s.infer(req(3)))).toBe(3);
  });
});
