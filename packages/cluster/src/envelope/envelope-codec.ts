/**
 * @module The compact binary form of requests and responses between gateways and workers:
 * `[u32 LE header length][header JSON][tensor bytes, in header order]`. Tensor data never goes
 * through JSON; a tensor's bytes are viewed in place on decode when aligned.
 */
import { Errors, setOwn } from '@triode/core';
import type { InferenceRequest, InferenceResponse, ParameterValue, RequestedOutput } from '@triode/core';
import { countBytesElements, dataBytes, dataTypeByteSize, elementCount, isDataType, viewBytesAs } from '@triode/core';
import { isTransferable } from '@triode/core';
import type { DataType, Tensor } from '@triode/core';

interface TensorHeader {
  name: string;
  datatype: DataType;
  shape: number[];
  bytes: number;
}

const dec = new TextDecoder();

/**
 * What plain JSON cannot carry, tagged: a bigint (a 64-bit sequence id or parameter) and a number
 * that is not finite (a gRPC double parameter of NaN or ±Infinity, which JSON.stringify would write
 * as null: a value the worker would then refuse, and the gateway wait for a reply that never came).
 * A tag is an array `[0, kind, text]`: no field a client fills can hold one (parameter values are
 * scalars, their maps objects, shapes numbers only), so a parameters map such as
 * `{"$bigint": "5"}` stays what it is (an object tag `{$bigint}` took it for a bigint).
 */
const tagValues = (_k: string, v: unknown): unknown =>
  typeof v === 'bigint' ? [0, 'bigint', v.toString()] : typeof v === 'number' && !Number.isFinite(v) ? [0, 'number', String(v)] : v;

const NON_FINITE: Readonly<Record<string, number>> = { NaN: Number.NaN, Infinity: Number.POSITIVE_INFINITY, '-Infinity': Number.NEGATIVE_INFINITY };

/**
 * The longest bigint a message may carry, in digits: more than any client can send (a JSON integer
 * past the largest double is refused), and few enough that a hostile message cannot make a worker
 * spend seconds in BigInt().
 */
const MAX_BIGINT_DIGITS = 400;
const BIGINT_TEXT = new RegExp(`^-?\\d{1,${MAX_BIGINT_DIGITS}}$`);

/** Undoes `tagValues`; any other array is left as it is (and refused by the checks where it does not belong). */
const untagValues = (_k: string, v: unknown): unknown => {
  if (!Array.isArray(v) || v.length !== 3 || v[0] !== 0 || typeof v[2] !== 'string') return v;
  if (v[1] === 'bigint' && BIGINT_TEXT.test(v[2])) return BigInt(v[2]);
  if (v[1] === 'number' && Object.hasOwn(NON_FINITE, v[2])) return NON_FINITE[v[2]];
  return v;
};

/** Whether `v` holds a number that is not finite, at any depth (a parameter value, in practice). */
function hasNonFinite(v: unknown): boolean {
  if (typeof v === 'number') return !Number.isFinite(v);
  if (typeof v !== 'object' || v === null) return false;
  for (const x of Object.values(v)) if (hasNonFinite(x)) return true;
  return false;
}

/**
 * The metadata as JSON (bigints and non-finite numbers tagged). A replacer or reviver function
 * takes V8's slow JSON path, so they are used only when needed: metadata without either (almost
 * all) is stringified and parsed plainly.
 */
function metaJson(meta: Record<string, unknown>): string {
  try {
    const json = JSON.stringify(meta);
    // JSON.stringify writes NaN and ±Infinity as null, silently: metadata with a null in it is
    // looked at again (null is rare in the metadata, so the walk almost never runs).
    return json.includes('null') && hasNonFinite(meta) ? JSON.stringify(meta, tagValues) : json;
  } catch (err) {
    // TypeError: a BigInt somewhere in the metadata.
    if (!(err instanceof TypeError)) throw err;
    return JSON.stringify(meta, tagValues);
  }
}

/**
 * The JSON header: the metadata, then `env` (the request's envelope, already JSON) and `tensors`
 * (each tensor's name, type, shape and byte size), as `JSON.stringify({ ...meta, env, tensors })`
 * would write them (a key of the metadata named so is overridden: JSON.parse keeps the last). Built
 * as text: the spread and the tensors' objects cost a gateway more than the stringify (~40% of
 * encoding a `simple` request).
 */
