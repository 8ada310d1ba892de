/**
 * @module Frames of the direct channel between a worker and a gateway over TCP: `[u32 BE length][bytes]`.
 * Worker -> gateway: the first frame on a connection is its auth frame (the gateway's token, or
 * with a cluster secret its MAC), at most MAX_AUTH_FRAME_BYTES long; then replies, and fetches of
 * a request's tensors (FETCH_MAGIC and the request key); with a secret each is `[MAC][bytes]`.
 * Gateway -> worker: `[kind][...]` frames: a confirmation (the running count of replies taken),
 * or a request's tensors (or word that they are gone: the request was answered or given up).
 */

/** The largest first (auth) frame a gateway accepts before it drops the connection. */
export const MAX_AUTH_FRAME_BYTES = 128;

/** Length-prefixes a message. */
export function frame(message: Uint8Array): Buffer {
  return framed([message]);
}

/** One frame of several pieces (a MAC and a reply): one buffer, each piece copied once. */
export function framed(pieces: readonly Uint8Array[]): Buffer {
  let n = 0;
  for (const p of pieces) n += p.byteLength;
  const out = Buffer.allocUnsafe(4 + n);
  out.writeUInt32BE(n, 0);
  let at = 4;
  for (const p of pieces) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/**
 * The bytes that go before a frame's payload: its length prefix (of `header` + `payloadBytes`) and
 * `header` (a MAC) if any. Written before the payload under one cork, the payload itself is not copied.
 */
export function frameHead(payloadBytes: number, header?: Uint8Array): Buffer {
  const h = header?.byteLength ?? 0;
  const out = Buffer.allocUnsafe(4 + h);
  out.writeUInt32BE(h + payloadBytes, 0);
  if (header) out.set(header, 4);
  return out;
}

/**
 * The bytes of unfinished frames that several readers (a gateway's direct connections) may hold
 * together. Each connection's own limit is a frame (1 GiB); without a shared one, 256 connections
 * that each sent most of a frame could hold 256 GiB (review: 640 MiB from one connection).
 */
export class FrameBudget {
  #used = 0;
  constructor(readonly limit: number) {}

  /** Bytes held now. */
  get used(): number {
    return this.#used;
  }

  /** Takes `n` bytes; false (and nothing taken) when that would pass the limit. */
  take(n: number): boolean {
    if (this.#used + n > this.limit) return false;
    this.#used += n;
    return true;
  }

  give(n: number): void {
    this.#used = Math.max(0, this.#used - n);
  }
}

/** A chunk under this many bytes is small: see MAX_SMALL_RUN. */
const SMALL_CHUNK_BYTES = 4096;
/**
 * Small chunks held in a row before they are joined into one buffer. Each buffer held costs ~100
 * bytes of bookkeeping besides its bytes, which the budget does not see: a peer that sent a frame
 * a byte at a time grew a gateway by 35 bytes of memory per byte it sent (review), 35 GiB for the
 * 1 GiB of unfinished frames it allows.
 */
const MAX_SMALL_RUN = 256;

/**
 * Reassembles frames from a byte stream. Chunks of a frame are joined once, when the frame is
 * complete (joining on every chunk would copy a frame of n chunks n times); only runs of small
 * chunks are joined before (MAX_SMALL_RUN), so a frame holds a buffer per 4 KiB at most, about.
 */
export class FrameReader {
  #pending: Buffer[] = [];
  /** How many of #pending's last buffers are small (SMALL_CHUNK_BYTES), in a row. */
  #smallRun = 0;
  #size = 0;
  /** The current frame's length with its prefix, once the prefix has arrived. */
  #need: number | undefined;
  readonly #maxFrame: number | (() => number);
  readonly #budget: FrameBudget | undefined;

  /**
   * @param maxFrame largest frame accepted (a larger length means a broken or hostile peer).
   * @param budget shared with other readers: bytes held until their frame is complete count against it.
   */
  constructor(maxFrame: number | (() => number) = 1 << 30, budget?: FrameBudget) {
    this.#maxFrame = maxFrame;
    this.#budget = budget;
  }

  /**
   * Adds received bytes; returns the frames now complete.
   * @throws Error on a length above `maxFrame`, or bytes the shared budget has no room for.
   */
  push(chunk: Buffer): Buffer[] {
    if (this.#budget && !this.#budget.take(chunk.byteLength)) {
      throw new Error(`unfinished reply frames over the limit of ${this.#budget.limit} bytes held at once`);
    }
    this.#hold(chunk);
    this.#size += chunk.byteLength;
    const out: Buffer[] = [];
    for (;;) {
      if (this.#need === undefined) {
        if (this.#size < 4) break;
        // The prefix split over chunks (rare): join what is here.
        if (this.#pending[0]!.byteLength < 4) {
          this.#pending = [Buffer.concat(this.#pending, this.#size)];
          this.#smallRun = this.#size < SMALL_CHUNK_BYTES ? 1 : 0;
        }
        const n = this.#pending[0]!.readUInt32BE(0);
        if (n > (typeof this.#maxFrame === 'number' ? this.#maxFrame : this.#maxFrame())) throw new Error(`frame of ${n} bytes is over the limit`);
        this.#need = 4 + n;
      }
      if (this.#size < this.#need) break;
      const buf = this.#pending.length === 1 ? this.#pending[0]! : Buffer.concat(this.#pending, this.#size);
      out.push(buf.subarray(4, this.#need));
      const rest = buf.subarray(this.#need);
      this.#pending = rest.byteLength ? [rest] : [];
      this.#smallRun = rest.byteLength > 0 && rest.byteLength < SMALL_CHUNK_BYTES ? 1 : 0;
      this.#budget?.give(this.#need);
      this.#size = rest.byteLength;
      this.#need = undefined;
    }
    return out;
  }

  /**
   * Adds a chunk to those held. A run of MAX_SMALL_RUN small ones is joined into one buffer, and so
   * is a shorter run that a large chunk ends: a small run joined is copied at most once more than
   * once, so a byte is copied a few times at most (a merged run still small stays the next run's first).
   */
  #hold(chunk: Buffer): void {
    const small = chunk.byteLength < SMALL_CHUNK_BYTES;
    if (!small && this.#smallRun > 1) this.#joinSmallRun();
    this.#pending.push(chunk);
    if (!small) {
      this.#smallRun = 0;
      return;
    }
    if (++this.#smallRun >= MAX_SMALL_RUN) this.#joinSmallRun();
  }

  /** Joins the run of small buffers at the end of #pending into one (of its own, not a slice of Node's shared pool). */
  #joinSmallRun(): void {
    const run = this.#pending.splice(this.#pending.length - this.#smallRun);
    let n = 0;
    for (const b of run) n += b.byteLength;
    const joined = Buffer.allocUnsafeSlow(n);
    let at = 0;
    for (const b of run) {
      joined.set(b, at);
      at += b.byteLength;
    }
    this.#pending.push(joined);
    this.#smallRun = n < SMALL_CHUNK_BYTES ? 1 : 0;
  }

  /** Bytes held now: of a frame not yet complete. */
  get heldBytes(): number {
    return this.#size;
  }

  /** Buffers held now (what tests check: a frame sent a byte at a time is not held as a buffer a byte). */
  get heldBuffers(): number {
    return this.#pending.length;
  }

  /** Drops what is held (the connection is gone) and gives it back to the budget. */
  release(): void {
    this.#budget?.give(this.#size);
    this.#smallRun = 0;
    this.#pending = [];
    this.#size = 0;
    this.#need = undefined;
  }
}

/**
 * The first bytes of a fetch (worker -> gateway): a reply starts with its header's length (u32 LE),
 * which is never 2^32-1, so the two cannot be taken for each other.
 */
const FETCH_MAGIC = 0xffffffff;
/** The longest request key a fetch may name (a gateway's are short decimal counters). */
export const MAX_FETCH_KEY_BYTES = 64;

/** A fetch of the tensors of request `requestKey` (sent framed, after a MAC with a secret). */
export function fetchRequest(requestKey: string): Buffer {
  const key = Buffer.from(requestKey);
  const out = Buffer.allocUnsafe(4 + key.byteLength);
  out.writeUInt32LE(FETCH_MAGIC, 0);
  out.set(key, 4);
  return out;
}

/** The request key of a fetch, or undefined when `body` is not one (a reply). */
export function fetchKeyOf(body: Uint8Array): string | undefined {
  if (body.byteLength < 4 || body[0] !== 0xff || body[1] !== 0xff || body[2] !== 0xff || body[3] !== 0xff) return undefined;
  if (body.byteLength - 4 > MAX_FETCH_KEY_BYTES) return '';
  return Buffer.from(body.buffer, body.byteOffset + 4, body.byteLength - 4).toString('latin1');
}

const KIND_CONFIRM = 0;
const KIND_TENSORS = 1;
/** The part count of a tensors frame that says the request is gone. */
const GONE = 0xffffffff;

/** A confirmation frame: the running count (mod 2^32) of replies the gateway has taken on this connection. */
export function confirmFrame(count: number): Buffer {
  const out = Buffer.allocUnsafe(9);
  out.writeUInt32BE(5, 0);
  out[4] = KIND_CONFIRM;
  out.writeUInt32BE(count >>> 0, 5);
  return out;
}

/**
 * The head of a tensors frame for `requestKey` (`parts` undefined: gone): the length prefix, the
 * kind, the key, the part count and each part's length. The parts follow it as they are, uncopied.
 */
export function tensorsFrameHead(requestKey: string, parts: readonly Uint8Array[] | undefined): Buffer {
  const key = Buffer.from(requestKey, 'latin1');
  const n = parts?.length ?? 0;
  const headLen = 1 + 4 + key.byteLength + 4 + 4 * n;
  let total = headLen;
  for (const p of parts ?? []) total += p.byteLength;
  const out = Buffer.allocUnsafe(4 + headLen);
  out.writeUInt32BE(total, 0);
  out[4] = KIND_TENSORS;
  out.writeUInt32BE(key.byteLength, 5);
  out.set(key, 9);
  let at = 9 + key.byteLength;
  out.writeUInt32BE(parts ? n : GONE, at);
  at += 4;
  for (const p of parts ?? []) {
    out.writeUInt32BE(p.byteLength, at);
    at += 4;
  }
  return out;
}

/** What a gateway sent a worker, read from one frame. */
export type GatewayMessage =
  | { kind: 'confirm'; count: number }
  /** `parts` undefined: the request is gone (answered, given up, or never this gateway's). */
  | { kind: 'tensors'; requestKey: string; parts: Buffer[] | undefined };

/** Reads one gateway -> worker frame (without its length prefix). @throws Error when malformed. */
export function readGatewayMessage(f: Buffer): GatewayMessage {
  const bad = (): never => { throw new Error('malformed frame from the gateway'); };
  if (f.byteLength < 5) bad();
  if (f[0] === KIND_CONFIRM) return f.byteLength === 5 ? { kind: 'confirm', count: f.readUInt32BE(1) } : bad();
  if (f[0] !== KIND_TENSORS) bad();
  const keyLen = f.readUInt32BE(1);
  if (keyLen > MAX_FETCH_KEY_BYTES || 9 + keyLen > f.byteLength) bad();
  const requestKey = f.toString('latin1', 5, 5 + keyLen);
  let at = 5 + keyLen;
  const n = f.readUInt32BE(at);
  at += 4;
  if (n === GONE) return at === f.byteLength ? { kind: 'tensors', requestKey, parts: undefined } : bad();
  if (n > 1 << 16 || at + 4 * n > f.byteLength) bad();
  const lens: number[] = [];
  for (let i = 0; i < n; i++, at += 4) lens.push(f.readUInt32BE(at));
  const parts: Buffer[] = [];
  for (const len of lens) {
    if (at + len > f.byteLength) bad();
    parts.push(f.subarray(at, at + len));
    at += len;
  }
  return at === f.byteLength ? { kind: 'tensors', requestKey, parts } : bad();
}
