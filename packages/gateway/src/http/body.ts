/**
 * @module Request bodies: read with a size limit, decompressed (gzip/deflate), into memory owned
 * by the request so its tensors can be moved to instance threads without a copy.
 * Triton: server/src/http_server.cc (GetRequestCompressionType, --http-max-input-size)
 */
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { deflate, gunzip, gzip, inflate } from 'node:zlib';
import type { Context } from 'hono';
import { Errors, TriodeError, markTransferable } from '@triode/core';

const gunzipAsync = promisify(gunzip);
const inflateAsync = promisify(inflate);
const gzipAsync = promisify(gzip);
const deflateAsync = promisify(deflate);

function tooLarge(size: number, limit: number): TriodeError {
  return Errors.invalidArg(`Request JSON size of ${size} bytes exceeds the maximum allowed value of ${limit} bytes. Use --http-max-input-size to increase the limit.`);
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

/**
 * Reads the socket straight into one buffer of the declared length (no chunk list, one copy).
 * `pad` bytes are left free in front, so that a binary section after a JSON header of known
 * length starts 8-byte aligned and its tensors can be viewed in place instead of copied.
 */
function readIncoming(incoming: IncomingMessage, limit: number, declared: number | undefined, pad: number): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    let buf = declared !== undefined ? new Uint8Array(pad + declared) : undefined;
    const chunks: Buffer[] = [];
    let total = 0;
    let failed = false;
    incoming.on('data', (c: Buffer) => {
      if (failed) return;
      if (total + c.byteLength > limit) {
        failed = true;
        // Keep draining (and dropping) so the connection can still carry the 400 answer.
        chunks.length = 0;
        buf = undefined;
        reject(tooLarge(total + c.byteLength, limit));
        return;
      }
      if (buf && pad + total + c.byteLength <= buf.byteLength) buf.set(c, pad + total);
      else chunks.push(c);
      total += c.byteLength;
    });
    incoming.on('end', () => {
      if (failed) return;
      if (buf && chunks.length === 0 && pad + total === buf.byteLength) resolve(buf.subarray(pad));
      else resolve(join(buf ? [buf.subarray(pad, pad + Math.min(total, buf.byteLength - pad)), ...chunks] : chunks, total));
    });
    incoming.on('error', (e) => { if (!failed) reject(Errors.invalidArg(`failed to read the request body: ${e.message}`)); });
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
  if (incoming?.headers) {
    const v = incoming.headers[name];
    return Array.isArray(v) ? v.join(', ') : v;
  }
  return c.req.header(name);
}

/**
 * Reads the request body, enforcing `limit` on both the received and the decompressed size.
 * @throws INVALID_ARG when too large, UNSUPPORTED for an unknown Content-Encoding.
 */
export async function readBody(c: Context, limit: number, headerLength?: number): Promise<Uint8Array> {
  const encoding = (header(c, 'content-encoding') ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'deflate') {
    throw Errors.unsupported(`unsupported Content-Encoding '${encoding}'`);
  }
  const cl = header(c, 'content-length');
  const declared = cl !== undefined && /^\d+$/.test(cl) ? Number(cl) : undefined;
  if (declared !== undefined && declared > limit) throw tooLarge(declared, limit);
  const env = c.env as { incoming?: IncomingMessage } | undefined;
  let raw: Uint8Array;
  if (env?.incoming && typeof env.incoming.on === 'function' && !env.incoming.readableEnded) {
    const pad = encoding === 'identity' && headerLength ? (8 - (headerLength % 8)) % 8 : 0;
    raw = await readIncoming(env.incoming, limit, declared, pad);
  } else {
    const ab = await c.req.arrayBuffer();
    if (ab.byteLength > limit) throw tooLarge(ab.byteLength, limit);
    raw = new Uint8Array(ab);
  }
  // The body belongs to this request alone: its tensors (views of it) may move it to a thread.
  markTransferable(raw.buffer);
  if (encoding === 'identity') return raw;
  try {
    const out = encoding === 'gzip' ? await gunzipAsync(raw, { maxOutputLength: limit }) : await inflateAsync(raw, { maxOutputLength: limit });
    const body = join([out], out.byteLength);
    markTransferable(body.buffer);
    return body;
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(limit + 1, limit);
    throw Errors.invalidArg(`failed to decompress the request body (${encoding}): ${(err as Error).message}`);
  }
}

/** The response compression the client accepts (`Accept-Encoding`), if any. */
export function responseCompression(c: Context): 'gzip' | 'deflate' | undefined {
  const accept = header(c, 'accept-encoding');
  if (!accept) return undefined;
  const names = accept.split(',').map((s) => s.split(';')[0]!.trim().toLowerCase());
  if (names.includes('gzip')) return 'gzip';
  if (names.includes('deflate')) return 'deflate';
  return undefined;
}

/** Compresses a response body. */
export async function compress(body: Uint8Array | string, how: 'gzip' | 'deflate'): Promise<Uint8Array> {
  return how === 'gzip' ? gzipAsync(body) : deflateAsync(body);
}
