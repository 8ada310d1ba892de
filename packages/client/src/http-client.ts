/**
 * @module An HTTP/REST client for any KServe v2 / Triton server. Tensors travel with the binary
 * tensor extension by default (JSON header + raw bytes), over keep-alive connections.
 * Triton: client/src/python/library/tritonclient/http, server docs/protocol/extension_binary_data.md
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import {
  dataBytes, echo, elementCount, isDataType, serializeBytesTensor, timerMs,
  type DataType, type ModelIndexEntry, type ModelMetadata, type ModelStatistics, type ParameterValue, type ServerMetadata, type TensorData,
} from '@triode/core';
import { InferenceServerError } from './errors.js';
import { ResponseBuffer } from './response-buffer.js';
import { requestParameters, versionString } from './request-parameters.js';
import { inputTensorData, outputShape, outputTensor } from './tensor-data.js';
import {
  checkRegistration, inputWindow, outputWindow, regionStatuses, sharedMemoryOutput, sharedMemoryOutputs, windowParameters, type SharedMemoryOutputs,
} from './shared-memory-params.js';
import { markInteger, markNonFinite, parseJson, stringifyJson, type ParseJsonOptions } from './json-non-finite.js';
import {
  InferResult, splitBytes,
  type InferenceClient, type InferOptions, type LoadModelOptions, type OutputTensor, type PreparedInfer, type SystemSharedMemoryRegionStatus,
} from './types.js';

/** Options of an HttpClient. */
export interface HttpClientOptions {
  /** Connections kept per server. @default 64 */
  maxSockets?: number;
  /** Per-call deadline in ms, from sending to the last byte of the answer (0: none). @default 0 */
  timeoutMs?: number;
  /**
   * Fails a call when its connection moves no byte for this many ms (0: never), as tritonclient's
   * 60 s `network_timeout` does: a server that never answers does not hold a call forever.
   * A model that computes longer than this before answering needs a larger value.
   * @default 60000, or `timeoutMs` when that is larger (see idleTimeoutOf)
   */
  idleTimeoutMs?: number;
  /** Largest response body accepted; a larger one fails the call. @default 1 GiB */
  maxResponseBytes?: number;
  /** Headers sent with every call (e.g. a restricted-API key). */
  headers?: Record<string, string>;
  /** Send inputs and ask for outputs in binary (the binary tensor extension). @default true */
  binary?: boolean;
}

interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

const JSON_ARRAY: Partial<Record<DataType, (v: unknown[]) => TensorData>> = {
  BOOL: (v) => Uint8Array.from(v as boolean[], (b) => (b ? 1 : 0)),
  UINT8: (v) => Uint8Array.from(v as number[]), UINT16: (v) => Uint16Array.from(v as number[]), UINT32: (v) => Uint32Array.from(v as number[]),
  // Integers past 2^53 arrive as exact bigints (parseJson's exactIntegers), the others as numbers.
  UINT64: (v) => BigUint64Array.from(v as (number | bigint)[], (x) => BigInt(x)),
  INT8: (v) => Int8Array.from(v as number[]), INT16: (v) => Int16Array.from(v as number[]), INT32: (v) => Int32Array.from(v as number[]),
  INT64: (v) => BigInt64Array.from(v as (number | bigint)[], (x) => BigInt(x)),
  FP32: (v) => Float32Array.from(v as number[]), FP64: (v) => Float64Array.from(v as number[]),
  BYTES: (v) => serializeBytesTensor(v as string[]),
};

const INT_RANGE: Partial<Record<DataType, readonly [bigint, bigint]>> = {
  INT8: [-128n, 127n], INT16: [-32768n, 32767n], INT32: [-(2n ** 31n), 2n ** 31n - 1n], INT64: [-(2n ** 63n), 2n ** 63n - 1n],
  UINT8: [0n, 255n], UINT16: [0n, 65535n], UINT32: [0n, 2n ** 32n - 1n], UINT64: [0n, 2n ** 64n - 1n],
};

