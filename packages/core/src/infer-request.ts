/**
 * @module Inference requests and their normalization against a model's config.
 * Triton: core/src/infer_request.cc (InferenceRequest::Normalize), infer_parameter.cc
 */
import { Errors, echo } from './errors.js';
import type { ModelConfig } from './model-config/model-config.js';
import { countBytesElements } from './tensor/bytes-tensor.js';
import { configTypeToDataType, dataTypeByteSize, elementCount } from './tensor/data-type.js';
import type { Tensor } from './tensor/tensor.js';

/** A request or tensor parameter value (KServe v2: string, number or boolean). */
export type ParameterValue = string | number | boolean | bigint;

/** An output the client asked for. */
export interface RequestedOutput {
  name: string;
  /** Classification extension: return the top `classCount` entries as strings instead of the tensor. */
  classCount?: number;
}

/** One inference request as the frontends hand it to the core. */
export interface InferenceRequest {
  /** Client-given id, echoed in the response. */
  id?: string;
  modelName: string;
  /** A specific version, or undefined for the version policy's choice (the highest ready one). */
  modelVersion?: number;
  inputs: Tensor[];
  /** Outputs to return; all of the model's outputs when undefined or empty. */
  outputs?: RequestedOutput[];
  /** Request-level parameters (`sequence_id`, `priority`, `timeout`, custom ones). */
  parameters?: Record<string, ParameterValue>;
  /** Set on requests a model makes of other models (BLS): how deep the call chain is. */
  blsDepth?: number;
  /** Set on BLS requests: the models of the call chain, the caller last. */
  blsChain?: string[];
  /**
   * Aborted when the client gives up (a cancelled gRPC call). A request still queued is taken
   * out of the queue and fails with CANCELLED; one already executing runs to the end and its
   * response is dropped by the frontend. Never serialized (stays in the process).
   */
  signal?: CancelSignal;
  /** Set when the request is traced (trace_level TIMESTAMPS): the core adds its timestamps. Never serialized. */
  trace?: RequestTrace;
  /**
   * Set by a cluster worker: when the gateway queued the request (epoch ms). The batchers count
   * `max_queue_delay_microseconds` from then, so the time a request spent in Redis counts against
   * its delay instead of adding to it. Never serialized (the envelope carries it).
   */
  queuedSinceMs?: number;
}

/** A traced request's timestamps (Triton's trace names, ns on the process's monotonic clock). */
export interface RequestTrace {
  timestamps: { name: string; ns: number }[];
}

/** The part of AbortSignal the core uses; an AbortSignal is one, and so is a CancelToken. */
export interface CancelSignal {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * A CancelSignal without EventTarget machinery, for frontends that make one per request (an
 * AbortController costs a few µs and a DOMException when aborted).
 */
export class CancelToken implements CancelSignal {
  #aborted = false;
  #listeners: (() => void)[] = [];

  get aborted(): boolean {
    return this.#aborted;
  }

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.#aborted) this.#listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const i = this.#listeners.indexOf(listener);
    if (i >= 0) this.#listeners.splice(i, 1);
  }

