/**
 * @module The `triode` module a JavaScript model imports (Triton's `triton_python_backend_utils`):
 * tensor helpers, errors, logging, and `infer` to call other models (BLS). It runs inside the
 * model instance's thread.
 *
 * @example
 * // model_repository/my_model/1/model.mjs
 * import { tensor, TritonModelError } from 'triode';
 * export default class Model {
 *   async initialize(args) { this.name = args.model_name; }
 *   async execute(requests) {
 *     return requests.map((r) => ({ outputs: [tensor('OUT', 'INT32', r.input('IN').shape, r.input('IN').data)] }));
 *   }
 * }
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import {
  REQUEST_FLAG_SEQUENCE_END, REQUEST_FLAG_SEQUENCE_START, deserializeBytesTensor, isDataType, serializeBytesTensor,
  type DataType, type ErrorCode, type ModelConfig, type ParameterValue, type TensorData, type WireError,
} from '@triode/core';

/**
 * A named tensor: `data` is a typed array (BYTES: the length-prefixed bytes; use `strings()`).
 * A tensor a model returns or sends is copied to the server, unless it is `owned`: then its buffer
 * moves there (no copy) and is detached in the model, which must not use that array again.
 * `tensor()` sets `owned` when it made the array itself (from plain values).
 */
export interface Tensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: TensorData;
  owned?: boolean;
}

/** What `initialize(args)` receives (Triton's Python backend names). */
export interface InitializeArgs {
  /** The model config as a JSON string, as the Python backend gives it. */
  model_config: string;
  /** The same config, parsed. */
  config: ModelConfig;
  model_instance_kind: 'CPU' | 'GPU' | 'MODEL';
  model_instance_device_id: string;
  model_instance_name: string;
  model_repository: string;
  model_version: string;
  model_name: string;
}

/** `Request.flags` bit: the request starts a sequence (`sequence_start`), as in triton_python_backend_utils. */
export const TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = REQUEST_FLAG_SEQUENCE_START;
/** `Request.flags` bit: the request ends a sequence (`sequence_end`). */
export const TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = REQUEST_FLAG_SEQUENCE_END;

/** One request as `execute(requests)` receives it. */
export interface Request {
  /** The client's request id, if any. */
  id?: string;
  inputs: Tensor[];
  /** The input named `name`, or undefined when it was not sent (optional inputs). */
  input(name: string): Tensor | undefined;
  /** The outputs the client asked for (all the model's outputs when it named none). */
  requestedOutputs: string[];
  /**
   * The request's custom parameters. As in Triton, those the server acts on itself
   * (`sequence_id`, `sequence_start`, `sequence_end`, `priority`, `timeout`, `binary_data_output`)
   * are not among them: the model reads them as `correlationId`, `flags` and `timeout` (a sequence
   * model also through its `sequence_batching` control inputs); priority it does not see.
   */
  parameters: Record<string, ParameterValue>;
  /**
   * The request's correlation id (`sequence_id`), whatever the model's scheduler: a uint64 as a
   * bigint (exact past 2^53), or a string; `0n` when it has none (Triton's
   * `request.correlation_id()`, which returns 0).
   */
  readonly correlationId: bigint | string;
  /**
   * TRITONSERVER_REQUEST_FLAG_SEQUENCE_START and TRITONSERVER_REQUEST_FLAG_SEQUENCE_END bits
   * (`sequence_start`, `sequence_end`); 0 when neither is set (Triton's `request.flags()`).
   */
  readonly flags: number;
  /** The request's `timeout` in µs; 0 when it gave none (Triton's `request.timeout()`). */
  readonly timeout: number;
  /**
   * Decoupled models (`model_transaction_policy { decoupled: true }`) answer through this instead
   * of returning responses: 0..N `send`s, the last with `{ final: true }` (or `close()`).
   */
  sender?: ResponseSender;
  /**
   * Decoupled models: true once the client has cancelled the request (a cancelled gRPC stream,
   * a closed connection). A model streaming responses should then stop and close its sender
   * (Triton's `request.is_cancelled()`); what it still sends is dropped. Always false otherwise.
   */
  isCancelled(): boolean;
}

