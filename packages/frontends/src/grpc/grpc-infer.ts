/**
 * @module ModelInferRequest -> InferenceRequest and InferenceResponse -> ModelInferResponse, with
 * Triton's rules: each input without `contents` takes the next raw_input_contents entry (entries
 * left over are ignored), `contents` never mixed with raw_input_contents; responses always in
 * raw_output_contents.
 * Triton: server/src/grpc/infer_handler.cc (InferGRPCToInput, InferResponseCompleteCommon)
 */
import {
  Errors, dataBytes, echo, elementCount, isDataType, parameterValue,
  parameterKind, parametersToMessage, parseModelVersion, serializeBytesTensor, toNumber, viewBytesAs,
  type DataType, type InferParameterMessage, type InferenceRequest, type InferenceResponse, type ParameterValue,
  type ProtoLong, type RequestedOutput, type Tensor, type TensorData,
} from '@triode/core';
import { checkReservedParameters, checkTensorByteSize, checkTensorBytes } from '../protocol-checks.js';
import { LazySharedMemory, type RequestSharedMemory, type SharedMemoryFactory, type SharedMemoryWindow } from '../shared-memory/system-shared-memory.js';
import { REFUSED } from './infer-request-scan.js';

/** InferTensorContents as decoded. */
interface ContentsMessage {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: ProtoLong[];
  uint_contents?: number[];
  uint64_contents?: ProtoLong[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Uint8Array[];
}

/** ModelInferRequest as protobufjs decodes it (field names as in the proto). */
export interface ModelInferRequestMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameterMessage>;
  inputs: { name: string; datatype: string; shape: ProtoLong[]; parameters: Record<string, InferParameterMessage>; contents?: ContentsMessage | null }[];
  outputs: { name: string; parameters: Record<string, InferParameterMessage> }[];
  raw_input_contents: Uint8Array[];
}

/** ModelInferResponse as given to the encoder. */
export interface ModelInferResponseMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters: Record<string, InferParameterMessage>;
  outputs: { name: string; datatype: string; shape: number[]; parameters?: Record<string, InferParameterMessage> }[];
  raw_output_contents: Uint8Array[];
}

/** The request parameter asking a decoupled stream for an empty final response. */
const EMPTY_FINAL = 'triton_enable_empty_final_response';

/** The typed fields in the order Triton reads them, with the datatype each one carries for `dt`. */
const FIELD_TYPES: readonly [keyof ContentsMessage, (dt: DataType) => DataType][] = [
  ['bool_contents', () => 'BOOL'],
  ['int_contents', (dt) => (dt === 'INT8' || dt === 'INT16' ? dt : 'INT32')],
  ['int64_contents', () => 'INT64'],
  ['uint_contents', (dt) => (dt === 'UINT8' || dt === 'UINT16' ? dt : 'UINT32')],
  ['uint64_contents', () => 'UINT64'],
  ['fp32_contents', () => 'FP32'],
  ['fp64_contents', () => 'FP64'],
  ['bytes_contents', () => 'BYTES'],
];

/** The typed field that carries `dt` (FP16/BF16 have none: raw only). */
const contentField = (dt: DataType): keyof ContentsMessage | undefined => FIELD_TYPES.find(([, carries]) => carries(dt) === dt)?.[0];

/**
 * Refuses typed contents in a field other than the datatype's, or in more than one field, with
 * Triton's words (InferGRPCToInputHelper). Ignored, a wrong field's values were dropped and the
 * request ran on the right one's (review).
 */
function checkContentFields(c: ContentsMessage, dt: DataType, input: string, model: string): void {
  let supplied = false;
  for (const [field, carries] of FIELD_TYPES) {
    if (((c[field] as unknown[] | undefined)?.length ?? 0) === 0) continue;
    if (supplied) throw Errors.invalidArg(`unexpected explicit tensor data for input tensor '${echo(input)}' for model '${echo(model)}', binary data was already supplied.`);
    if (carries(dt) !== dt) throw Errors.invalidArg(`unexpected explicit tensor data for input tensor '${echo(input)}' for model '${echo(model)}' of type '${carries(dt)}', expected datatype '${dt}'`);
    supplied = true;
  }
}

/**
 * Typed contents as tensor data. As Triton, which packs them into bytes and lets core check the
 * size, a wrong number of values is refused with core's words (checkTensorBytes), and a datatype
 * with no typed field (FP16, BF16) reads as no bytes.
 */
