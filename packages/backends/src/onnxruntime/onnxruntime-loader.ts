/**
 * @module Loads an onnxruntime session and runs it with no hop: onnxruntime-node's native session
 * runs synchronously (it blocks its thread either way), but onnxruntime-node's handler puts every run
 * in an immediate of its own and onnxruntime-common's `InferenceSession.run` wraps that in two more
 * promises and a result object built anew. A lone `simple` request paid ~1.9 us for them
 * (bench/RESULTS.md, issue #18). The native session is onnxruntime-node's private `dist/binding`
 * module, the one its handler uses: onnxruntime-node 1.30.0 is pinned exactly, and
 * onnxruntime-loader.test.ts fails if that module changes. Without it, sessions are onnxruntime-common's.
 * Triton: onnxruntime_backend/src/onnxruntime_loader.cc (OnnxLoader::LoadSession)
 */
import { createRequire } from 'node:module';
import { setImmediate as nextImmediate } from 'node:timers/promises';
import * as ort from 'onnxruntime-node';

type Outputs = ort.InferenceSession.OnnxValueMapType;

/**
 * An input as the native run reads it (onnxruntime-node's NapiValueToOrtValue reads `dims`,
 * `location`, `type` and `data`, nothing else): a plain object, not an onnxruntime-common Tensor,
 * whose constructor checks again what the core checked (a data length that matches the shape) and
 * cost a lone `simple` request two calls of ~700 instructions each. A Tensor is one too.
 */
export interface OrtFeed {
  readonly location: string;
  readonly type: string;
  readonly dims: readonly number[];
  readonly data: ArrayBufferView | readonly string[];
}
type Feeds = Record<string, OrtFeed>;

/** What every loaded session shows, whichever way it runs. */
interface LoadedSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  readonly outputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  release(): Promise<void>;
}

/**
 * A session on the native binding. `run` checks the feeds and fetches as onnxruntime-common does,
 * with its messages (a check that fails throws before the native run), and answers at once.
 */
export interface ImmediateOrtSession extends LoadedSession {
  readonly immediate: true;
  run(feeds: Feeds, outputNames: readonly string[]): Outputs;
}

/** A session of onnxruntime-common's: `run` answers in a promise, after an immediate. */
export interface DeferredOrtSession extends LoadedSession {
  readonly immediate: false;
  run(feeds: Feeds, outputNames: readonly string[]): Promise<Outputs>;
}

export type OrtSession = ImmediateOrtSession | DeferredOrtSession;

/** What onnxruntime-node's native binding metadata says of one input or output. */
interface RawMetadata {
  name: string;
  isTensor: boolean;
  type: number;
  shape: number[];
  symbolicDimensions: string[];
}

/** onnxruntime-node's native session (bin/napi-v6/.../onnxruntime_binding.node), as its handler uses it. */
interface NativeSession {
  loadModel(path: string, options: object): void;
  readonly inputMetadata: RawMetadata[];
  readonly outputMetadata: RawMetadata[];
  run(feeds: Feeds, fetches: Record<string, null>, options: object): Outputs;
  dispose(): void;
}

/** onnxruntime-node's `dist/binding` module. */
export interface NativeBinding {
  binding: { InferenceSession: new () => NativeSession };
  /** Sets onnxruntime's environment up once a thread (the log level, the Tensor class). */
  initOrt(): void;
}

/** onnxruntime-node's binding module, if it is the one this file knows. */
function loadBinding(): NativeBinding | null {
  try {
    const m = createRequire(import.meta.url)('onnxruntime-node/dist/binding') as Partial<NativeBinding>;
    const proto = (m.binding?.InferenceSession as { prototype?: Partial<NativeSession> } | undefined)?.prototype;
    if (typeof m.initOrt !== 'function' || typeof proto?.loadModel !== 'function' || typeof proto.run !== 'function' || typeof proto.dispose !== 'function') return null;
    return m as NativeBinding;
  } catch {
    return null;
  }
}

const NATIVE = loadBinding();

/** onnxruntime-node's tensor type codes (ONNXTensorElementDataType), as its handler reads them. */
const TYPES: readonly (ort.Tensor.Type | undefined)[] = [
  undefined, 'float32', 'uint8', 'int8', 'uint16', 'int16', 'int32', 'int64', 'string', 'bool', 'float16', 'float64',
  'uint32', 'uint64', undefined, undefined, undefined, undefined, undefined, undefined, undefined, 'uint4', 'int4',
];

/** ONNX's names of its tensor element types (TensorProto.DataType), by code. */
const ONNX_TYPE_NAMES: readonly string[] = [
  'UNDEFINED', 'FLOAT', 'UINT8', 'INT8', 'UINT16', 'INT16', 'INT32', 'INT64', 'STRING', 'BOOL', 'FLOAT16', 'DOUBLE',
  'UINT32', 'UINT64', 'COMPLEX64', 'COMPLEX128', 'BFLOAT16', 'FLOAT8E4M3FN', 'FLOAT8E4M3FNUZ', 'FLOAT8E5M2',
  'FLOAT8E5M2FNUZ', 'UINT4', 'INT4', 'FLOAT4E2M1',
];

/** An ONNX element type by its name (`BFLOAT16`), or its code where ONNX names it after this list. */
export function onnxTypeName(code: number): string {
  return ONNX_TYPE_NAMES[code] ?? `element type ${code}`;
}

