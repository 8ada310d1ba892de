/**
 * @module Tensor ownership: who may move (transfer) a tensor's buffer to another thread, which
 * detaches it on this side. It is always declared, never guessed from a buffer's size or offset:
 * - `owned: true`: the receiver owns the whole buffer under `data` (other tensors of the same
 *   request or response may view it too; they travel together). It may move it.
 * - `owned: false`: the tensor is lent. The receiver reads it, or copies it, and leaves the buffer
 *   as it is: someone else still needs it (a second consumer, a cache entry, the model's own array).
 * - unset: owned when the buffer's owner declared it with `markTransferable` (a request body that
 *   only that request's tensors view), lent otherwise.
 * Whoever hands a tensor on decides: an ensemble lends a tensor until its last consumer; a backend
 * gives away outputs it made for one response and lends views of a buffer several responses share.
 */
import type { TensorData } from './data-type.js';
import type { Tensor } from './tensor.js';

/** A base whose constructor returns the object it is given, so a subclass can stamp its fields on it. */
class Stamped {
  constructor(target: object) {
    return target;
  }
}

/**
 * The mark `markTransferable` leaves: a private field stamped on the buffer. Every request body
 * gets one, and a WeakSet of them cost ~0.6 µs an add (its weak table is rebuilt as buffers die); a
 * private field costs a property store, and stays invisible (inspection, equality, clones).
 */
class TransferableMark extends Stamped {
  #transferable = true;

  static mark(buffer: ArrayBufferLike): void {
    if (!TransferableMark.has(buffer)) new TransferableMark(buffer);
  }

  static has(buffer: ArrayBufferLike): boolean {
    return #transferable in buffer;
  }
}

/**
 * Declares a buffer owned by one request (or response): the tensors viewing it may move it to a
 * thread. Call it only on a buffer nothing else will read once the request is handed on.
 */
export function markTransferable(buffer: ArrayBufferLike): void {
  TransferableMark.mark(buffer);
}

/** True if `data`'s buffer was declared owned by one request with `markTransferable`. */
export function isTransferable(data: ArrayBufferView): boolean {
  return data.buffer instanceof ArrayBuffer && TransferableMark.has(data.buffer);
}

/** True if the receiver of `t` may move (detach) its buffer: see the module notes. */
export function isOwned(t: Pick<Tensor, 'data' | 'owned'>): boolean {
  if (!(t.data.buffer instanceof ArrayBuffer)) return false;
  return t.owned ?? TransferableMark.has(t.data.buffer);
}

/** The tensor, lent: its receiver must leave the buffer as it is. */
export function lend(t: Tensor): Tensor {
  return { ...t, owned: false };
}

/** The tensor, given away: its receiver owns its buffer. */
export function give(t: Tensor): Tensor {
  return { ...t, owned: true };
}

/** The buffers of the owned tensors among `tensors`, each once: what a thread message may move. */
export function transferList(tensors: Iterable<Pick<Tensor, 'data' | 'owned'>>): ArrayBuffer[] {
  const set = new Set<ArrayBuffer>();
  for (const t of tensors) if (isOwned(t)) set.add(t.data.buffer as ArrayBuffer);
  return [...set];
}

/**
 * Sets `owned` on freshly received tensors, one group per request or response: a tensor is owned
 * when no tensor of another group views its buffer (one batch output buffer that several responses
 * view is lent to each of them). Mutates the tensors; returns the groups.
 */
export function claimOwnership<T extends Pick<Tensor, 'data' | 'owned'>>(groups: T[][]): T[][] {
  if (groups.length === 1) {
    // One response (a lone request): no other response can share its buffers.
    for (const t of groups[0]!) t.owned = t.data.buffer instanceof ArrayBuffer;
    return groups;
  }
  const group = new Map<ArrayBufferLike, number>();
  groups.forEach((g, i) => {
    for (const t of g) {
      const b = t.data.buffer;
      const seen = group.get(b);
      group.set(b, seen === undefined || seen === i ? i : -1);
    }
  });
  for (const g of groups) for (const t of g) t.owned = t.data.buffer instanceof ArrayBuffer && group.get(t.data.buffer) !== -1;
  return groups;
}

/** A copy of `data` in a buffer of its own, as a plain typed array (`slice()` of a Node Buffer is a view). */
export function copyTensorData<D extends TensorData>(data: D): D {
  const bytes = new Uint8Array(data.byteLength);
  bytes.set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  return new (plainTypedArrayClass(data))(bytes.buffer, 0, data.length);
}

const TYPED_ARRAY_PROTO = Object.getPrototypeOf(Uint8Array.prototype) as object;

/** A typed-array class, as `plainTypedArrayClass` gives it. */
export type TypedArrayClass<D extends TensorData = TensorData> = (new (b: ArrayBuffer, offset: number, length: number) => D) & { readonly BYTES_PER_ELEMENT: number };

/** The plain typed-array class of `data` (Uint8Array for a Node Buffer). */
export function plainTypedArrayClass<D extends TensorData>(data: D): TypedArrayClass<D> {
  let proto = Object.getPrototypeOf(data) as object;
  while (Object.getPrototypeOf(proto) !== TYPED_ARRAY_PROTO) proto = Object.getPrototypeOf(proto) as object;
  return (proto as { constructor: TypedArrayClass<D> }).constructor;
}

/** Buffers smaller than this are left to the garbage collector (see `releaseOwnedBuffers`). */
const RELEASE_MIN_BYTES = 1024 * 1024;

/**
 * Frees at once the large buffers of tensors that will not be used again (a response refused for
 * its size): V8 frees an unreferenced ArrayBuffer only at its next collection, which an idle server
 * may not run for a long time, so a 126 MB output stayed resident after its 400. A buffer is
 * released only when nothing else can be looking at it: the tensor owns it (`owned`), spans all of
 * it, it is an ArrayBuffer (not shared) of at least 1 MiB. It is detached by transferring it to a
 * channel that is closed at once, which drops the memory.
 * @returns the bytes released
 */
export function releaseOwnedBuffers(tensors: Iterable<Pick<Tensor, 'data' | 'owned'>>): number {
  const buffers = new Set<ArrayBuffer>();
  for (const t of tensors) {
    const b = t.data.buffer;
    if (t.owned === true && b instanceof ArrayBuffer && t.data.byteOffset === 0 && t.data.byteLength === b.byteLength && b.byteLength >= RELEASE_MIN_BYTES) buffers.add(b);
  }
  if (buffers.size === 0) return 0;
  let bytes = 0;
  for (const b of buffers) bytes += b.byteLength;
  const { port1, port2 } = new MessageChannel();
  port1.postMessage(null, [...buffers]);
  port1.close();
  port2.close();
  return bytes;
}
