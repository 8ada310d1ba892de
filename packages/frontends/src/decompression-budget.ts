/**
 * @module The server-wide budget of decompressed request bytes: the bytes that inflating
 * compressed requests (HTTP `Content-Encoding`, gRPC `grpc-encoding`) produced and that the
 * requests in flight still hold, over the HTTP and gRPC frontends of a process together. Each
 * compressed request may inflate to its own limit (`--http-max-input-size`,
 * `--grpc-max-message-size`), but nothing bounded their sum: 40 ModelInfer calls of 16 KB of gzip
 * each, held by a queued model, took `triode serve` to 4 GB (review). Uncompressed requests are
 * not counted: what they hold is what their client sent.
 * Triode's own: Triton has no such limit.
 */
import { createGunzip, createInflate } from 'node:zlib';
import { Errors, type TriodeError } from '@triode/core';

/** The default bound on decompressed request bytes held at once (`--max-decompressed-request-bytes`). */
export const DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES = 1 << 30;

/**
 * What one compressed request (an HTTP body, a gRPC message) holds of the budget. It takes bytes
 * as inflation produces them and gives them all back at once, when its request ends.
 */
export interface DecompressionHold {
  /**
   * Counts `n` more bytes. False, counting nothing, when that would pass the budget's limit or
   * the hold was released already (its request ended while it inflated): the inflating stops.
   */
  take(n: number): boolean;
  /** Gives back every byte taken (once; later calls do nothing, later takes are refused). */
  release(): void;
  /** Bytes taken and not given back. */
  readonly bytes: number;
  /** The budget it counts against. */
  readonly budget: DecompressionBudget;
}

/**
 * The budget: one per process, shared by its frontends (as the shared memory regions are).
 * @example
 * const budget = new DecompressionBudget(256 << 20);
 * createHttpApp(backplane, { decompressionBudget: budget });
 * await startGrpcServer(backplane, { decompressionBudget: budget });
 */
export class DecompressionBudget {
  /** The most bytes held at once. */
  readonly limit: number;
  #used = 0;

  /** @param limit @default DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES (1 GiB) */
  constructor(limit = DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES) {
    if (!Number.isSafeInteger(limit) || limit <= 0) throw new RangeError('limit must be a positive integer');
    this.limit = limit;
  }

  /** Bytes the requests in flight hold now. */
  get used(): number {
    return this.#used;
  }

  /** True when nothing more fits: a compressed request is refused before it inflates anything. */
  get full(): boolean {
    return this.#used >= this.limit;
  }

  /** A hold for one compressed request, holding nothing yet. */
  hold(): DecompressionHold {
    let bytes = 0;
    let released = false;
    return {
      take: (n) => {
        if (released || this.#used + n > this.limit) return false;
        this.#used += n;
        bytes += n;
        return true;
      },
      release: () => {
        if (released) return;
        released = true;
        this.#used -= bytes;
        bytes = 0;
      },
      get bytes() {
        return bytes;
      },
      budget: this,
    };
  }

  /** The refusal of a compressed request past the limit (UNAVAILABLE: 503, gRPC UNAVAILABLE). */
  refusal(): TriodeError {
    return Errors.unavailable(`the server holds too many decompressed request bytes (the requests in flight would hold more than ${this.limit}): retry later, or send the request uncompressed`);
  }
}

/** What inflateCounted rejects with past `maxOutputLength`: zlib's own error for it (callers map its code). */
function tooLarge(max: number): Error {
  return Object.assign(new RangeError(`Cannot create a Buffer larger than ${max} bytes`), { code: 'ERR_BUFFER_TOO_LARGE' });
}

/**
 * Inflates `input` (gzip or deflate) in zlib's thread pool, counting each chunk against `hold` as
 * zlib produces it: past `maxOutputLength` it rejects with code ERR_BUFFER_TOO_LARGE (as zlib's
 * `maxOutputLength`), past the budget with its refusal (UNAVAILABLE), and once the hold is
 * released (the request ended) likewise; zlib stops there (with the budget full already, it does
 * not start). On any failure the hold is released,
 * so what it took goes back at once; on success the bytes stay held until the caller releases it.
 * Without a hold nothing is counted. As costly as zlib's one-shot `gunzip(buf, cb)`, which runs
 * the same stream.
 */
export function inflateCounted(input: Uint8Array, encoding: 'gzip' | 'deflate', maxOutputLength: number, hold?: DecompressionHold): Promise<Buffer> {
  // Nothing fits: refused before zlib starts.
  if (hold?.budget.full) {
    hold.release();
    return Promise.reject(hold.budget.refusal());
  }
  return new Promise((resolve, reject) => {
    const z = encoding === 'gzip' ? createGunzip() : createInflate();
    let chunks: Buffer[] = [];
    let total = 0;
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      chunks = [];
      hold?.release();
      z.destroy();
      reject(err);
    };
    z.on('data', (c: Buffer) => {
      if (settled) return;
      total += c.byteLength;
      if (total > maxOutputLength) fail(tooLarge(maxOutputLength));
      else if (hold && !hold.take(c.byteLength)) fail(hold.budget.refusal());
      else chunks.push(c);
    });
    z.on('error', fail);
    z.on('end', () => {
      if (settled) return;
      settled = true;
      const out = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
      chunks = [];
      resolve(out);
    });
    try {
      z.end(input);
    } catch (err) {
      fail(err as Error);
    }
  });
}