/** How a decoupled model sends a request's responses. */
export interface ResponseSender {
  /** Sends a response (an Error fails the request and ends it). `final` ends the request. */
  send(response: { outputs: Tensor[] } | Error, options?: { final?: boolean }): void;
  /** Ends the request without another response. */
  close(): void;
}

/**
 * One response: its outputs, or an error that fails only this request (`code`: one of Triton's
 * error codes, INTERNAL when absent; a failed BLS result can be returned as it is).
 */
export type Response = { outputs: Tensor[] } | { error: string; code?: ErrorCode } | Error;

/**
 * The whole batch as one set of tensors, the way Triton's framework backends (onnxruntime, ...)
 * feed a model; what `executeBatch` receives.
 */
export interface Batch {
  /**
   * The batch's inputs: an input with `allow_ragged_batch` is every request's elements one after
   * another, shape [total elements]; any other input is the requests' tensors joined along the
   * batch dim ([sum of batch sizes, ...dims]); then one tensor per `batch_input` target, e.g.
   * BATCH_ACCUMULATED_ELEMENT_COUNT: where each request's elements end ([3, 7, 12] for requests of
   * 3, 4 and 5 elements).
   */
  inputs: Tensor[];
  /** The input or batch input named `name`. */
  input(name: string): Tensor | undefined;
  /** The requests of the batch, in order, each with its own inputs (as `execute` gets them). */
  requests: Request[];
}

/**
 * What `executeBatch` returns: the batch's outputs, which the server splits among the requests.
 * A `batch_output` target (BATCH_SCATTER_WITH_INPUT_SHAPE) is cut into parts shaped like each
 * request's source input (its -1 dims take that input's dims); any other output is cut along the
 * batch dim, each request getting its batch size's rows. Return an Error (or throw) to fail the batch.
 */
export type BatchResponse = { outputs: Tensor[] } | { error: string; code?: ErrorCode } | Error;

/**
 * A model class (default export or named `Model` / `TritonModel` export of model.js / model.mjs).
 * It defines `execute` (one response per request), `executeBatch` (the batch as one set of tensors,
 * which a config with `batch_input` or `batch_output` needs), or both: then `executeBatch` runs,
 * except for decoupled models, which answer through `execute`'s senders.
 */
export interface Model {
  initialize?(args: InitializeArgs): void | Promise<void>;
  execute?(requests: Request[]): Response[] | Promise<Response[]>;
  executeBatch?(batch: Batch): BatchResponse | Promise<BatchResponse>;
  finalize?(): void | Promise<void>;
}

/**
 * An error that fails one request (return it in place of that request's response, or throw it to
 * fail the batch). `code` is one of Triton's error codes; the client sees its status.
 */
export class TritonModelError extends Error {
  readonly code: ErrorCode;

  constructor(message: string, code: ErrorCode = 'INTERNAL') {
    super(message);
    this.name = 'TritonModelError';
    this.code = code;
  }
}

const ARRAYS: Partial<Record<DataType, new (n: number) => TensorData>> = {
  BOOL: Uint8Array, UINT8: Uint8Array, UINT16: Uint16Array, UINT32: Uint32Array, UINT64: BigUint64Array,
  INT8: Int8Array, INT16: Int16Array, INT32: Int32Array, INT64: BigInt64Array,
  FP16: Uint16Array, BF16: Uint16Array, FP32: Float32Array, FP64: Float64Array,
};

/**
 * Makes a tensor. `data` may be a typed array (used as is, and copied when the tensor is returned
 * or sent, unless `options.owned` hands its buffer over) or an array of numbers, bigints, booleans
 * or (for BYTES) strings / Uint8Arrays (made into a new array the tensor owns).
 */
export function tensor(
  name: string, datatype: DataType, shape: number[], data: TensorData | ArrayLike<number | bigint | boolean | string | Uint8Array>,
  options: { owned?: boolean } = {},
): Tensor {
  if (!isDataType(datatype)) throw new TypeError(`unknown datatype '${String(datatype)}'`);
  if (ArrayBuffer.isView(data)) return born({ name, datatype, shape: [...shape], data: data as TensorData, ...(options.owned ? { owned: true } : {}) });
  const items = Array.from(data as ArrayLike<unknown>);
  if (datatype === 'BYTES') return born({ name, datatype, shape: [...shape], data: serializeBytesTensor(items.map((x) => (x instanceof Uint8Array ? x : String(x)))), owned: true });
  const Ctor = ARRAYS[datatype]!;
  const out = new Ctor(items.length);
  const big = datatype === 'INT64' || datatype === 'UINT64';
  items.forEach((x, i) => { out[i] = (big ? BigInt(x as number) : Number(x)) as never; });
  return born({ name, datatype, shape: [...shape], data: out, owned: true });
}

