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

/** Reassembles frames from a byte stream. */
export class FrameReader {
  #pending: Buffer[] = [];
  #size = 0;
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
    while (this.#size >= 4) {
      let buf = this.#pending.length === 1 ? this.#pending[0]! : Buffer.concat(this.#pending, this.#size);
      const n = buf.readUInt32BE(0);
      if (n > this.#maxFrame) throw new Error(`reply frame of ${n} bytes is over the limit`);
      if (this.#size < 4 + n) {
        this.#pending = [buf];
        break;
      }
      out.push(buf.subarray(4, 4 + n));
      buf = buf.subarray(4 + n);
      this.#pending = buf.byteLength ? [buf] : [];
      this.#size = buf.byteLength;
    }
    return out;
  }
}
