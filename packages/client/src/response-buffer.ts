/**
 * @module A response body copied into one buffer as it arrives (HTTP and the lean gRPC path).
 * Kept chunk by chunk, a body sent a byte at a time held an object per byte, and the client ran
 * out of heap far under its limit (reviews); sized up front by a Content-Length, a server that
 * claims 1 GiB and sends 10 bytes reserved 1 GiB a call (review).
 */

/** The first allocation; then the buffer doubles as bytes come. */
const FIRST_BYTES = 64 * 1024;

export class ResponseBuffer {
  #buf: Buffer;
  #length = 0;
  readonly #max: number;
  readonly #expected: number | undefined;

  /**
   * @param max the most bytes accepted
   * @param expected the announced size (Content-Length), if any: the buffer grows to it, not past
   *   it, while the bytes stay within it
   */
  constructor(max: number, expected?: number) {
    this.#max = max;
    this.#expected = expected !== undefined && Number.isSafeInteger(expected) && expected >= 0 ? expected : undefined;
    this.#buf = Buffer.allocUnsafeSlow(Math.min(max, this.#expected ?? FIRST_BYTES, FIRST_BYTES));
  }

  /** The bytes received so far. */
  get length(): number {
    return this.#length;
  }

  /**
   * Appends a chunk; false (nothing kept) when it would take the body past `max`.
   * @throws RangeError when a larger buffer cannot be allocated
   */
  push(chunk: Uint8Array): boolean {
    const size = this.#length + chunk.byteLength;
    if (size > this.#max) return false;
    if (size > this.#buf.byteLength) {
      let next = Math.max(size, 2 * this.#buf.byteLength);
      if (this.#expected !== undefined && size <= this.#expected) next = Math.min(next, this.#expected);
      const grown = Buffer.allocUnsafeSlow(Math.min(this.#max, next));
      this.#buf.copy(grown, 0, 0, this.#length);
      this.#buf = grown;
    }
    this.#buf.set(chunk, this.#length);
    this.#length = size;
    return true;
  }

  /** The big-endian uint32 at `offset` of the bytes received (which must hold it). */
  uint32At(offset: number): number {
    return this.#buf.readUInt32BE(offset);
  }

  /** The body: the bytes received, in a buffer whose spare room is zeroed (no stale memory behind a view). */
  bytes(): Buffer {
    if (this.#length < this.#buf.byteLength) this.#buf.fill(0, this.#length);
    return this.#buf.subarray(0, this.#length);
  }
}