  /** Cancels: every listener runs once. */
  cancel(): void {
    if (this.#aborted) return;
    this.#aborted = true;
    for (const l of this.#listeners.splice(0)) l();
  }
}

/** The response to one request. */
export interface InferenceResponse {
  id?: string;
  modelName: string;
  modelVersion: string;
  outputs: Tensor[];
  parameters?: Record<string, ParameterValue>;
  /**
   * Decoupled models only: whether this is the request's last response (the model sent it with
   * the final flag). Undefined for regular models. gRPC streams report it as
   * `triton_final_response`.
   */
  final?: boolean;
}

function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(',')}]`;
}

/**
 * Checks a request against the model config and puts it in the form the backend receives:
 * every input known, of the right type, shape and byte size, `reshape` applied, requested
 * outputs known. Returns the batch size (first dim when `max_batch_size > 0`, else 0).
 * Mutates `req.inputs[*].shape` when a reshape applies.
 */
export function normalizeRequest(req: InferenceRequest, config: ModelConfig): number {
  const model = config.name ?? req.modelName;
  const mbs = config.max_batch_size ?? 0;
  const cfgInputs = new Map((config.input ?? []).map((i) => [i.name, i]));
  const seen = new Set<string>();
  let batch = 0;

  for (const t of req.inputs) {
    const cfg = cfgInputs.get(t.name);
    if (!cfg) throw Errors.invalidArg(`unexpected inference input '${echo(t.name)}' for model '${model}'`);
    if (seen.has(t.name)) throw Errors.invalidArg(`input '${echo(t.name)}' already exists in request`);
    seen.add(t.name);
    const want = configTypeToDataType(cfg.data_type ?? '');
    if (t.datatype !== want) {
      throw Errors.invalidArg(`inference input '${echo(t.name)}' data-type is '${echo(t.datatype)}', but model '${model}' expects '${want}'`);
    }
    for (const d of t.shape) {
      if (!Number.isSafeInteger(d) || d < 0) throw Errors.invalidArg(`invalid shape ${echo(fmtShape(t.shape))} for input '${echo(t.name)}' for model '${model}'`);
    }
    const dims = cfg.dims ?? [];
    const expected = mbs > 0 ? [-1, ...dims] : dims;
    let shapeOk = t.shape.length === expected.length && expected.every((d, i) => d === -1 || d === t.shape[i]);
    /** True when the request already gave the shape the model sees (no reshape left to do). */
    let givenReshaped = false;
    if (cfg.reshape && !shapeOk) {
      // A request may also give the reshaped shape (Triton accepts both).
      const alt = mbs > 0 ? [-1, ...(cfg.reshape.shape ?? [])] : cfg.reshape.shape ?? [];
      shapeOk = t.shape.length === alt.length && alt.every((d, i) => d === -1 || d === t.shape[i]);
      givenReshaped = shapeOk;
    }
    if (!shapeOk) {
      const note = mbs > 0
        ? ' NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero. See the model configuration docs for allowed max_batch_size values.'
        : '';
      throw Errors.invalidArg(`unexpected shape for input '${echo(t.name)}' for model '${model}'. Expected ${fmtShape(expected)}, got ${echo(fmtShape(t.shape))}.${note}`);
    }
    if (mbs > 0) {
      const b = t.shape[0]!;
      if (b < 1) throw Errors.invalidArg(`inference request batch-size must be >= 1 for '${model}'`);
      if (b > mbs) throw Errors.invalidArg(`inference request batch-size must be <= ${mbs} for '${model}'`);
      if (batch !== 0 && b !== batch) throw Errors.invalidArg(`input '${echo(t.name)}' batch size does not match other inputs for '${model}'`);
      batch = b;
    }
    const n = elementCount(t.shape);
    if (t.datatype === 'BYTES') {
      const got = t.data instanceof Uint8Array ? countBytesElements(t.data) : -1;
      if (got !== n) {
        throw Errors.invalidArg(
          got < 0
            ? `input '${echo(t.name)}' for model '${model}': malformed BYTES data (4-byte length prefix runs past the end)`
            : `expected ${n} string elements for inference input '${echo(t.name)}' for model '${model}', got ${got}`,
        );
      }
    } else {
      const want = n * dataTypeByteSize(t.datatype);
      if (t.data.byteLength !== want) {
        throw Errors.invalidArg(`input byte size mismatch for input '${echo(t.name)}' for model '${model}'. Expected ${want}, got ${t.data.byteLength}`);
      }
    }
    if (cfg.reshape && !givenReshaped) t.shape = applyReshape(t.shape, dims, cfg.reshape.shape ?? [], mbs > 0);
  }

  const missing = (config.input ?? []).filter((i) => !seen.has(i.name) && !i.optional).map((i) => i.name);
  if (missing.length > 0) {
    const got = [...seen].map((n) => `'${n}'`).join(',');
    throw Errors.invalidArg(
      `expected ${(config.input ?? []).filter((i) => !i.optional).length} inputs but got ${req.inputs.length} inputs for model '${model}'. Got input(s) [${got}], but missing required input(s) [${missing.map((n) => `'${n}'`).join(',')}]. Please provide all required input(s).`,
    );
  }

  if (req.outputs?.length) {
    const names = new Set((config.output ?? []).map((o) => o.name));
    const dup = new Set<string>();
    for (const o of req.outputs) {
      if (!names.has(o.name)) throw Errors.invalidArg(`unexpected inference output '${echo(o.name)}' for model '${model}'`);
      if (dup.has(o.name)) throw Errors.invalidArg(`output '${echo(o.name)}' already exists in request`);
      dup.add(o.name);
      if (o.classCount !== undefined && (!Number.isSafeInteger(o.classCount) || o.classCount < 0)) {
        throw Errors.invalidArg(`classification count for output '${echo(o.name)}' must be a non-negative integer`);
      }
    }
  }
  return batch;
}

/**
 * A shape written against the dims `from`, rewritten against the dims `to` (Triton's `reshape`):
 * the values of `from`'s variable-size (-1) dims fill `to`'s, in order; with `batching` the first
 * dim is the batch dim and is kept. Inputs go from `dims` to `reshape.shape` (the shape the model
 * sees), outputs from `reshape.shape` to `dims` (the shape clients see). When `shape` is not in
 * `from`'s form (a backend that gave another shape with the same elements), a single -1 of `to` is
 * filled from the element count.
 * @throws TriodeError INTERNAL when no shape of `to`'s form holds the same elements.
 * Triton: InferenceRequest::Normalize (inputs), InferenceResponse::Output::Reshape (outputs)
 * @example applyReshape([3, 16], [16], [2, 8], true) // [3, 2, 8]: a batch of 3, each [16] seen as [2, 8]
 */
export function applyReshape(shape: readonly number[], from: readonly number[], to: readonly number[], batching: boolean): number[] {
  const body = batching ? shape.slice(1) : [...shape];
  const wildcards = to.filter((d) => d === -1).length;
  let out: number[] | undefined;
  if (body.length === from.length) {
    const values = body.filter((_d, i) => from[i] === -1);
    if (values.length === wildcards) out = to.map((d) => (d === -1 ? values.shift()! : d));
    if (out && elementCount(out) !== elementCount(body)) out = undefined;
  }
  if (!out && wildcards <= 1) {
    const known = to.reduce((a, d) => (d === -1 ? a : a * d), 1);
    const total = elementCount(body);
    out = to.map((d) => (d === -1 ? (known === 0 ? 0 : total / known) : d));
  }
  if (!out || elementCount(out) !== elementCount(body) || out.some((d) => !Number.isSafeInteger(d) || d < 0)) {
    throw Errors.internal(`cannot reshape [${shape.join(',')}] from [${from.join(',')}] to [${to.join(',')}]: the element counts differ`);
  }
  return batching ? [shape[0]!, ...out] : out;
}

/** A non-negative integer parameter (number, bigint or decimal string), or undefined when absent. */
function uintParam(params: Record<string, ParameterValue>, key: string): bigint | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  if (typeof v === 'bigint' && v >= 0n) return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw Errors.invalidArg(`parameter '${echo(key)}' must be a non-negative integer, got ${echo(JSON.stringify(typeof v === 'bigint' ? String(v) : v))}`);
}

/** The `priority` (0: default level) and `timeout` (µs, 0: none) request parameters. */
export function schedulePolicyParams(params: Record<string, ParameterValue> | undefined): { priority: number; timeoutUs: number } {
  if (!params) return { priority: 0, timeoutUs: 0 };
  const p = uintParam(params, 'priority') ?? 0n;
  const t = uintParam(params, 'timeout') ?? 0n;
  return { priority: Number(p > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : p), timeoutUs: Number(t > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : t) };
}

/**
 * The sequence parameters (`sequence_id` as uint64 or string, `sequence_start`, `sequence_end`),
 * or undefined when the request names no sequence (id 0 or "").
 */
export function sequenceParams(params: Record<string, ParameterValue> | undefined): { correlationId: bigint | string; key: string; start: boolean; end: boolean } | undefined {
  const raw = params?.['sequence_id'];
  if (raw === undefined || raw === 0 || raw === 0n || raw === '') return undefined;
  const flag = (k: string) => {
    const v = params?.[k];
    if (v === undefined) return false;
    if (typeof v !== 'boolean') throw Errors.invalidArg(`parameter '${k}' must be a boolean`);
    return v;
  };
  let correlationId: bigint | string;
  if (typeof raw === 'string') correlationId = raw;
  else correlationId = uintParam(params!, 'sequence_id')!;
  return {
    correlationId,
    key: typeof correlationId === 'string' ? `s:${correlationId}` : `n:${correlationId}`,
    start: flag('sequence_start'),
    end: flag('sequence_end'),
  };
}
