/**
 * @module Which tensor buffers may be moved (transferred) to an instance thread instead of copied.
 * Moving detaches the buffer on this side, so only buffers nothing else looks at may move: one a
 * tensor covers entirely, or one its owner marked (a request body that only the request's tensors
 * view). A view into a shared buffer (a Node Buffer pool slab, a batch's output buffer whose other
 * parts belong to other responses) is copied.
 */

const marked = new WeakSet<ArrayBufferLike>();

/** Marks a buffer as owned by one request: its tensors' views may move it to a thread. */
export function markTransferable(buffer: ArrayBufferLike): void {
  marked.add(buffer);
}

/** True if moving `data`'s buffer cannot take memory from anyone else. */
export function isTransferable(data: ArrayBufferView): boolean {
  const b = data.buffer;
  if (!(b instanceof ArrayBuffer)) return false;
  return data.byteOffset === 0 && data.byteLength === b.byteLength ? true : marked.has(b);
}
