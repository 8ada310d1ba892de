/**
 * @module RESP2, the Redis protocol, for the cluster's hot paths (the rest goes through ioredis):
 * commands encoded with their Buffer arguments kept as they are, so a tensor goes to the socket
 * without being copied into a command buffer; and an incremental reply reader whose bulk strings
 * are copied once, straight from the socket's chunks into buffers of their own (a large one gets
 * its own ArrayBuffer, which can then move to an instance thread). Nothing is parsed or copied
 * until the whole reply has arrived; the walk that finds its end resumes where it stopped when a
 * chunk comes, so a reply costs two walks over its headers and one copy of its data, however many
 * chunks it takes.
 */

import { markTransferable } from '@triode/core';

type Arg = string | Buffer;

/**
 * Buffer arguments at least this long go to the socket as they are; shorter ones are copied into
 * the command's own buffer. A socket write costs a small command more than its bytes do (Node's
 * stream machinery per write, and writev encoding each string piece: ~12% of a gateway's
 * instructions a `simple` request went to an XADD written as seven pieces).
 */
const PASS_THROUGH_BYTES = 16 * 1024;

/**
 * The RESP encoding of `name args...` as few Buffers as it can be: strings and short Buffers
 * written into one buffer, Buffers of PASS_THROUGH_BYTES or more kept as they are (a tensor goes
 * to the socket without a copy). A command without a large argument is one Buffer. Written here
 * byte by byte where the text is ASCII: each Buffer.write or byteLength is a call into C++ that
 * costs more than a short string's bytes.
 */
export function respPieces(name: string, args: readonly Arg[]): Buffer[] {
  const n = args.length;
  // Each argument's byte length (a string's measured once) and the bytes of the whole command.
  const lengths = new Array<number>(n);
  const nameBytes = utf8Length(name);
  let size = 1 + digits(n + 1) + 2 + bulkBytes(nameBytes);
  for (let i = 0; i < n; i++) {
    const a = args[i]!;
    const len = typeof a === 'string' ? utf8Length(a) : a.byteLength;
    lengths[i] = len;
    size += typeof a !== 'string' && len >= PASS_THROUGH_BYTES ? bulkBytes(0) - 1 + digits(len) : bulkBytes(len);
  }
  const pieces: Buffer[] = [];
  let out = Buffer.allocUnsafe(size);
  out[0] = 42; // '*'
  let at = writeCount(out, 1, n + 1);
  at = writeBulk(out, at, name, nameBytes);
  for (let i = 0; i < n; i++) {
    const a = args[i]!;
    const len = lengths[i]!;
    if (typeof a === 'string') {
      at = writeBulk(out, at, a, len);
    } else if (len < PASS_THROUGH_BYTES) {
      out[at] = 36; // '$'
      at = writeCount(out, at + 1, len);
      out.set(a, at);
      at = crlf(out, at + len);
    } else {
      // The large argument between what is written so far and the rest.
      out[at] = 36;
      at = writeCount(out, at + 1, len);
      pieces.push(out.subarray(0, at), a);
      out = out.subarray(at);
      at = crlf(out, 0);
    }
  }
  pieces.push(out);
  return pieces;
}

/** Bytes of a bulk string of `n` bytes: `$<n>\r\n<bytes>\r\n`. */
function bulkBytes(n: number): number {
  return 1 + digits(n) + 2 + n + 2;
}

function digits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** A string's UTF-8 byte length: its length when it is ASCII (checked here, without a call into C++). */
function utf8Length(s: string): number {
  if (s.length > 256) return Buffer.byteLength(s);
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 127) return Buffer.byteLength(s);
  return s.length;
}

/** `<n>\r\n` at `at`; returns where it ends. */
function writeCount(out: Buffer, at: number, n: number): number {
  const end = at + digits(n);
  for (let i = end - 1; i >= at; i--) {
    out[i] = 48 + (n % 10);
    n = Math.floor(n / 10);
  }
  return crlf(out, end);
}

