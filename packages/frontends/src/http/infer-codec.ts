/**
 * @module The KServe v2 infer request and response over HTTP: JSON, plus the binary tensor
 * extension (JSON header, then raw tensor bytes; `Inference-Header-Content-Length`).
 * Triton: server/src/http_server.cc (EVBufferToInput, InferRequestClass::FinalizeResponse),
 * server docs/protocol/extension_binary_data.md, extension_classification.md
 */
import {
  Errors, dataTypeByteSize, echo, elementCount, isDataType, viewBytesAs,
  type InferenceRequest, type InferenceResponse, type OutputEncoding, type ParameterValue, type RequestedOutput, type Tensor,
} from '@triode/core';
import { readJson } from './json-reader.js';
import { jsonSizeBound, jsonToTensorData, tensorDataToJson } from './json-tensor.js';
import { checkReservedParameters, checkTensorBytes } from '../protocol-checks.js';

export type { OutputEncoding };

/** A parsed infer request and the encoding its response needs. */
export interface ParsedInfer {
  request: InferenceRequest;
  encoding: OutputEncoding;
}

type Json = Record<string, unknown>;

/** A JSON object: not null, not an array (nor a number array, which the reader makes a Float64Array). */
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);

/**
 * A parameters object (as `readJson` gives it: an integer past 2^53 is a bigint, so a uint64
 * `sequence_id` stays exact); `where` names its owner in an error (made only then: it is on every
 * request's path).
 */