/**
 * The index of the first element of JSON output data that is not a value of `datatype`, or -1.
 * Converted as they were, strings became 0, 300 in UINT8 became 44, 3.7 in INT32 became 3 and
 * "false" in BOOL became true, all returned as valid (review).
 */
function badJsonElement(datatype: DataType, flat: readonly unknown[]): number {
  const range = INT_RANGE[datatype];
  if (range) {
    // Compared exactly: integers past 2^53 come as bigints, the rest as numbers.
    const [lo, hi] = range;
    return flat.findIndex((x) => {
      if (typeof x === 'number' && Number.isInteger(x)) x = BigInt(x);
      return typeof x !== 'bigint' || x < lo || x > hi;
    });
  }
  switch (datatype) {
    case 'BOOL': return flat.findIndex((x) => typeof x !== 'boolean');
    case 'BYTES': return flat.findIndex((x) => typeof x !== 'string');
    // Non-finite values come marked by the reader; a finite one past FP32's range is not an FP32.
    case 'FP32': return flat.findIndex((x) => typeof x !== 'number' || (Number.isFinite(x) && !Number.isFinite(Math.fround(x))));
    default: return flat.findIndex((x) => typeof x !== 'number');
  }
}

/**
 * JSON `data` for an input (BYTES as strings, 64-bit integers as exact digit tokens).
 * @throws InferenceServerError when a BYTES element is not UTF-8 (JSON has no form for it).
 */
function jsonData(name: string, datatype: DataType, data: TensorData): unknown[] {
  if (datatype === 'BYTES') {
    // Fatal: a lenient decoder sent U+FFFD in place of the bytes, silently (review).
    const utf8 = new TextDecoder('utf-8', { fatal: true });
    return splitBytes(data as Uint8Array).map((b, i) => {
      try {
        return utf8.decode(b);
      } catch {
        throw new InferenceServerError(`Failed to encode input '${name}' using UTF-8: element ${i} is not UTF-8 text; send it in binary (HttpClient option binary: true)`);
      }
    });
  }
  if (datatype === 'BOOL') return Array.from(data as Uint8Array, (x) => x !== 0);
  // NaN and infinities go as bare tokens, as tritonclient (Python's json) sends them.
  if (datatype === 'FP32' || datatype === 'FP64') return markNonFinite(Array.from(data as Float32Array));
  // Number() rounded INT64/UINT64 past 2^53 (review): their digits go as they are.
  if (datatype === 'INT64' || datatype === 'UINT64') return Array.from(data as BigInt64Array, markInteger);
  return Array.from(data as ArrayLike<number>);
}

/**
 * A client for the HTTP/REST protocol.
 * @example
 * const client = new HttpClient('http://127.0.0.1:8000');
 * const r = await client.infer('simple', { inputs: [
 *   { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) },
 *   { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
 * ] });
 * r.data<Int32Array>('OUTPUT0');
 */
export class HttpClient implements InferenceClient {
  readonly #url: URL;
  readonly #agent: Agent;
  readonly #options: HttpClientOptions;
  readonly #https: boolean;

