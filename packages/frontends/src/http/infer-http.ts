/**
 * @module Reading an infer request off HTTP and writing its response: shared by `/infer` and the
 * async endpoints (`/infer_async`, `/v2/jobs/{id}/result`), which take and give the same bodies.
 */
import type { Context } from 'hono';
import { Errors, TriodeError, configTypeToDataType, dataBytes, echo, parseModelVersion, releaseOwnedBuffers, type Backplane, type InferenceRequest, type InferenceResponse, type ModelConfig } from '@triode/core';
import { traceNow, type ActiveTrace, type Tracer } from '../control/tracer.js';
import { compress, compressionOf, header, readBody } from './body.js';
import { DEFAULT_MAX_JSON_OUTPUT_SIZE, encodeInferResponse, parseInferRequest, type OutputEncoding, type ParsedInfer, type SharedMemoryFactory } from './infer-codec.js';
import type { RequestSharedMemory } from '../shared-memory/system-shared-memory.js';
import { versionNotFound } from '../model-version.js';
import type { HttpDeps } from './http-options.js';

/**
 * A traced request's infer and write (both infer routes): HTTP_RECV_END before the infer,
 * HTTP_SEND_START and HTTP_SEND_END around `write`, then the trace's end, or its failure when the
 * infer fails.
 */
export async function tracedInfer<T>(backplane: Backplane, request: InferenceRequest, tracer: Tracer, t: ActiveTrace, write: (r: InferenceResponse) => T | Promise<T>): Promise<T> {
  t.trace.timestamps.push({ name: 'HTTP_RECV_END', ns: traceNow() });
  request.trace = t.trace;
  const response = await backplane.infer(request).catch((err: unknown) => {
    tracer.failed(t, err, request.id ?? '', String(request.modelVersion ?? ''));
    throw err;
  });
  t.trace.timestamps.push({ name: 'HTTP_SEND_START', ns: traceNow() });
  let written: T;
  try {
    written = await write(response);
  } catch (err) {
    tracer.failed(t, err, request.id ?? '', response.modelVersion);
    throw err;
  }
  t.trace.timestamps.push({ name: 'HTTP_SEND_END', ns: traceNow() });
  tracer.finish(t, response.modelVersion, request.id ?? '');
  return written;
}

/**
 * Parses the infer request of a model route: JSON, binary extension, or raw binary (header length
 * 0). A compressed body counts against `deps.decompressionBudget` until the response closes.
 */
export function readInferRequest(c: Context, deps: Pick<HttpDeps, 'backplane' | 'maxInputSize' | 'decompressionBudget'>, sharedMemory?: SharedMemoryFactory): Promise<ParsedInfer> {
  const { backplane, maxInputSize, decompressionBudget } = deps;
  const name = c.req.param('model') ?? '';
  const version = parseModelVersion(c.req.param('version'));
  if (typeof version === 'bigint') return versionNotFound(name, version, backplane);
  const model = version === undefined ? { name } : { name, version };
  return readInferBody(model, header(c, 'inference-header-content-length'), (headerLength) => readBody(c, maxInputSize, headerLength, decompressionBudget), backplane, sharedMemory);
}

/**
 * `readInferRequest` without Hono: `h` is the `Inference-Header-Content-Length` header, `read`
 * reads the body (told the JSON header's length, so binary tensors can start aligned).
 */
export function readInferBody(
  model: { name: string; version?: number },
  h: string | undefined,
  read: (headerLength: number | undefined) => Promise<Uint8Array>,
  backplane: Backplane,
  sharedMemory?: SharedMemoryFactory,
): Promise<ParsedInfer> {
  const headerLength = h === undefined ? undefined : /^\d{1,9}$/.test(h) ? Number(h) : atoi(h);
  const failed = (err: unknown) => modelFirst(err, model, backplane);
  if (headerLength !== undefined && headerLength < 0) {
    return read(undefined).then((body) => failed(headerSizeError(body.byteLength, h!)), failed);
  }
  // One hop after the body (not an async function's two): issue #18's lone small request. The
  // try costs a request that parses nothing.
  if (headerLength !== 0) {
    return read(headerLength).then((body) => {
      try {
        if (headerLength !== undefined && headerLength > body.byteLength) throw headerSizeError(body.byteLength, h!);
        return parseInferRequest(body, headerLength, model, undefined, undefined, sharedMemory);
      } catch (err) {
        return failed(err);
      }
    }, failed);
  }
  return read(0).then((body) => readRawBinary(body, model, backplane), failed);
}

/**
 * An `Inference-Header-Content-Length` as C's `atoi` reads it, which Triton uses (glibc: `strtol`
 * cut to an int): leading white space, a sign, the digits that follow; no digits is 0 (a raw
 * binary request). Only headers that are not 1-9 plain digits come here.
 * Triton: server/src/http_server.cc GetInferenceHeaderLength
 */
