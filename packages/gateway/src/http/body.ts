/**
 * @module Request bodies: read with a size limit, decompressed (gzip/deflate), into memory owned
 * by the request so its tensors can be moved to instance threads without a copy.
 * Triton: server/src/http_server.cc (GetRequestCompressionType, --http-max-input-size)
 */
import type { IncomingMessage } from 'node:http';
import { promisify } from 'node:util';
import { deflate, gunzip, gzip, inflate } from 'node:zlib';
import type { Context } from 'hono';
import { Errors, TriodeError } from '@triode/core';

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

function readIncoming(incoming: IncomingMessage, limit: number): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    let failed = false;
    incoming.on('data', (c: Buffer) => {
      if (failed) return;
      total += c.byteLength;
      if (total > limit) {
        failed = true;
        // Keep draining (and dropping) so the connection can still carry the 400 answer.
        chunks.length = 0;
        reject(tooLarge(total, limit));
        return;
      }
      chunks.push(c);
    });
    incoming.on('end', () => { if (!failed) resolve(join(chunks, total)); });
    incoming.on('error', (e) => { if (!failed) reject(Errors.invalidArg(`failed to read the request body: ${e.message}`)); });
  });
}

/**
 * Reads the request body, enforcing `limit` on both the received and the decompressed size.
 * @throws INVALID_ARG when too large, UNSUPPORTED for an unknown Content-Encoding.
 */
export async function readBody(c: Context, limit: number): Promise<Uint8Array> {
  const encoding = (c.req.header('content-encoding') ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity' && encoding !== 'gzip' && encoding !== 'deflate') {
    throw Errors.unsupported(`unsupported Content-Encoding '${encoding}'`);
  }
  const declared = Number(c.req.header('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(declared, limit);
  const env = c.env as { incoming?: IncomingMessage } | undefined;
  let raw: Uint8Array;
  if (env?.incoming && typeof env.incoming.on === 'function' && !env.incoming.readableEnded) {
    raw = await readIncoming(env.incoming, limit);
  } else {
    const ab = await c.req.arrayBuffer();
    if (ab.byteLength > limit) throw tooLarge(ab.byteLength, limit);
    raw = new Uint8Array(ab);
  }
  if (encoding === 'identity') return raw;
  try {
    const out = encoding === 'gzip' ? await gunzipAsync(raw, { maxOutputLength: limit }) : await inflateAsync(raw, { maxOutputLength: limit });
    return join([out], out.byteLength);
  } catch (err) {
    if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw tooLarge(limit + 1, limit);
    throw Errors.invalidArg(`failed to decompress the request body (${encoding}): ${(err as Error).message}`);
  }
}

/** The response compression the client accepts (`Accept-Encoding`), if any. */
export function responseCompression(c: Context): 'gzip' | 'deflate' | undefined {
  const accept = c.req.header('accept-encoding');
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