  /** @param url the server, e.g. `http://127.0.0.1:8000` (https works too). */
  constructor(url = 'http://127.0.0.1:8000', options: HttpClientOptions = {}) {
    this.#url = new URL(url.includes('://') ? url : `http://${url}`);
    this.#https = this.#url.protocol === 'https:';
    const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 64 };
    this.#agent = this.#https ? new HttpsAgent(agentOptions) : new Agent(agentOptions);
    this.#options = options;
  }

  /**
   * Sends one call; resolves with the whole response (any status). The deadline covers the whole
   * call, and the body is bounded by `maxResponseBytes`: a server that trickles or never ends its
   * answer fails the call instead of holding it (and its memory) forever.
   */
  #send(method: string, path: string, body?: Uint8Array | string, headers: Record<string, string | number> = {}, signal?: AbortSignal): Promise<RawResponse> {
    return new Promise((resolveCall, reject) => {
      const aborted = () => new InferenceServerError(`HTTP ${method} ${path} aborted`, { cause: signal?.reason });
      if (signal?.aborted) {
        reject(aborted());
        return;
      }
      const max = this.#options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
      const failure = (err: Error) => (err instanceof InferenceServerError ? err : new InferenceServerError(`HTTP ${method} ${path} failed: ${err.message}`, { cause: err }));
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => req.destroy(aborted());
      const settle = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const resolve = (r: RawResponse) => {
        settle();
        resolveCall(r);
      };
      const fail = (err: Error) => {
        settle();
        reject(failure(err));
      };
      const req = (this.#https ? httpsRequest : httpRequest)({
        agent: this.#agent,
        hostname: this.#url.hostname,
        port: this.#url.port || (this.#https ? 443 : 80),
        path: this.#url.pathname.replace(/\/$/, '') + path,
        method,
        headers: { ...this.#options.headers, ...headers, ...(body !== undefined ? { 'Content-Length': Buffer.byteLength(body) } : {}) },
      }, (res) => {
        const tooLarge = () => new InferenceServerError(`HTTP ${method} ${path}: the response is larger than maxResponseBytes (${max})`);
        if (Number(res.headers['content-length'] ?? 0) > max) {
          req.destroy(tooLarge());
          return;
        }
        // Copied into one buffer that grows as bytes come (response-buffer.ts).
        const cl = res.headers['content-length'];
        let body: ResponseBuffer;
        try {
          body = new ResponseBuffer(max, cl === undefined ? undefined : Number(cl));
        } catch (err) {
          req.destroy(new InferenceServerError(`HTTP ${method} ${path}: ${(err as Error).message}`, { cause: err }));
          return;
        }
        res.on('data', (c: Buffer) => {
          try {
            if (!body.push(c)) req.destroy(tooLarge());
          } catch (err) {
            // A buffer that could not be allocated fails this call, not the process (review).
            req.destroy(new InferenceServerError(`HTTP ${method} ${path}: ${(err as Error).message}`, { cause: err }));
          }
        });
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: body.bytes() });
        });
        res.on('error', fail);
      });
      const idle = idleTimeoutOf(this.#options);
      if (idle) req.setTimeout(timerMs(idle), () => req.destroy(new InferenceServerError(`HTTP ${method} ${path}: no answer for ${idle} ms (idleTimeoutMs)`)));
      if (this.#options.timeoutMs) {
        timer = setTimeout(() => req.destroy(new InferenceServerError(`HTTP ${method} ${path} timed out after ${this.#options.timeoutMs} ms`)), timerMs(this.#options.timeoutMs));
      }
      req.on('error', fail);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (body !== undefined) req.end(body);
      else req.end();
    });
  }

  /** A call whose 2xx body is JSON (or empty); anything else becomes an InferenceServerError. */
  async #json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await this.#send(method, path, body === undefined ? undefined : JSON.stringify(body), body === undefined ? {} : { 'Content-Type': 'application/json' });
    if (r.status < 200 || r.status >= 300) throw errorOf(r);
    if (!r.body.byteLength) return {} as T;
    try {
      return parseServerJson(r.body) as T;
    } catch (err) {
      if (err instanceof InferenceServerError) throw err;
      throw new InferenceServerError(`malformed response to ${method} ${path}: not JSON`, { httpStatus: r.status, cause: err });
    }
  }

  async #ok(path: string): Promise<boolean> {
    const r = await this.#send('GET', path);
    return r.status === 200;
  }

  isServerLive(): Promise<boolean> {
    return this.#ok('/v2/health/live');
  }

  isServerReady(): Promise<boolean> {
    return this.#ok('/v2/health/ready');
  }

  async isModelReady(model: string, version?: number | string): Promise<boolean> {
    return this.#ok(`${modelPath(model, version)}/ready`);
  }

  serverMetadata(): Promise<ServerMetadata> {
    return this.#json('GET', '/v2');
  }

  async modelMetadata(model: string, version?: number | string): Promise<ModelMetadata> {
    return this.#json('GET', modelPath(model, version));
  }

  async modelConfig(model: string, version?: number | string): Promise<Record<string, unknown>> {
    return this.#json('GET', `${modelPath(model, version)}/config`);
  }

  async modelStatistics(model?: string, version?: number | string): Promise<ModelStatistics[]> {
    const path = model ? `${modelPath(model, version)}/stats` : '/v2/models/stats';
    const stats = (await this.#json<{ model_stats?: unknown }>('GET', path)).model_stats;
    if (!Array.isArray(stats)) throw new InferenceServerError(`malformed response to GET ${path}: no model_stats list`);
    return stats as ModelStatistics[];
  }

  /** The index rows; `reason` is '' where the server leaves it out (Triton does when it is empty), as over gRPC. */
  async repositoryIndex(readyOnly = false): Promise<ModelIndexEntry[]> {
    const rows = await this.#json<ModelIndexEntry[]>('POST', '/v2/repository/index', readyOnly ? { ready: true } : {});
    if (!Array.isArray(rows)) throw new InferenceServerError('malformed response to POST /v2/repository/index: not a list');
    return rows.map((r) => ({ ...r, reason: r.reason ?? '' }));
  }

  async loadModel(model: string, options: LoadModelOptions = {}): Promise<void> {
    const parameters: Record<string, string> = {};
    if (options.config !== undefined) parameters['config'] = typeof options.config === 'string' ? options.config : JSON.stringify(options.config);
    for (const [path, bytes] of Object.entries(options.files ?? {})) parameters[`file:${path}`] = Buffer.from(bytes).toString('base64');
    await this.#json('POST', `/v2/repository/models/${pathSegment(model)}/load`, Object.keys(parameters).length ? { parameters } : {});
  }

  async unloadModel(model: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    await this.#json('POST', `/v2/repository/models/${pathSegment(model)}/unload`, options.unloadDependents ? { parameters: { unload_dependents: true } } : {});
  }

  async registerSystemSharedMemory(name: string, key: string, byteSize: number, offset = 0): Promise<void> {
    checkRegistration(name, key, byteSize, offset);
    await this.#json('POST', `${shmPath(name, 'register')}/register`, { key, offset, byte_size: byteSize });
  }

  async systemSharedMemoryStatus(name?: string): Promise<SystemSharedMemoryRegionStatus[]> {
    const path = `${shmPath(name, 'status')}/status`;
    return regionStatuses(`GET ${path}`, await this.#json<unknown>('GET', path));
  }

  async unregisterSystemSharedMemory(name?: string): Promise<void> {
    // An empty body, as tritonclient sends.
    const r = await this.#send('POST', `${shmPath(name, 'unregister')}/unregister`, '');
    if (r.status < 200 || r.status >= 300) throw errorOf(r);
  }

  /** GET (no update) or POST `/v2/logging`. */
  async logSettings(update?: Record<string, boolean | number | string>): Promise<Record<string, unknown>> {
    return update ? this.#json('POST', '/v2/logging', update) : this.#json('GET', '/v2/logging');
  }

  /** GET (no update) or POST the trace settings, global or of one model. */
  async traceSettings(update?: Record<string, string | string[] | null>, model?: string): Promise<Record<string, string | string[]>> {
    const path = model ? `/v2/models/${pathSegment(model)}/trace/setting` : '/v2/trace/setting';
    return update ? this.#json('POST', path, update) : this.#json('GET', path);
  }

  /** Encodes an infer request body (binary extension unless `binary: false`). */
  encodeInfer(options: Omit<InferOptions, 'signal'>): { body: Buffer; headers: Record<string, string | number> } {
    const binary = this.#options.binary !== false;
    const chunks: Uint8Array[] = [];
    const inputs = options.inputs.map((input) => {
      // A region instead of data: the parameters say where, the body carries nothing for it.
      const window = inputWindow(input);
      if (window) return { name: input.name, datatype: input.datatype, shape: input.shape, parameters: windowParameters(window) };
      const data = inputTensorData(input);
      // FP16/BF16 have no JSON form: always binary.
      if (binary || input.datatype === 'FP16' || input.datatype === 'BF16') {
        const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        chunks.push(bytes);
        return { name: input.name, datatype: input.datatype, shape: input.shape, parameters: { binary_data_size: bytes.byteLength } };
      }
      return { name: input.name, datatype: input.datatype, shape: input.shape, data: jsonData(input.name, input.datatype, data) };
    });
    const params: Record<string, ParameterValue> = requestParameters(options);
    if (binary) params['binary_data_output'] = true;
    const header: Record<string, unknown> = { inputs };
    if (options.id !== undefined) header['id'] = options.id;
    if (Object.keys(params).length) header['parameters'] = jsonParameters(params);
    if (options.outputs?.length) {
      header['outputs'] = options.outputs.map((o) => {
        // Never binary_data with a region (Triton refuses both together).
        const window = outputWindow(o);
        if (window) return { name: o.name, parameters: windowParameters(window) };
        const p: Record<string, unknown> = { binary_data: o.binary ?? binary };
        if (o.classCount) p['classification'] = o.classCount;
        return { name: o.name, parameters: p };
      });
    }
    const json = Buffer.from(stringifyJson(header));
    if (chunks.length === 0) return { body: json, headers: { 'Content-Type': 'application/json' } };
    return {
      body: Buffer.concat([json, ...chunks]),
      headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': json.byteLength },
    };
  }

  /** Runs one inference request; `options.signal` aborts it (the call rejects at once). */
  async infer(model: string, options: InferOptions): Promise<InferResult> {
    return this.#infer(this.prepare(model, options), options.signal);
  }

  prepare(model: string, options: Omit<InferOptions, 'signal'>): PreparedInfer {
    const { body, headers } = this.encodeInfer(options);
    const shm = sharedMemoryOutputs(options.outputs);
    return { model, body, headers, path: `${modelPath(model, options.version)}/infer`, ...(shm ? { sharedMemoryOutputs: shm } : {}) };
  }

  inferPrepared(prepared: PreparedInfer): Promise<InferResult> {
    return this.#infer(prepared);
  }

  async #infer(prepared: PreparedInfer, signal?: AbortSignal): Promise<InferResult> {
    const r = await this.#send('POST', prepared.path ?? `${modelPath(prepared.model)}/infer`, prepared.body, prepared.headers, signal);
    if (r.status !== 200) throw errorOf(r);
    return decodeInferResponse(r.body, r.headers['inference-header-content-length'], prepared.sharedMemoryOutputs);
  }

  close(): void {
    this.#agent.destroy();
  }
}

