/** Test helper: the infer call and queue probe the ragged-batching tests share. */

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
