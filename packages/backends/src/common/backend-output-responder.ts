/**
 * @module A batch's outputs split among its requests: each request's rows of the batch dim, or, for
 * an output of a `batch_output` (BATCH_SCATTER_WITH_INPUT_SHAPE), a part shaped like that request's
 * source input.
 * Triton: backend/src/backend_output_responder.cc (ProcessTensor, ProcessBatchOutput);
 * backend_common.cc BatchOutput::ParseFromModelConfig (the scatter shape)
 */
import {
  Errors, TriodeError, deserializeBytesTensor, elementCount, serializeBytesTensor, type ModelConfig, type Tensor, type TensorData,
} from '@triode/core';

/** What the responder reads of one request. */
export interface ResponderRequest {
  /** Its inputs as sent (a scatter takes the shape of one of them). */
  inputs: readonly Pick<Tensor, 'name' | 'shape'>[];
  /** Its first dim when the model batches, else 0. */
  batchSize: number;
}

/**
 * The shape each request's part of a scattered output has: `template` is the output's config shape
 * (`reshape.shape` when it has one, else `dims`) after a -1 for the batch dim when the model
 * batches; each -1 takes the source input's dim at the same index, as Triton does.
 * @example scatterShape([-1, -1], [2, 5]) // [2, 5]
 */
export function scatterShape(template: readonly number[], source: readonly number[]): number[] {
  return template.map((d, i) => {
    if (d !== -1) return d;
    const s = source[i];
    if (s === undefined) throw Errors.internal(`cannot scatter an output of shape [${template.join(',')}] with an input of shape [${source.join(',')}]: the input has no dim ${i}`);
    return s;
  });
}

/** Elements [start, start + count) of `t` with shape `shape` (a view, or for BYTES a new serialization). */
function slice(t: Tensor, start: number, count: number, shape: number[]): Tensor {
  if (t.datatype === 'BYTES') {
    const elems = deserializeBytesTensor(t.data as Uint8Array).slice(start, start + count);
    return { name: t.name, datatype: t.datatype, shape, data: serializeBytesTensor(elems), owned: true };
  }
  // A view of the batch's buffer: it stays whoever's it was, and several requests share it.
  const data = t.data.subarray(start, start + count) as TensorData;
  return { name: t.name, datatype: t.datatype, shape, data, ...(t.owned !== undefined ? { owned: t.owned } : {}) };
}

function elements(t: Tensor): number {
  return t.datatype === 'BYTES' ? deserializeBytesTensor(t.data as Uint8Array).length : t.data.length;
}

/**
 * Splits one output among the requests by their parts' shapes, in order. A scatter must cover it
 * exactly; rows of the batch dim beyond the requests' (`prefix`) are left out, as Triton does.
 */
function split(t: Tensor, shapes: readonly number[][], prefix = false): Tensor[] {
  const need = shapes.reduce((n, s) => n + elementCount(s), 0);
  const have = elements(t);
  if (prefix ? need > have : need !== have) throw Errors.internal(`output '${t.name}' has ${have} elements, but the requests of the batch need ${need} ([${shapes.map((s) => s.join(',')).join('] + [')}])`);
  let at = 0;
  return shapes.map((s) => {
    const n = elementCount(s);
    const part = slice(t, at, n, s);
    at += n;
    return part;
  });
}

/**
 * Each request's outputs, in request order, from the batch's `outputs`:
 * - an output named in a `batch_output` is scattered: request i gets the next elements, shaped like
 *   its source input (see `scatterShape`);
 * - any other output of a batching model is split along the batch dim: request i gets its batch
 *   size's rows, its own dim 0 (a lone request too); rows past the batch's are left out;
 * - a model that does not batch answers its one request with the output as it is.
 * Parts of one buffer are views that keep the output's `owned` (the requests share that buffer).
 * @throws TriodeError UNSUPPORTED when an output has fewer rows than the batch (Triton's text),
 * INTERNAL when a scatter does not fit its requests
 */
export function respondBatchOutputs(outputs: readonly Tensor[], requests: readonly ResponderRequest[], config: Pick<ModelConfig, 'output' | 'batch_output' | 'max_batch_size'>): Tensor[][] {
  const batching = (config.max_batch_size ?? 0) > 0;
  // Most models have no batch_output: no map to build or look up then.
  const scatter = config.batch_output?.length ? new Map<string, string>() : undefined;
  for (const bo of config.batch_output ?? []) for (const name of bo.target_name ?? []) scatter!.set(name, bo.source_input?.[0] ?? '');
  const per: Tensor[][] = requests.map(() => []);
  let rows = 0;
  for (const r of requests) rows += r.batchSize;
  for (const t of outputs) {
    const source = scatter?.get(t.name);
    let parts: Tensor[];
    if (source !== undefined) {
      const io = (config.output ?? []).find((o) => o.name === t.name);
      const template = [...(batching ? [-1] : []), ...(io?.reshape ? io.reshape.shape ?? [] : io?.dims ?? [])];
      parts = split(t, requests.map((r) => {
        const input = r.inputs.find((x) => x.name === source);
        if (!input) throw Errors.invalidArg(`batch output '${t.name}' takes its shape from input '${source}', which a request of the batch lacks`);
        return scatterShape(template, input.shape);
      }));
    } else if (!batching) {
      if (requests.length !== 1) throw Errors.internal(`cannot split output '${t.name}' among ${requests.length} requests: the model does not batch (max_batch_size 0)`);
      parts = [t];
    } else {
      // Triton's BackendOutputResponder::ProcessTensor: dim 0 is each request's batch size.
      const have = t.shape[0] ?? 0;
      if (t.shape.length === 0 || have < rows) {
        throw new TriodeError('UNSUPPORTED', `failed to split the output tensor '${t.name}' in responses: expected batch size of atleast ${rows} in model output, got ${t.shape.length === 0 ? -1 : have}`);
      }
      parts = requests.length === 1 && have === rows ? [t] : split(t, requests.map((r) => [r.batchSize, ...t.shape.slice(1)]), true);
    }
    parts.forEach((p, i) => per[i]!.push(p));
  }
  return per;
}