function headerJson(meta: Record<string, unknown>, tensors: readonly Tensor[], env?: string): string {
  const m = metaJson(meta);
  let json = m.length > 2 ? `${m.slice(0, -1)},` : '{';
  if (env !== undefined) json += `"env":${env},`;
  json += '"tensors":[';
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i]!;
    json += `${i > 0 ? ',' : ''}{"name":${JSON.stringify(t.name)},"datatype":${JSON.stringify(t.datatype)},"shape":${JSON.stringify(t.shape)},"bytes":${t.data.byteLength}}`;
  }
  return `${json}]}`;
}

/** The envelope's parts that stay the same from request to request of one gateway, as JSON (the last one made). */
let envTail: { replyTo: string; direct: WireEnvelope['direct']; json: string } | undefined;

/** `JSON.stringify(env)`, its gateway's constant part written once. */
function envJson(env: WireEnvelope): string {
  if (envTail?.replyTo !== env.replyTo || envTail.direct !== env.direct) {
    envTail = { replyTo: env.replyTo, direct: env.direct, json: `,"replyTo":${JSON.stringify(env.replyTo)}${env.direct ? `,"direct":${JSON.stringify(env.direct)}` : ''}}` };
  }
  return `{"requestKey":${JSON.stringify(env.requestKey)},"enqueuedMs":${JSON.stringify(env.enqueuedMs)},"deadlineMs":${JSON.stringify(env.deadlineMs)}${env.trace ? ',"trace":true' : ''}${envTail.json}`;
}

function parseHeader(bytes: Uint8Array): Record<string, unknown> {
  const text = dec.decode(bytes);
  return (text.includes('[0,"bigint",') || text.includes('[0,"number",') ? JSON.parse(text, untagValues) : JSON.parse(text)) as Record<string, unknown>;
}

/** `[u32 LE length][header]` and `pad` spaces after it, in a buffer of `total` bytes (the rest left to the caller). */
function headed(header: string, pad: number, total: number): { out: Buffer; end: number } {
  const n = Buffer.byteLength(header);
  const size = total + 4 + n + pad;
  // Small messages (requests' headers, replies of small outputs, errors) come from Node's shared
  // pool; large ones get a buffer of their own, whose tensors can then move to another thread.
  const out = size < 4096 ? Buffer.allocUnsafe(size) : Buffer.allocUnsafeSlow(size);
  out.writeUInt32LE(n + pad, 0);
  out.write(header, 4, n, 'utf8');
  out.fill(0x20, 4 + n, 4 + n + pad);
  return { out, end: 4 + n + pad };
}

function encode(meta: Record<string, unknown>, tensors: readonly Tensor[], env?: string): Buffer {
  const header = headerJson(meta, tensors, env);
  // Pad the header so the first tensor starts 8-byte aligned.
  const pad = (8 - ((4 + Buffer.byteLength(header)) % 8)) % 8;
  let data = 0;
  for (const t of tensors) data += t.data.byteLength + ((8 - (t.data.byteLength % 8)) % 8);
  const { out, end } = headed(header, pad, data);
  let off = end;
  for (const t of tensors) {
    out.set(dataBytes(t.data), off);
    off += t.data.byteLength + ((8 - (t.data.byteLength % 8)) % 8);
  }
  return out;
}

/**
 * Checks of what arrives from Redis: a message may come from a broken or hostile peer (without a
 * cluster secret, anyone who reaches Redis can write one), and a field of the wrong type must be
 * refused here, as malformed, not crash or wedge whatever reads it later.
 */
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isParamValue = (v: unknown): boolean => typeof v === 'string' || typeof v === 'boolean' || typeof v === 'bigint' || typeof v === 'number';

function malformed(what: string): never {
  throw Errors.invalidArg(`malformed message: ${what}`);
}

function checkParameters(v: unknown, what: string): void {
  if (v === undefined) return;
  if (!isObject(v)) malformed(`${what} parameters`);
  for (const [k, x] of Object.entries(v)) {
    // A gateway or worker of an earlier version tags a bigint value as {"$bigint": digits}: read
    // as a value only (a parameter value is a scalar), never as a map a client keyed so.
    if (isObject(x) && typeof x['$bigint'] === 'string' && Object.keys(x).length === 1 && BIGINT_TEXT.test(x['$bigint'])) {
      // setOwn: an own '__proto__' key (JSON.parse makes one) is set as a value, not a prototype.
      setOwn(v, k, BigInt(x['$bigint']));
    } else if (!isParamValue(x)) malformed(`${what} parameters`);
  }
}