function typedContents(c: ContentsMessage, dt: DataType, shape: readonly number[], input: string, model: string): TensorData {
  checkContentFields(c, dt, input, model);
  const field = contentField(dt);
  if (!field) {
    const none = new Uint8Array(0);
    checkTensorBytes(echo(input), dt, shape, none, echo(model));
    return viewBytesAs(dt, none);
  }
  const values = (c[field] ?? []) as unknown[];
  const data = typedValues(dt, values);
  // Only a wrong count pays for the check (its text is core's: byte sizes, or BYTES elements).
  if (values.length !== elementCount(shape)) checkTensorBytes(echo(input), dt, shape, dataBytes(data), echo(model));
  return data;
}

function typedValues(dt: DataType, values: unknown[]): TensorData {
  switch (dt) {
    case 'BOOL': return Uint8Array.from(values as boolean[], (b) => (b ? 1 : 0));
    case 'INT8': return Int8Array.from(values as number[]);
    case 'INT16': return Int16Array.from(values as number[]);
    case 'INT32': return Int32Array.from(values as number[]);
    case 'UINT8': return Uint8Array.from(values as number[]);
    case 'UINT16': return Uint16Array.from(values as number[]);
    case 'UINT32': return Uint32Array.from(values as number[]);
    case 'INT64': return BigInt64Array.from(values as ProtoLong[], (v) => BigInt.asIntN(64, BigInt(v.toString())));
    case 'UINT64': return BigUint64Array.from(values as ProtoLong[], (v) => BigInt.asUintN(64, BigInt(v.toString())));
    case 'FP32': return Float32Array.from(values as number[]);
    case 'FP64': return Float64Array.from(values as number[]);
    default: return serializeBytesTensor(values as Uint8Array[]);
  }
}

/**
 * The value of a parameter Triton's gRPC frontend reads itself (SetInferenceRequestMetadata), with
 * its types and messages: `sequence_id` int64 (taken as uint64, so -1 is 2^64-1: how a client
 * sends an id of 2^63 or more) or string; `sequence_start`/`sequence_end` bool; `priority` int64
 * (not negative) or uint64; `timeout` int64 (taken as uint64); any other key int64, bool, string
 * or double.
 */
function typedParameter(k: string, p: InferParameterMessage, v: ParameterValue | undefined): ParameterValue | undefined {
  const kind = parameterKind(p);
  const wrong = (expected: string) => Errors.invalidArg(`invalid value type for '${k}' parameter, expected ${expected}.`);
  switch (k) {
    case 'sequence_id':
      if (kind === 'string_param') return v;
      if (kind !== 'int64_param') throw wrong('int64_param or string_param');
      return uint64Of(v);
    case 'sequence_start':
    case 'sequence_end':
      if (kind !== 'bool_param') throw wrong('bool_param');
      return v;
    case 'priority':
      if (kind === 'uint64_param') return v;
      if (kind !== 'int64_param') throw wrong('int64_param or uint64_param');
      if ((typeof v === 'bigint' && v < 0n) || (typeof v === 'number' && v < 0)) throw Errors.invalidArg("invalid value for 'priority', expected value >= 0.");
      return v;
    case 'timeout':
      if (kind !== 'int64_param') throw wrong('int64_param');
      return uint64Of(v);
    case EMPTY_FINAL:
      return v; // checked by the caller, with Triton's words for it
    default:
      // Any other key: int64, bool, string or double, as Triton takes them (its message names three).
      if (kind === undefined || kind === 'uint64_param') throw wrong('int64_param, bool_param, or string_param');
      return v;
  }
}

/** An int64 parameter's value as the uint64 Triton's C API takes it (a negative one wraps). */
function uint64Of(v: ParameterValue | undefined): ParameterValue | undefined {
  if (typeof v === 'number' && v < 0) return BigInt.asUintN(64, BigInt(v));
  if (typeof v === 'bigint' && v < 0n) return BigInt.asUintN(64, v);
  return v;
}

/** Request parameters; `triton_` keys are reserved (the empty-final-response flag excepted). */
function requestParameters(map: Record<string, InferParameterMessage>): { params: Record<string, ParameterValue>; emptyFinal: boolean } {
  checkReservedParameters(Object.keys(map), [EMPTY_FINAL], { listAllowed: true });
  const params: Record<string, ParameterValue> = {};
  let emptyFinal = false;
  for (const [k, p] of Object.entries(map)) {
    const v = typedParameter(k, p, parameterValue(p));
    if (v === undefined) continue;
    if (k === EMPTY_FINAL) {
      // Triton: SetStateParameterFromTritonParameter.
      if (typeof v !== 'boolean') throw Errors.invalidArg(`invalid value type for '${EMPTY_FINAL}' parameter, expected bool_param.`);
      emptyFinal = v;
    } else params[k] = v;
  }
  return { params, emptyFinal };
}


