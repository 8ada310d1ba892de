/**
 * @module A gRPC client for any Triton server (package `inference`, GRPCInferenceService):
 * unary calls, and ModelStreamInfer streams (sequences, decoupled models). Tensors go as
 * raw_input_contents and come back from raw_output_contents, as tritonclient.grpc does.
 * Triton: client/src/python/library/tritonclient/grpc
 */
import {
  Metadata, credentials as grpcCredentials, makeGenericClientConstructor,
  type ChannelCredentials, type ChannelOptions, type Client, type ClientDuplexStream, type ServiceError,
} from '@grpc/grpc-js';
import {
  messageType, parametersFromMessage, parametersToMessage, serviceDefinition, toNumber, toPlain,
  type GrpcMethodDefinition, type InferParameterMessage, type ModelIndexEntry, type ModelMetadata, type ModelStatistics, type ServerMetadata,
} from '@triode/core';
import { InferenceServerError } from './errors.js';
import { checkInferResponseWire, checkStreamResponseWire } from './response-scan.js';
import { H2Unary } from './h2-unary.js';
import { requestParameters, versionString } from './request-parameters.js';
import { inputBytes, outputTensor } from './tensor-data.js';
import {
  checkRegistration, inputWindow, outputWindow, regionStatuses, sharedMemoryOutput, sharedMemoryOutputs, windowParameters, type SharedMemoryOutputs,
} from './shared-memory-params.js';
import {
  InferResult, type InferenceClient, type InferOptions, type LoadModelOptions, type OutputTensor, type PreparedInfer, type SystemSharedMemoryRegionStatus,
} from './types.js';

/** Options of a GrpcClient. */
export interface GrpcClientOptions {
  /** TLS or other credentials. @default insecure */
  credentials?: ChannelCredentials;
  /**
   * Channel options, e.g. `grpc.max_receive_message_length`, `grpc.keepalive_time_ms`,
   * `grpc.default_compression_algorithm` (1 deflate, 2 gzip).
   */
  channelOptions?: ChannelOptions;
  /** Metadata sent with every call (e.g. `triton-grpc-protocol-<key>` for restricted protocols). */
  metadata?: Record<string, string>;
  /** Per-call deadline in ms of unary calls (0: none); streams take `streamTimeoutMs`. @default 0 */
  timeoutMs?: number;
  /**
   * Deadline in ms of a whole ModelStreamInfer stream (0: none), tritonclient's `stream_timeout`:
   * a stream outlives any one call. @default 0
   */
  streamTimeoutMs?: number;
  /** Largest response message accepted (`grpc.max_receive_message_length` unless that is set). @default 1 GiB */
  maxResponseBytes?: number;
  /**
   * Largest answer to any call but ModelInfer / ModelStreamInfer (metadata, config, statistics,
   * repository index, ...): such an answer becomes plain objects, with defaults, about 100 to 200
   * times its size on the wire. @default 4 MiB
   */
  maxControlResponseBytes?: number;
  /**
   * Send ModelInfer calls over a lean node:http2 path instead of @grpc/grpc-js (same wire
   * protocol, a third of the client CPU). Only for a plain `host:port` / `[v6]:port` address on a
   * plaintext channel whose `channelOptions` are at most those in `LEAN_CHANNEL_OPTIONS`; any other
   * address (`dns:///`, `ipv4:`, `unix:`) or option goes through grpc-js, which honours it.
   * @default true
   */
  leanInfer?: boolean;
  /**
   * HTTP/2 connections the lean ModelInfer path spreads calls over. Two measured best on 2 cores:
   * with one, a busy connection delivers requests in bursts and they wait longer in the server's
   * queue (bench/RESULTS.md). @default 2
   */
  connections?: number;
}

type Unary = (req: object, md: Metadata, opts: object, cb: (err: ServiceError | null, res: object) => void) => void;

/** A ModelInferResponse as protobufjs decodes it. */
interface InferResponseMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameterMessage>;
  outputs: { name: string; datatype: string; shape: (number | { toNumber(): number })[] }[];
  raw_output_contents: Uint8Array[];
}

