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
import type { MessagePort } from 'node:worker_threads';
import {
  deserializeBytesTensor, isDataType, serializeBytesTensor,
  type DataType, type ModelConfig, type ParameterValue, type TensorData,
} from '@triode/core';

/** A named tensor: `data` is a typed array (BYTES: the length-prefixed bytes; use `strings()`). */
export interface Tensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: TensorData;
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

/** One request as `execute(requests)` receives it. */
export interface Request {
  /** The client's request id, if any. */
  id?: string;
  inputs: Tensor[];
  /** The input named `name`, or undefined when it was not sent (optional inputs). */
  input(name: string): Tensor | undefined;
  /** The outputs the client asked for (all the model's outputs when it named none). */
  requestedOutputs: string[];
  parameters: Record<string, ParameterValue>;
  /**
   * Decoupled models (`model_transaction_policy { decoupled: true }`) answer through this instead
   * of returning responses: 0..N `send`s, the last with `{ final: true }` (or `close()`).
   */
  sender?: ResponseSender;
}

/** How a decoupled model sends a request's responses. */
export interface ResponseSender {
  /** Sends a response (an Error fails the request and ends it). `final` ends the request. */
  send(response: { outputs: Tensor[] } | Error, options?: { final?: boolean }): void;
  /** Ends the request without another response. */
  close(): void;
}

/** One response: its outputs, or an error that fails only this request. */
export type Response = { outputs: Tensor[] } | { error: string } | Error;

/** A model class (default export or named `Model` / `TritonModel` export of model.js / model.mjs). */
export interface Model {
  initialize?(args: InitializeArgs): void | Promise<void>;
  execute(requests: Request[]): Response[] | Promise<Response[]>;
  finalize?(): void | Promise<void>;
}

/** An error that fails one request (return it in place of that request's response). */
export class TritonModelError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TritonModelError';
  }
}

const ARRAYS: Partial<Record<DataType, new (n: number) => TensorData>> = {
  BOOL: Uint8Array, UINT8: Uint8Array, UINT16: Uint16Array, UINT32: Uint32Array, UINT64: BigUint64Array,
  INT8: Int8Array, INT16: Int16Array, INT32: Int32Array, INT64: BigInt64Array,
  FP16: Uint16Array, BF16: Uint16Array, FP32: Float32Array, FP64: Float64Array,
};

/**
 * Makes a tensor. `data` may be a typed array (used as is) or an array of numbers, bigints,
 * booleans or (for BYTES) strings / Uint8Arrays.
 */
export function tensor(name: string, datatype: DataType, shape: number[], data: TensorData | ArrayLike<number | bigint | boolean | string | Uint8Array>): Tensor {
  if (!isDataType(datatype)) throw new TypeError(`unknown datatype '${String(datatype)}'`);
  if (ArrayBuffer.isView(data)) return { name, datatype, shape: [...shape], data: data as TensorData };
  const items = Array.from(data as ArrayLike<unknown>);
  if (datatype === 'BYTES') return { name, datatype, shape: [...shape], data: serializeBytesTensor(items.map((x) => (x instanceof Uint8Array ? x : String(x)))) };
  const Ctor = ARRAYS[datatype]!;
  const out = new Ctor(items.length);
  const big = datatype === 'INT64' || datatype === 'UINT64';
  items.forEach((x, i) => { out[i] = (big ? BigInt(x as number) : Number(x)) as never; });
  return { name, datatype, shape: [...shape], data: out };
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

/** A request to another model (BLS). */
export interface InferRequest {
  model: string;
  /** A version number; the highest ready version when absent. */
  version?: number;
  inputs: Tensor[];
  /** Output names to return; all when absent. */
  outputs?: string[];
  parameters?: Record<string, ParameterValue>;
}

/** The answer to a BLS call: outputs, or the error as a value (nothing is thrown). */
export type InferResult = { outputs: Tensor[]; output(name: string): Tensor | undefined; error?: undefined } | { outputs?: undefined; error: string };

// The bridge to the main thread, set up by the instance thread before the model loads.
let port: MessagePort | undefined;
let chain: string[] = [];
let nextCall = 1;
const calls = new Map<number, (r: InferResult) => void>();

function send(msg: Record<string, unknown>, transfer: ArrayBuffer[] = []): void {
  port?.postMessage(msg, transfer);
}

/** @internal A sender that streams responses of request `index` of execute call `token`. */
export function __sender(token: number, index: number, check: (r: unknown) => { outputs: Tensor[] } | { error: string }): ResponseSender {
  let ended = false;
  const post = (payload: Record<string, unknown>, final: boolean) => {
    if (ended) throw new Error('this request has already ended (its final response was sent)');
    if (final) ended = true;
    const transfer = new Set<ArrayBuffer>();
    for (const t of (payload['outputs'] as Tensor[] | undefined) ?? []) {
      const b = t.data.buffer;
      if (b instanceof ArrayBuffer && t.data.byteOffset === 0 && t.data.byteLength === b.byteLength) transfer.add(b);
    }
    send({ type: 'response', token, index, final, ...payload }, [...transfer]);
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

/** @internal Connects the module to its instance thread (called by the thread, not by models). */
export function __connect(p: MessagePort, modelName: string): void {
  port = p;
  chain = [modelName];
  p.on('message', (m: { type: string; id: number; outputs?: Tensor[]; error?: string }) => {
    if (m.type !== 'infer-result') return;
    const done = calls.get(m.id);
    calls.delete(m.id);
    if (!done) return;
    if (m.error !== undefined) done({ error: m.error });
    else {
      const outputs = m.outputs ?? [];
      done({ outputs, output: (n: string) => outputs.find((o) => o.name === n) });
    }
  });
  // Let the thread go idle (and exit) while no BLS call is waiting.
  p.unref();
}

/** @internal The models above the current request in its BLS call chain. */
export function __setChain(c: string[]): void {
  chain = c;
}

/**
 * Runs a request on another loaded model and waits for its answer (business logic scripting).
 * Calling a model that is already in the current call chain is refused (its instance would wait
 * on itself).
 */
export function infer(request: InferRequest): Promise<InferResult> {
  if (!port) return Promise.resolve({ error: 'triode.infer is only available inside a model instance' });
  const id = nextCall++;
  // Inputs are copied (not moved): the model may keep using its arrays after the call.
  return new Promise<InferResult>((resolve) => {
    calls.set(id, resolve);
    port!.ref();
    send({ type: 'infer', id, request: { ...request, inputs: request.inputs.map((t) => ({ ...t })) }, chain });
  }).finally(() => {
    if (calls.size === 0) port?.unref();
  });
}
