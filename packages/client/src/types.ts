/**
 * @module What both clients (HTTP and gRPC) take and give: typed tensors, infer options and
 * results, and the management calls, in one interface.
 */
import { deserializeBytesTensor } from '@triode/core';
import { InferenceServerError } from './errors.js';
import type { DataType, ModelIndexEntry, ModelMetadata, ModelStatistics, ParameterValue, ServerMetadata, TensorData } from '@triode/core';

export type { DataType, ModelIndexEntry, ModelMetadata, ModelStatistics, ParameterValue, ServerMetadata, TensorData };

/**
 * Tensor data a client accepts: a typed array matching the datatype (Int32Array for INT32,
 * BigInt64Array for INT64, Uint16Array holding raw half floats for FP16/BF16, Uint8Array of 0/1 for
 * BOOL), a plain array of numbers / booleans (converted), for INT64/UINT64 numbers and/or bigints
 * (a number must be an exact integer: give values past 2^53 as bigints), or for BYTES an array of
 * strings (UTF-8) and/or byte arrays.
 */
export type InputData = TensorData | readonly number[] | readonly boolean[] | readonly (number | bigint)[] | readonly (string | Uint8Array)[];

/**
 * A window of a system shared memory region registered with `registerSystemSharedMemory`: what
 * the extension's `shared_memory_region`, `shared_memory_offset` and `shared_memory_byte_size`
 * parameters say (tritonclient's `set_shared_memory(region_name, byte_size, offset)`).
 */
export interface SharedMemoryWindow {
  /** The name the region was registered under (not its key). */
  region: string;
  /** The window's size in bytes: an input's exact size (BYTES: its serialization's), an output's room. */
  byteSize: number;
  /** Where the window starts, in bytes from the region's start. @default 0 */
  offset?: number;
}

interface InferInputBase {
  name: string;
  datatype: DataType;
  shape: readonly number[];
}

/** An input whose data travels in the request. */
export interface InferInputWithData extends InferInputBase {
  data: InputData;
  sharedMemory?: undefined;
}

/**
 * An input the server reads from a registered system shared memory region (write it there first,
 * e.g. with SystemSharedMemoryRegion): the request carries no data for it.
 */
export interface InferInputInSharedMemory extends InferInputBase {
  sharedMemory: SharedMemoryWindow;
  data?: undefined;
}

/** One input tensor of a request: its `data`, or the `sharedMemory` window that holds it. */
export type InferInput = InferInputWithData | InferInputInSharedMemory;

/** An output to ask for. */
export interface RequestedOutput {
  name: string;
  /** Classification extension: the top `classCount` classes as "score:index[:label]" strings. */
  classCount?: number;
  /** HTTP only: ask for this output in binary (default) or as JSON. Ignored with `sharedMemory`. */
  binary?: boolean;
  /**
   * Have the server write this output into a registered system shared memory region instead of
   * the response (not with `classCount`). The response's output then carries no data: it comes
   * with `sharedMemory` set and an empty `data`; read the region (SystemSharedMemoryRegion.read).
   */
  sharedMemory?: SharedMemoryWindow;
}

/** One registered system shared memory region, as the status calls list it. */
export interface SystemSharedMemoryRegionStatus {
  name: string;
  key: string;
  offset: number;
  byteSize: number;
}

/** Sequence parameters of a request to a stateful model. */
export interface SequenceOptions {
  /** Correlation id (a number, a bigint or a string). */
  id: number | bigint | string;
  start?: boolean;
  end?: boolean;
}

/** Everything an infer call may set besides the inputs. */
export interface InferOptions {
  inputs: readonly InferInput[];
  /** Outputs to return (all when omitted). */
  outputs?: readonly RequestedOutput[];
  /** A specific model version (the server's policy when omitted). */
  version?: number | string;
  /** Echoed in the response. */
  id?: string;
  sequence?: SequenceOptions;
  /** Scheduling priority (1 is highest; 0 the model's default). */
  priority?: number;
  /** Queue timeout in microseconds. */
  timeoutUs?: number;
  /** Any other request parameters. */
  parameters?: Record<string, ParameterValue>;
  /** Aborts the call (gRPC: the server drops the request if it has not started). */
  signal?: AbortSignal;
}

/** One output of a response. */
export interface OutputTensor {
  name: string;
  datatype: DataType;
  shape: number[];
  /**
   * The elements as a typed array (BYTES: the 4-byte-length-prefixed serialization). Empty (of
   * the datatype's kind) for an output the server wrote to shared memory: see `sharedMemory`.
   */
  data: TensorData;
  /**
   * Set when the output was asked for in a shared memory window and the server wrote it there
   * (the response then carries no data for it): read `shape`'s elements from the region, e.g.
   * `region.read(datatype, shape, offset)`.
   */
  sharedMemory?: Required<SharedMemoryWindow>;
}

