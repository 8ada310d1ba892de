/**
 * @module Frames of the direct reply channel (worker -> gateway over TCP): `[u32 BE length][bytes]`.
 * The first frame a worker sends on a connection is its auth frame (the gateway's token, or with a
 * cluster secret its MAC), at most MAX_AUTH_FRAME_BYTES long; with a secret each reply frame is
 * `[MAC][reply]`.
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

/**
 * Reassembles frames from a byte stream. Chunks of a frame are joined once, when the frame is
 * complete (joining on every chunk would copy a frame of n chunks n times).
 */
export class FrameReader {
  #pending: Buffer[] = [];
  #size = 0;
  /** The current frame's length with its prefix, once the prefix has arrived. */
  #need: number | undefined;
  readonly #maxFrame: number;
  readonly #budget: FrameBudget | undefined;

  /**
   * @param maxFrame largest frame accepted (a larger length means a broken or hostile peer).
   * @param budget shared with other readers: bytes held until their frame is complete count against it.
   */
  constructor(maxFrame = 1 << 30, budget?: FrameBudget) {
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
    this.#pending.push(chunk);
    this.#size += chunk.byteLength;
    const out: Buffer[] = [];
    for (;;) {
      if (this.#need === undefined) {
        if (this.#size < 4) break;
        // The prefix split over chunks (rare): join what is here.
        if (this.#pending[0]!.byteLength < 4) this.#pending = [Buffer.concat(this.#pending, this.#size)];
        const n = this.#pending[0]!.readUInt32BE(0);
        if (n > this.#maxFrame) throw new Error(`reply frame of ${n} bytes is over the limit`);
        this.#need = 4 + n;
      }
      if (this.#size < this.#need) break;
      const buf = this.#pending.length === 1 ? this.#pending[0]! : Buffer.concat(this.#pending, this.#size);
      out.push(buf.subarray(4, this.#need));
      const rest = buf.subarray(this.#need);
      this.#pending = rest.byteLength ? [rest] : [];
      this.#budget?.give(this.#need);
      this.#size = rest.byteLength;
      this.#need = undefined;
    }
    return out;
  }

  /** Drops what is held (the connection is gone) and gives it back to the budget. */
  release(): void {
    this.#budget?.give(this.#size);
    this.#pending = [];
    this.#size = 0;
    this.#need = undefined;
  }
}