/** The tensor headers of a message, checked: names, known datatypes, shapes and byte sizes. */
function tensorHeads(meta: Record<string, unknown>): TensorHeader[] {
  const heads = meta['tensors'] ?? [];
  if (!Array.isArray(heads)) malformed('tensors');
  for (const h of heads as unknown[]) {
    if (!isObject(h) || typeof h['name'] !== 'string' || !isDataType(h['datatype']) || !isCount(h['bytes'])
      || !Array.isArray(h['shape']) || !(h['shape'] as unknown[]).every(isCount)) {
      malformed(`tensor '${isObject(h) && typeof h['name'] === 'string' ? h['name'].slice(0, 64) : '?'}'`);
    }
  }
  return heads as TensorHeader[];
}

/** A request's metadata as a gateway writes it (InferenceRequest without its tensors). */
function checkRequestMeta(meta: Record<string, unknown>): void {
  if (typeof meta['modelName'] !== 'string') malformed('modelName');
  if (meta['modelVersion'] !== undefined && !isCount(meta['modelVersion'])) malformed('modelVersion');
  if (meta['id'] !== undefined && typeof meta['id'] !== 'string') malformed('id');
  checkParameters(meta['parameters'], 'request');
  const outputs = meta['outputs'];
  if (outputs !== undefined && (!Array.isArray(outputs) || !outputs.every((o) => isObject(o) && typeof o['name'] === 'string'
    && (o['classCount'] === undefined || isCount(o['classCount'])) && (o['parameters'] === undefined || isObject(o['parameters']))))) {
    malformed('outputs');
  }
  if (meta['blsDepth'] !== undefined && !isCount(meta['blsDepth'])) malformed('blsDepth');
  const chain = meta['blsChain'];
  if (chain !== undefined && (!Array.isArray(chain) || !chain.every((c) => typeof c === 'string'))) malformed('blsChain');
}

/**
 * The longest request key, reply stream key or direct address an envelope may carry: a gateway makes
 * them far shorter, and a hostile one must not make workers build keys of hundreds of megabytes.
 */
const MAX_KEY_CHARS = 4096;

function isShortText(v: unknown, max: number): v is string {
  return typeof v === 'string' && v.length <= max;
}

/** A direct reply channel's token, as a gateway makes it (randomUUID). */
const DIRECT_TOKEN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The envelope of a request, checked: where its reply goes and until when. */
function checkEnvelope(env: unknown): WireEnvelope {
  if (!isObject(env)) malformed('envelope');
  if (!isShortText(env['requestKey'], MAX_KEY_CHARS) || !isShortText(env['replyTo'], MAX_KEY_CHARS)) malformed('envelope keys');
  if (!Number.isFinite(env['enqueuedMs']) || !Number.isFinite(env['deadlineMs'])) malformed('envelope times');
  const direct = env['direct'];
  // A gateway's token is a UUID: anything else would be bytes a hostile envelope has a worker send
  // to the address it names (review: up to 128 chosen bytes, CRLF included, to any host and port).
  if (direct !== undefined && (!isObject(direct) || !isShortText(direct['address'], MAX_KEY_CHARS) || typeof direct['token'] !== 'string' || !DIRECT_TOKEN.test(direct['token']))) malformed('envelope direct');
  if (env['trace'] !== undefined && env['trace'] !== true) malformed('envelope trace');
  return env as unknown as WireEnvelope;
}

/** A reply's metadata as a worker writes it. */
function checkReplyMeta(meta: Record<string, unknown>): void {
  if (typeof meta['requestKey'] !== 'string') malformed('requestKey');
  const error = meta['error'];
  if (error !== undefined && error !== null && error !== false) {
    if (!isObject(error) || typeof error['code'] !== 'string' || typeof error['message'] !== 'string') malformed('error');
    return;
  }
  if (meta['end']) return;
  const r = meta['response'];
  if (!isObject(r) || typeof r['modelName'] !== 'string' || typeof r['modelVersion'] !== 'string' || (r['id'] !== undefined && typeof r['id'] !== 'string')) malformed('response');
  checkParameters(r['parameters'], 'response');
}

