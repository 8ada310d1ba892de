/**
 * @module Request bodies: read with a size limit, decompressed (gzip/deflate), into memory owned
 * by the request so its tensors can be moved to instance threads without a copy. The limit holds
 * while reading: a declared Content-Length over it is refused before a byte is read, a chunked or
 * compressed body is counted as it streams, and inflating stops at the limit (no gzip bomb). What
 * a compressed body inflates to counts against the server's DecompressionBudget until its
 * response closes (answered, or its client gone); an uncompressed one is not counted.
 * Triton: server/src/http_server.cc (GetRequestCompressionType, --http-max-input-size)
 */
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { deflate, gzip } from 'node:zlib';
import type { Context, MiddlewareHandler } from 'hono';
import { Errors, TriodeError, echo, markTransferable } from '@triode/core';
import { inflateCounted, type DecompressionBudget, type DecompressionHold } from '../decompression-budget.js';

const gzipAsync = promisify(gzip);
const deflateAsync = promisify(deflate);

/**
 * A request body over its route's limit (INVALID_ARG, as Triton answers for `/infer`). Its own
 * class so that the control routes' body limit can answer 413 without looking at the message.
 */
export class BodyTooLargeError extends TriodeError {
  /** Bytes received or declared (for a decompressed body: limit + 1, inflating stops there). */
  readonly size: number;
  readonly limit: number;

  constructor(size: number, limit: number) {
    super('INVALID_ARG', `Request JSON size of ${size} bytes exceeds the maximum allowed value of ${limit} bytes. Use --http-max-input-size to increase the limit.`);
    this.size = size;
    this.limit = limit;
  }
}

/** A Content-Encoding other than identity, gzip and deflate (UNSUPPORTED: 501 with `Accept-Encoding`). */
export class UnsupportedEncodingError extends TriodeError {
  constructor(message: string) {
    super('UNSUPPORTED', message);
  }
}

const tooLarge = (size: number, limit: number): TriodeError => new BodyTooLargeError(size, limit);

/** Reads a Fetch body stream (in-process requests), counting as it goes: never more than `limit` + one chunk. */
async function readStream(stream: ReadableStream<Uint8Array>, limit: number): Promise<Uint8Array> {
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(total, limit);
    }
    chunks.push(value);
  }
  return join(chunks, total);
}

/** Copies chunks into one fresh buffer (never a slice of Node's shared pool). */
function join(chunks: Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.byteLength;
  }
  return out;
}

/** First buffer of a body without Content-Length (chunked): grown by doubling as bytes arrive. */
const FIRST_CAPACITY = 16 * 1024;
/**
 * The most of a declared Content-Length reserved before its bytes come; a larger body grows, as its
 * bytes come, DECLARED_GROWTH times at a time up to its declared length. Reserving the whole length
 * at once let a request that sent only its head make the server allocate 64 MiB, and churning such
 * requests forced a full GC every few connections (review).
 */
const FIRST_DECLARED_CAPACITY = 1 << 20;
/**
 * How much a declared body's buffer grows at a time past FIRST_DECLARED_CAPACITY: at most 4 times
 * the bytes received so far are reserved. Doubling cost an 11 MB body four copies (1, 2, 4 and 8 MB)
 * and 26 MB of buffers zeroed, 1.3-1.4x its main-thread CPU outside the model (bench/RESULTS.md,
 * "Large bodies read with fewer copies").
 */
const DECLARED_GROWTH = 4;

/** From this size on, a body's memory is not zero-filled (below it, zeroing costs less than the unpooled allocation). */
const UNZEROED_MIN_BYTES = 64 * 1024;

/**
 * Memory for a body, owned (never a slice of Node's shared pool, so it can move to a thread); from
 * UNZEROED_MIN_BYTES on, not zero-filled: readIncoming writes every byte a reader can reach, and
 * zeroes the rest (the pad in front, the spare after) before the buffer leaves it.
 */
function bodyMemory(n: number): Uint8Array {
  if (n < UNZEROED_MIN_BYTES) return new Uint8Array(n);
  const b = Buffer.allocUnsafeSlow(n);
  return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
}

/**
 * Reads the socket straight into one buffer: of the declared length, or, for a chunked body,
 * one that doubles as it fills (never past the limit). Chunks are copied as they arrive, never
 * kept: a body sent as millions of 1-byte chunks would otherwise hold a Buffer object (and its
 * share of a socket read) per byte, hundreds of times the limit. `pad` bytes are left free in
 * front, so that a binary section after a JSON header of known length starts 8-byte aligned and
 * its tensors can be viewed in place instead of copied.
 */
