/**
 * @module The KServe v2 infer request and response over HTTP: JSON, plus the binary tensor
 * extension (JSON header, then raw tensor bytes; `Inference-Header-Content-Length`).
 * Triton: server/src/http_server.cc (EVBufferToInput, InferRequestClass::FinalizeResponse),
 * server docs/protocol/extension_binary_data.md, extension_classification.md
 */
import {
  Errors, TriodeError, dataTypeByteSize, echo, elementCount, isDataType, viewBytesAs,
  type DataType, type InferenceRequest, type InferenceResponse, type OutputEncoding, type ParameterValue, type RequestedOutput, type Tensor,
} from '@triode/core';
import { readJson } from './json-reader.js';
import { jsonSizeBound, jsonToTensorData, tensorDataToJson } from './json-tensor.js';
import { checkReservedParameters, checkTensorByteSize, checkTensorBytes } from '../protocol-checks.js';
import { LazySharedMemory, type RequestSharedMemory, type SharedMemoryFactory, type SharedMemoryWindow } from '../shared-memory/system-shared-memory.js';

export type { OutputEncoding };

/** A parsed infer request and the encoding its response needs. */
export interface ParsedInfer {
  request: InferenceRequest;
  encoding: OutputEncoding;
  /**
   * The shared memory regions the request reads inputs from or writes outputs to, held until it is
   * answered: the caller awaits `load` (large inputs are read then), writes the outputs
   * (`writeOutputs`) and calls `release` once done, failed or not. Absent when it names no region.
   */
  sharedMemory?: RequestSharedMemory;
}

export type { SharedMemoryFactory };

type Json = Record<string, unknown>;

/** A JSON object: not null, not an array (nor a number array, which the reader makes a Float64Array). */
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);

/** The most keys one `parameters` object may have (Triton: no limit). */
export const MAX_PARAMETERS = 4096;

/** A `parameters` object (`v`), bounded in keys; `where` names its owner in an error (made only then). */
function parametersObject(v: unknown, where: () => string): Json {
  if (!isObj(v)) throw Errors.invalidArg(`'parameters' of ${where()} must be a JSON object`);
  // Counted before they are read: 6.5 million keys (a 60 MB body) held the server 41 s (review).
  let count = 0;
  for (const _ in v) {
    if (++count > MAX_PARAMETERS) throw Errors.invalidArg(`'parameters' of ${where()} has more than ${MAX_PARAMETERS} keys`);
  }
  return v;
}