/** A decoded request, read: its InferenceRequest, the stream's empty-final flag, the regions it holds. */
export interface ReadInferMessage {
  request: InferenceRequest;
  emptyFinal: boolean;
  /**
   * The shared memory windows its inputs were read from and its outputs go to: the caller awaits
   * `load` (large inputs are read then), writes the outputs before answering and calls `release`
   * once done, failed or not.
   */
  sharedMemory?: RequestSharedMemory;
}

/**
 * A decoded ModelInferRequest as an InferenceRequest (plus the stream's empty-final flag); or,
 * for a version past 2^53 (which no model has), that version alone: Triton looks the model up
 * before it reads the inputs, so the caller answers it with `versionNotFound`. `sharedMemory` makes
 * the request's hold on regions (none given: every region is unknown).
 */
export function inferRequestFromMessage(m: ModelInferRequestMessage, sharedMemory?: SharedMemoryFactory): ReadInferMessage | { unknownVersion: bigint } {
  // A message the wire check refused (grpc-js path): its error, answered as any other.
  if (REFUSED in m) throw (m as unknown as { [REFUSED]: Error })[REFUSED];
  const model = m.model_name;
  const version = parseModelVersion(m.model_version);
  if (typeof version === 'bigint') return { unknownVersion: version };
  const shm = new LazySharedMemory(sharedMemory);
  try {
    const read = readMessage(m, model, version, () => shm.use());
    return shm.made ? { ...read, sharedMemory: shm.made } : read;
  } catch (err) {
    // What it held of regions before it was refused is given back.
    shm.made?.release();
    throw err;
  }
}

function readMessage(m: ModelInferRequestMessage, model: string, version: number | undefined, shm: () => RequestSharedMemory): { request: InferenceRequest; emptyFinal: boolean } {
  // Triton's order (ModelInferHandler::Execute): the request's parameters (SetInferenceRequestMetadata),
  // then its inputs (InferGRPCToInput), then its outputs (InferAllocatorPayload); a request wrong in
  // several places gets the first one's error.
  const { params, emptyFinal } = requestParameters(m.parameters);
  const raw = m.raw_input_contents;
  // Triton's walk (InferGRPCToInput): each input without contents or a region takes the next raw
  // entry; one left without is refused, entries left over are ignored.
  let next = 0;
  const inputs: Tensor[] = m.inputs.map((inp) => {
    const { name, datatype } = inp;
    if (!isDataType(datatype)) {
      throw Errors.invalidArg(`invalid datatype '${echo(datatype)}' for input '${echo(name)}' (expected one of BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, FP64, BYTES)`);
    }
    const shape = inp.shape.map((d) => {
      const n = toNumber(d);
      if (!Number.isSafeInteger(n) || n < 0) throw Errors.invalidArg(`input '${echo(name)}' must have a 'shape' of non-negative integers`);
      return n;
    });
    const window = sharedMemoryWindow(inp.parameters, name);
    // Present, even with no field set, is Triton's has_contents(): protobufjs leaves an absent
    // message field null and decodes a present one, empty or not, to an object.
    if (window) {
      if (inp.contents != null) {
        throw Errors.invalidArg(`unexpected 'content' provided when using shared memory for input tensor '${echo(name)}' for model '${echo(model)}'`);
      }
      // Copied out of the region (the request owns the copy), its size checked before the copy.
      // A large window is read later (off the event loop: the caller awaits `load`), and then checked.
      const bytes = shm().readInput(window, (n) => {
        if (datatype !== 'BYTES') checkTensorByteSize(echo(name), datatype, shape, n, echo(model));
      }, (b) => checkTensorBytes(echo(name), datatype, shape, b, echo(model)));
      return { name, datatype, shape, data: viewBytesAs(datatype, bytes), owned: true };
    }
    if (inp.contents != null) {
      if (raw.length > 0) {
        throw Errors.invalidArg(`contents field must not be specified when using raw_input_contents for '${echo(name)}' for model '${echo(model)}'`);
      }
      const data = typedContents(inp.contents, datatype, shape, name, model);
      // The decoded values go now: a JS array slot or an object per element (up to 50 bytes of
      // heap for a 1-byte packed zero), kept by the message while its request waits for its model.
      // 40 queued calls of 16M int_contents (16 KB gzipped each) ran the server out of heap (review).
      inp.contents = null;
      return { name, datatype, shape, data };
    }
    const bytes = raw[next++];
    if (bytes === undefined) {
      throw Errors.invalidArg(`unable to find data for input tensor '${echo(name)}' for model '${echo(model)}' in request.`);
    }
    checkTensorBytes(echo(name), datatype, shape, bytes, echo(model));
    return { name, datatype, shape, data: viewBytesAs(datatype, bytes) };
  });
  const outputs: RequestedOutput[] = m.outputs.map((o) => {
    const ro: RequestedOutput = { name: o.name };
    const window = sharedMemoryWindow(o.parameters, o.name);
    const cls = o.parameters['classification'];
    if (window && cls) throw Errors.invalidArg("output can't set both 'shared_memory_region' and 'classification'");
    if (window) shm().holdOutput(o.name, window);
    if (cls) ro.classCount = classCount(cls);
    return ro;
  });
  const request: InferenceRequest = { modelName: model, inputs, parameters: params };
  if (version !== undefined) request.modelVersion = version;
  if (m.id) request.id = m.id;
  if (outputs.length) request.outputs = outputs;
  return { request, emptyFinal };
}