const INFER_PATH = '/inference.GRPCInferenceService/ModelInfer';
const DEFAULT_MAX_RESPONSE_BYTES = 2 ** 30;
/** Decodes a ModelInferResponse once its wire bytes passed the check (the server is not trusted). */
const decodeInferResponse = (b: Buffer): InferResponseMessage => {
  checkInferResponseWire(b);
  return messageType('ModelInferResponse').decode(b) as unknown as InferResponseMessage;
};

const DEFAULT_MAX_CONTROL_RESPONSE_BYTES = 4 * 1024 * 1024;

/**
 * The service, with every answer checked before it is decoded: the infer ones by their wire
 * check, the others by size (review: 20 MiB of empty statistics entries ran the client, and
 * `triode perf`, out of heap).
 */
function inferenceService(maxControlBytes: number): Record<string, GrpcMethodDefinition> {
  const def = serviceDefinition('inference.GRPCInferenceService');
  const checked = (m: GrpcMethodDefinition, check: (b: Buffer) => void): GrpcMethodDefinition => ({
    ...m, responseDeserialize: (b: Buffer) => { check(b); return m.responseDeserialize(b); },
  });
  const out: Record<string, GrpcMethodDefinition> = {};
  for (const [rpc, m] of Object.entries(def)) {
    out[rpc] = checked(m, (b) => {
      if (b.byteLength > maxControlBytes) throw new Error(`a ${rpc} answer of ${b.byteLength} bytes is larger than maxControlResponseBytes (${maxControlBytes})`);
    });
  }
  return { ...out, ModelInfer: checked(def['ModelInfer']!, checkInferResponseWire), ModelStreamInfer: checked(def['ModelStreamInfer']!, checkStreamResponseWire) };
}

/** The client constructor for a control-answer limit (one per limit used). */
const services = new Map<number, ReturnType<typeof makeGenericClientConstructor>>();
function serviceFor(maxControlBytes: number): ReturnType<typeof makeGenericClientConstructor> {
  let s = services.get(maxControlBytes);
  if (!s) services.set(maxControlBytes, (s = makeGenericClientConstructor(inferenceService(maxControlBytes), 'GRPCInferenceService')));
  return s;
}

/**
 * The request's parameters as Triton's gRPC frontend takes them: a sequence id of 2^63 or more
 * goes as the int64 of the same 64 bits (Triton reads `sequence_id` as int64 only, and takes it
 * as uint64), not as uint64_param, which it refuses.
 */
function grpcParameters(o: InferOptions): ReturnType<typeof parametersToMessage> {
  const params = parametersToMessage(requestParameters(o));
  const id = o.sequence?.id;
  if (typeof id === 'bigint' && id >= 2n ** 63n) params['sequence_id'] = { int64_param: BigInt.asIntN(64, id).toString() };
  return params;
}

/**
 * A ModelInferRequest for the options. An input in shared memory names its window in its
 * parameters and takes no raw_input_contents entry (Triton's InferGRPCToInput gives the entries,
 * in order, to the inputs that name no region).
 */
function inferRequest(model: string, o: InferOptions): object {
  const raw: Uint8Array[] = [];
  const inputs = o.inputs.map((i) => {
    const window = inputWindow(i);
    if (!window) raw.push(inputBytes(i));
    return { name: i.name, datatype: i.datatype, shape: i.shape, parameters: window ? parametersToMessage(windowParameters(window)) : {} };
  });
  return {
    model_name: model,
    model_version: versionString(o.version),
    id: o.id ?? '',
    parameters: grpcParameters(o),
    inputs,
    outputs: (o.outputs ?? []).map((r) => {
      const window = outputWindow(r);
      if (window) return { name: r.name, parameters: parametersToMessage(windowParameters(window)) };
      return { name: r.name, parameters: r.classCount ? { classification: { int64_param: r.classCount } } : {} };
    }),
    raw_input_contents: raw,
  };
}

/**
 * An InferResult from a decoded ModelInferResponse: one raw content per output, each holding
 * exactly its shape's elements, except that an output asked for in shared memory (`shm`) has an
 * empty one (Triton's: the bytes are in the region).
 * @throws InferenceServerError when the response does not add up.
 */