/** The request parameters Triton's HTTP frontend reads itself, each refused with its own words when of the wrong type. */
const TRITON_READ = new Set(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout', 'binary_data_output']);

/**
 * A request's parameters object (as `readJson` gives it: an integer past 2^53 is a bigint, so a
 * uint64 `sequence_id` stays exact). A custom parameter that is not a string, number or boolean
 * is refused with Triton's words (SetTritonParameterFromJsonParameter); the keys Triton reads
 * itself, and `triton_` ones, are left to checkTritonParameters and checkReservedParameters.
 */
export function parameters(v: unknown): Record<string, ParameterValue> {
  if (v === undefined) return {};
  const params = parametersObject(v, () => 'the request');
  for (const [k, x] of Object.entries(params)) {
    if (typeof x !== 'string' && typeof x !== 'number' && typeof x !== 'boolean' && typeof x !== 'bigint' && !TRITON_READ.has(k) && !k.startsWith('triton_')) {
      throw Errors.invalidArg(`parameter '${echo(k)}' has invalid type. It should be either 'int', 'bool', or 'string'.`);
    }
  }
  return params as Record<string, ParameterValue>;
}

/**
 * An input's or output's parameters: Triton reads only its own keys there (`binary_data_size`,
 * `binary_data`, `classification`, `shared_memory_*`), each checked where it is read, and
 * ignores the others whatever their type.
 */
function tensorParameters(v: unknown, where: () => string): Json {
  return v === undefined ? NO_PARAMETERS : parametersObject(v, where);
}

const NO_PARAMETERS: Json = Object.freeze({});

const MAX_UINT64 = 2n ** 64n - 1n;

/** A uint64 as rapidjson reads one (`IsUint64`): an integer from 0 to 2^64 - 1. */
const isUint64 = (v: ParameterValue): boolean =>
  (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) || (typeof v === 'bigint' && v >= 0n && v <= MAX_UINT64);

/**
 * Checks the request parameters Triton's HTTP frontend reads itself, for every model (a model
 * without sequence batching too), with its words: `sequence_id` a uint64 or a string,
 * `sequence_start`/`sequence_end` booleans, `priority`/`timeout` uint64s. Before, they were checked
 * only where they were used: `"sequence_start": "bogus"` or `"sequence_id": -5` to `simple` got
 * 200, where gRPC refused them (review). Triton answers these 500 (INTERNAL, rapidjson's status);
 * they are the client's mistake: 400.
 * Triton: server/src/http_server.cc HTTPAPIServer::InferRequestClass (EVBufferToInput), RETURN_MSG_IF_ERR
 */
function checkTritonParameters(params: Record<string, ParameterValue>): void {
  const unable = (k: string, what: string) => Errors.invalidArg(`Unable to parse '${k}': attempt to access JSON ${what}`);
  const id = params['sequence_id'];
  // Triton tries AsUInt, then AsString: the error is the string's.
  if (id !== undefined && typeof id !== 'string' && !isUint64(id)) throw unable('sequence_id', 'non-string as string');
  for (const k of ['sequence_start', 'sequence_end']) {
    const v = params[k];
    if (v !== undefined && typeof v !== 'boolean') throw unable(k, 'non-boolean as boolean');
  }
  for (const k of ['priority', 'timeout']) {
    const v = params[k];
    if (v !== undefined && !isUint64(v)) throw unable(k, 'non-unsigned-integer as unsigned-integer');
  }
}

/**
 * An array of the document as a JS array: the reader gives an array of numbers only as a
 * Float64Array, or not (a small document read with `plainArrays`), so that `"inputs": [1]` is
 * told the same either way.
 */
const jsonArray = (v: unknown): unknown => (v instanceof Float64Array ? Array.from(v) : v);

/** One input of a request header, checked: everything but its tensor bytes. */
interface InputHeader {
  name: string;
  datatype: DataType;
  shape: number[];
  count: number;
  /** `binary_data_size`: the input's bytes follow the header. */
  size?: number;
  /** Its JSON `data` (when not binary). */
  data?: unknown;
  /** The shared memory window its bytes are in (`shared_memory_region`). */
  shm?: SharedMemoryWindow;
}

/** A request's header (its JSON, or the JSON part of a binary body), checked, less its inputs. */
interface RequestHeader {
  id: string | undefined;
  params: Record<string, ParameterValue>;
  outputs: RequestedOutput[] | undefined;
  encoding: OutputEncoding;
  /** Outputs written to shared memory, with their windows. */
  shmOutputs?: [string, SharedMemoryWindow][];
}

/** A header whose inputs are all binary: what a request with the same header bytes reuses (HeaderCache). */
interface HeaderTemplate extends RequestHeader {
  inputs: InputHeader[];
}

/**
 * A tensor's shared memory window (`p`: its `parameters`, checked to be an object), or undefined
 * when it names no `shared_memory_region`: the region a string, `shared_memory_offset` (default 0)
 * and `shared_memory_byte_size` (default 0, which no tensor but an empty one fits) uint64s, each
 * refused with Triton's words (its status for them is 500; they are the client's mistake: 400).
 * Triton: server/src/http_server.cc CheckSharedMemoryData
 */
function sharedMemoryWindow(p: Json): SharedMemoryWindow | undefined {
  const region = Object.hasOwn(p, 'shared_memory_region') ? p['shared_memory_region'] : undefined;
  if (region === undefined) return undefined;
  if (typeof region !== 'string') throw Errors.invalidArg("Unable to parse 'shared_memory_region': attempt to access JSON non-string as string");
  const uint = (key: string): number | bigint => {
    const v = Object.hasOwn(p, key) ? p[key] : undefined;
    if (v === undefined) return 0;
    if (!isUint64(v as ParameterValue)) throw unableToParse(key, v, NON_UINT);
    return v as number | bigint;
  };
  return { region, offset: uint('shared_memory_offset'), byteSize: uint('shared_memory_byte_size') };
}

/**
 * Triton's words for a request field it could not read (`v`: its value, undefined when missing;
 * `what`: the JSON type it wanted, e.g. `non-string as string`). Triton answers them 500; they
 * are the client's mistake: 400.
 * Triton: server/src/http_server.cc ParseJsonTritonIO, RETURN_MSG_IF_ERR over TritonJson
 */
function unableToParse(key: string, v: unknown, what: string, verb = 'parse'): TriodeError {
  return Errors.invalidArg(v === undefined
    ? `Unable to ${verb} '${key}': attempt to access non-existing object member '${key}'`
    : `Unable to ${verb} '${key}': attempt to access JSON ${what}`);
}

const NON_UINT = 'non-unsigned-integer as unsigned-integer';

/** Triton's ValidateInputContentType: an input has exactly one of `data`, `binary_data_size`, `shared_memory_region`. */
function contentTypeError(data: boolean, size: boolean, region: boolean): TriodeError {
  const set = `${data ? " 'data'" : ''}${size ? " 'binary_data_size'" : ''}${region ? " 'shared_memory_region'" : ''}`;
  return Errors.invalidArg("Input must set only one of the following fields: 'data', 'binary_data_size' in 'parameters', "
    + `'shared_memory_region' in 'parameters'. But ${set ? `set${set}` : 'no field is set'}`);
}

/** The checks of one input's header (`inp`, the request's input `i`), in Triton's order and words. */
function inputHeader(inp: unknown, i: number): InputHeader {
  if (!isObj(inp)) throw contentTypeError(false, false, false);
  const name = inp['name'];
  const ip = tensorParameters(inp['parameters'], () => (typeof name === 'string' ? `input '${echo(name)}'` : `input ${i}`));
  const hasData = inp['data'] !== undefined;
  const size = ip['binary_data_size'];
  const hasRegion = ip['shared_memory_region'] !== undefined;
  if (+hasData + +(size !== undefined) + +hasRegion !== 1) throw contentTypeError(hasData, size !== undefined, hasRegion);
  if (typeof name !== 'string') throw unableToParse('name', name, 'non-string as string');
  const datatype = inp['datatype'];
  if (typeof datatype !== 'string') throw unableToParse('datatype', datatype, 'non-string as string');
  if (!isDataType(datatype)) throw Errors.invalidArg(`invalid datatype for input ${echo(name)}`);
  const shape = jsonArray(inp['shape']);
  if (!Array.isArray(shape)) throw unableToParse('shape', shape, 'non-array as array');
  if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0)) throw unableToParse('shape', shape, NON_UINT);
  const count = elementCount(shape as number[]);
  if (size !== undefined) {
    if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) throw unableToParse('binary_data_size', size, NON_UINT);
    return { name, datatype, shape: shape as number[], count, size };
  }
  const shm = hasRegion ? sharedMemoryWindow(ip) : undefined;
  if (shm) return { name, datatype, shape: shape as number[], count, shm };
  return { name, datatype, shape: shape as number[], count, data: inp['data'] };
}

