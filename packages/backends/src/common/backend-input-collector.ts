/**
 * @module A batch's inputs as a framework model takes them: each input of every request joined into
 * one tensor, ragged inputs (`allow_ragged_batch`) flattened, plus the `batch_input` tensors that
 * describe the batch. Any backend can use it (the javascript backend does for `executeBatch`).
 * Triton: backend/src/backend_input_collector.cc (ProcessTensor, BatchInputShape, ProcessBatchInput);
 * the ragged shape is the one onnxruntime_backend's SetInputTensors gives ([total elements])
 */
import { Errors, configTypeToDataType, elementCount, type BatchInput, type BatchInputKind, type ModelConfig, type Tensor, type TensorData } from '@triode/core';

/** What the collector reads of one request: its inputs, with their shapes as sent (batch dim first when batching). */
export interface CollectorRequest {
  inputs: readonly Tensor[];
}

/**
 * The shape of a batch input of `kind` for requests whose source input has `shapes` (each with its
 * batch dim): [requests] for the element counts, [requests + 1] WITH_ZERO, [largest element count]
 * for BATCH_MAX_ELEMENT_COUNT_AS_SHAPE, [batch items, dims - 1] for BATCH_ITEM_SHAPE and
 * [batch items × (dims - 1)] for BATCH_ITEM_SHAPE_FLATTEN (a request of batch size b is b items).
 */
export function batchInputShape(kind: BatchInputKind, shapes: readonly (readonly number[])[]): number[] {
  switch (kind) {
    case 'BATCH_ELEMENT_COUNT':
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT':
      return [shapes.length];
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO':
      return [shapes.length + 1];
    case 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE':
      return [shapes.reduce((max, s) => Math.max(max, elementCount(s)), 0)];
    case 'BATCH_ITEM_SHAPE':
      // Triton's second dim is the last request's rank minus one (the requests share it: 0 for none).
      return [shapes.reduce((n, s) => n + (s[0] ?? 0), 0), shapes.length ? shapes[shapes.length - 1]!.length - 1 : 0];
    case 'BATCH_ITEM_SHAPE_FLATTEN':
      return [shapes.reduce((n, s) => n + (s[0] ?? 0) * (s.length - 1), 0)];
  }
}

/**
 * The values of a batch input of `kind`, in order, as `datatype` (INT32 unless FP32): each
 * request's element count; their running sum (WITH_ZERO: after a 0); each batch item's shape
 * without the batch dim. A BATCH_MAX_ELEMENT_COUNT_AS_SHAPE input says everything in its shape:
 * its values are zeros. Written straight into the typed array: a JS number array as long as a
 * request's element count (one ragged INT8 request of 60 MB makes a 60-million-element
 * BATCH_MAX_ELEMENT_COUNT_AS_SHAPE) goes to V8's dictionary mode, gigabytes and seconds.
 * @example batchInputValues('BATCH_ACCUMULATED_ELEMENT_COUNT', [[1, 3], [1, 4], [1, 5]]) // Int32Array [3, 7, 12]
 */
export function batchInputValues(kind: BatchInputKind, shapes: readonly (readonly number[])[], datatype: 'INT32' | 'FP32' = 'INT32'): Int32Array | Float32Array {
  const length = batchInputShape(kind, shapes).reduce((a, b) => a * b, 1);
  const out = datatype === 'FP32' ? new Float32Array(length) : new Int32Array(length);
  let at = 0;
  switch (kind) {
    case 'BATCH_ELEMENT_COUNT':
      for (const s of shapes) out[at++] = elementCount(s);
      break;
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT':
    case 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO': {
      // WITH_ZERO: the leading 0 is the array's own.
      if (kind === 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO') at = 1;
      let sum = 0;
      for (const s of shapes) out[at++] = sum += elementCount(s);
      break;
    }
    case 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE':
      break;
    case 'BATCH_ITEM_SHAPE':
    case 'BATCH_ITEM_SHAPE_FLATTEN':
      // The first dim is the batch: a request of batch size b holds b items of the same shape.
      for (const s of shapes) {
        for (let b = 0; b < (s[0] ?? 0); b++) for (let d = 1; d < s.length; d++) out[at++] = s[d]!;
      }
      break;
  }
  return out;
}