function readIncoming(incoming: IncomingMessage, limit: number, declared: number | undefined, pad: number, owned: boolean): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    let buf: Uint8Array | undefined = bodyMemory(pad + (declared !== undefined ? Math.min(declared, FIRST_DECLARED_CAPACITY) : Math.min(limit, FIRST_CAPACITY)));
    let total = 0;
    let failed = false;
    incoming.on('data', (c: Buffer) => {
      if (failed || !buf) return;
      const size = total + c.byteLength;
      if (size > limit) {
        failed = true;
        // Keep draining (and dropping) so the connection can still carry the 400 answer.
        buf = undefined;
        reject(tooLarge(size, limit));
        return;
      }
      if (pad + size > buf.byteLength) {
        const factor = declared !== undefined ? DECLARED_GROWTH : 2;
        const grown = bodyMemory(pad + Math.min(declared ?? limit, Math.max(size, factor * (buf.byteLength - pad))));
        grown.set(buf.subarray(pad, pad + total), pad);
        buf = grown;
      }
      buf.set(c, pad + total);
      total = size;
    });
    incoming.on('end', () => {
      if (failed || !buf) return;
      let out = buf;
      buf = undefined;
      // A doubled buffer can be up to twice the body: give the spare back unless it is small.
      if (out.byteLength - pad - total > FIRST_CAPACITY) {
        const exact = bodyMemory(pad + total);
        exact.set(out.subarray(pad, pad + total), pad);
        out = exact;
      }
      // No byte of the buffer is left as the allocator gave it (its tensors may move it to a thread whole).
      out.fill(0, 0, pad);
      out.fill(0, pad + total);
      // An uncompressed body is the request's own: its tensors (views of it) may move it to a thread.
      if (owned) markTransferable(out.buffer);
      resolve(out.subarray(pad, pad + total));
    });
    incoming.on('error', (e) => {
      if (failed) return;
      failed = true;
      buf = undefined;
      reject(Errors.invalidArg(`failed to read the request body: ${echo(e.message)}`));
    });
    // A client that goes away mid-body: nothing else would settle this promise (and free `buf`).
    incoming.on('close', () => {
      if (!failed && !incoming.complete) {
        failed = true;
        buf = undefined;
        reject(Errors.invalidArg('the client closed the connection before sending the whole request body'));
      }
    });
  });
}

/**
 * A request header. On Node, read from the parsed IncomingMessage headers: building the Fetch
 * `Headers` object that `c.req.header()` needs costs more than the lookup (hot path).
 */
export function header(c: Context, name: string): string | undefined {
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (incoming?.headers) return incomingHeader(incoming, name);
  return c.req.header(name);
}

/** The checks made from the headers before a byte of the body is read. */
function bodyHead(get: (name: string) => string | undefined, limit: number): { encoding: string; declared: number | undefined } {
  // Compared as sent, as Triton's GetRequestCompressionType does: `GZIP` is not gzip; empty is identity.
  const sent = get('content-encoding');
  const encoding = sent === undefined || sent === '' ? 'identity' : sent;
  if (encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'deflate') {
    throw new UnsupportedEncodingError('Unsupported compression type');
  }
  const cl = get('content-length');
  const declared = cl !== undefined && /^\d+$/.test(cl) ? Number(cl) : undefined;
  if (declared !== undefined && declared > limit) throw tooLarge(declared, limit);
  return { encoding, declared };
}

