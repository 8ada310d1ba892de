/**
 * @module Inference requests and their normalization against a model's config.
 * Triton: core/src/infer_request.cc (InferenceRequest::Normalize), infer_parameter.cc
 */
import { Errors, echo } from './errors.js';
import type { ModelConfig, ModelInput } from './model-config/model-config.js';
import { checkBytesElements } from './tensor/bytes-tensor.js';
import { configTypeToDataType, dataBytes, dataTypeByteSize, elementCount, type DataType } from './tensor/data-type.js';
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
  /**
   * Set by a caller that waits longer for the answer than an interactive client (an async job):
   * how long it will wait (ms). A backplane that waits on another process for the answer (cluster
   * mode) waits this long when it is longer than its own request timeout, so a request queued
   * behind a busy model is not given up after that timeout. Never serialized.
   */
  waitMs?: number;
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

/**
 * Takes each response of a streamed request. A promise means the taker is not ready for more (a
 * gRPC stream whose client is not reading): a backend that can wait, such as a JavaScript model's
 * sender, holds its next response until it settles. The promise never rejects.
 */
export type ResponseHandler = (r: InferenceResponse) => void | Promise<void>;

/** Options of a streamed request (`inferStream`). */
export interface InferStreamOptions {
  /**
   * Called once, before the request is queued, when its model is decoupled: its responses will
   * come as they are made, 0..N of them. A gRPC stream answers such a request out of request order
   * (Triton decides this when the request arrives, not at its first response).
   */
  onDecoupled?: () => void;
}