/** One tensor per `target_name` of a batch input (views of one buffer the receiver owns). */
export function batchInputTensors(bi: BatchInput, shapes: readonly (readonly number[])[]): Tensor[] {
  const kind = bi.kind ?? 'BATCH_ELEMENT_COUNT';
  const shape = batchInputShape(kind, shapes);
  const datatype = configTypeToDataType(bi.data_type ?? '') === 'FP32' ? 'FP32' : 'INT32';
  const data: TensorData = batchInputValues(kind, shapes, datatype);
  return (bi.target_name ?? []).map((name) => ({ name, datatype, shape: [...shape], data, owned: true }));
}

/** `parts`' bytes one after another, in a new buffer (BYTES: the serializations joined, which is their elements joined). */
function join(parts: readonly Tensor[]): TensorData {
  const first = parts[0]!;
  let bytes = 0;
  for (const p of parts) bytes += p.data.byteLength;
  const out = new Uint8Array(bytes);
  let at = 0;
  for (const p of parts) {
    out.set(new Uint8Array(p.data.buffer, p.data.byteOffset, p.data.byteLength), at);
    at += p.data.byteLength;
  }
  const Ctor = first.data.constructor as new (b: ArrayBuffer, o: number, l: number) => TensorData;
  return new Ctor(out.buffer, 0, bytes / first.data.BYTES_PER_ELEMENT);
}

/**
 * The batch's inputs, in the first request's input order, then the batch inputs:
 * - a ragged input (`allow_ragged_batch`) is every request's elements one after another, shape
 *   [total elements], whatever the requests' shapes (Triton's framework backends do the same);
 * - any other input is the requests' tensors joined along the batch dim ([sum of batch sizes,
 *   ...dims]), or the one request's tensor as it is;
 * - each `batch_input` is computed from its source input's shapes in the requests.
 * A joined tensor is a new buffer the receiver owns; a tensor passed on as it is keeps its `owned`.
 * @throws TriodeError INVALID_ARG when a request lacks an input another has (or a batch input's
 *   source); INTERNAL when a model that does not batch is given several requests
 */
export function collectBatchInputs(requests: readonly CollectorRequest[], config: Pick<ModelConfig, 'input' | 'batch_input' | 'max_batch_size'>): Tensor[] {
  const first = requests[0];
  if (!first) return [];
  const ragged = new Set((config.input ?? []).filter((io) => io.allow_ragged_batch === true).map((io) => io.name));
  const batching = (config.max_batch_size ?? 0) > 0;
  const of = (r: CollectorRequest, name: string): Tensor => {
    const t = r.inputs.find((x) => x.name === name);
    if (!t) throw Errors.invalidArg(`input '${name}' is missing from a request of the batch`);
    return t;
  };
  const out: Tensor[] = [];
  for (const t of first.inputs) {
    const parts = requests.map((r) => of(r, t.name));
    if (ragged.has(t.name)) {
      const total = parts.reduce((n, p) => n + elementCount(p.shape), 0);
      out.push(parts.length === 1 ? { ...t, shape: [total] } : { name: t.name, datatype: t.datatype, shape: [total], data: join(parts), owned: true });
    } else if (parts.length === 1) {
      out.push(t);
    } else {
      if (!batching) throw Errors.internal(`cannot join input '${t.name}' of ${parts.length} requests: the model does not batch (max_batch_size 0)`);
      const size = parts.reduce((n, p) => n + (p.shape[0] ?? 0), 0);
      out.push({ name: t.name, datatype: t.datatype, shape: [size, ...t.shape.slice(1)], data: join(parts), owned: true });
    }
  }
  for (const bi of config.batch_input ?? []) {
    const source = bi.source_input?.[0] ?? '';
    out.push(...batchInputTensors(bi, requests.map((r) => of(r, source).shape)));
  }
  return out;
}