function atoi(h: string): number {
  const [, sign, digits] = /^[ \t\n\v\f\r]*([+-]?)(\d*)/.exec(h)!;
  if (!digits) return 0;
  const LONG_MAX = 2n ** 63n - 1n;
  let v = BigInt(digits);
  if (v > LONG_MAX) v = sign === '-' ? LONG_MAX + 1n : LONG_MAX;
  return Number(BigInt.asIntN(32, sign === '-' ? -v : v));
}

/** Triton's words for a header length outside the (decompressed) body, with the header as sent. */
const headerSizeError = (length: number, h: string) =>
  Errors.invalidArg(`inference header size should be in range (0, ${length}), got: ${echo(h)}`);

/**
 * The error of a request whose body could not be read or parsed (`err`), or, before it, what
 * Triton's HandleInfer answers before it reads the body: an unknown model or version (404), a
 * model not ready, a decoupled one (its transaction policy). Run on the failure path only.
 * Triton: server/src/http_server.cc HandleInfer (CheckTransactionPolicy before DecompressBuffer)
 */
async function modelFirst(err: unknown, model: { name: string; version?: number }, backplane: Backplane): Promise<never> {
  let config: Record<string, unknown>;
  try {
    config = await backplane.modelConfig(model.name, model.version);
  } catch (modelErr) {
    const known = modelErr instanceof TriodeError && (modelErr.code === 'NOT_FOUND' || modelErr.code === 'UNAVAILABLE');
    throw known ? modelErr : err;
  }
  if ((config as ModelConfig).model_transaction_policy?.decoupled === true) throw Errors.decoupledInfer(model.name);
  throw err;
}

/** A raw binary request (header length 0): the body is the model's one input, as its config says. */
async function readRawBinary(body: Uint8Array, model: { name: string; version?: number }, backplane: Backplane): Promise<ParsedInfer> {
  const config = (await backplane.modelConfig(model.name, model.version)) as ModelConfig;
  const inputs = config.input ?? [];
  if (inputs.length !== 1) {
    // Triton's text (core src/infer_request.cc Normalize; server qa/L0_http/http_request_many_chunks.py
    // asserts it): the request's one raw input is 'found 1'.
    throw Errors.invalidArg(`Raw request must only have 1 input (found 1) to be deduced but got ${inputs.length} inputs in '${model.name}' model configuration`);
  }
  const inp = inputs[0]!;
  const dims = inp.dims ?? [];
  const raw = {
    name: inp.name,
    datatype: configTypeToDataType(inp.data_type ?? '') ?? '',
    shape: (config.max_batch_size ?? 0) > 0 ? [1, ...dims] : dims,
  };
  return parseInferRequest(body, 0, model, raw);
}

/**
 * Writes an infer response (JSON, or JSON header + binary), compressed when the client accepts it.
 * @throws INVALID_ARG when its JSON outputs could exceed `maxJsonOutputSize` bytes.
 */
export async function writeInferResponse(c: Context, response: InferenceResponse, encoding: OutputEncoding, maxJsonOutputSize = DEFAULT_MAX_JSON_OUTPUT_SIZE, shm?: RequestSharedMemory): Promise<Response> {
  const { body, headers } = await inferResponseBody(response, encoding, maxJsonOutputSize, header(c, 'accept-encoding'), shm);
  return c.body(body as Uint8Array<ArrayBuffer> | string, 200, headers);
}

/** The body and headers of a 200 answer to an infer request. */
export interface InferAnswer {
  body: Uint8Array | string;
  headers: Record<string, string>;
}

/**
 * The 200 answer to an infer request: its body and headers, compressed per `acceptEncoding`. Made
 * at once unless it is compressed (no promise on a small request's path).
 * @throws INVALID_ARG when its JSON outputs could exceed `maxJsonOutputSize` bytes
 */
export function inferResponseBody(
  response: InferenceResponse,
  encoding: OutputEncoding,
  maxJsonOutputSize: number,
  acceptEncoding: string | undefined,
  shm?: RequestSharedMemory,
): InferAnswer | Promise<InferAnswer> {
  let encoded: ReturnType<typeof encodeInferResponse>;
  try {
    // Outputs asked for in shared memory go to their regions first: one that does not fit fails
    // the request (INTERNAL, as Triton's allocator), the others are not written then.
    if (shm) shm.writeOutputs(response.outputs.map((o) => ({ name: o.name, data: dataBytes(o.data) })));
    encoded = encodeInferResponse(response, encoding, maxJsonOutputSize, shm?.outputs);
  } catch (err) {
    // Refused (for its size, or an output its region cannot hold): the outputs (possibly hundreds
    // of MB) are given back now, not at V8's next collection, which an idle server may not run for
    // a long time.
    releaseOwnedBuffers(response.outputs);
    throw err;
  }
  const headers: Record<string, string> = {
    'Content-Type': encoded.headerLength === undefined ? 'application/json' : 'application/octet-stream',
  };
  if (encoded.headerLength !== undefined) headers['Inference-Header-Content-Length'] = String(encoded.headerLength);
  const how = compressionOf(acceptEncoding);
  if (how) {
    headers['Content-Encoding'] = how;
    return compress(encoded.body, how).then((body) => ({ body, headers }));
  }
  return { body: encoded.body, headers };
}