/**
 * The tensor of input header `h`: its JSON data, or its binary bytes at `at.offset` of `body`
 * (checked against the body's length and the datatype; `at.offset` moves past them).
 */
function inputTensor(h: InputHeader, body: Uint8Array, at: { offset: number }, model: string, shm: LazySharedMemory): Tensor {
  const { name, datatype, count } = h;
  // A fresh array: the request may be changed on its way (the header's may serve other requests).
  const shape = h.shape.slice();
  if (h.shm) {
    // Copied out of the region (a buffer the request owns): the size is checked before the copy,
    // so a window far larger than the tensor is refused without reading it.
    // A large window is read later (off the event loop: the caller awaits `load`), and then checked.
    const bytes = shm.use().readInput(h.shm, (n) => {
      if (datatype !== 'BYTES') checkTensorByteSize(name, datatype, shape, n, model);
    }, (b) => checkTensorBytes(name, datatype, shape, b, model));
    return { name, datatype, shape, data: viewBytesAs(datatype, bytes), owned: true };
  }
  if (h.size === undefined) {
    // A new array made from the JSON: the request owns it (it may move to an instance thread).
    return { name, datatype, shape, data: jsonToTensorData(h.data, datatype, count, name, shape), owned: true };
  }
  if (at.offset + h.size > body.byteLength) {
    throw Errors.invalidArg(`unexpected size for input '${echo(name)}', expecting ${h.size} additional bytes for model '${echo(model)}'`);
  }
  const bytes = body.subarray(at.offset, at.offset + h.size);
  at.offset += h.size;
  checkTensorBytes(name, datatype, shape, bytes, model);
  return { name, datatype, shape, data: viewBytesAs(datatype, bytes) };
}