const DEFAULT_MAX_RESPONSE_BYTES = 2 ** 30;
const DEFAULT_IDLE_TIMEOUT_MS = 60_000;

/**
 * The idle timeout a client applies: `idleTimeoutMs` if given, else 60 s, or `timeoutMs` when that
 * is larger (a caller that allows a call 120 s allows it to be idle that long; review: `triode
 * perf --request-timeout 120000` was cut at 60 s).
 */
export function idleTimeoutOf(options: Pick<HttpClientOptions, 'idleTimeoutMs' | 'timeoutMs'>): number {
  return options.idleTimeoutMs ?? Math.max(DEFAULT_IDLE_TIMEOUT_MS, options.timeoutMs ?? 0);
}

/**
 * A model name or version as one path segment. `.` and `..` are refused: no escaping keeps them
 * one segment (a server's URL parser removes dot segments, `%2e` included), so `..` would reach
 * another route, e.g. the global trace settings instead of a model's.
 */
function pathSegment(s: string): string {
  if (s === '.' || s === '..') throw new InferenceServerError(`'${s}' is not a valid model name or version`);
  return encodeURIComponent(s);
}

/**
 * `/v2/systemsharedmemory`, with `/region/{name}` for a region; no name, or '' (gRPC's and
 * tritonclient's "all"), is every region, except to register, which needs one.
 */