/**
 * The execute call a tensor was made in. An owned tensor's buffer moves when it is returned, so
 * only one made in the current call moves; one the model keeps across calls (made in initialize,
 * or cached) is copied each time, as Triton lets a tensor be returned many times (it moved the
 * first time, and the next request failed "its data 0").
 */
let epoch = 0;
const bornIn = new WeakMap<Tensor, number>();
function born(t: Tensor): Tensor {
  if (t.owned) bornIn.set(t, epoch);
  return t;
}

/** @internal An execute call starts: tensors made before it no longer move. */
export function __beginExecute(): void {
  epoch++;
}

const utf8 = new TextDecoder();

/** A BYTES tensor's elements as strings (UTF-8). */
export function strings(t: Tensor): string[] {
  return deserializeBytesTensor(t.data as Uint8Array).map((b) => utf8.decode(b));
}

/** A BYTES tensor's elements as byte arrays (views, no copy). */
export function bytes(t: Tensor): Uint8Array[] {
  return deserializeBytesTensor(t.data as Uint8Array);
}

/** Logging to the server's log, tagged with the model. */
export const log = {
  info: (msg: string) => send({ type: 'log', level: 'info', msg }),
  warning: (msg: string) => send({ type: 'log', level: 'warning', msg }),
  error: (msg: string) => send({ type: 'log', level: 'error', msg }),
  verbose: (msg: string) => send({ type: 'log', level: 'verbose', msg }),
};

/**
 * A request to another model (BLS), as Python's `pb_utils.InferenceRequest(model_name=,
 * model_version=, inputs=, requested_output_names=, parameters=, correlation_id=, flags=,
 * timeout=)`. `correlationId`, `flags` and `timeout` reach the server as the `sequence_id`,
 * `sequence_start` / `sequence_end` and `timeout` parameters a client would send (so the sequence
 * batcher, the queue policy and the callee's `Request` see them); setting one both ways, or a
 * value out of range, refuses the call with INVALID_ARG.
 *
 * @example
 * // One step of a sequence on `accumulator`, in the caller's own sequence.
 * const res = await infer({ model: 'accumulator', inputs: [x], correlationId: request.correlationId,
 *   flags: TRITONSERVER_REQUEST_FLAG_SEQUENCE_START, timeout: 50_000 });
 */
export interface InferRequest {
  model: string;
  /** A version number; the highest ready version when absent. */
  version?: number;
  inputs: Tensor[];
  /** Output names to return; all when absent. */
  outputs?: string[];
  /** Custom parameters (and `priority`, which has no option of its own, as in Python). */
  parameters?: Record<string, ParameterValue>;
  /**
   * The correlation id (`sequence_id`): a uint64 as a bigint, or as a number up to 2^53 - 1 (a
   * larger number is refused: it would not be exact), or a string; 0 or "" for none.
   * @default none (Python's correlation_id=0)
   */
  correlationId?: bigint | number | string;
  /**
   * TRITONSERVER_REQUEST_FLAG_SEQUENCE_START and/or TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
   * (`sequence_start`, `sequence_end`); other bits are refused.
   * @default 0
   */
  flags?: number;
  /**
   * The request's timeout in µs (`timeout`), a uint64, applied as a client's: a dynamic batcher's
   * queue policy uses it when it has `allow_timeout_override` and a longer
   * `default_timeout_microseconds`, as in Triton.
   * @default 0 (none)
   */
  timeout?: number | bigint;
}

/**
 * The answer to a BLS call: outputs, or the error as a value (nothing is thrown): its message and
 * Triton's code (NOT_FOUND for an unknown model, INVALID_ARG for a bad input, ...).
 */
export type InferResult =
  | { outputs: Tensor[]; output(name: string): Tensor | undefined; error?: undefined; code?: undefined }
  | { outputs?: undefined; error: string; code: ErrorCode };