/** The `[u32 LE length][header JSON]` at the start of `buf`: the header, and where what follows it starts. */
function readHeader(buf: Uint8Array | undefined): { meta: Record<string, unknown>; end: number } {
  if (!buf || buf.byteLength < 4) throw Errors.invalidArg('malformed message: too short');
  const hlen = new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint32(0, true);
  if (4 + hlen > buf.byteLength) throw Errors.invalidArg('malformed message: header runs past the end');
  const meta = parseHeader(buf.subarray(4, 4 + hlen));
  if (!isObject(meta)) malformed('header');
  return { meta, end: 4 + hlen };
}

function decode(buf: Uint8Array): { meta: Record<string, unknown>; tensors: Tensor[] } {
  const { meta, end } = readHeader(buf);
  let off = end;
  const tensors = tensorHeads(meta).map((h) => {
    if (off + h.bytes > buf.byteLength) malformed(`tensor '${h.name.slice(0, 64)}'`);
    const data = viewBytesAs(h.datatype, buf.subarray(off, off + h.bytes));
    off += h.bytes + ((8 - (h.bytes % 8)) % 8);
    return { name: h.name, datatype: h.datatype, shape: h.shape, data };
  });
  return { meta, tensors };
}

/** Routing data a request carries through Redis besides the request itself. */
export interface WireEnvelope {
  /** Unique per gateway: matches the reply to the waiting request. */
  requestKey: string;
  /** The gateway's reply stream. */
  replyTo: string;
  /** When the gateway queued it (ms since the epoch). */
  enqueuedMs: number;
  /** After this (ms since the epoch) nobody waits for the answer any more. */
  deadlineMs: number;
  /**
   * The gateway's direct reply channel (TCP `host:port` and the token to present), if it has one;
   * replies go there, and to `replyTo` when it cannot be reached.
   */
  direct?: { address: string; token: string };
  /**
   * The gateway traces this request: its worker gives the core's timestamps back with the reply
   * (WireReply `trace`). Absent on a request not traced (nothing more on the wire).
   */
  trace?: true;
}

/**
 * A request's tensors and the metadata that travels with them. The abort signal and the trace stay
 * in the sending process (cancellation and tracing are the gateway's business).
 */
function wireParts(req: InferenceRequest): { inputs: Tensor[]; meta: Record<string, unknown> } {
  const { inputs, signal: _signal, trace: _trace, queuedSinceMs: _queued, waitMs: _wait, ...meta } = req;
  return { inputs, meta };
}

/** Encodes a request and its envelope. */
export function encodeRequest(req: InferenceRequest, env: WireEnvelope): Buffer {
  const { inputs, meta } = wireParts(req);
  return encode(meta, inputs, envJson(env));
}

/**
 * Encodes a request as parts, for a transport that takes several values (Redis stream fields):
 * the header (`[u32 LE length][JSON]`, with each tensor's byte size) and then each tensor's bytes
 * as a view of the request's own buffer, not a copy.
 */
export function encodeRequestParts(req: InferenceRequest, env: WireEnvelope): Buffer[] {
  const { inputs, meta } = wireParts(req);
  const { out: head } = headed(headerJson(meta, inputs, envJson(env)), 0, 0);
  return [head, ...inputs.map((t) => Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength))];
}

/** A copy of `bytes` in an ArrayBuffer of its own (not zero-filled first: every byte is written). */
function ownCopy(bytes: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafeSlow(bytes.byteLength);
  out.set(bytes);
  return out;
}