/** The response to an infer call. */
export class InferResult {
  readonly modelName: string;
  readonly modelVersion: string;
  readonly id: string;
  readonly parameters: Record<string, ParameterValue>;
  readonly outputs: OutputTensor[];

  constructor(init: { modelName: string; modelVersion: string; id?: string; parameters?: Record<string, ParameterValue>; outputs: OutputTensor[] }) {
    this.modelName = init.modelName;
    this.modelVersion = init.modelVersion;
    this.id = init.id ?? '';
    this.parameters = init.parameters ?? {};
    this.outputs = init.outputs;
  }

  /**
   * The named output.
   * @throws InferenceServerError when the response has no such output.
   */
  output(name: string): OutputTensor {
    const t = this.outputs.find((o) => o.name === name);
    if (!t) throw new InferenceServerError(`no output named '${name}' in the response (outputs: ${this.outputs.map((o) => o.name).join(', ')})`);
    return t;
  }

  /** The named output's elements as a typed array (BYTES: use `strings` or `bytes`). */
  data<T extends TensorData = TensorData>(name: string): T {
    return this.output(name).data as T;
  }

  /** A BYTES output's elements as byte arrays. */
  bytes(name: string): Uint8Array[] {
    return splitBytes(this.output(name).data as Uint8Array);
  }

  /** A BYTES output's elements decoded as UTF-8 strings. */
  strings(name: string): string[] {
    const utf8 = new TextDecoder();
    return this.bytes(name).map((b) => utf8.decode(b));
  }

  /** Decoupled models over a gRPC stream: whether this is the request's last response. */
  get final(): boolean | undefined {
    const f = this.parameters['triton_final_response'];
    return typeof f === 'boolean' ? f : undefined;
  }
}

/**
 * Splits a length-prefixed BYTES serialization into its elements (views, no copies).
 * @throws Error when the data is malformed.
 */
export function splitBytes(buf: Uint8Array): Uint8Array[] {
  return deserializeBytesTensor(buf);
}

/** Options of a repository load. */
export interface LoadModelOptions {
  /** A config override (a ModelConfig in Triton's JSON form, or its JSON text). */
  config?: Record<string, unknown> | string;
  /** `file:` overrides: path in the model directory (e.g. `1/model.onnx`) -> contents. */
  files?: Record<string, Uint8Array>;
}

/** A request encoded for the wire by the client that prepared it (opaque). */
export interface PreparedInfer {
  readonly model: string;
  readonly body: Uint8Array;
  readonly path?: string;
  readonly headers?: Record<string, string | number>;
  /** gRPC: `body` with gRPC's 5-byte message prefix in front (`body` is a view of it). */
  readonly frame?: Uint8Array;
  /** The outputs asked for in shared memory, by name: their answers carry no data. */
  readonly sharedMemoryOutputs?: ReadonlyMap<string, Required<SharedMemoryWindow>>;
}

/** Calls both clients offer. Every method rejects with InferenceServerError. */
export interface InferenceClient {
  isServerLive(): Promise<boolean>;
  isServerReady(): Promise<boolean>;
  isModelReady(model: string, version?: number | string): Promise<boolean>;
  serverMetadata(): Promise<ServerMetadata>;
  modelMetadata(model: string, version?: number | string): Promise<ModelMetadata>;
  /** The model's configuration in Triton's JSON form. */
  modelConfig(model: string, version?: number | string): Promise<Record<string, unknown>>;
  /** Runs one inference request. */
  infer(model: string, options: InferOptions): Promise<InferResult>;
  /** Encodes a request once, to send many times with `inferPrepared` (load generators). */
  prepare(model: string, options: Omit<InferOptions, 'signal'>): PreparedInfer;
  /** Sends a prepared request. */
  inferPrepared(prepared: PreparedInfer): Promise<InferResult>;
  /** Statistics of all models, one model, or one version. */
  modelStatistics(model?: string, version?: number | string): Promise<ModelStatistics[]>;
  repositoryIndex(readyOnly?: boolean): Promise<ModelIndexEntry[]>;
  loadModel(model: string, options?: LoadModelOptions): Promise<void>;
  unloadModel(model: string, options?: { unloadDependents?: boolean }): Promise<void>;
  /**
   * Registers `byteSize` bytes at `offset` of the POSIX shared memory object `key` (shm_open's
   * name, e.g. `/input0`) as system shared memory region `name`. The server maps the window, so
   * Triton wants `offset` a multiple of the page size and `byteSize` above 0.
   */
  registerSystemSharedMemory(name: string, key: string, byteSize: number, offset?: number): Promise<void>;
  /** The registered system shared memory regions (one, by `name`), ordered by name. */
  systemSharedMemoryStatus(name?: string): Promise<SystemSharedMemoryRegionStatus[]>;
  /** Unregisters system shared memory region `name`, or all of them (an unknown name is no error). */
  unregisterSystemSharedMemory(name?: string): Promise<void>;
  /** Closes connections. */
  close(): void;
}