/** The buffers of the tensors a model handed over (`owned`), each once: what a message may move. */
export function __movable(tensors: readonly Tensor[]): ArrayBuffer[] {
  const set = new Set<ArrayBuffer>();
  for (const t of tensors) if (t.owned === true && t.data.buffer instanceof ArrayBuffer) set.add(t.data.buffer);
  return [...set];
}

/** A tensor as model code gets it: the model's own, to keep or change (no `owned` left on it). */
export function __received(t: Tensor): Tensor {
  return { name: t.name, datatype: t.datatype, shape: t.shape, data: t.data };
}

// The bridge to the main thread, set up by the instance thread before the model loads.
let port: MessagePort | undefined;
let chain: string[] = [];
/** The call chain of the execute call a BLS call comes from (its own async context). */
const chainStore = new AsyncLocalStorage<string[]>();
let nextCall = 1;
const calls = new Map<number, (r: InferResult) => void>();

function send(msg: Record<string, unknown>, transfer: ArrayBuffer[] = []): void {
  port?.postMessage(msg, transfer);
}

/**
 * Requests of decoupled execute calls (`${token}:${index}`) not ended yet, and whether the client
 * cancelled each. An entry goes when its final response is sent.
 */
const openRequests = new Map<string, boolean>();
/** The latest execute call this thread started: a cancel for a later one came before its task. */
let lastToken = 0;
/** Cancels that came before their execute call's task (told on another port): taken when it starts. */
const earlyCancels = new Set<string>();

/** @internal Execute call `token` starts on this thread (before its senders are made). */
export function __begin(token: number): void {
  lastToken = token;
}

/** @internal Execute call `token` failed as a whole: its requests are over (nothing will end them). */
export function __abandon(token: number, count: number): void {
  for (let i = 0; i < count; i++) {
    openRequests.delete(`${token}:${i}`);
    releaseSlot(`${token}:${i}`);
  }
}

/** @internal Whether request `index` of execute call `token` was cancelled (Request.isCancelled). */
export function __isCancelled(token: number | undefined, index: number): boolean {
  if (token === undefined) return false;
  // A model that checks in a synchronous loop never yields to the event loop: look at what the
  // main thread has sent since, here and now.
  drainPort();
  return openRequests.get(`${token}:${index}`) === true;
}

/**
 * Per request, responses this thread has posted that their client has not yet taken: one slot of
 * `flow` (shared with the main thread, which takes one off when the client is ready for the next:
 * a gRPC stream not waiting for 'drain', an SSE write done). A sender that finds
 * MAX_UNTAKEN_RESPONSES untaken in its request's slot waits: a model sending in a loop faster than
 * its client reads must not fill the server's memory or hold its event loop for seconds. The wait
 * blocks the thread, so it is bounded: a client that takes nothing for `clientStallMs` counts as
 * gone, and its request as cancelled (later sends are dropped), so one client that stops reading
 * holds the instance's other requests that long at most. Requests beyond the slots are not held.
 * The bytes of the untaken responses are bounded too (MAX_UNTAKEN_KIB, in KiB, in the second half
 * of `flow`): 64 responses of 1 MiB were 64 MiB held for one client that stopped reading (review).
 */
let flow: Int32Array | undefined;
/** The slots of `flow` (its first half: responses untaken; its second: their KiB). */
let slots = 0;
export const MAX_UNTAKEN_RESPONSES = 64;
/** Untaken responses of a request past this many KiB make its sender wait (one at least goes). */
export const MAX_UNTAKEN_KIB = 16 * 1024;
/** Slots not in use by an open request (reused once all their responses were taken). */
let freeSlots: number[] = [];
/** The slot of each open request (`${token}:${index}`) that has one. */
const slotOf = new Map<string, number>();
let clientStallMs = 10_000;
/** How often a waiting sender looks whether its request was cancelled. */
const FLOW_CHECK_MS = 50;

/** A free slot whose earlier responses have all been taken, or -1 when none is. */
function takeSlot(): number {
  if (!flow) return -1;
  for (let i = 0; i < freeSlots.length; i++) {
    const s = freeSlots[i]!;
    if (Atomics.load(flow, s) === 0) {
      freeSlots.splice(i, 1);
      return s;
    }
  }
  return -1;
}