/**
 * The tensors of a request's inputs, each checked (`header` of it) and then read before the next
 * (as Triton: the first fault is reported), and the body read to its end.
 */
function inputTensors<T>(inputs: readonly T[], header: (inp: T, i: number) => InputHeader, body: Uint8Array, at: { offset: number }, model: string, shm: LazySharedMemory): Tensor[] {
  const tensors = inputs.map((inp, i) => inputTensor(header(inp, i), body, at, model, shm));
  if (at.offset !== body.byteLength) throw Errors.invalidArg(`unexpected additional input data for model '${echo(model)}'`);
  return tensors;
}

const FP64_NAME = Buffer.from('"FP64"');
const REGION_NAME = Buffer.from('shared_memory_region');

/** Whether a JSON document may name a shared memory region (a byte search, before parsing). */
function mentionsRegion(json: Uint8Array): boolean {
  return Buffer.from(json.buffer, json.byteOffset, json.byteLength).indexOf(REGION_NAME) >= 0;
}

/** Whether a JSON document names the FP64 datatype anywhere (a byte search, before parsing). */
function mentionsFp64(json: Uint8Array): boolean {
  return Buffer.from(json.buffer, json.byteOffset, json.byteLength).indexOf(FP64_NAME) >= 0;
}

/** The encoding of a request that lists no output: one map for all (it is only read). */
const NO_BINARY_OUTPUTS: ReadonlyMap<string, boolean> = new Map();

