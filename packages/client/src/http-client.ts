/**
 * @module An HTTP/REST client for any KServe v2 / Triton server. Tensors travel with the binary
 * tensor extension by default (JSON header + raw bytes), over keep-alive connections.
 * Triton: client/src/python/library/tritonclient/http, server docs/protocol/extension_binary_data.md
 */
import { Agent, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import {
  dataTypeByteSize, serializeBytesTensor,
  type DataType, type ModelIndexEntry, type ModelMetadata, type ModelStatistics, type ParameterValue, type ServerMetadata, type TensorData,
} from '@triode/core';
import { InferenceServerError } from './errors.js';
import { requestParameters, versionString } from './request-parameters.js';
import { inputTensorData, outputData } from './tensor-data.js';
import { InferResult, splitBytes, type InferenceClient, type InferOptions, type LoadModelOptions, type OutputTensor, type PreparedInfer } from './types.js';

/** Options of an HttpClient. */
export interface HttpClientOptions {
  /** Connections kept per server. @default 64 */
  maxSockets?: number;
  /** Per-call timeout in ms (0: none). @default 0 */
  timeoutMs?: number;
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
  UINT64: (v) => BigUint64Array.from(v as number[], (x) => BigInt(x)),
  INT8: (v) => Int8Array.from(v as number[]), INT16: (v) => Int16Array.from(v as number[]), INT32: (v) => Int32Array.from(v as number[]),
  INT64: (v) => BigInt64Array.from(v as number[], (x) => BigInt(x)),
  FP32: (v) => Float32Array.from(v as number[]), FP64: (v) => Float64Array.from(v as number[]),
  BYTES: (v) => serializeBytesTensor(v as string[]),
};

/** JSON `data` for an input (BYTES as strings, 64-bit integers as numbers). */
function jsonData(datatype: DataType, data: TensorData): unknown[] {
  if (datatype === 'BYTES') {
    const utf8 = new TextDecoder();
    return splitBytes(data as Uint8Array).map((b) => utf8.decode(b));
  }
  if (datatype === 'BOOL') return Array.from(data as Uint8Array, (x) => x !== 0);
  return Array.from(data as ArrayLike<number | bigint>, (x) => (typeof x === 'bigint' ? Number(x) : x));
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

  /** Sends one call; resolves with the whole response (any status). */
  #send(method: string, path: string, body?: Uint8Array | string, headers: Record<string, string | number> = {}): Promise<RawResponse> {
    return new Promise((resolve, reject) => {
      const req = (this.#https ? httpsRequest : httpRequest)({
        agent: this.#agent,
        hostname: this.#url.hostname,
        port: this.#url.port || (this.#https ? 443 : 80),
        path: this.#url.pathname.replace(/\/$/, '') + path,
        method,
        headers: { ...this.#options.headers, ...headers, ...(body !== undefined ? { 'Content-Length': Buffer.byteLength(body) } : {}) },
        ...(this.#options.timeoutMs ? { timeout: this.#options.timeoutMs } : {}),
      }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new InferenceServerError(`HTTP ${method} ${path} timed out after ${this.#options.timeoutMs} ms`)));
      req.on('error', (err) => reject(err instanceof InferenceServerError ? err : new InferenceServerError(`HTTP ${method} ${path} failed: ${err.message}`, { cause: err })));
      if (body !== undefined) req.end(body);
      else req.end();
    });
  }

  /** A call whose 2xx body is JSON (or empty); anything else becomes an InferenceServerError. */
  async #json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const r = await this.#send(method, path, body === undefined ? undefined : JSON.stringify(body), body === undefined ? {} : { 'Content-Type': 'application/json' });
    if (r.status < 200 || r.status >= 300) throw errorOf(r);
    return (r.body.byteLength ? JSON.parse(r.body.toString('utf8')) : {}) as T;
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

  isModelReady(model: string, version?: number | string): Promise<boolean> {
    return this.#ok(`${modelPath(model, version)}/ready`);
  }

  serverMetadata(): Promise<ServerMetadata> {
    return this.#json('GET', '/v2');
  }

  modelMetadata(model: string, version?: number | string): Promise<ModelMetadata> {
    return this.#json('GET', modelPath(model, version));
  }

  modelConfig(model: string, version?: number | string): Promise<Record<string, unknown>> {
    return this.#json('GET', `${modelPath(model, version)}/config`);
  }

  async modelStatistics(model?: string, version?: number | string): Promise<ModelStatistics[]> {
    const path = model ? `${modelPath(model, version)}/stats` : '/v2/models/stats';
    return (await this.#json<{ model_stats: ModelStatistics[] }>('GET', path)).model_stats;
  }

  repositoryIndex(readyOnly = false): Promise<ModelIndexEntry[]> {
    return this.#json('POST', '/v2/repository/index', readyOnly ? { ready: true } : {});
  }

  async loadModel(model: string, options: LoadModelOptions = {}): Promise<void> {
    const parameters: Record<string, string> = {};
    if (options.config !== undefined) parameters['config'] = typeof options.config === 'string' ? options.config : JSON.stringify(options.config);
    for (const [path, bytes] of Object.entries(options.files ?? {})) parameters[`file:${path}`] = Buffer.from(bytes).toString('base64');
    await this.#json('POST', `/v2/repository/models/${encodeURIComponent(model)}/load`, Object.keys(parameters).length ? { parameters } : {});
  }

  async unloadModel(model: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    await this.#json('POST', `/v2/repository/models/${encodeURIComponent(model)}/unload`, options.unloadDependents ? { parameters: { unload_dependents: true } } : {});
  }

  /** GET (no update) or POST `/v2/logging`. */
  logSettings(update?: Record<string, boolean | number | string>): Promise<Record<string, unknown>> {
    return update ? this.#json('POST', '/v2/logging', update) : this.#json('GET', '/v2/logging');
  }

  /** GET (no update) or POST the trace settings, global or of one model. */
  traceSettings(update?: Record<string, string | string[] | null>, model?: string): Promise<Record<string, string | string[]>> {
    const path = model ? `/v2/models/${encodeURIComponent(model)}/trace/setting` : '/v2/trace/setting';
    return update ? this.#json('POST', path, update) : this.#json('GET', path);
  }

  /** Encodes an infer request body (binary extension unless `binary: false`). */
  encodeInfer(options: Omit<InferOptions, 'signal'>): { body: Buffer; headers: Record<string, string | number> } {
    const binary = this.#options.binary !== false;
    const chunks: Uint8Array[] = [];
    const inputs = options.inputs.map((input) => {
      const data = inputTensorData(input);
      // FP16/BF16 have no JSON form: always binary.
      if (binary || input.datatype === 'FP16' || input.datatype === 'BF16') {
        const bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        chunks.push(bytes);
        return { name: input.name, datatype: input.datatype, shape: input.shape, parameters: { binary_data_size: bytes.byteLength } };
      }
      return { name: input.name, datatype: input.datatype, shape: input.shape, data: jsonData(input.datatype, data) };
    });
    const params: Record<string, ParameterValue> = requestParameters(options);
    if (binary) params['binary_data_output'] = true;
    const header: Record<string, unknown> = { inputs };
    if (options.id !== undefined) header['id'] = options.id;
    if (Object.keys(params).length) header['parameters'] = jsonParameters(params);
    if (options.outputs?.length) {
      header['outputs'] = options.outputs.map((o) => {
        const p: Record<string, unknown> = { binary_data: o.binary ?? binary };
        if (o.classCount) p['classification'] = o.classCount;
        return { name: o.name, parameters: p };
      });
    }
    const json = Buffer.from(JSON.stringify(header));
    if (chunks.length === 0) return { body: json, headers: { 'Content-Type': 'application/json' } };
    return {
      body: Buffer.concat([json, ...chunks]),
      headers: { 'Content-Type': 'application/octet-stream', 'Inference-Header-Content-Length': json.byteLength },
    };
  }

  async infer(model: string, options: InferOptions): Promise<InferResult> {
    return this.inferPrepared(this.prepare(model, options));
  }

  prepare(model: string, options: Omit<InferOptions, 'signal'>): PreparedInfer {
    const { body, headers } = this.encodeInfer(options);
    return { model, body, headers, path: `${modelPath(model, options.version)}/infer` };
  }

  async inferPrepared(prepared: PreparedInfer): Promise<InferResult> {
    const r = await this.#send('POST', prepared.path ?? `${modelPath(prepared.model)}/infer`, prepared.body, prepared.headers);
    if (r.status !== 200) throw errorOf(r);
    return decodeInferResponse(r.body, r.headers['inference-header-content-length']);
  }

  close(): void {
    this.#agent.destroy();
  }
}

function modelPath(model: string, version?: number | string): string {
  const v = versionString(version);
  return `/v2/models/${encodeURIComponent(model)}${v ? `/versions/${encodeURIComponent(v)}` : ''}`;
}

/** Parameters as JSON (bigints as numbers when exact, else strings). */
function jsonParameters(params: Record<string, ParameterValue>): Record<string, string | number | boolean> {
  const out: Record<string, string | number | boolean> = {};
  for (const [k, v] of Object.entries(params)) out[k] = typeof v === 'bigint' ? (Number.isSafeInteger(Number(v)) ? Number(v) : v.toString()) : v;
  return out;
}

function errorOf(r: RawResponse): InferenceServerError {
  let message = r.body.toString('utf8');
  try {
    const doc = JSON.parse(message) as { error?: unknown };
    if (typeof doc.error === 'string') message = doc.error;
  } catch {
    // not JSON: keep the text
  }
  return new InferenceServerError(message || `HTTP ${r.status}`, { httpStatus: r.status });
}

interface JsonOutput {
  name: string;
  datatype: DataType;
  shape: number[];
  parameters?: Record<string, unknown>;
  data?: unknown[];
}

/** Decodes an infer response body (JSON, or JSON header + binary outputs). */
export function decodeInferResponse(body: Buffer, headerLength: string | string[] | undefined): InferResult {
  const hl = headerLength === undefined ? undefined : Number(Array.isArray(headerLength) ? headerLength[0] : headerLength);
  const doc = JSON.parse(body.subarray(0, hl ?? body.byteLength).toString('utf8')) as {
    model_name: string; model_version: string; id?: string; parameters?: Record<string, ParameterValue>; outputs?: JsonOutput[];
  };
  let offset = hl ?? body.byteLength;
  const outputs: OutputTensor[] = (doc.outputs ?? []).map((o) => {
    const size = o.parameters?.['binary_data_size'];
    let data: TensorData;
    if (typeof size === 'number') {
      data = outputData(o.datatype, body.subarray(offset, offset + size));
      offset += size;
    } else {
      const flat = (o.data ?? []).flat(Infinity as 1) as unknown[];
      const make = JSON_ARRAY[o.datatype];
      if (!make) throw new InferenceServerError(`output '${o.name}': ${o.datatype} cannot come as JSON`);
      data = make(flat);
    }
    if (o.datatype !== 'BYTES' && data.byteLength !== o.shape.reduce((a, d) => a * d, 1) * dataTypeByteSize(o.datatype)) {
      throw new InferenceServerError(`output '${o.name}': ${data.byteLength} bytes do not fit shape [${o.shape.join(',')}] of ${o.datatype}`);
    }
    return { name: o.name, datatype: o.datatype, shape: o.shape, data };
  });
  return new InferResult({
    modelName: doc.model_name, modelVersion: doc.model_version, outputs,
    ...(doc.id !== undefined ? { id: doc.id } : {}), ...(doc.parameters ? { parameters: doc.parameters } : {}),
  });
}