function shmPath(name: string | undefined, call: 'register' | 'status' | 'unregister'): string {
  if (!name) {
    if (call === 'register') throw new InferenceServerError('registering a system shared memory region over HTTP needs a region name');
    return '/v2/systemsharedmemory';
  }
  if (name === '.' || name === '..') throw new InferenceServerError(`'${name}' is not a valid shared memory region name over HTTP`);
  return `/v2/systemsharedmemory/region/${encodeURIComponent(name)}`;
}

function modelPath(model: string, version?: number | string): string {
  const v = versionString(version);
  return `/v2/models/${pathSegment(model)}${v ? `/versions/${pathSegment(v)}` : ''}`;
}

/**
 * Parameters as JSON: a bigint is an integer, its digits written as they are (`stringifyJson`).
 * As a string it was another kind of value: a string correlation id instead of a UINT64 one (review).
 */
function jsonParameters(params: Record<string, ParameterValue>): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(params)) out[k] = typeof v === 'bigint' ? markInteger(v) : v;
  return out;
}

/** The longest error body read as the error's message (Triton's are a line). */
const MAX_ERROR_BODY = 64 * 1024;

function errorOf(r: RawResponse): InferenceServerError {
  const body = r.body.subarray(0, MAX_ERROR_BODY);
  let message = body.toString('utf8');
  try {
    const doc = parseServerJson(body) as { error?: unknown };
    if (typeof doc.error === 'string') message = doc.error;
  } catch {
    // not JSON: keep the text
  }
  return new InferenceServerError(message || `HTTP ${r.status}`, { httpStatus: r.status });
}