function releaseSlot(key: string): void {
  const s = slotOf.get(key);
  if (s === undefined) return;
  slotOf.delete(key);
  freeSlots.push(s);
}

/** Waits (blocking this thread) while request `key`'s client has MAX_UNTAKEN_RESPONSES untaken, as bounded above. */
function awaitRoom(key: string, slot: number): void {
  if (!flow || slot < 0) return;
  const giveUpAt = Date.now() + clientStallMs;
  for (;;) {
    const untaken = Atomics.load(flow, slot);
    if (untaken === 0 || (untaken < MAX_UNTAKEN_RESPONSES && Atomics.load(flow, slots + slot) < MAX_UNTAKEN_KIB)) return;
    drainPort();
    if (openRequests.get(key) !== false) return; // cancelled or ended: its sends are dropped
    if (Date.now() >= giveUpAt) {
      openRequests.set(key, true);
      log.warning(`a client took none of its request's last ${untaken} responses in ${clientStallMs} ms: the request counts as cancelled, and what the model sends it is dropped`);
      return;
    }
    Atomics.wait(flow, slot, untaken, FLOW_CHECK_MS);
  }
}

/** The KiB of a response's outputs (rounded up; values that are not typed arrays count as none). */
function outputKib(outputs: readonly Tensor[]): number {
  let bytes = 0;
  for (const t of outputs) if (ArrayBuffer.isView(t.data)) bytes += t.data.byteLength;
  return Math.min(Math.ceil(bytes / 1024), 0x3fffffff);
}

/** Handles what the main thread has sent and this thread has not yet seen (cancels, BLS results). */
function drainPort(): void {
  if (!port) return;
  for (let m = receiveMessageOnPort(port); m; m = receiveMessageOnPort(port)) onPortMessage(m.message as PortMessage);
}

/** @internal A sender that streams responses of request `index` of execute call `token`. */
export function __sender(token: number, index: number, check: (r: unknown) => { outputs: Tensor[] } | { error: WireError }): ResponseSender {
  let ended = false;
  const key = `${token}:${index}`;
  openRequests.set(key, earlyCancels.delete(key));
  const slot = takeSlot();
  if (slot >= 0) slotOf.set(key, slot);
  const post = (payload: Record<string, unknown>, final: boolean) => {
    if (ended) throw new Error('this request has already ended (its final response was sent)');
    awaitRoom(key, slot);
    // Cancelled: the client is gone, and what the model still sends is dropped here, not posted.
    if (!final && openRequests.get(key) === true) return;
    const outputs = (payload['outputs'] as Tensor[] | undefined) ?? [];
    const kib = slot >= 0 ? outputKib(outputs) : 0;
    if (slot >= 0) {
      Atomics.add(flow!, slots + slot, kib);
      Atomics.add(flow!, slot, 1);
    }
    try {
      // Only what the model handed over moves; anything else is copied, so the model may send the
      // same array again or keep using it.
      send({ type: 'response', token, index, final, slot, kib, ...payload }, __movable(outputs));
    } catch (err) {
      // Not posted (a value that cannot be cloned): nothing changes, the request is still open
      // and the model may send an error instead (it was marked ended, and hung its client).
      if (slot >= 0) {
        Atomics.sub(flow!, slot, 1);
        Atomics.sub(flow!, slots + slot, kib);
      }
      throw err;
    }
    if (final) {
      ended = true;
      openRequests.delete(key);
      releaseSlot(key);
    }
  };
  return {
    send(response, options = {}) {
      const r = check(response);
      post(r, 'error' in r || options.final === true);
    },
    close() {
      post({}, true);
    },
  };
}

type PortMessage = { type: string; id: number; token?: number; index?: number; outputs?: Tensor[]; error?: WireError };

/** A message from the main thread: a cancel, or the answer to a BLS call. */
function onPortMessage(m: PortMessage): void {
  if (m.type === 'cancel') {
    // Only a request still open: one that already ended has nothing left to stop.
    const key = `${m.token}:${m.index}`;
    if (openRequests.has(key)) openRequests.set(key, true);
    else if ((m.token ?? 0) > lastToken) earlyCancels.add(key);
    return;
  }
  if (m.type !== 'infer-result') return;
  const done = calls.get(m.id);
  calls.delete(m.id);
  if (!done) return;
  if (m.error !== undefined) done({ error: m.error.message, code: m.error.code });
  else {
    const outputs = (m.outputs ?? []).map(__received);
    done({ outputs, output: (n: string) => outputs.find((o) => o.name === n) });
  }
}