function inferResult(m: InferResponseMessage, shm?: SharedMemoryOutputs): InferResult {
  const r = tryInferResult(m, shm);
  if (r instanceof InferenceServerError) throw r;
  return r;
}

/** `inferResult`, or the reason it failed, for callbacks that must not throw. */
function tryInferResult(m: InferResponseMessage, shm?: SharedMemoryOutputs): InferResult | InferenceServerError {
  try {
    if (m.raw_output_contents.length !== m.outputs.length) {
      throw new InferenceServerError(`malformed response: ${m.outputs.length} outputs with ${m.raw_output_contents.length} raw_output_contents`);
    }
    const outputs: OutputTensor[] = m.outputs.map((o, i) => {
      const raw = m.raw_output_contents[i]!;
      const window = raw.byteLength === 0 ? shm?.get(o.name) : undefined;
      const shape = o.shape.map(toNumber);
      return window ? sharedMemoryOutput(o.name, o.datatype, shape, window) : outputTensor(o.name, o.datatype, shape, raw);
    });
    return new InferResult({ modelName: m.model_name, modelVersion: m.model_version, id: m.id, parameters: parametersFromMessage(m.parameters), outputs });
  } catch (err) {
    return err instanceof InferenceServerError ? err : new InferenceServerError(`malformed response: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Channel options the lean path honours (`grpc.max_receive_message_length`) or that only tune
 * grpc-js's own transport. Any other key (compression, keepalive, send limits, user agents,
 * proxies, resolvers, ...) would be ignored by the lean path, so its calls go through grpc-js.
 */
export const LEAN_CHANNEL_OPTIONS: readonly string[] = ['grpc.max_receive_message_length', 'grpc-node.flow_control_window'];

/** `host:port` or `[v6]:port` with nothing else: what `http://${address}` reaches as grpc-js would. */
const PLAIN_ADDRESS = /^(?:[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]):\d{1,5}$/;

/** Whether ModelInfer may take the lean path for these constructor arguments. */
function leanAllowed(address: string, options: GrpcClientOptions): boolean {
  return options.leanInfer !== false && options.credentials === undefined && PLAIN_ADDRESS.test(address) &&
    Object.keys(options.channelOptions ?? {}).every((k) => LEAN_CHANNEL_OPTIONS.includes(k));
}

function grpcFailure(err: ServiceError): InferenceServerError {
  return new InferenceServerError(err.details || err.message, { grpcCode: err.code, cause: err });
}

/** A ModelStreamInfer call: send requests, get responses (and in-band errors) through the callback. */
export interface InferStream {
  /**
   * Sends one request on the stream.
   * @throws InferenceServerError once the stream is closed (`end`, `cancel`, or the server ended it).
   */
  infer(model: string, options: Omit<InferOptions, 'signal'>): void;
  /** Half-closes the stream; resolves when the server has sent everything and ended it. */
  end(): Promise<void>;
  /** Cancels the call (requests not started are dropped by the server). */
  cancel(): void;
}

/**
 * A client for Triton's gRPC protocol.
 * @example
 * const client = new GrpcClient('127.0.0.1:8001');
 * const r = await client.infer('simple', { inputs: [...] });
 * const s = client.stream((err, result) => console.log(err ?? result?.id));
 * s.infer('simple_sequence', { id: '1', sequence: { id: 1000, start: true }, inputs: [...] });
 * await s.end();
 */
export class GrpcClient implements InferenceClient {
  readonly #client: Client & Record<string, Unary>;
  readonly #options: GrpcClientOptions;
  /** The lean path for ModelInfer (see `leanInfer`). */
  readonly #h2: H2Unary | undefined;
  /** The largest ModelInfer answer the lean path takes (grpc-js's limit, as configured). */
  readonly #leanMaxBytes: number;

  /** @param address `host:port` of the server's gRPC endpoint. */
  constructor(address = '127.0.0.1:8001', options: GrpcClientOptions = {}) {
    const Service = serviceFor(options.maxControlResponseBytes ?? DEFAULT_MAX_CONTROL_RESPONSE_BYTES);
    this.#client = new Service(address, options.credentials ?? grpcCredentials.createInsecure(), {
      'grpc.max_receive_message_length': Math.min(options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES, 2 ** 31 - 1),
      'grpc.max_send_message_length': -1,
      // A larger HTTP/2 window than the 64 KiB default: big tensors do not wait for WINDOW_UPDATEs.
      'grpc-node.flow_control_window': 8 * 1024 * 1024,
      ...options.channelOptions,
    }) as unknown as Client & Record<string, Unary>;
    this.#options = options;
    this.#h2 = leanAllowed(address, options) ? new H2Unary(address, options.connections ?? 2) : undefined;
    const limit = options.channelOptions?.['grpc.max_receive_message_length'] as unknown;
    // -1 is grpc-js's "no limit": the most a gRPC message's 4-byte length prefix can say.
    this.#leanMaxBytes = typeof limit === 'number' ? (limit < 0 ? 2 ** 32 - 1 : limit) : options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  }

  #metadata(): Metadata {
    const md = new Metadata();
    for (const [k, v] of Object.entries(this.#options.metadata ?? {})) md.set(k, v);
    return md;
  }

  #callOptions(): object {
    return this.#options.timeoutMs ? { deadline: Date.now() + this.#options.timeoutMs } : {};
  }

  /** Calls a unary RPC; resolves with the decoded message. */
  #unary<T>(rpc: string, request: object, signal?: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal?.aborted) {
        reject(new InferenceServerError('the call was aborted before it was sent', { grpcCode: 1 }));
        return;
      }
      const call = (this.#client[rpc] as unknown as (...a: unknown[]) => { cancel(): void })(request, this.#metadata(), this.#callOptions(), (err: ServiceError | null, res: object) => {
        if (err) reject(grpcFailure(err));
        else resolve(res as T);
      });
      signal?.addEventListener('abort', () => call.cancel(), { once: true });
    });
  }

  /** Calls a unary RPC; resolves with the response as a plain object (64-bit ints as numbers). */
  async #plain(rpc: string, request: object = {}): Promise<Record<string, unknown>> {
    const m = await this.#unary<object>(rpc, request);
    const type = messageType(`${rpc}Response`);
    return type.toObject(m as never, { longs: Number, enums: String, defaults: true, arrays: true, objects: true });
  }

  async isServerLive(): Promise<boolean> {
    return (await this.#plain('ServerLive'))['live'] === true;
  }

  async isServerReady(): Promise<boolean> {
    return (await this.#plain('ServerReady'))['ready'] === true;
  }

  async isModelReady(model: string, version?: number | string): Promise<boolean> {
    return (await this.#plain('ModelReady', { name: model, version: versionString(version) }))['ready'] === true;
  }

  async serverMetadata(): Promise<ServerMetadata> {
    return (await this.#plain('ServerMetadata')) as unknown as ServerMetadata;
  }

  async modelMetadata(model: string, version?: number | string): Promise<ModelMetadata> {
    return (await this.#plain('ModelMetadata', { name: model, version: versionString(version) })) as unknown as ModelMetadata;
  }

  async modelConfig(model: string, version?: number | string): Promise<Record<string, unknown>> {
    const m = await this.#unary<{ config: object }>('ModelConfig', { name: model, version: versionString(version) });
    return toPlain(messageType('ModelConfig'), m.config as never);
  }

  async modelStatistics(model?: string, version?: number | string): Promise<ModelStatistics[]> {
    const stats = (await this.#plain('ModelStatistics', { name: model ?? '', version: versionString(version) }))['model_stats'];
    if (!Array.isArray(stats)) throw new InferenceServerError('malformed ModelStatistics response: no model_stats list');
    return stats as ModelStatistics[];
  }

  async repositoryIndex(readyOnly = false): Promise<ModelIndexEntry[]> {
    return (await this.#plain('RepositoryIndex', { ready: readyOnly }))['models'] as ModelIndexEntry[];
  }

  async loadModel(model: string, options: LoadModelOptions = {}): Promise<void> {
    const parameters: Record<string, object> = {};
    if (options.config !== undefined) parameters['config'] = { string_param: typeof options.config === 'string' ? options.config : JSON.stringify(options.config) };
    for (const [path, bytes] of Object.entries(options.files ?? {})) parameters[`file:${path}`] = { bytes_param: bytes };
    await this.#unary('RepositoryModelLoad', { model_name: model, parameters });
  }

  async unloadModel(model: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    await this.#unary('RepositoryModelUnload', { model_name: model, parameters: options.unloadDependents ? { unload_dependents: { bool_param: true } } : {} });
  }

  async registerSystemSharedMemory(name: string, key: string, byteSize: number, offset = 0): Promise<void> {
    checkRegistration(name, key, byteSize, offset);
    await this.#unary('SystemSharedMemoryRegister', { name, key, offset, byte_size: byteSize });
  }

  /** Over gRPC a name of '' is every region too. */
  async systemSharedMemoryStatus(name?: string): Promise<SystemSharedMemoryRegionStatus[]> {
    const regions = (await this.#plain('SystemSharedMemoryStatus', { name: name ?? '' }))['regions'];
    return regionStatuses('SystemSharedMemoryStatus', Object.values(typeof regions === 'object' && regions !== null ? regions : {}));
  }

  /** Over gRPC a name of '' is every region too. */
  async unregisterSystemSharedMemory(name?: string): Promise<void> {
    await this.#unary('SystemSharedMemoryUnregister', { name: name ?? '' });
  }

  /** Reads (no update) or changes the log settings. */
  async logSettings(update: Record<string, boolean | number | string> = {}): Promise<Record<string, boolean | number | string>> {
    const settings: Record<string, object> = {};
    for (const [k, v] of Object.entries(update)) {
      settings[k] = typeof v === 'boolean' ? { bool_param: v } : typeof v === 'number' ? { uint32_param: v } : { string_param: v };
    }
    const res = (await this.#plain('LogSettings', { settings }))['settings'] as Record<string, Record<string, boolean | number | string>>;
    return Object.fromEntries(Object.entries(res).map(([k, v]) => [k, v['bool_param'] ?? v['uint32_param'] ?? v['string_param'] ?? '']));
  }

  async infer(model: string, options: InferOptions): Promise<InferResult> {
    if (this.#h2 && !options.signal) return this.inferPrepared(this.prepare(model, options));
    const request = inferRequest(model, options);
    return inferResult(await this.#unary<InferResponseMessage>('ModelInfer', request, options.signal), sharedMemoryOutputs(options.outputs));
  }

  prepare(model: string, options: Omit<InferOptions, 'signal'>): PreparedInfer {
    const frame = H2Unary.frame(messageType('ModelInferRequest').encode(inferRequest(model, options)).finish());
    const shm = sharedMemoryOutputs(options.outputs);
    return { model, frame, body: frame.subarray(5), ...(shm ? { sharedMemoryOutputs: shm } : {}) };
  }

  inferPrepared(prepared: PreparedInfer): Promise<InferResult> {
    if (this.#h2) {
      return this.#h2.call(INFER_PATH, prepared.frame ?? H2Unary.frame(prepared.body), this.#options.metadata ?? {}, this.#options.timeoutMs, this.#leanMaxBytes)
        .then((b) => {
          let m: InferResponseMessage;
          try {
            m = decodeInferResponse(b);
          } catch (err) {
            if (err instanceof InferenceServerError) throw err;
            throw new InferenceServerError(`malformed response: ${(err as Error).message}`, { grpcCode: 13, cause: err });
          }
          return inferResult(m, prepared.sharedMemoryOutputs);
        });
    }
    return new Promise((resolve, reject) => {
      this.#client.makeUnaryRequest(INFER_PATH, (b: Uint8Array) => Buffer.from(b.buffer, b.byteOffset, b.byteLength), decodeInferResponse,
        prepared.body, this.#metadata(), this.#callOptions(), (err: ServiceError | null, res?: InferResponseMessage) => {
          if (err) {
            reject(grpcFailure(err));
            return;
          }
          const r = tryInferResult(res!, prepared.sharedMemoryOutputs);
          if (r instanceof InferenceServerError) reject(r);
          else resolve(r);
        });
    });
  }

  /**
   * Opens a ModelStreamInfer stream. `onResponse` gets each response, or the in-band error of a
   * request (the stream stays open); with `grpcErrors` the server instead ends the stream at the
   * first error. A failure of the stream itself (its status, a cancel, the deadline) also goes to
   * `onResponse`, as tritonclient's callback gets it, and `end()` then rejects with it.
   * The stream's deadline is `streamTimeoutMs` (`options.timeoutMs` for this stream).
   * Outputs asked for in shared memory come back marked (`OutputTensor.sharedMemory`) by matching
   * each response to its request by `id`: requests in flight that share an id are matched in order.
   */
  stream(onResponse: (error: InferenceServerError | undefined, result: InferResult | undefined) => void, options: { grpcErrors?: boolean; timeoutMs?: number } = {}): InferStream {
    const md = this.#metadata();
    if (options.grpcErrors) md.set('triton_grpc_error', 'true');
    const timeoutMs = options.timeoutMs ?? this.#options.streamTimeoutMs;
    let closed = false;
    // The outputs each request in flight asked for in shared memory, by request id in send order
    // (kept only for ids that ever had some): a response is matched to its request by the id it
    // echoes, and its final response (or an error) ends the request.
    const pending = new Map<string, (SharedMemoryOutputs | undefined)[]>();
    const shmOf = (id: string, final: boolean): SharedMemoryOutputs | undefined => {
      const q = pending.get(id);
      if (!q) return undefined;
      const shm = q[0];
      if (final) {
        q.shift();
        if (q.length === 0) pending.delete(id);
      }
      return shm;
    };
    const call = (this.#client as unknown as { ModelStreamInfer(md: Metadata, opts: object): ClientDuplexStream<object, { error_message: string; infer_response: InferResponseMessage | null }> })
      .ModelStreamInfer(md, timeoutMs ? { deadline: Date.now() + timeoutMs } : {});
    const ended = new Promise<void>((resolve, reject) => {
      // A malformed response is reported to onResponse like an in-band error: throwing here
      // would be an uncaught exception in grpc-js's event.
      call.on('data', (m) => {
        if (m.error_message) {
          if (m.infer_response) shmOf(m.infer_response.id, true);
          const r = m.infer_response ? tryInferResult({ ...m.infer_response, outputs: [], raw_output_contents: [] }) : undefined;
          onResponse(new InferenceServerError(m.error_message), r instanceof InferenceServerError ? undefined : r);
        } else if (m.infer_response) {
          const final = parametersFromMessage(m.infer_response.parameters)['triton_final_response'] !== false;
          const r = tryInferResult(m.infer_response, shmOf(m.infer_response.id, final));
          if (r instanceof InferenceServerError) onResponse(r, undefined);
          else onResponse(undefined, r);
        }
      });
      call.on('end', () => {
        closed = true;
        resolve();
      });
      // The status ending the stream reached only end(), so a caller waiting on the callback
      // waited forever (review).
      call.on('error', (err: ServiceError) => {
        closed = true;
        const failure = grpcFailure(err);
        reject(failure);
        onResponse(failure, undefined);
      });
    });
    // The rejection is handed to whoever awaits end(); keep it from being reported as unhandled.
    ended.catch(() => undefined);
    return {
      infer: (model, o) => {
        // A write after the end was dropped without a word (review); tritonclient raises.
        if (closed) throw new InferenceServerError('stream is closed');
        const request = inferRequest(model, o);
        const shm = sharedMemoryOutputs(o.outputs);
        const id = o.id ?? '';
        if (shm || pending.has(id)) {
          const q = pending.get(id) ?? [];
          q.push(shm);
          pending.set(id, q);
        }
        call.write(request);
      },
      end: async () => {
        if (!closed) call.end();
        closed = true;
        await ended;
      },
      cancel: () => {
        closed = true;
        call.cancel();
      },
    };
  }

  close(): void {
    this.#h2?.close();
    this.#client.close();
  }
}
