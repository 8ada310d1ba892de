/**
 * Implicit state driven by hostile requests: a state with variable dims takes whatever shape its
 * sequence's requests make it, so the batcher must keep shapes apart and the state must stay bounded.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ExecuteRequest, ExecuteResult } from '../backend-api.js';
import type { InferenceRequest } from '../infer-request.js';
import { backendWith, servers, stopOneModelServers } from '../one-model-server.case.js';
import { MAX_STATE_BYTES } from '../model-config/validate-model-config.js';
import { InferenceServer } from '../server.js';

afterEach(() => stopOneModelServers(1000));

/** A model whose state is its last input, as it came (dims [-1]): OUT = IN, STATE_OUT = IN. */
async function serveEcho(execute: (requests: ExecuteRequest[]) => Promise<ExecuteResult>): Promise<InferenceServer> {
  const repo = mkdtempSync(join(tmpdir(), 'triode-state-'));
  mkdirSync(join(repo, 'm', '1'), { recursive: true });
  writeFileSync(join(repo, 'm', 'config.pbtxt'), [
    'backend: "testing"', 'max_batch_size: 4',
    'input { name: "IN" data_type: TYPE_INT32 dims: [ -1 ] }', 'output { name: "OUT" data_type: TYPE_INT32 dims: [ -1 ] }',
    'sequence_batching {',
    '  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]',
    '  state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ -1 ] } ]',
    '}',
    'instance_group { count: 1 kind: KIND_CPU }',
  ].join('\n'));
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [backendWith(execute)] });
  servers.push(s);
  expect(s.repositoryIndex()[0]!.state).toBe('READY');
  return s;
}

const echo = (r: ExecuteRequest) => {
  const input = r.inputs.find((t) => t.name === 'IN')!;
  const data = Int32Array.from(input.data as Int32Array);
  return { outputs: [{ name: 'OUT', datatype: 'INT32' as const, shape: [...input.shape], data }, { name: 'STATE_OUT', datatype: 'INT32' as const, shape: [...input.shape], data: data.slice() }] };
};

const step = (id: number, values: number[], start = false): InferenceRequest => ({
  modelName: 'm',
  parameters: { sequence_id: id, sequence_start: start },
  inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, values.length], data: Int32Array.from(values) }],
});

describe('implicit state with variable dims', () => {
  it('attack: sequences whose states took other shapes never share a batch (a framework backend joins a batch\'s states along the batch dim: one client\'s shape failed the other sequences in its batch)', async () => {
    const batches: string[][] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    const s = await serveEcho(async (requests) => {
      const shapes = requests.map((r) => r.inputs.find((t) => t.name === 'STATE_IN')!.shape.join('x'));
      batches.push(shapes);
      if ((requests[0]!.inputs.find((t) => t.name === 'IN')!.data as Int32Array)[0] === 99) await held;
      // What onnxruntime (and collectBatchInputs) would make of it: one tensor of the first's shape.
      if (new Set(shapes).size > 1) throw new Error(`cannot join STATE_IN of shapes ${shapes.join(', ')}`);
      return { responses: requests.map(echo) };
    });
    // Sequence 1's state becomes [1,1], sequence 2's (another client's) [1,3].
    await s.infer(step(1, [5], true));
    await s.infer(step(2, [6, 6, 6], true));
    // Sequence 3 holds the instance while both send their next request, of the same shape.
    const holder = s.infer(step(3, [99], true));
    await new Promise((r) => setImmediate(r));
    const a = s.infer(step(1, [1, 1]));
    const b = s.infer(step(2, [2, 2]));
    await new Promise((r) => setImmediate(r));
    release();
    await holder;
    const [ra, rb] = await Promise.allSettled([a, b]);
    expect(ra).toMatchObject({ status: 'fulfilled', value: { outputs: [{ shape: [1, 2] }] } });
    expect(rb).toMatchObject({ status: 'fulfilled', value: { outputs: [{ shape: [1, 2] }] } });
    for (const shapes of batches) expect(new Set(shapes).size).toBe(1);
  });
});

describe('implicit state size', () => {
  it(`attack: a state that grows with its requests is bounded at MAX_STATE_BYTES a sequence: the request that would pass it fails INVALID_ARG and the sequence keeps its state (it grew without bound)`, async () => {
    // STATE_OUT is the state with IN[0] bytes (of zeros) appended: a stand-in for a model that
    // appends each request's input, so that two requests of 200 MiB pass the limit.
    const grow = 200 << 20;
    const s = await serveEcho(async (requests) => ({
      responses: requests.map((r) => {
        const state = r.inputs.find((t) => t.name === 'STATE_IN')!;
        const n = (r.inputs.find((t) => t.name === 'IN')!.data as Int32Array)[0]!;
        const next = new Uint8Array(state.data.byteLength + n);
        next.set(new Uint8Array(state.data.buffer, state.data.byteOffset, state.data.byteLength));
        const out = { name: 'OUT', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(state.data.byteLength) };
        return { outputs: [out, { name: 'STATE_OUT', datatype: 'INT32' as const, shape: [1, next.byteLength / 4], data: new Int32Array(next.buffer) }] };
      }),
    }));
    /** The bytes of state the request was given. */
    const given = async (r: InferenceRequest) => Number((await s.infer(r)).outputs[0]!.data[0]);
    expect(await given(step(1, [grow], true))).toBe(4);
    await expect(s.infer(step(1, [grow]))).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining(`over the limit of ${MAX_STATE_BYTES} bytes a sequence`) as unknown });
    // The state is still the one the first request left.
    expect(await given(step(1, [0]))).toBe(4 + grow);
  });
});