/** `$<bytes>\r\n<s>\r\n` at `at`; returns where it ends. */
function writeBulk(out: Buffer, at: number, s: string, bytes: number): number {
  out[at] = 36; // '$'
  at = writeCount(out, at + 1, bytes);
  if (bytes === s.length && bytes <= 256) {
    for (let i = 0; i < bytes; i++) out[at + i] = s.charCodeAt(i);
  } else {
    out.write(s, at, bytes, 'utf8');
  }
  return crlf(out, at + bytes);
}

function crlf(out: Buffer, at: number): number {
  out[at] = 13;
  out[at + 1] = 10;
  return at + 2;
}

/** A RESP2 value: simple strings as strings, bulk strings as Buffers, nil as null. */
export type RespValue = string | number | Buffer | null | RespError | RespValue[];

/** An XREAD / XREADGROUP reply: per stream, its entries as [id, [field, value, ...]]; null when the read timed out. */
export type StreamEntries = [Buffer, [Buffer, Buffer[]][]][] | null;

/** An error reply (`-ERR ...`). */
export class RespError extends Error {}

/** Bulk strings at least this long get an ArrayBuffer of their own (not a slice of Node's pool). */
const OWN_BUFFER_BYTES = 4096;

/** Reads replies from a byte stream that arrives in chunks. */
export class RespReader {
  #chunks: Buffer[] = [];
  /** Offset of the unread data in the first chunk. */
  #start = 0;
  #available = 0;