export function parameters(v: unknown, where: () => string): Record<string, ParameterValue> {
  if (v === undefined) return {};
  if (!isObj(v)) throw Errors.invalidArg(`'parameters' of ${where()} must be a JSON object`);
  for (const [k, x] of Object.entries(v)) {
    if (typeof x !== 'string' && typeof x !== 'number' && typeof x !== 'boolean' && typeof x !== 'bigint') {
      throw Errors.invalidArg(`parameter '${echo(k)}' of ${where()} must be a string, number or boolean`);
    }
  }
  return v as Record<string, ParameterValue>;
}

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
): ParsedInfer {
  if (headerLength !== undefined && (headerLength < 0 || headerLength > body.byteLength)) {
    throw Errors.invalidArg(`Inference header size should be in range (0, ${body.byteLength}), got: ${headerLength}`);
  }
  if (headerLength === 0) return parseRawBinary(body, model, rawInput);
  const jsonBytes = headerLength === undefined ? body : body.subarray(0, headerLength);
  let doc: unknown;
  try {
    doc = readJson(jsonBytes);
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${(err as Error).message}`);
  }
  if (!isObj(doc)) throw Errors.invalidArg('failed to parse the request JSON buffer: the request must be a JSON object');
  const params = parameters(doc['parameters'], () => 'the request');
  checkReservedParameters(Object.keys(params));
  const id = doc['id'];
  if (id !== undefined && typeof id !== 'string') throw Errors.invalidArg(`request 'id' must be a string`);
  const inputsJson = doc['inputs'];
  if (!Array.isArray(inputsJson)) throw Errors.invalidArg(`Request JSON must contain 'inputs' array`);

  let offset = headerLength ?? body.byteLength;
  const inputs: Tensor[] = inputsJson.map((inp: unknown, i) => {
    if (!isObj(inp)) throw Errors.invalidArg(`input ${i} must be a JSON object`);
    const name = inp['name'];
    if (typeof name !== 'string') throw Errors.invalidArg(`input ${i} must have a string 'name'`);
    const datatype = inp['datatype'];
    if (!isDataType(datatype)) {
      throw Errors.invalidArg(`invalid datatype '${echo(datatype)}' for input '${echo(name)}' (expected one of BOOL, UINT8..UINT64, INT8..INT64, FP16, BF16, FP32, FP64, BYTES)`);
    }
    const rawShape = inp['shape'];
    // The reader returns number arrays as Float64Arrays.
    const shape = rawShape instanceof Float64Array ? Array.from(rawShape) : rawShape;
    if (!Array.isArray(shape) || !shape.every((d) => Number.isSafeInteger(d) && d >= 0)) {
      throw Errors.invalidArg(`input '${echo(name)}' must have a 'shape' of non-negative integers`);
    }
    const count = elementCount(shape as number[]);
    const ip = parameters(inp['parameters'], () => `input '${echo(name)}'`);
    const size = ip['binary_data_size'];
    if (size !== undefined) {
      if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
        throw Errors.invalidArg(`'binary_data_size' of input '${echo(name)}' must be a non-negative integer`);
      }
      if (inp['data'] !== undefined) throw Errors.invalidArg(`input '${echo(name)}' has both 'data' and 'binary_data_size'`);
      if (offset + size > body.byteLength) {
        throw Errors.invalidArg(`unexpected size for input '${echo(name)}', expecting ${size} additional bytes for model '${echo(model.name)}'`);
      }
      const bytes = body.subarray(offset, offset + size);
      offset += size;
      checkTensorBytes(name, datatype, count, bytes, model.name);
      return { name, datatype, shape: shape as number[], data: viewBytesAs(datatype, bytes) };
    }
    if (inp['data'] === undefined) throw Errors.invalidArg(`must specify valid 'data' field or 'binary_data_size' parameter for input '${echo(name)}'`);
    // A new array made from the JSON: the request owns it (it may move to an instance thread).
    return { name, datatype, shape: shape as number[], data: jsonToTensorData(inp['data'], datatype, count, name), owned: true };
  });
  if (offset !== body.byteLength) {
    throw Errors.invalidArg(`unexpected additional input data for model '${echo(model.name)}'`);
  }

  const bdo = params['binary_data_output'];
  // Triton's words (its status for this is INTERNAL, 500; a client's mistake is 400 here).
  if (bdo !== undefined && typeof bdo !== 'boolean') throw Errors.invalidArg("Unable to parse 'binary_data_output': attempt to access JSON non-boolean as boolean");
  const encoding: OutputEncoding = { binary: new Map(), defaultBinary: bdo === true };
  const outputsJson = doc['outputs'];
  let outputs: RequestedOutput[] | undefined;
  if (outputsJson !== undefined) {
    if (!Array.isArray(outputsJson)) throw Errors.invalidArg(`'outputs' must be an array`);
    outputs = outputsJson.map((o: unknown, i) => {
      if (!isObj(o) || typeof o['name'] !== 'string') throw Errors.invalidArg(`output ${i} must be a JSON object with a string 'name'`);
      const name = o['name'];
      const op = parameters(o['parameters'], () => `output '${echo(name)}'`);
      const ro: RequestedOutput = { name };
      if (op['classification'] !== undefined) {
        const n = op['classification'];
        if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
          throw Errors.invalidArg(`'classification' of output '${echo(name)}' must be a non-negative integer`);
        }
        if (n > 0) ro.classCount = n;
      }
      if (op['binary_data'] !== undefined) {
        if (typeof op['binary_data'] !== 'boolean') throw Errors.invalidArg(`'binary_data' of output '${echo(name)}' must be a boolean`);
        encoding.binary.set(name, op['binary_data']);
      }
      return ro;
    });
  }
  const request: InferenceRequest = { modelName: model.name, inputs, parameters: params };
  if (model.version !== undefined) request.modelVersion = model.version;
  if (id !== undefined) request.id = id;
  if (outputs?.length) request.outputs = outputs;
  return { request, encoding };
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
    if (variable > 0) shape.splice(0, shape.length, ...shape.map((d) => (d === -1 ? 1 : d)));
    const data = new Uint8Array(4 + body.byteLength);
    new DataView(data.buffer).setUint32(0, body.byteLength, true);
    data.set(body, 4);
    return finishRaw(model, spec.name, dt, shape, data);
  }
  if (variable > 1) throw Errors.invalidArg(`raw binary request requires the input of model '${echo(model.name)}' to have at most one variable-size dimension`);
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
  return { request, encoding: { binary: new Map(), defaultBinary: true } };
}

/** Response parameters as JSON; a bigint (a backend's uint64) is written exactly, as JSON.stringify cannot. */
export function parametersJson(p: Record<string, ParameterValue>): string {
  let s = '';
  for (const [k, v] of Object.entries(p)) s += `${s ? ',' : ''}${JSON.stringify(k)}:${typeof v === 'bigint' ? String(v) : JSON.stringify(v)}`;
  return `{${s}}`;
}

/** An encoded infer response: the JSON header and, when any output is binary, the chunks after it. */
export interface EncodedResponse {
  /** The whole body. */
  body: Uint8Array | string;
  /** Length of the JSON part when binary chunks follow; undefined for a JSON-only body. */
  headerLength?: number;
}

const encoder = new TextEncoder();

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
 * Encodes a response, each output as JSON `data` or as a binary chunk per the client's wishes.
 * @throws INVALID_ARG when the JSON outputs could exceed `maxJsonOutputSize` bytes (nothing built).
 */
export function encodeInferResponse(res: InferenceResponse, encoding: OutputEncoding, maxJsonOutputSize = DEFAULT_MAX_JSON_OUTPUT_SIZE): EncodedResponse {
  checkJsonOutputSize(res.outputs, (name) => encoding.binary.get(name) ?? encoding.defaultBinary, maxJsonOutputSize);
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
    if (binary) {
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
  const header = encoder.encode(json);
  let total = header.byteLength;
  for (const c of chunks) total += c.byteLength;
  const body = new Uint8Array(total);
  body.set(header, 0);
  let off = header.byteLength;
  for (const c of chunks) {
    body.set(c, off);
    off += c.byteLength;
  }
  return { body, headerLength: header.byteLength };
}
