/**
 * End to end: ragged batching on the onnxruntime backend (issue #15) against `triode serve`, with
 * a generated ONNX model (test/helpers/ragged-onnx.ts) that takes INPUT as every request's
 * elements in one [total elements] tensor and INDEX, the BATCH_ACCUMULATED_ELEMENT_COUNT batch
 * input: DOUBLED (INPUT * 2) is scattered back with each request's shape, ACC (INDEX) split by
 * request. Requests of different shapes run in one execution, on the instance thread and on the
 * main thread (`execution_thread: "main"`). Deterministic on any machine: a batch can only go when
 * its preferred size (all the requests) is queued, and the requests are sent one at a time, each
 * once the previous is seen queued (nv_inference_pending_request_count), so their order is known.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { writeRaggedOnnxModel } from './helpers/ragged-onnx.js';
import { freePort, startTriode, type Child } from './helpers/process.js';
import { inferInOneBatch, type JsonOutput } from './helpers/ragged.js';

let triode: Child;
let base: string;
let metricsBase: string;

beforeAll(async () => {
  const port = await freePort();
  const metricsPort = await freePort();
  base = `http://127.0.0.1:${port}`;
  metricsBase = `http://127.0.0.1:${metricsPort}`;
  const repo = makeRepository([]);
  writeRaggedOnnxModel(repo, 'ragged_onnx', { preferred: 4 });
  writeRaggedOnnxModel(repo, 'ragged_onnx_main', { preferred: 3, extraConfig: 'parameters { key: "execution_thread" value: { string_value: "main" } }\n' });
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false',
    '--metrics-port', String(metricsPort), '--strict-readiness=false']);
});

afterAll(async () => {
  await triode?.stop();
});

type Output = JsonOutput;

const inOneBatch = (model: string, requests: [number[], number[]][]): Promise<Output[][]> => inferInOneBatch(base, metricsBase, model, requests);

async function executions(model: string): Promise<{ inference_count: number; execution_count: number }> {
  const stats = (await (await fetch(`${base}/v2/models/${model}/stats`)).json()) as { model_stats: { inference_count: number; execution_count: number }[] };
  return stats.model_stats[0]!;
}

const get = (outs: Output[], name: string) => outs.find((o) => o.name === name)!;

describe('ragged batching on onnxruntime (triode serve)', () => {
  it('the model loads: onnxruntime implements ragged batching', async () => {
    const rows = (await (await fetch(`${base}/v2/repository/index`, { method: 'POST' })).json()) as { name: string; state: string }[];
    expect(rows.filter((r) => r.name.startsWith('ragged_onnx')).map((r) => r.state)).toEqual(['READY', 'READY']);
  });

  it('runs requests of shapes [1,3], [1,1], [1,5], [1,2] in one execution on the instance thread; each gets its own answer', async () => {
    const requests: [number[], number[]][] = [
      [[1, 3], [1, 2, 3]],
      [[1, 1], [10]],
      [[1, 5], [1, 1, 1, 1, 1]],
      [[1, 2], [-4, 0.5]],
    ];
    const results = await inOneBatch('ragged_onnx', requests);
    // DOUBLED: each request's elements doubled, in its own shape (the batch output's scatter).
    expect(results.map((o) => get(o, 'DOUBLED'))).toMatchObject(requests.map(([shape, data]) => ({ shape, data: data.map((v) => v * 2) })));
    // ACC: the batch input the model saw, [3, 4, 9, 11], one row per request: all four in one batch.
    expect(results.map((o) => get(o, 'ACC'))).toMatchObject([{ shape: [1, 1], data: [3] }, { shape: [1, 1], data: [4] }, { shape: [1, 1], data: [9] }, { shape: [1, 1], data: [11] }]);
    expect(await executions('ragged_onnx')).toMatchObject({ inference_count: 4, execution_count: 1 });
  });

  it('the same on the main thread (execution_thread "main"), and a lone request alone', async () => {
    const results = await inOneBatch('ragged_onnx_main', [[[1, 2], [1, 2]], [[1, 4], [3, 4, 5, 6]], [[1, 1], [7]]]);
    expect(results.map((o) => get(o, 'DOUBLED'))).toMatchObject([{ shape: [1, 2], data: [2, 4] }, { shape: [1, 4], data: [6, 8, 10, 12] }, { shape: [1, 1], data: [14] }]);
    expect(results.map((o) => get(o, 'ACC').data[0])).toEqual([2, 6, 7]);
    expect(await executions('ragged_onnx_main')).toMatchObject({ inference_count: 3, execution_count: 1 });
  });
});
