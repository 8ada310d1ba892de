/**
 * What a sequence model answers to its requests through the server (the order of the request
 * checks, the idle timeout), as Triton's SequenceBatchScheduler answers them.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest, ExecuteResult } from './backend-api.js';
import type { InferenceRequest } from './infer-request.js';
import { backendWith, serveOneModel as serve, stopOneModelServers } from './one-model-server.case.js';

/** A backend named "testing": OUT = IN, after `delayMs` a batch. */
function echoBackend(delayMs = 0): Backend {
  return backendWith(async (requests: ExecuteRequest[]): Promise<ExecuteResult> => {
    if (delayMs) await new Promise((r) => setTimeout(r, delayMs));
    return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs.find((t) => t.name === 'IN')!, name: 'OUT' }] })) };
  });
}

afterEach(() => stopOneModelServers(2000));

const req = (values: number[], parameters: InferenceRequest['parameters'] = {}): InferenceRequest => ({
  modelName: 'm', parameters, inputs: [{ name: 'IN', datatype: 'INT32', shape: [values.length, 1], data: Int32Array.from(values) }],
});

describe('sequence requests: the order of the checks', () => {
  it('a batch of 2 without a correlation id gets the batch-size error first, as Triton checks it first', async () => {
    const s = await serve('max_batch_size: 4\nsequence_batching { }', echoBackend());
    await expect(s.infer(req([1, 2]))).rejects.toThrow("inference request to model 'm' must specify batch-size 1 due to requirements of sequence batcher");
    await expect(s.infer(req([1]))).rejects.toThrow("inference request to model 'm' must specify a non-zero or non-empty correlation ID");
  });
});

describe('sequence requests: the idle timeout', () => {
  it('counts from the last arrival: START runs 300 ms, the client waits 300 ms, the continuation is refused (Triton 400, Triode answered 200)', async () => {
    const s = await serve('max_batch_size: 4\nsequence_batching { max_sequence_idle_microseconds: 500000 }\ninstance_group { count: 1 kind: KIND_CPU }', echoBackend(300));
    await s.infer(req([1], { sequence_id: 5, sequence_start: true }));
    await new Promise((r) => setTimeout(r, 300));
    await expect(s.infer(req([2], { sequence_id: 5 }))).rejects.toMatchObject({
      code: 'INVALID_ARG',
      message: "inference request for sequence 5 to model 'm' must specify the START flag on the first request of the sequence",
    });
  });
});