/**
 * Most JSON objects and arrays a server's answer may hold. Three bytes of text (`{},`) become an
 * object of tens of bytes: a hostile server's 64 MB answer took 37 s and 2 GB to parse, a 200 MB
 * one ran the client out of memory. Counting `{` and `[` bytes (inside strings too, which only
 * overcounts) bounds that before anything is parsed.
 */
const MAX_JSON_CONTAINERS = 1 << 20;

/** A server's JSON answer, parsed once its objects and arrays are counted. */
function parseServerJson(bytes: Buffer, options: ParseJsonOptions = {}): unknown {
  let n = 0;
  for (const c of [0x7b, 0x5b]) {
    for (let i = bytes.indexOf(c); i >= 0; i = bytes.indexOf(c, i + 1)) {
      if (++n > MAX_JSON_CONTAINERS) throw new InferenceServerError(`malformed response: more than ${MAX_JSON_CONTAINERS} JSON objects and arrays (ask for binary outputs)`);
    }
  }
  return parseJson(bytes.toString('utf8'), options);
}

interface JsonOutput {
  name: string;
  datatype: DataType;
  shape: number[];
  parameters?: Record<string, unknown>;
  data?: unknown[];
}

/**
 * Decodes an infer response body (JSON, or JSON header + binary outputs). Nothing in it is
 * trusted: the header length and each `binary_data_size` must lie inside the body, and each
 * output's data must hold exactly its shape's elements. An output named in `sharedMemoryOutputs`
 * (asked for in a shared memory window) may come without data, as Triton sends it: it is
 * returned with `sharedMemory` set and empty `data`.
 * @throws InferenceServerError when the body is not a well-formed answer.
 */
export function decodeInferResponse(body: Buffer, headerLength: string | string[] | undefined, sharedMemoryOutputs?: SharedMemoryOutputs): InferResult {
  try {
    return decodeResponse(body, headerLength, sharedMemoryOutputs);
  } catch (err) {
    if (err instanceof InferenceServerError) throw err;
    throw new InferenceServerError(`malformed infer response: ${(err as Error).message}`, { cause: err });
  }
}