/**
 * @internal Connects the module to its instance thread (called by the thread, not by models).
 * @param f the untaken-responses slots shared with the main thread (see `flow`)
 * @param stallMs how long a sender waits on a client that takes nothing (see `flow`)
 */
export function __connect(p: MessagePort, modelName: string, f?: Int32Array, stallMs?: number): void {
  port = p;
  flow = f;
  slots = f ? f.length >> 1 : 0;
  freeSlots = Array.from({ length: slots }, (_, i) => i);
  slotOf.clear();
  if (stallMs !== undefined) clientStallMs = stallMs;
  chain = [modelName];
  p.on('message', onPortMessage);
  // Let the thread go idle (and exit) while no BLS call is waiting.
  p.unref();
}

/** @internal The models above the current request in its BLS call chain. */
export function __setChain(c: string[]): void {
  chain = c;
}

/** @internal Runs `f` (an execute call) with `c` as the BLS call chain of what it, and what it starts, calls. */
export function __withChain<T>(c: string[], f: () => T): T {
  chain = c;
  return chainStore.run(c, f);
}

/** @internal The typed array class of `datatype` (Uint8Array for BOOL, Uint16Array for FP16/BF16). */
export function __arrayClass(datatype: DataType): (new (n: number) => TensorData) | undefined {
  return ARRAYS[datatype];
}

/**
 * @internal An output as it leaves the thread: only its fields (a property the model added, a
 * function, could not be posted and failed the whole reply), its data copied when it lives in a
 * SharedArrayBuffer (posting shares it, so the model's later writes reached answers in flight).
 */
export function __plainTensor(t: Tensor): Tensor {
  const shared = !(t.data.buffer instanceof ArrayBuffer);
  const moves = t.owned === true && bornIn.get(t) === epoch;
  return {
    name: t.name, datatype: t.datatype, shape: [...t.shape], data: shared ? (t.data.slice() as TensorData) : t.data,
    ...(shared || moves ? { owned: true } : {}),
  };
}

/**
 * Runs a request on another loaded model and waits for its answer (business logic scripting).
 * Calling a model that is already in the current call chain is refused (its instance would wait
 * on itself).
 */
export function infer(request: InferRequest): Promise<InferResult> {
  if (!port) return Promise.resolve({ error: 'triode.infer is only available inside a model instance', code: 'UNAVAILABLE' });
  // Refused as a value, as every BLS error is (this threw a TypeError into the model before).
  const refused = (why: string): Promise<InferResult> => Promise.resolve({ error: `BLS request refused: ${why}`, code: 'INVALID_ARG' });
  if (typeof request !== 'object' || request === null) return refused('the request is not an object');
  if (!Array.isArray(request.inputs)) return refused("'inputs' is not a list of tensors");
  const bad = request.inputs.findIndex((t) => typeof t !== 'object' || t === null || !ArrayBuffer.isView((t as { data?: unknown }).data));
  if (bad >= 0) return refused(`input ${bad} is not a tensor (use tensor(name, datatype, shape, data))`);
  const id = nextCall++;
  // Inputs are copied (not moved): the model may keep using its arrays after the call, or send
  // the same one again (one in a SharedArrayBuffer is copied here, or posting would share it).
  return new Promise<InferResult>((resolve) => {
    calls.set(id, resolve);
    port!.ref();
    try {
      send({ type: 'infer', id, request: { ...request, inputs: request.inputs.map((t) => __received(__plainTensor(t))) }, chain: chainStore.getStore() ?? chain });
    } catch (err) {
      // A field that cannot be posted (a function in parameters): the call fails alone.
      calls.delete(id);
      resolve({ error: `BLS request refused: ${err instanceof Error ? err.message : 'it could not be sent'}`, code: 'INVALID_ARG' });
    }
  }).finally(() => {
    if (calls.size === 0) port?.unref();
  });
}