/** A header of a Node request, as `header()` reads it. */
export function incomingHeader(incoming: IncomingMessage, name: string): string | undefined {
  const v = incoming.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** What a response's end looks like to a compressed body held until then (a Node ServerResponse). */
export interface ClosingResponse {
  /** True once the response has finished or its connection has closed. */
  readonly closed: boolean;
  once(event: 'close', listener: () => void): unknown;
}

/**
 * Reads the request body, enforcing `limit` on both the received and the decompressed size.
 * `budget`: where a compressed body's decompressed bytes count, until the response closes (a
 * request served in-process, with no Node response, gives them back once decoded); without one
 * they are not counted.
 * @throws INVALID_ARG when too large, UNSUPPORTED for an unknown Content-Encoding, UNAVAILABLE
 * past the budget
 */
export async function readBody(c: Context, limit: number, headerLength?: number, budget?: DecompressionBudget): Promise<Uint8Array> {
  const env = c.env as { incoming?: IncomingMessage; outgoing?: ClosingResponse } | undefined;
  if (env?.incoming && typeof env.incoming.on === 'function' && !env.incoming.readableEnded) {
    return readIncomingBody(env.incoming, limit, headerLength, budget, env.outgoing);
  }
  const { encoding } = bodyHead((name) => header(c, name), limit);
  if (encoding !== 'identity' && budget?.full) throw budget.refusal();
  let raw: Uint8Array;
  if (c.req.raw.body && !c.req.raw.bodyUsed) {
    raw = await readStream(c.req.raw.body, limit);
  } else {
    const ab = await c.req.arrayBuffer();
    if (ab.byteLength > limit) throw tooLarge(ab.byteLength, limit);
    raw = new Uint8Array(ab);
  }
  if (encoding === 'identity') return decodeBody(raw, encoding, limit);
  const hold = budget?.hold();
  try {
    return await decodeBody(raw, encoding, limit, hold);
  } finally {
    // Nothing tells when an in-process request's answer is done: its bytes are counted while it inflates.
    hold?.release();
  }
}

/**
 * `readBody` of a Node request whose body is still unread (the Hono route's and the infer fast
 * path's). A compressed body's decompressed bytes count against `budget` until `response` closes.
 */
export function readIncomingBody(incoming: IncomingMessage, limit: number, headerLength?: number, budget?: DecompressionBudget, response?: ClosingResponse): Promise<Uint8Array> {
  let head: { encoding: string; declared: number | undefined };
  try {
    head = bodyHead((name) => incomingHeader(incoming, name), limit);
  } catch (err) {
    return Promise.reject(err);
  }
  const { encoding, declared } = head;
  // Not an async function: an uncompressed body (every request but a compressed one) is
  // readIncoming's promise itself, owned when it resolves, with no promise more (issue #18), and
  // nothing of the budget is looked at.
  if (encoding === 'identity') return readIncoming(incoming, limit, declared, headerLength ? (8 - (headerLength % 8)) % 8 : 0, true);
  return readCompressed(incoming, limit, declared, encoding, budget, response);
}

/**
 * A compressed body, read and inflated: refused before a byte is read when the budget is spent
 * already; its decompressed bytes then count as they come, until `response` closes (at once when
 * it fails: a refused request gives back what it took).
 */
async function readCompressed(incoming: IncomingMessage, limit: number, declared: number | undefined, encoding: string, budget: DecompressionBudget | undefined, response: ClosingResponse | undefined): Promise<Uint8Array> {
  if (budget?.full) throw budget.refusal();
  const hold = budget?.hold();
  if (hold && response) {
    // Registered before reading: a client that goes away mid-body or mid-inflation stops it there.
    if (response.closed) hold.release();
    else response.once('close', () => hold.release());
  }
  try {
    return await decodeBody(await readIncoming(incoming, limit, declared, 0, false), encoding, limit, hold);
  } catch (err) {
    hold?.release();
    throw err;
  } finally {
    if (!response) hold?.release();
  }
}

/** The most deflate inflates a byte to (zlib's bound: a 258-byte match in ~2 bits, about 1032:1). */
const MAX_DEFLATE_RATIO = 1032;

/**
 * The body as received, decompressed per its Content-Encoding; owned by the request. A compressed
 * one's decompressed bytes count against `hold` as zlib produces them.
 */
async function decodeBody(raw: Uint8Array, encoding: string, limit: number, hold?: DecompressionHold): Promise<Uint8Array> {
  // The body belongs to this request alone: its tensors (views of it) may move it to a thread.
  markTransferable(raw.buffer);
  if (encoding === 'identity') return raw;
  // A gzip member ends with its inflated size (mod 2^32): a bomb that states it is refused before
  // inflating anything. One that lies is still stopped by maxOutputLength below. A body that is
  // not gzip at all (no magic bytes) is left to gunzip's own error, not a made-up size, and so is
  // one whose last bytes state more than deflate could make of it (MAX_DEFLATE_RATIO): they are
  // not its member's size but bytes after it (review: "garbage" after a member was refused as a
  // request of 1,701,273,954 bytes).
  if (encoding === 'gzip' && raw.byteLength >= 18 && raw[0] === 0x1f && raw[1] === 0x8b) {
    const stated = new DataView(raw.buffer, raw.byteOffset + raw.byteLength - 4, 4).getUint32(0, true);
    if (stated > limit && stated <= raw.byteLength * MAX_DEFLATE_RATIO) throw tooLarge(stated, limit);
  }
  try {
    const out = await inflateCounted(raw, encoding as 'gzip' | 'deflate', limit, hold);
    const body = join([out], out.byteLength);
    markTransferable(body.buffer);
    return body;
  } catch (err) {
    if (err instanceof TriodeError) throw err;
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(limit + 1, limit);
    throw Errors.invalidArg(`failed to decompress the request body (${encoding}): ${echo((err as Error).message)}`);
  }
}

/** Methods whose body `bodyLimit` reads. */
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/** Body limit of the control routes (logging, trace settings, repository index and unload, and any other route without its own). */
export const CONTROL_MAX_BODY_SIZE = 64 * 1024;

/**
 * Reads, before the route runs, the body of every request whose route does not read it itself
 * (`limitOf(path)` gives its limit; undefined: the route reads it, as `/infer` does with
 * `--http-max-input-size`). A body over the limit is answered 413 and never buffered whole; the
 * route then finds the (decompressed) body in `c.req.raw`. A compressed body counts against
 * `budget` until the response closes.
 */
export function bodyLimit(limitOf: (path: string) => number | undefined, budget?: DecompressionBudget): MiddlewareHandler {
  return async (c, next) => {
    const method = c.req.method;
    // Only the methods a route takes a body with: any other (GET, TRACE, ...) goes on to its 404
    // or 405 with its body unread (Node drops it), and a Fetch Request could not carry it anyway.
    const limit = BODY_METHODS.has(method) ? limitOf(c.req.path) : undefined;
    if (limit === undefined) {
      await next();
      return undefined;
    }
    let bytes: Uint8Array;
    try {
      bytes = await readBody(c, limit, undefined, budget);
    } catch (err) {
      if (!(err instanceof BodyTooLargeError)) throw err;
      // Close the connection: what the client still sends is not read.
      return c.json({ error: `Request body of ${err.size} bytes exceeds the limit of ${err.limit} bytes of this endpoint` }, 413, { Connection: 'close' });
    }
    const headers = new Headers(c.req.raw.headers);
    for (const h of ['content-length', 'content-encoding', 'transfer-encoding']) headers.delete(h);
    // A request target in absolute form may carry credentials (user:pw@host), which a Request
    // cannot be made with (review: each such request was a 500 and a stack trace in the log).
    const url = new URL(c.req.raw.url);
    url.username = '';
    url.password = '';
    c.req.raw = new Request(url, { method, headers, body: bytes as Uint8Array<ArrayBuffer>, signal: c.req.raw.signal });
    await next();
    return undefined;
  };
}

/**
 * The response compression a client's `Accept-Encoding` asks for, if any, chosen as Triton
 * chooses: of `identity`, `deflate` and `gzip` (exact names), the one with the highest `;q=`
 * weight (1 when none), the first on a tie; a weight of 0 refuses it. Anything else is skipped.
 * Triton: server/src/http_server.cc (CompressionTypeUsed)
 */
export function compressionOf(accept: string | undefined): 'gzip' | 'deflate' | undefined {
  if (!accept) return undefined;
  let best = 'identity';
  let bestWeight = 0;
  for (const encoding of accept.split(',')) {
    const start = encoding.search(/[^ ]/);
    const at = encoding.indexOf(';q=');
    if (start < 0 || (at >= 0 && start >= at)) continue;
    const type = at < 0 ? encoding.slice(start) : encoding.slice(start, at);
    const weight = at < 0 ? 1 : Number.parseFloat(encoding.slice(at + 3));
    if (Number.isNaN(weight)) continue;
    if ((type === 'identity' || type === 'deflate' || type === 'gzip') && weight > bestWeight) {
      best = type;
      bestWeight = weight;
    }
  }
  return best === 'identity' ? undefined : best as 'gzip' | 'deflate';
}

/** Compresses a response body. */
export async function compress(body: Uint8Array | string, how: 'gzip' | 'deflate'): Promise<Uint8Array> {
  return how === 'gzip' ? gzipAsync(body) : deflateAsync(body);
}