/**
 * Raw metadata as onnxruntime-common's session shows it (a symbolic dim by its name). A tensor
 * of a type onnxruntime-node cannot pass (BFLOAT16, COMPLEX64, FLOAT8...) refuses the session
 * naming the tensor and its type (onnxruntime-node's own error said `Unsupported data type: 16`).
 */
function metadata(raw: readonly RawMetadata[], kind: 'input' | 'output'): ort.InferenceSession.ValueMetadata[] {
  return raw.map((m) => {
    if (!m.isTensor) return { name: m.name, isTensor: false };
    const type = TYPES[m.type];
    if (type === undefined) throw new Error(`${kind} '${m.name}' of the model has ONNX type ${onnxTypeName(m.type)}, which the onnxruntime backend does not support`);
    const shape = m.shape.map((d, i) => {
      if (d === -1) return m.symbolicDimensions[i]!;
      if (d >= 0) return d;
      throw new Error(`Invalid dimension: ${d}`);
    });
    return { name: m.name, isTensor: true, type, shape };
  });
}

/** The feeds and fetches checks of onnxruntime-common's run, with its messages. */
function fetchesFor(session: Pick<LoadedSession, 'inputNames' | 'outputNames'>, feeds: Feeds, outputNames: readonly string[]): Record<string, null> {
  if (outputNames.length === 0) throw new TypeError("'fetches' cannot be an empty array.");
  const fetches: Record<string, null> = {};
  for (const name of outputNames) {
    if (!session.outputNames.includes(name)) throw new RangeError(`'fetches' contains invalid output name: ${name}.`);
    fetches[name] = null;
  }
  for (const name of session.inputNames) {
    if (feeds[name] === undefined) throw new Error(`input '${name}' is missing in 'feeds'.`);
  }
  return fetches;
}

/** A session on onnxruntime-node's native binding: a run answers at once. */
class NativeOrtSession implements ImmediateOrtSession {
  readonly #native: NativeSession;
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  readonly inputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  readonly outputMetadata: readonly ort.InferenceSession.ValueMetadata[];
  readonly immediate = true as const;

  constructor(native: NativeSession) {
    this.#native = native;
    this.inputMetadata = metadata(native.inputMetadata, 'input');
    this.outputMetadata = metadata(native.outputMetadata, 'output');
    this.inputNames = this.inputMetadata.map((m) => m.name);
    this.outputNames = this.outputMetadata.map((m) => m.name);
  }

  run(feeds: Feeds, outputNames: readonly string[]): Outputs {
    return this.#native.run(feeds, fetchesFor(this, feeds, outputNames), {});
  }

  release(): Promise<void> {
    this.#native.dispose();
    return Promise.resolve();
  }
}

/** A session of onnxruntime-common's, when the native binding is not the one this file knows. */
class CommonOrtSession implements DeferredOrtSession {
  readonly #session: ort.InferenceSession;
  readonly immediate = false as const;
  constructor(session: ort.InferenceSession) { this.#session = session; }
  get inputNames(): readonly string[] { return this.#session.inputNames; }
  get outputNames(): readonly string[] { return this.#session.outputNames; }
  get inputMetadata(): readonly ort.InferenceSession.ValueMetadata[] { return this.#session.inputMetadata; }
  get outputMetadata(): readonly ort.InferenceSession.ValueMetadata[] { return this.#session.outputMetadata; }
  run(feeds: Feeds, outputNames: readonly string[]): Promise<Outputs> {
    // onnxruntime-common hands the feeds to the same native run as they are.
    return this.#session.run(feeds as unknown as ort.InferenceSession.FeedsType, outputNames);
  }
  release(): Promise<void> { return this.#session.release(); }
}

/** The execution provider names onnxruntime-node lists (its backends). */
let listed: Set<string> | undefined;
function providerNames(): Set<string> {
  return (listed ??= new Set(ort.listSupportedBackends().map((b) => b.name)));
}

/**
 * Where sessions are made: an object, so that a test can stand in for `create`.
 */
export const OnnxLoader = {
  /**
   * Loads the model file into a session with these options: on onnxruntime-node's native binding
   * (`native`; null: there is none) when every provider is one onnxruntime-node lists, otherwise
   * through onnxruntime-common (which drops the others with a warning: that case is left to it).
   */
  async create(file: string, options: ort.InferenceSession.SessionOptions, native: NativeBinding | null = NATIVE): Promise<OrtSession> {
    const eps = options.executionProviders ?? [];
    const names = providerNames();
    if (!native || !eps.every((p) => names.has(typeof p === 'string' ? p : p.name))) {
      return new CommonOrtSession(await ort.InferenceSession.create(file, options));
    }
    // In an immediate, as onnxruntime-node makes its handler: a load blocks its thread throughout.
    await nextImmediate();
    native.initOrt();
    const s = new native.binding.InferenceSession();
    s.loadModel(file, options);
    try {
      return new NativeOrtSession(s);
    } catch (err) {
      s.dispose();
      throw err;
    }
  },
};

/** onnxruntime-node's native binding, if this file knows it (null: sessions are onnxruntime-common's). */
export const nativeBinding = (): NativeBinding | null => NATIVE;
