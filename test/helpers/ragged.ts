/** Test helper: the infer call, queue probe and one-batch sender the ragged-batching tests share. */
import { until } from './process.js';

/** One output of an HTTP/JSON infer response. */
export interface JsonOutput { name: string; shape: number[]; data: (number | string)[] }

/** Sends one FP32 `INPUT` of `shape` to `model` over HTTP/JSON; rejects with the status and error when it is not 200. */
export async function inferInput(base: string, model: string, shape: number[], data: number[]): Promise<JsonOutput[]> {
  const r = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'INPUT', datatype: 'FP32', shape, data }] }) });
  const json = (await r.json()) as { outputs?: JsonOutput[]; error?: string };
  if (r.status !== 200) throw new Error(`${r.status}: ${json.error ?? ''}`);
  return json.outputs!;
}

/** `model` version 1's queued requests, from `nv_inference_pending_request_count` on the metrics endpoint. */
export async function pendingRequests(metricsBase: string, model: string): Promise<number> {
  const text = await (await fetch(`${metricsBase}/metrics`)).text();
  return Number(new RegExp(`^nv_inference_pending_request_count\\{model="${model}",version="1"\\} (\\d+)$`, 'm').exec(text)?.[1]);
}

/**
 * Sends `requests` ([shape, data] each) to `model` one after another, each once the one before is
 * queued (so they form one batch in this order, with a preferred batch size of their count and a
 * long queue delay); resolves with the answers in order.
 */
export async function inferInOneBatch(base: string, metricsBase: string, model: string, requests: readonly [number[], number[]][]): Promise<JsonOutput[][]> {
  const answers: Promise<JsonOutput[]>[] = [];
  for (const [k, [shape, data]] of requests.entries()) {
    answers.push(inferInput(base, model, shape, data));
    if (k < requests.length - 1) await until(async () => (await pendingRequests(metricsBase, model)) === k + 1);
  }
  return Promise.all(answers);
}