/** The checks of a request header's outputs and the encoding they ask for. */
function outputsHeader(doc: Json, params: Record<string, ParameterValue>): { outputs: RequestedOutput[] | undefined; encoding: OutputEncoding; shmOutputs?: [string, SharedMemoryWindow][] } {
  const bdo = params['binary_data_output'];
  // Triton's words (its status for this is INTERNAL, 500; a client's mistake is 400 here).
  if (bdo !== undefined && typeof bdo !== 'boolean') throw Errors.invalidArg("Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean");
  const defaultBinary = bdo === true;
  const outputsJson = jsonArray(doc['outputs']);
  if (outputsJson === undefined) return { outputs: undefined, encoding: { binary: NO_BINARY_OUTPUTS, defaultBinary } };
  if (!Array.isArray(outputsJson)) throw unableToParse('outputs', outputsJson, 'non-array as array');
  const binary = new Map<string, boolean>();
  const shmOutputs: [string, SharedMemoryWindow][] = [];
  const outputs = outputsJson.map((o: unknown) => {
    const name = isObj(o) ? o['name'] : undefined;
    if (typeof name !== 'string') throw unableToParse('name', name, 'non-string as string');
    const op = tensorParameters((o as Json)['parameters'], () => `output '${echo(name)}'`);
    // Triton's ValidateOutputParameter: a region excludes classification and binary data.
    if (op['shared_memory_region'] !== undefined) {
      if (op['classification'] !== undefined) throw Errors.invalidArg("Output can't set both 'shared_memory_region' and 'classification'");
      if (op['binary_data'] === true) throw Errors.invalidArg("Output can't set both 'shared_memory_region' and 'binary_data'");
    }
    const ro: RequestedOutput = { name };
    if (op['classification'] !== undefined) {
      const n = op['classification'];
      if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw unableToParse('classification', n, NON_UINT, 'set');
      if (n > 0) ro.classCount = n;
    }
    if (op['binary_data'] !== undefined && typeof op['binary_data'] !== 'boolean') throw unableToParse('binary_data', op['binary_data'], 'non-boolean as boolean');
    // A listed output is binary only when it says so: `binary_data_output` is the kind of the
    // outputs the request does not list (Triton: CheckBinaryOutputData, default false).
    binary.set(name, op['binary_data'] === true);
    const shm = sharedMemoryWindow(op);
    if (shm) shmOutputs.push([name, shm]);
    return ro;
  });
  const header = { outputs, encoding: { binary: binary.size > 0 ? binary : NO_BINARY_OUTPUTS, defaultBinary } };
  return shmOutputs.length ? { ...header, shmOutputs } : header;
}

/** The request of a checked header and its inputs' tensors (the output windows held now, after the inputs', as Triton). */
function inferRequest(h: RequestHeader, inputs: Tensor[], model: { name: string; version?: number }, shm: LazySharedMemory): ParsedInfer {
  // Fresh objects: the header's may serve other requests (HeaderCache); `encoding` is only read.
  const request: InferenceRequest = { modelName: model.name, inputs, parameters: { ...h.params } };
  if (model.version !== undefined) request.modelVersion = model.version;
  if (h.id !== undefined) request.id = h.id;
  if (h.outputs?.length) request.outputs = h.outputs.map((o) => ({ ...o }));
  if (h.shmOutputs) for (const [name, w] of h.shmOutputs) shm.use().holdOutput(name, w);
  return shm.made ? { request, encoding: h.encoding, sharedMemory: shm.made } : { request, encoding: h.encoding };
}

/** The largest JSON header HeaderCache keeps (that of a small request's binary tensors is ~100-300 bytes). */
const CACHED_HEADER_MAX_BYTES = 4096;

/**
 * Checked headers of recent binary-tensor requests, by their exact bytes: a client sends the same
 * header with every request of a shape (tritonclient, perf_analyzer), and parsing and checking it
 * again cost a small request (`simple`) ~9 µs of the main thread's ~80 (bench/RESULTS.md, issue
 * #18). What a request's header gives depends on its bytes alone, so a request whose header bytes
 * match one here gets the same header; only its body's bytes are checked again (their length, and
 * a BYTES tensor's elements), in the same order. Bounded: `max` headers of at most
 * CACHED_HEADER_MAX_BYTES, the oldest dropped first; only headers that passed every check, and
 * only those whose inputs are all binary or in shared memory regions (a JSON `data` input is a
 * request's own; a region's window is plain data, read again, and held again, for each request).
 * A whole-JSON body counts as a header when it names a region (perf_analyzer --shared-memory sends
 * the same one with every request).
 */
export class HeaderCache {
  readonly #max: number;
  readonly #byText = new Map<string, HeaderTemplate>();

  constructor(max = 64) {
    this.#max = max;
  }

  /** Headers held now. */
  get size(): number {
    return this.#byText.size;
  }