/** Decodes what `encodeRequestParts` wrote (the header, then one part per tensor); each tensor gets a buffer of its own. */
export function decodeRequestParts(parts: readonly Uint8Array[]): { request: InferenceRequest; env: WireEnvelope } {
  const { meta } = readHeader(parts[0]);
  const heads = tensorHeads(meta);
  if (heads.length !== parts.length - 1) throw Errors.invalidArg('malformed message: tensor parts do not match the header');
  checkRequestMeta(meta);
  const checkedEnv = checkEnvelope(meta['env']);
  const inputs = heads.map((h, i) => {
    const bytes = parts[i + 1]!;
    if (bytes.byteLength !== h.bytes) malformed(`tensor '${h.name.slice(0, 64)}'`);
    // A part in a buffer declared its own (the RESP reader marks the large bulk strings it copies
    // out of the socket) is used as it is; any other part is copied once into a buffer of its own.
    // Either way the request owns the result, said explicitly: it moves to an instance thread
    // without the two copies of a structured clone.
    return { name: h.name, datatype: h.datatype, shape: h.shape, data: viewBytesAs(h.datatype, isTransferable(bytes) ? bytes : ownCopy(bytes)), owned: true };
  });
  return { request: requestOf(meta, inputs), env: checkedEnv };
}

/**
 * The envelope of a request that did not decode, if its header still gives one: where a worker can
 * answer that it could not read the request, instead of leaving its gateway to time out.
 * `head`: the message (`encodeRequest`) or its first part (`encodeRequestParts`).
 */
export function requestEnvelope(head: Uint8Array): WireEnvelope | undefined {
  try {
    return checkEnvelope(readHeader(head).meta['env']);
  } catch {
    return undefined;
  }
}

/**
 * The envelope of a request whose tensors its worker fetches, and their total byte size, from one
 * read of its header (`encodeRequestParts`' first part); undefined when it does not read.
 */
export function fetchedRequestHead(head: Uint8Array): { env: WireEnvelope; bytes: number } | undefined {
  try {
    const { meta } = readHeader(head);
    let bytes = 0;
    for (const h of tensorHeads(meta)) bytes += h.bytes;
    return { env: checkEnvelope(meta['env']), bytes };
  } catch {
    return undefined;
  }
}

/** Decodes what `encodeRequest` wrote. */
export function decodeRequest(buf: Uint8Array): { request: InferenceRequest; env: WireEnvelope } {
  const { meta, tensors } = decode(buf);
  checkRequestMeta(meta);
  const env = checkEnvelope(meta['env']);
  return { request: requestOf(meta, tensors), env };
}

/**
 * The request a checked header describes: the fields the wire carries and nothing else. A field a
 * hostile header adds is dropped, not passed on: a `signal` of `{}` (no listener methods) made the
 * gateway that ran such an async job throw from its timeout timer and exit (review).
 */
function requestOf(meta: Record<string, unknown>, inputs: Tensor[]): InferenceRequest {
  const r: InferenceRequest = { modelName: meta['modelName'] as string, inputs };
  if (meta['id'] !== undefined) r.id = meta['id'] as string;
  if (meta['modelVersion'] !== undefined) r.modelVersion = meta['modelVersion'] as number;
  if (meta['outputs'] !== undefined) r.outputs = meta['outputs'] as RequestedOutput[];
  if (meta['parameters'] !== undefined) r.parameters = meta['parameters'] as Record<string, ParameterValue>;
  if (meta['blsDepth'] !== undefined) r.blsDepth = meta['blsDepth'] as number;
  if (meta['blsChain'] !== undefined) r.blsChain = meta['blsChain'] as string[];
  return r;
}

/**
 * A reply: the response, or the error (code and message) that failed the request. A decoupled
 * model's request gets its responses with `more: true`, then `{ end: true }`.
 */
export type WireReply =
  /**
   * `seq`: a decoupled response's number within its request (0, 1, ...), so a gateway drops one
   * it has already taken (a replayed reply stream entry, signed as it was) instead of streaming it twice.
   */
  | { requestKey: string; response: InferenceResponse; more?: boolean; seq?: number; trace?: TraceTimestamp[] }
  /**
   * `unfetched`: the worker could not fetch the request's tensors from its gateway (not reached,
   * the connection failed, no answer in time): the gateway sends the request again with them, or,
   * when it cannot, answers the error.
   */
  | { requestKey: string; error: WireReplyError }
  | { requestKey: string; end: true };

/** A timestamp of a traced request: Triton's activity name, ns on CLOCK_MONOTONIC (core clock.ts monotonicNs). */
export interface TraceTimestamp {
  name: string;
  ns: number;
}

/**
 * The timestamps the core takes of a request (core backend-model.ts), the only names a reply's
 * `trace` may hold: the frontend's (HTTP_*, GRPC_*) are the gateway's own.
 */