  /** Adds a chunk; returns the replies it completed, in order. */
  push(chunk: Buffer): RespValue[] {
    this.#chunks.push(chunk);
    this.#available += chunk.byteLength;
    const out: RespValue[] = [];
    for (;;) {
      const end = this.#measure();
      if (end === undefined) return out;
      const cursor = new Cursor(this.#chunks, this.#start);
      out.push(readValue(cursor));
      this.#consume(end);
    }
  }

  /** Drops what is buffered (a connection that closed mid-reply). */
  reset(): void {
    this.#chunks = [];
    this.#start = 0;
    this.#available = 0;
    this.#scan = undefined;
  }

  /**
   * Where the walk over the first reply stopped because the rest had not arrived: the next chunk
   * resumes it there, so a reply of many values in many chunks is walked once, not once a chunk.
   * `todo` holds, per nesting level, the values still to walk; `bulk` the bytes of a bulk string
   * (and its CRLF) still to skip, or -1.
   */
  #scan: { cursor: Cursor; todo: number[]; bulk: number } | undefined;
  #headers = 0;

  /** Header lines walked so far: each once, however many chunks its reply came in. */
  get headersWalked(): number {
    return this.#headers;
  }

  /** Byte length of the first complete reply, or undefined if it has not all arrived. */
  #measure(): number | undefined {
    if (this.#available === 0) return undefined;
    const s = (this.#scan ??= { cursor: new Cursor(this.#chunks, this.#start), todo: [1], bulk: -1 });
    const c = s.cursor;
    for (;;) {
      if (s.bulk >= 0) {
        if (c.consumed + s.bulk > this.#available) return undefined;
        c.skip(s.bulk);
        s.bulk = -1;
      }
      while (s.todo.length > 0 && s.todo[s.todo.length - 1] === 0) s.todo.pop();
      if (s.todo.length === 0) {
        this.#scan = undefined;
        return c.consumed;
      }
      const head = c.line(this.#available);
      if (head === undefined) return undefined;
      this.#headers++;
      s.todo[s.todo.length - 1]!--;
      const kind = head[0];
      if (kind === '$' || kind === '*') {
        const n = countOf(head);
        if (kind === '$' && n >= 0) s.bulk = n + 2;
        else if (kind === '*' && n > 0) s.todo.push(n);
      }
    }
  }

  #consume(bytes: number): void {
    this.#available -= bytes;
    let left = this.#start + bytes;
    while (this.#chunks.length > 0 && left >= this.#chunks[0]!.byteLength) {
      left -= this.#chunks[0]!.byteLength;
      this.#chunks.shift();
    }
    this.#start = left;
  }
}

/** A read position over a list of chunks. */
class Cursor {
  #ci = 0;
  #off: number;
  consumed = 0;

  constructor(private readonly chunks: Buffer[], start: number) {
    this.#off = start;
  }

  /** The next line (without CRLF) as latin1 text, or undefined if no CRLF has arrived. */
  line(limit: number): string | undefined {
    let text = '';
    let ci = this.#ci;
    let off = this.#off;
    let read = 0;
    while (ci < this.chunks.length) {
      const c = this.chunks[ci]!;
      const nl = c.indexOf(0x0a, off);
      if (nl >= 0) {
        text += c.toString('latin1', off, nl);
        read += nl + 1 - off;
        if (this.consumed + read > limit) return undefined;
        this.#ci = ci;
        this.#off = nl + 1;
        this.consumed += read;
        return text.endsWith('\r') ? text.slice(0, -1) : text;
      }
      text += c.toString('latin1', off);
      read += c.byteLength - off;
      ci++;
      off = 0;
    }
    return undefined;
  }

  /** Moves past `n` bytes. */
  skip(n: number): void {
    this.consumed += n;
    while (n > 0) {
      const c = this.chunks[this.#ci]!;
      const take = Math.min(n, c.byteLength - this.#off);
      n -= take;
      this.#off += take;
      if (this.#off === c.byteLength) {
        this.#ci++;
        this.#off = 0;
      }
    }
  }

  /** Copies the next `n` bytes into a buffer of their own. */
  take(n: number): Buffer {
    const out = n >= OWN_BUFFER_BYTES ? Buffer.allocUnsafeSlow(n) : Buffer.allocUnsafe(n);
    // Declared, not guessed: this buffer holds this bulk string alone, so a tensor decoded in place
    // from it may move to an instance thread.
    if (n >= OWN_BUFFER_BYTES) markTransferable(out.buffer);
    let at = 0;
    while (at < n) {
      const c = this.chunks[this.#ci]!;
      const take = Math.min(n - at, c.byteLength - this.#off);
      c.copy(out, at, this.#off, this.#off + take);
      at += take;
      this.#off += take;
      if (this.#off === c.byteLength) {
        this.#ci++;
        this.#off = 0;
      }
    }
    this.consumed += n;
    return out;
  }
}

/** The count of a `$` or `*` header: a reply that is not RESP is an error, not a guess. */
function countOf(head: string): number {
  if (!/^[$*]-?\d{1,15}$/.test(head)) throw new RespError(`malformed reply from Redis: ${JSON.stringify(head.slice(0, 40))}`);
  return Number(head.slice(1));
}

/** Reads one value that `#measure` found complete. */
function readValue(c: Cursor): RespValue {
  const head = c.line(Number.MAX_SAFE_INTEGER)!;
  const rest = head.slice(1);
  switch (head[0]) {
    case '+': return rest;
    case '-': return new RespError(rest);
    case ':': return Number(rest);
    case '$': {
      const len = countOf(head);
      if (len < 0) return null;
      const out = c.take(len);
      c.skip(2);
      return out;
    }
    case '*': {
      const n = countOf(head);
      if (n < 0) return null;
      const out: RespValue[] = [];
      for (let i = 0; i < n; i++) out.push(readValue(c));
      return out;
    }
    default: throw new RespError(`malformed reply from Redis: ${JSON.stringify(head.slice(0, 40))}`);
  }
}

/** A reply of alternating field names and values (XINFO GROUPS / CONSUMERS rows) as an object. */
export function fieldsOf(row: readonly unknown[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < row.length; i += 2) out[String(row[i])] = row[i + 1];
  return out;
}
