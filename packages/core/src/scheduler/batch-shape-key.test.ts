import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest } from '../backend-api.js';
import { normalizeModelConfig } from '../model-config/normalize-model-config.js';
import { parsePbtxt } from '../model-config/pbtxt-parser.js';
import { InferenceServer } from '../server.js';
import { batchShapeKey, raggedInputNames } from './batch-shape-key.js';

describe('batchShapeKey', () => {
  const ragged = raggedInputNames(normalizeModelConfig(parsePbtxt(`max_batch_size: 8
input { name: "R" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }
input { name: "V" data_type: TYPE_FP32 dims: [ -1 ] }`)));

  it('reads the inputs with allow_ragged_batch from the config', () => {
    expect([...ragged]).toEqual(['R']);
  });

  it('is the same for requests whose ragged input differs in shape', () => {
    expect(batchShapeKey([{ name: 'R', shape: [1, 3] }, { name: 'V', shape: [1, 2] }], ragged))
      .toBe(batchShapeKey([{ name: 'R', shape: [1, 5] }, { name: 'V', shape: [4, 2] }], ragged));
  });

  it('differs when an input that is not ragged differs in its non-batch dims, or when the inputs differ', () => {
    expect(batchShapeKey([{ name: 'V', shape: [1, 2] }], ragged)).not.toBe(batchShapeKey([{ name: 'V', shape: [1, 3] }], ragged));
    expect(batchShapeKey([{ name: 'R', shape: [1, 2] }], ragged)).not.toBe(batchShapeKey([{ name: 'R', shape: [1, 2] }, { name: 'V', shape: [1, 2] }], ragged));
  });
});

describe('the dynamic batcher with ragged inputs (InferenceServer)', () => {
  const servers: InferenceServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop(1000)));
  });

  /** A backend that records each execution's input shapes and echoes IN as OUT. */
  function recording(executions: number[][][]): Backend {
    return {
      name: 'recording',
      raggedBatching: true,
      async modelInitialize() {
        return {
          async instanceInitialize() {
            return {
              async execute(requests: ExecuteRequest[]) {
                executions.push(requests.map((r) => r.inputs[0]!.shape));
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

  async function serve(ragged: boolean, delayUs: number, executions: number[][][]): Promise<InferenceServer> {
    const repo = mkdtempSync(join(tmpdir(), 'triode-ragged-'));
    mkdirSync(join(repo, 'm', '1'), { recursive: true });
    writeFileSync(join(repo, 'm', 'config.pbtxt'), `backend: "recording"\nmax_batch_size: 8
input { name: "IN" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: ${ragged} }
output { name: "OUT" data_type: TYPE_FP32 dims: [ -1 ] }
dynamic_batching { preferred_batch_size: [ 3 ] max_queue_delay_microseconds: ${delayUs} }`);
    const s = await InferenceServer.create({ modelRepositories: [repo], backends: [recording(executions)] });
    servers.push(s);
    expect(s.repositoryIndex()[0]).toMatchObject({ state: 'READY' });
    return s;
  }

  const infer = (s: InferenceServer, n: number) => s.infer({ modelName: 'm', inputs: [{ name: 'IN', datatype: 'FP32', shape: [1, n], data: new Float32Array(n).fill(n) }] });

  it('batches requests of different shapes into one execution when the input is ragged', async () => {
    const executions: number[][][] = [];
    // The batch goes when it reaches the preferred size 3, long before the 60 s delay.
    const s = await serve(true, 60_000_000, executions);
    const answers = await Promise.all([3, 4, 5].map((n) => infer(s, n)));
    expect(executions).toEqual([[[1, 3], [1, 4], [1, 5]]]);
    expect(answers.map((a) => a.outputs[0]!.shape)).toEqual([[1, 3], [1, 4], [1, 5]]);
  });

  it('never batches them when it is not (unchanged: a shape that differs ends the batch)', async () => {
    const executions: number[][][] = [];
    const s = await serve(false, 50_000, executions);
    await Promise.all([3, 4, 5].map((n) => infer(s, n)));
    expect(executions.map((e) => e.length)).toEqual([1, 1, 1]);
    // Equal shapes still batch.
    executions.length = 0;
    await Promise.all([2, 2, 2].map((n) => infer(s, n)));
    expect(executions).toEqual([[[1, 2], [1, 2], [1, 2]]]);
  });
});