  /** The key of a header's bytes (one character a byte), or undefined when it is not kept. */
  key(json: Uint8Array): string | undefined {
    if (json.byteLength === 0 || json.byteLength > CACHED_HEADER_MAX_BYTES) return undefined;
    return Buffer.from(json.buffer, json.byteOffset, json.byteLength).toString('latin1');
  }

  get(key: string): HeaderTemplate | undefined {
    return this.#byText.get(key);
  }

  set(key: string, header: HeaderTemplate): void {
    if (this.#byText.size >= this.#max) this.#byText.delete(this.#byText.keys().next().value!);
    this.#byText.set(key, header);
  }
}

const headerCache = new HeaderCache();

/**
 * Parses an infer request body. `headerLength` is `Inference-Header-Content-Length` (undefined:
 * the whole body is JSON). A header length of 0 is a raw binary request: the body is the data of
 * the model's single input (`rawInput` gives its name, datatype and shape).
 */
export function parseInferRequest(
  body: Uint8Array,
  headerLength: number | undefined,
  model: { name: string; version?: number },
  rawInput?: { name: string; datatype: string; shape: number[] },
  cache: HeaderCache = headerCache,
  sharedMemory?: SharedMemoryFactory,
): ParsedInfer {
  const shm = new LazySharedMemory(sharedMemory);
  try {
    return parseBody(body, headerLength, model, rawInput, cache, shm);
  } catch (err) {
    // What the request held of regions before it was refused is given back.
    shm.made?.release();
    throw err;
  }
}

function parseBody(
  body: Uint8Array,
  headerLength: number | undefined,
  model: { name: string; version?: number },
  rawInput: { name: string; datatype: string; shape: number[] } | undefined,
  cache: HeaderCache,
  shm: LazySharedMemory,
): ParsedInfer {
  if (headerLength !== undefined && (headerLength < 0 || headerLength > body.byteLength)) {
    throw Errors.invalidArg(`inference header size should be in range (0, ${body.byteLength}), got: ${headerLength}`);
  }
  if (headerLength === 0) return parseRawBinary(body, model, rawInput);
  const jsonBytes = headerLength === undefined ? body : body.subarray(0, headerLength);
  // A whole-JSON body is kept only when it names a shared memory region (its tensors are not in
  // it): looked for first, so JSON requests with data pay a byte search, not a key.
  const key = headerLength !== undefined || mentionsRegion(jsonBytes) ? cache.key(jsonBytes) : undefined;
  const cached = key === undefined ? undefined : cache.get(key);
  const at = { offset: headerLength ?? body.byteLength };
  if (cached) {
    return inferRequest(cached, inputTensors(cached.inputs, (h) => h, body, at, model.name, shm), model, shm);
  }
  let doc: unknown;
  try {
    // Numbers of 16+ digits are read exactly only where an FP64 tensor may hold them: FP32 data
    // printed from float32 is exact either way, and reading every long number exactly costs large
    // JSON requests (review: FP64 inputs of 17 digits reached the model up to 2 ulp off).
    doc = readJson(jsonBytes, { plainArrays: true, exact: mentionsFp64(jsonBytes) });
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${(err as Error).message}`);
  }
  if (!isObj(doc)) throw Errors.invalidArg('failed to parse the request JSON buffer: the request must be a JSON object');
  const params = parameters(doc['parameters']);
  checkReservedParameters(Object.keys(params));
  checkTritonParameters(params);
  const id = doc['id'];
  if (id !== undefined && typeof id !== 'string') throw unableToParse('id', id, 'non-string as string');
  const inputsJson = jsonArray(doc['inputs']);
  if (!Array.isArray(inputsJson)) throw unableToParse('inputs', inputsJson, 'non-array as array');
  const headers: InputHeader[] = [];
  const inputs = inputTensors(inputsJson, (inp, i) => {
    const h = inputHeader(inp, i);
    headers.push(h);
    return h;
  }, body, at, model.name, shm);
  const header: HeaderTemplate = { id, params, ...outputsHeader(doc, params), inputs: headers };
  if (key !== undefined && headers.every((h) => h.size !== undefined || h.shm !== undefined)) cache.set(key, header);
  return inferRequest(header, inputs, model, shm);
}

function parseRawBinary(
  body: Uint8Array,
  model: { name: string; version?: number },
  rawInput?: { name: string; datatype: string; shape: number[] },
): ParsedInfer {
  if (!rawInput) throw Errors.invalidArg(`raw binary request is not supported for model '${echo(model.name)}'`);
  const spec = rawInput;
  if (!isDataType(spec.datatype)) throw Errors.invalidArg(`raw binary request: model '${echo(model.name)}' input has an unsupported datatype`);
  const dt = spec.datatype;
  const shape = [...spec.shape];
  const variable = shape.filter((d) => d === -1).length;
  if (dt === 'BYTES') {
    // One element, known from the config (the batch dim Triode prepends is 1): Triton's rule and
    // text (core src/infer_request.cc Normalize; server qa/L0_http/http_request_many_chunks.py).
    if (variable > 0 || shape.reduce((a, d) => a * d, 1) !== 1) throw Errors.invalidArg(`For BYTE datatype raw input '${echo(spec.name)}', the model must have input shape [1]`);
    const data = new Uint8Array(4 + body.byteLength);
    new DataView(data.buffer).setUint32(0, body.byteLength, true);
    data.set(body, 4);
    return finishRaw(model, spec.name, dt, shape, data);
  }
  if (variable > 1) throw Errors.invalidArg(`The shape of the raw input '${echo(spec.name)}' can not be deduced because there are more than one variable-sized dimension`);
  const known = shape.reduce((a, d) => (d === -1 ? a : a * d), 1) * dataTypeByteSize(dt);
  if (variable === 1) {
    if (known === 0 || body.byteLength % known !== 0) throw Errors.invalidArg(`raw binary request: ${body.byteLength} bytes do not fit the shape of input '${echo(spec.name)}' of model '${echo(model.name)}'`);
    shape[shape.indexOf(-1)] = body.byteLength / known;
  }
  return finishRaw(model, spec.name, dt, shape, viewBytesAs(dt, body));
}

function finishRaw(model: { name: string; version?: number }, name: string, datatype: Tensor['datatype'], shape: number[], data: Tensor['data']): ParsedInfer {
  const request: InferenceRequest = { modelName: model.name, inputs: [{ name, datatype, shape, data }], parameters: {} };
  if (model.version !== undefined) request.modelVersion = model.version;
  return { request, encoding: { binary: NO_BINARY_OUTPUTS, defaultBinary: true } };
}

/** Response parameters as JSON; a bigint (a backend's uint64) is written exactly, as JSON.stringify cannot. */
export function parametersJson(p: Record<string, ParameterValue>): string {
  let s = '';
  for (const [k, v] of Object.entries(p)) s += `${s ? ',' : ''}${JSON.stringify(k)}:${typeof v === 'bigint' ? String(v) : JSON.stringify(v)}`;
  return `{${s}}`;
}

/** An encoded infer response: the JSON header and, when any output is binary, the chunks after it. */
export interface EncodedResponse {
  /** The whole body. A small binary one may be a view of Node's shared Buffer pool: copy it before transferring its buffer. */
  body: Uint8Array | string;
  /** Length of the JSON part when binary chunks follow; undefined for a JSON-only body. */
  headerLength?: number;
}

/** Default largest JSON infer response (outputs written as JSON `data`); see `HttpOptions.maxJsonOutputSize`. */
export const DEFAULT_MAX_JSON_OUTPUT_SIZE = 64 * 1024 * 1024;

/**
 * Refuses (INVALID_ARG, HTTP 400) a response whose JSON outputs could exceed `limit` bytes,
 * before any of it is written: a large tensor as JSON text takes many times its binary size and,
 * past V8's string limit, cannot be built at all. The size is an upper bound from the element
 * counts (see `jsonSizeBound`).
 */
export function checkJsonOutputSize(outputs: readonly Tensor[], isBinary: (name: string) => boolean, limit: number): void {
  let total = 0;
  let largest: Tensor | undefined;
  let largestSize = -1;
  for (const o of outputs) {
    if (isBinary(o.name)) continue;
    const size = jsonSizeBound(o.data, o.datatype);
    total += size;
    if (size > largestSize) {
      largest = o;
      largestSize = size;
    }
  }
  if (total > limit && largest) {
    throw Errors.invalidArg(
      `Response of up to ${total} bytes exceeds the limit of ${limit} bytes for outputs written as JSON `
      + `(the largest: '${echo(largest.name)}', ${largest.datatype} [${largest.shape.join(',')}]); `
      + 'request large outputs as binary data: output parameter "binary_data": true, or request parameter "binary_data_output": true',
    );
  }
}

/**
 * Encodes a response, each output as JSON `data` or as a binary chunk per the client's wishes; an
 * output in `inSharedMemory` (written to its region by the caller) carries no data.
 * @throws INVALID_ARG when the JSON outputs could exceed `maxJsonOutputSize` bytes (nothing built).
 */
export function encodeInferResponse(
  res: InferenceResponse,
  encoding: OutputEncoding,
  maxJsonOutputSize = DEFAULT_MAX_JSON_OUTPUT_SIZE,
  inSharedMemory?: ReadonlyMap<string, unknown>,
): EncodedResponse {
  checkJsonOutputSize(res.outputs, (name) => inSharedMemory?.has(name) === true || (encoding.binary.get(name) ?? encoding.defaultBinary), maxJsonOutputSize);
  let json = '{';
  if (res.id !== undefined && res.id !== '') json += `"id":${JSON.stringify(res.id)},`;
  json += `"model_name":${JSON.stringify(res.modelName)},"model_version":${JSON.stringify(res.modelVersion)}`;
  if (res.parameters && Object.keys(res.parameters).length) json += `,"parameters":${parametersJson(res.parameters)}`;
  json += ',"outputs":[';
  const chunks: Uint8Array[] = [];
  res.outputs.forEach((o, i) => {
    if (i) json += ',';
    json += `{"name":${JSON.stringify(o.name)},"datatype":"${o.datatype}","shape":[${o.shape.join(',')}]`;
    const binary = encoding.binary.get(o.name) ?? encoding.defaultBinary;
    if (inSharedMemory?.has(o.name)) {
      // Written to its region already: name, datatype and shape only (Triton's FinalizeResponse).
      json += '}';
    } else if (binary) {
      const bytes = new Uint8Array(o.data.buffer, o.data.byteOffset, o.data.byteLength);
      // An empty output adds no chunk: with nothing but empty ones the answer is plain JSON, as
      // Triton's (it adds a buffer, and so the header length, only for a non-empty output).
      if (bytes.byteLength > 0) chunks.push(bytes);
      json += `,"parameters":{"binary_data_size":${bytes.byteLength}}}`;
    } else {
      json += `,"data":${tensorDataToJson(o.data, o.datatype)}}`;
    }
  });
  json += ']}';
  if (chunks.length === 0) return { body: json };
  const headerLength = Buffer.byteLength(json);
  let total = headerLength;
  for (const c of chunks) total += c.byteLength;
  // Written whole below. A small body is a slice of Node's shared pool (no allocation of its own:
  // ~1 µs a small request, bench/RESULTS.md, issue #18), so it is written or copied, never transferred.
  const body = Buffer.allocUnsafe(total);
  body.write(json, 0, 'utf8');
  let off = headerLength;
  for (const c of chunks) {
    body.set(c, off);
    off += c.byteLength;
  }
  return { body, headerLength };
}