function decodeResponse(body: Buffer, headerLength: string | string[] | undefined, shm: SharedMemoryOutputs | undefined): InferResult {
  const malformed = (what: string) => new InferenceServerError(`malformed infer response: ${what}`);
  const hlText = Array.isArray(headerLength) ? headerLength[0] : headerLength;
  const hl = hlText === undefined ? body.byteLength : /^\d{1,15}$/.test(hlText) ? Number(hlText) : -1;
  if (hl < 0 || hl > body.byteLength) throw malformed(`Inference-Header-Content-Length '${hlText}' does not fit a ${body.byteLength}-byte body`);
  // Triton writes non-finite floats as bare NaN / Infinity / -Infinity, and INT64 / UINT64 data
  // as exact digits (read as bigints past 2^53: doubles rounded them).
  const doc = parseServerJson(body.subarray(0, hl), { exactIntegers: true });
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw malformed('not a JSON object');
  const d = doc as { model_name?: unknown; model_version?: unknown; id?: unknown; parameters?: unknown; outputs?: unknown };
  if (d.outputs !== undefined && !Array.isArray(d.outputs)) throw malformed('outputs is not a list');
  let offset = hl;
  const outputs: OutputTensor[] = ((d.outputs ?? []) as JsonOutput[]).map((o) => {
    if (typeof o !== 'object' || o === null) throw malformed('an output is not an object');
    const size = o.parameters?.['binary_data_size'];
    if (size !== undefined) {
      if (!Number.isSafeInteger(size) || (size as number) < 0 || offset + (size as number) > body.byteLength) {
        throw malformed(`output '${String(o.name)}': binary_data_size ${String(size)} does not fit the ${body.byteLength - offset} bytes left`);
      }
      const bytes = body.subarray(offset, offset + (size as number));
      offset += size as number;
      return outputTensor(o.name, o.datatype, o.shape, bytes);
    }
    if (o.data === undefined && typeof o.name === 'string') {
      // Written to its region: Triton sends only name, datatype and shape.
      const window = shm?.get(o.name);
      if (window) return sharedMemoryOutput(o.name, o.datatype, o.shape, window);
    }
    if (!Array.isArray(o.data)) throw malformed(`output '${String(o.name)}' has neither data nor binary_data_size`);
    const make = isDataType(o.datatype) ? JSON_ARRAY[o.datatype] : undefined;
    if (!make) throw malformed(`output '${String(o.name)}': ${String(o.datatype)} cannot come as JSON`);
    let flat = o.data.flat(Infinity as 1) as unknown[];
    // The count first: millions of strings for a shape of [1] were all converted before it was told (review).
    const dims = outputShape(o.name, o.shape);
    if (flat.length !== elementCount(dims)) throw malformed(`output '${String(o.name)}' has ${flat.length} elements of JSON data, not ${elementCount(dims)} (shape [${dims.join(',')}])`);
    // A float's long integer literal (read exactly) is that number.
    if (o.datatype === 'FP32' || o.datatype === 'FP64') flat = flat.map((x) => (typeof x === 'bigint' ? Number(x) : x));
    const bad = badJsonElement(o.datatype, flat);
    if (bad >= 0) throw malformed(`output '${String(o.name)}': element ${bad} of its JSON data (${echo(String(flat[bad]), 64)}) is not a ${o.datatype} value`);
    return outputTensor(o.name, o.datatype, o.shape, dataBytes(make(flat)));
  });
  return new InferResult({
    modelName: String(d.model_name ?? ''), modelVersion: String(d.model_version ?? ''), outputs,
    ...(d.id !== undefined ? { id: String(d.id) } : {}),
    ...(typeof d.parameters === 'object' && d.parameters !== null ? { parameters: d.parameters as Record<string, ParameterValue> } : {}),
  });
}
