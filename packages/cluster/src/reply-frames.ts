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
 * Reassembles frames from a byte stream. Chunks of a frame are joined once, when the frame is
 * complete (joining on every chunk would copy a frame of n chunks n times).
 */
export class FrameReader {
  #pending: Buffer[] = [];
  #size = 0;
  /** The current frame's length with its prefix, once the prefix has arrived. */
  #need: number | undefined;
  readonly #maxFrame: number;

  /** @param maxFrame largest frame accepted (a larger length means a broken or hostile peer). */
  constructor(maxFrame = 1 << 30) {
    this.#maxFrame = maxFrame;
  }

  /**
   * Adds received bytes; returns the frames now complete.
   * @throws Error on a length above `maxFrame`.
   */
  push(chunk: Buffer): Buffer[] {
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
      this.#size = rest.byteLength;
      this.#need = undefined;
    }
    return out;
  }
}