const CORE_TRACE_NAMES: ReadonlySet<string> = new Set(['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END']);

/**
 * The most timestamps a reply's `trace` may hold: the core takes 7 of a request; a longer list is
 * not a worker's, and is dropped whole (a hostile one must not grow the trace file).
 */
export const MAX_REPLY_TRACE_TIMESTAMPS = 32;

/** Past CLOCK_MONOTONIC's range (uint64 ns): a forged value, not a time (NaN and Infinity fail too). */
const MAX_TRACE_NS = 2 ** 64;

/**
 * A reply's `trace`, checked: a list of at most MAX_REPLY_TRACE_TIMESTAMPS, of which only the
 * entries with a core timestamp name and an `ns` from 0 to under 2^64 are kept (in their order).
 * Anything else is dropped, never the reply: the request is answered whatever its trace holds.
 */

function replyTrace(v: unknown): TraceTimestamp[] | undefined {
  if (!Array.isArray(v) || v.length > MAX_REPLY_TRACE_TIMESTAMPS) return undefined;
  const out: TraceTimestamp[] = [];
  for (const x of v as unknown[]) {
    if (!isObject(x)) continue;
    const { name, ns } = x;
    if (typeof name === 'string' && CORE_TRACE_NAMES.has(name) && typeof ns === 'number' && ns >= 0 && ns < MAX_TRACE_NS) out.push({ name, ns });
  }
  return out.length > 0 ? out : undefined;
}

/** A reply's error as it crosses Redis. */
export interface WireReplyError {
  code: string;
  message: string;
  rejected?: true;
  unfetched?: true;
}

/** Encodes a reply. */
export function encodeReply(reply: WireReply): Buffer {
  if ('error' in reply) return encode({ requestKey: reply.requestKey, error: reply.error }, []);
  if ('end' in reply) return encode({ requestKey: reply.requestKey, end: true }, []);
  const { outputs, ...rest } = reply.response;
  const meta: Record<string, unknown> = { requestKey: reply.requestKey, response: rest, ...(reply.more ? { more: true } : {}), ...(reply.seq !== undefined ? { seq: reply.seq } : {}) };
  if (reply.trace) meta['trace'] = reply.trace;
  return encode(meta, outputs);
}

/**
 * Whether a tensor's bytes hold exactly the elements its shape says (BYTES: that many
 * length-prefixed elements). A reply is checked so: its outputs go to clients as they are, and
 * one that did not fit went out as a 200 with `"shape":[1,16],"data":[0]` or with a shape of 2^40
 * elements over 4 bytes (review: a forged or broken worker). Requests are checked by the worker's
 * core, with Triton's messages.
 */
function fitsShape(t: Tensor): boolean {
  const n = elementCount(t.shape);
  if (t.datatype === 'BYTES') return countBytesElements(dataBytes(t.data)) === n;
  return n * dataTypeByteSize(t.datatype) === t.data.byteLength;
}

/** Decodes what `encodeReply` wrote. */
export function decodeReply(buf: Uint8Array): WireReply {
  const { meta, tensors } = decode(buf);
  checkReplyMeta(meta);
  for (let i = 0; i < tensors.length; i++) {
    const t = tensors[i]!;
    if (!fitsShape(t)) malformed(`output '${t.name.slice(0, 64)}' does not fit its shape`);
    for (let j = 0; j < i; j++) if (tensors[j]!.name === t.name) malformed(`output '${t.name.slice(0, 64)}' twice`);
  }
  const requestKey = meta['requestKey'] as string;
  if (meta['error']) return { requestKey, error: meta['error'] as WireReplyError };
  if (meta['end']) return { requestKey, end: true };
  const reply: WireReply = { requestKey, response: { ...(meta['response'] as Omit<InferenceResponse, 'outputs'>), outputs: tensors } };
  if (meta['more']) reply.more = true;
  if (meta['seq'] !== undefined) {
    if (!Number.isSafeInteger(meta['seq']) || (meta['seq'] as number) < 0) malformed('seq');
    reply.seq = meta['seq'] as number;
  }
  if (meta['trace'] !== undefined) {
    const trace = replyTrace(meta['trace']);
    if (trace) reply.trace = trace;
  }
  return reply;
}