/**
 * An output's `classification` count, with Triton's types and words (ParseClassificationParams):
 * an int64_param of at least 1. Before, 0 was taken as no classification and any numeric kind
 * was read (review).
 */
function classCount(p: InferParameterMessage): number {
  if (parameterKind(p) !== 'int64_param') throw Errors.invalidArg("invalid value type for 'classification' parameter, expected int64_param");
  const n = parameterValue(p);
  if ((typeof n === 'bigint' && n < 1n) || (typeof n === 'number' && n < 1)) throw Errors.invalidArg("invalid value for 'classification' parameter, expected >= 1");
  // Past 2^53 no output has that many classes: core caps the count at the output's size.
  return typeof n === 'bigint' ? Number.MAX_SAFE_INTEGER : (n as number);
}

/**
 * A tensor's shared memory window, or undefined when its parameters name no region, read as
 * Triton's ParseSharedMemoryParams reads it (order and words): the region a string_param, the
 * offset (default 0) and the byte size (required) int64_params, neither without a region. A
 * negative int64 is the uint64 Triton's size_t makes of it (refused by the window's checks).
 * Triton: server/src/grpc/grpc_utils.h ParseSharedMemoryParams
 */
function sharedMemoryWindow(params: Record<string, InferParameterMessage>, tensor: string): SharedMemoryWindow | undefined {
  const region = params['shared_memory_region'];
  const offset = params['shared_memory_offset'];
  const size = params['shared_memory_byte_size'];
  const t = echo(tensor);
  if (region !== undefined && parameterKind(region) !== 'string_param') {
    throw Errors.invalidArg(`invalid value type for 'shared_memory_region' parameter for tensor '${t}', expected string_param.`);
  }
  const int64 = (p: InferParameterMessage | undefined, key: string): number | bigint | undefined => {
    if (p === undefined) return undefined;
    if (region === undefined) throw Errors.invalidArg(`'${key}' can not be specified without 'shared_memory_region' parameter for tensor '${t}'`);
    if (parameterKind(p) !== 'int64_param') throw Errors.invalidArg(`invalid value type for '${key}' parameter for tensor '${t}', expected int64_param.`);
    return uint64Of(parameterValue(p)) as number | bigint;
  };
  const o = int64(offset, 'shared_memory_offset') ?? 0;
  const b = int64(size, 'shared_memory_byte_size');
  if (region === undefined) return undefined;
  if (b === undefined) throw Errors.invalidArg(`'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor '${t}'`);
  return { region: String(parameterValue(region)), offset: o, byteSize: b };
}

/** An InferenceResponse as a ModelInferResponse: every output's bytes in raw_output_contents. */
export function inferResponseToMessage(r: InferenceResponse, extra?: Record<string, ParameterValue>, shm?: RequestSharedMemory): ModelInferResponseMessage {
  // Outputs asked for in shared memory go to their regions (one that does not fit fails the
  // request, INTERNAL as Triton's allocator) and leave an empty raw entry, as Triton's.
  if (shm) shm.writeOutputs(r.outputs.map((t) => ({ name: t.name, data: dataBytes(t.data) })));
  return {
    model_name: r.modelName,
    model_version: r.modelVersion,
    id: r.id ?? '',
    parameters: parametersToMessage(extra ? { ...r.parameters, ...extra } : r.parameters),
    outputs: r.outputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape })),
    raw_output_contents: r.outputs.map((t) => (shm?.outputs.has(t.name) ? EMPTY_BYTES : dataBytes(t.data))),
  };
}

const EMPTY_BYTES = new Uint8Array(0);