function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(',')}]`;
}

/** What `normalizeRequest` reads from one config input, worked out once per config. */
interface InputSpec {
  readonly cfg: ModelInput;
  /** The wire data type requests must send (undefined for a type the config does not map). */
  readonly datatype: DataType | undefined;
  /** Bytes per element of `datatype` (0 for BYTES). */
  readonly byteSize: number;
  readonly dims: readonly number[];
  /** The shape requests give: `dims`, after a -1 batch dim when batching. */
  readonly expected: readonly number[];
  /** With a `reshape`: the reshaped shape, which requests may also give (same batch dim rule). */
  readonly reshaped: readonly number[] | undefined;
  /** The number of the last `normalizeRequest` call that met this input (see `nextCall`). */
  seenBy: number;
}

/** What `normalizeRequest` reads from a config, worked out once per config object. */
interface RequestSpec {
  /** The lists and values it was made from: a config whose lists were replaced gets a new one. */
  readonly input: ModelConfig['input'];
  readonly output: ModelConfig['output'];
  readonly name: string | undefined;
  readonly mbs: number;
  readonly inputs: ReadonlyMap<string, InputSpec>;
  /** How many config inputs are not optional. */
  readonly required: number;
  readonly outputs: ReadonlyMap<string, { seenBy: number }>;
}

const specs = new WeakMap<ModelConfig, RequestSpec>();
/**
 * Numbers `normalizeRequest` calls. A call marks each input (and output) it meets with its number,
 * so a second tensor of the same name is a duplicate without a Set per request. The spec is
 * shared, but a call runs to its end without yielding, so no other call sees its marks.
 */
let nextCall = 0;

/**
 * The config's inputs and outputs as `normalizeRequest` checks requests against them. Cached per
 * config object: a loaded model's config does not change (an input edited in place would not be seen).
 */
function requestSpec(config: ModelConfig): RequestSpec {
  const mbs = config.max_batch_size ?? 0;
  const cached = specs.get(config);
  if (cached && cached.input === config.input && cached.output === config.output && cached.name === config.name && cached.mbs === mbs) return cached;
  const inputs = new Map<string, InputSpec>();
  let required = 0;
  for (const cfg of config.input ?? []) {
    const datatype = configTypeToDataType(cfg.data_type ?? '');
    const dims = cfg.dims ?? [];
    const reshapeShape = cfg.reshape ? cfg.reshape.shape ?? [] : undefined;
    inputs.set(cfg.name, {
      cfg,
      datatype,
      byteSize: datatype ? dataTypeByteSize(datatype) : 0,
      dims,
      expected: mbs > 0 ? [-1, ...dims] : dims,
      reshaped: reshapeShape && (mbs > 0 ? [-1, ...reshapeShape] : reshapeShape),
      seenBy: -1,
    });
    if (!cfg.optional) required++;
  }
  const outputs = new Map<string, { seenBy: number }>();
  for (const o of config.output ?? []) outputs.set(o.name, { seenBy: -1 });
  const spec: RequestSpec = { input: config.input, output: config.output, name: config.name, mbs, inputs, required, outputs };
  specs.set(config, spec);
  return spec;
}

/** True if `shape` matches `want`, whose -1 dims match any size. */
function shapeMatches(shape: readonly number[], want: readonly number[]): boolean {
  if (shape.length !== want.length) return false;
  for (let i = 0; i < want.length; i++) if (want[i] !== -1 && want[i] !== shape[i]) return false;
  return true;
}

/**
 * Checks a request against the model config and puts it in the form the backend receives:
 * every input known, of the right type, shape and byte size, `reshape` applied, requested
 * outputs known. Returns the batch size (first dim when `max_batch_size > 0`, else 0).
 * Mutates `req.inputs[*].shape` when a reshape applies.
 */
export function normalizeRequest(req: InferenceRequest, config: ModelConfig): number {
  const spec = requestSpec(config);
  const model = config.name ?? req.modelName;
  const mbs = spec.mbs;
  const call = nextCall++;
  let batch = 0;
  let requiredSeen = 0;

  for (const t of req.inputs) {
    const input = spec.inputs.get(t.name);
    if (!input) throw Errors.invalidArg(`unexpected inference input '${echo(t.name)}' for model '${model}'`);
    if (input.seenBy === call) throw Errors.invalidArg(`input '${echo(t.name)}' already exists in request`);
    input.seenBy = call;
    if (!input.cfg.optional) requiredSeen++;
    const want = input.datatype;
    if (t.datatype !== want) {
      throw Errors.invalidArg(`inference input '${echo(t.name)}' data-type is '${echo(t.datatype)}', but model '${model}' expects '${want}'`);
    }
    for (const d of t.shape) {
      if (!Number.isSafeInteger(d) || d < 0) throw Errors.invalidArg(`invalid shape ${echo(fmtShape(t.shape))} for input '${echo(t.name)}' for model '${model}'`);
    }
    let shapeOk = shapeMatches(t.shape, input.expected);
    /** True when the request already gave the shape the model sees (no reshape left to do). */
    let givenReshaped = false;
    if (input.reshaped && !shapeOk) {
      // A request may also give the reshaped shape (Triton accepts both).
      shapeOk = shapeMatches(t.shape, input.reshaped);
      givenReshaped = shapeOk;
    }
    if (!shapeOk) {
      const note = mbs > 0
        ? ' NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each input shape. If you want to specify the full shape including the batch dim in your input dims config, try setting max_batch_size to zero. See the model configuration docs for allowed max_batch_size values.'
        : '';
      throw Errors.invalidArg(`unexpected shape for input '${echo(t.name)}' for model '${model}'. Expected ${fmtShape(input.expected)}, got ${echo(fmtShape(t.shape))}.${note}`);
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
      checkBytesElements(dataBytes(t.data), t.shape, echo(t.name), model);
    } else {
      const want = n * input.byteSize;
      if (t.data.byteLength !== want) {
        throw Errors.invalidArg(`input byte size mismatch for input '${echo(t.name)}' for model '${model}'. Expected ${want}, got ${t.data.byteLength}`);
      }
    }
    if (input.reshaped && !givenReshaped) t.shape = applyReshape(t.shape, input.dims, input.cfg.reshape!.shape ?? [], mbs > 0);
  }

  // Every request input is a distinct config input here, so fewer required ones seen than the
  // config has means one is missing.
  if (requiredSeen < spec.required) {
    const inputs = config.input ?? [];
    const missing = inputs.filter((i) => spec.inputs.get(i.name)?.seenBy !== call && !i.optional).map((i) => i.name);
    if (missing.length > 0) {
      const got = req.inputs.map((t) => `'${t.name}'`).join(',');
      throw Errors.invalidArg(
        `expected ${inputs.filter((i) => !i.optional).length} inputs but got ${req.inputs.length} inputs for model '${model}'. Got input(s) [${got}], but missing required input(s) [${missing.map((n) => `'${n}'`).join(',')}]. Please provide all required input(s).`,
      );
    }
  }

  if (req.outputs?.length) {
    for (const o of req.outputs) {
      const output = spec.outputs.get(o.name);
      if (!output) throw Errors.invalidArg(`unexpected inference output '${echo(o.name)}' for model '${model}'`);
      if (output.seenBy === call) throw Errors.invalidArg(`output '${echo(o.name)}' already exists in request`);
      output.seenBy = call;
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

/**
 * The request parameters Triton's frontends read into the request itself (its correlation id and
 * flags, priority, timeout, the outputs' kind) and do not pass on: a backend never sees them among
 * a request's parameters (TRITONBACKEND_RequestParameter*), and the response cache leaves them out
 * of its key.
 * Triton: server/src/http_server.cc ParseJsonTritonParams, grpc/infer_handler.cc SetInferenceRequestMetadata
 */
export const TRITON_REQUEST_PARAMETERS: ReadonlySet<string> = new Set(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout', 'binary_data_output']);

/** A request's parameters when none is left for a backend: one frozen object, shared. */
const NO_CUSTOM_PARAMETERS: Record<string, ParameterValue> = Object.freeze({});

/**
 * A request's parameters as a backend gets them: the custom ones, without TRITON_REQUEST_PARAMETERS
 * (`params` itself when it holds none of those, as most requests). One pass over the keys; a copy
 * is built, never `delete`d from (a Python client's `{binary_data_output: true}` on every request).
 */
export function customParameters(params: Record<string, ParameterValue>): Record<string, ParameterValue> {
  for (const k in params) {
    if (TRITON_REQUEST_PARAMETERS.has(k)) return withoutRequestParameters(params);
  }
  return params;
}

function withoutRequestParameters(params: Record<string, ParameterValue>): Record<string, ParameterValue> {
  let custom: Record<string, ParameterValue> | undefined;
  for (const k of Object.keys(params)) {
    if (TRITON_REQUEST_PARAMETERS.has(k)) continue;
    custom ??= {};
    // defineProperty: a parameter named `__proto__` stays a parameter (an assignment would set the prototype).
    if (k === '__proto__') Object.defineProperty(custom, k, { value: params[k], enumerable: true, writable: true, configurable: true });
    else custom[k] = params[k]!;
  }
  return custom ?? NO_CUSTOM_PARAMETERS;
}

const MAX_UINT64 = 2n ** 64n - 1n;
const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A uint64 parameter (a safe-integer number, or a bigint in range), or undefined when absent. */
function uintParam(params: Record<string, ParameterValue>, key: string): bigint | undefined {
  const v = params[key];
  if (v === undefined) return undefined;
  if (typeof v === 'bigint' && v >= 0n && v <= MAX_UINT64) return v;
  if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  throw Errors.invalidArg(`parameter '${echo(key)}' must be a non-negative integer, got ${echo(typeof v === 'number' && !Number.isFinite(v) ? String(v) : JSON.stringify(typeof v === 'bigint' ? String(v) : v))}`);
}

/** TRITONSERVER_REQUEST_FLAG_SEQUENCE_START: the request starts a sequence (`sequence_start`). */
export const REQUEST_FLAG_SEQUENCE_START = 1;
/** TRITONSERVER_REQUEST_FLAG_SEQUENCE_END: the request ends a sequence (`sequence_end`). */
export const REQUEST_FLAG_SEQUENCE_END = 2;

/**
 * What a backend reads of a request besides its inputs and custom parameters, as Triton's do
 * (TRITONBACKEND_RequestCorrelationId / CorrelationIdString, RequestFlags,
 * InferenceRequestTimeoutMicroseconds): each field only when set.
 */
export interface RequestControls {
  /** `sequence_id`: a uint64 (as a bigint) or a string; absent when 0 or "". */
  correlationId?: bigint | string;
  /** REQUEST_FLAG_SEQUENCE_START / _END bits, from `sequence_start` / `sequence_end`; absent when none. */
  flags?: number;
  /** `timeout`, in µs (capped at Number.MAX_SAFE_INTEGER); absent when 0. */
  timeoutUs?: number;
}

/**
 * The request's controls (above), or undefined when it sets none (most requests: nothing is made).
 * Checked as the frontends check them: a `sequence_id` that is neither a uint64 nor a string, a
 * flag that is not a boolean or a timeout that is not a uint64 is INVALID_ARG. A string id's
 * length is not limited here: sequence batching limits it (sequenceParams), as it keeps the id.
 */
export function requestControls(params: Record<string, ParameterValue> | undefined): RequestControls | undefined {
  if (!params) return undefined;
  const id = params['sequence_id'];
  const start = params['sequence_start'];
  const end = params['sequence_end'];
  const timeout = params['timeout'];
  if (id === undefined && start === undefined && end === undefined && timeout === undefined) return undefined;
  const controls: RequestControls = {};
  if (id !== undefined && id !== '' && id !== 0 && id !== 0n) controls.correlationId = typeof id === 'string' ? id : uintParam(params, 'sequence_id')!;
  let flags = 0;
  for (const [k, v, bit] of [['sequence_start', start, REQUEST_FLAG_SEQUENCE_START], ['sequence_end', end, REQUEST_FLAG_SEQUENCE_END]] as const) {
    if (v === undefined) continue;
    if (typeof v !== 'boolean') throw Errors.invalidArg(`parameter '${k}' must be a boolean`);
    if (v) flags |= bit;
  }
  if (flags !== 0) controls.flags = flags;
  const t = timeout === undefined ? 0n : uintParam(params, 'timeout')!;
  if (t > 0n) controls.timeoutUs = Number(t > MAX_SAFE ? MAX_SAFE : t);
  return controls.correlationId === undefined && controls.flags === undefined && controls.timeoutUs === undefined ? undefined : controls;
}

/** The `priority` (0: default level) and `timeout` (µs, 0: none) request parameters. */
export function schedulePolicyParams(params: Record<string, ParameterValue> | undefined): { priority: number; timeoutUs: number } {
  if (!params || (params['priority'] === undefined && params['timeout'] === undefined)) return { priority: 0, timeoutUs: 0 };
  const p = uintParam(params, 'priority') ?? 0n;
  const t = uintParam(params, 'timeout') ?? 0n;
  return { priority: Number(p > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : p), timeoutUs: Number(t > BigInt(Number.MAX_SAFE_INTEGER) ? BigInt(Number.MAX_SAFE_INTEGER) : t) };
}

/**
 * The longest string correlation id (`sequence_id`), in UTF-8 bytes. Triton sets none, but a
 * sequence's id is kept as long as the sequence (up to max_sequence_idle after its last request),
 * and a model keeps it too (its CORRID control): 40 sequences started with ids of 5 MB held 500 MB
 * of a server (review). UUIDs and session keys are far shorter.
 */
export const MAX_CORRELATION_ID_BYTES = 256;

/**
 * The sequence parameters (`sequence_id` as uint64 or string, `sequence_start`, `sequence_end`),
 * or undefined when the request names no sequence (id 0 or "").
 * @throws TriodeError INVALID_ARG for a flag that is not a boolean, an id that is neither a uint64
 * nor a string, or a string id longer than MAX_CORRELATION_ID_BYTES.
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
  if (typeof raw === 'string') {
    const bytes = Buffer.byteLength(raw);
    if (bytes > MAX_CORRELATION_ID_BYTES) {
      throw Errors.invalidArg(`string correlation ID (sequence_id) of ${bytes} bytes is longer than the ${MAX_CORRELATION_ID_BYTES} bytes accepted`);
    }
    correlationId = raw;
  } else correlationId = uintParam(params!, 'sequence_id')!;
  return {
    correlationId,
    key: typeof correlationId === 'string' ? `s:${correlationId}` : `n:${correlationId}`,
    start: flag('sequence_start'),
    end: flag('sequence_end'),
  };
}
