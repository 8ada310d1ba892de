/**
 * @module Triton's response cache (`--cache-config local,size=<bytes>`, per model
 * `response_cache { enable: true }`): identical requests to a model version are answered from
 * memory. Entries are keyed by a hash of the model, version, every input (name, type, shape,
 * bytes), the outputs asked for, the request's custom parameters and its correlation id, flags
 * and timeout: what a model sees (Triton leaves parameters out, but Triode's models read them:
 * two tenants' requests must not share an answer); least
 * recently used entries go when the size, counted with a fixed cost per entry and per output, is
 * exceeded.
 * An entry holds a copy of its outputs in one buffer of its own, and every hit answers with a fresh
 * copy of it, which its caller owns (`owned: true`; its outputs view the one buffer): moving one (to
 * a thread, a BLS caller) never reaches the entry.
 * Triton: core/src/cache_manager.cc, local_cache (TRITONCACHE_*), docs/user_guide/response_cache.md
 */
import { createHash } from 'node:crypto';
import { TRITON_REQUEST_PARAMETERS, requestControls, type InferenceRequest, type InferenceResponse } from '../infer-request.js';
import { dataBytes } from '../tensor/data-type.js';
import type { Tensor } from '../tensor/tensor.js';
import { plainTypedArrayClass, type TypedArrayClass } from '../tensor/transferable.js';

/** Counters of the whole cache (server-wide metrics). */
export interface ResponseCacheStats {
  entries: number;
  bytes: number;
  capacity: number;
  hits: number;
  misses: number;
  evictions: number;
  /** Time spent in lookups (hits and misses) and in insertions, ns. */
  lookupNs: number;
  insertNs: number;
}


/**
 * What an entry costs beyond its tensors' bytes, and what each of its outputs adds: the Map slot,
 * the key, the entry and its buffer's typed array (with its ArrayBuffer object), and each output's
 * name, shape and record. Measured with --expose-gc, heap and external memory of a full cache (see
 * response-cache.test.ts): an entry with one 1-element output and a 44-character key held about
 * 970 bytes, and each further output about 170. Before, an entry was counted as its bytes and 512
 * while each output had a buffer and objects of its own: an entry of 16 one-element outputs held
 * 6 KB, and a cache of 20 MB held 120 MB (and the server's RSS grew by 450 MB).
 */
export const ENTRY_OVERHEAD_BYTES = 768;
export const TENSOR_OVERHEAD_BYTES = 160;

/** Offsets in an entry's buffer are multiples of 8, so every typed array (BigInt64Array too) can view it. */
const ALIGN = 8;
const aligned = (n: number): number => Math.ceil(n / ALIGN) * ALIGN;

/** Where one output lies in its entry's buffer. */
interface CachedTensor {
  readonly name: string;
  readonly datatype: Tensor['datatype'];
  readonly shape: number[];
  readonly array: TypedArrayClass;
  readonly offset: number;
  readonly byteLength: number;
}

interface Entry {
  /** The response less its id and outputs. */
  readonly head: Omit<InferenceResponse, 'id' | 'outputs'>;
  readonly tensors: CachedTensor[];
  /** Every output's bytes, in one buffer of the entry's own. */
  readonly data: Uint8Array;
  readonly bytes: number;
}

/**
 * What an entry for `response` is counted as, in bytes: its buffer (each output padded to 8 bytes),
 * its key, the outputs' names and shapes, its parameters, and the fixed costs above.
 */
export function entryBytes(keyLength: number, response: Pick<InferenceResponse, 'outputs' | 'parameters'>): number {
  let bytes = ENTRY_OVERHEAD_BYTES + keyLength;
  for (const t of response.outputs) bytes += aligned(t.data.byteLength) + TENSOR_OVERHEAD_BYTES + t.name.length + 8 * t.shape.length;
  for (const [k, v] of Object.entries(response.parameters ?? {})) bytes += 32 + k.length + (typeof v === 'string' ? v.length : 8);
  return bytes;
}

/** Input bytes hashed at a time by `ResponseCache.keyAsync` before the event loop is served. */
export const KEY_HASH_CHUNK_BYTES = 8 * 1024 * 1024;

/** What a request's key hashes, in order: strings, and each input's bytes. */
function* keyParts(req: InferenceRequest, model: string, version: number | string): Generator<string | Uint8Array> {
  function* field(tag: string, s: string): Generator<string> {
    yield `${tag}${Buffer.byteLength(s)}:`;
    yield s;
  }
  yield* field('m', model);
  yield* field('v', String(version));
  for (const t of [...req.inputs].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    yield* field('i', t.name);
    yield* field('t', t.datatype);
    yield* field('s', t.shape.join(','));
    const bytes = dataBytes(t.data);
    yield `d${bytes.byteLength}:`;
    yield bytes;
  }
  for (const o of req.outputs ?? []) {
    yield* field('o', o.name);
    yield* field('c', String(o.classCount ?? 0));
  }
  const params = req.parameters ? Object.keys(req.parameters).filter((k) => !TRITON_REQUEST_PARAMETERS.has(k)).sort() : [];
  for (const k of params) {
    const v = req.parameters![k]!;
    yield* field('p', k);
    yield* field(typeof v === 'bigint' ? 'number' : typeof v, String(v));
  }
  // What a backend reads of the parameters the core acts on (correlation id, flags, timeout), as
  // the model sees them: two requests that differ in them must not share an answer either.
  // Priority and binary_data_output reach no model, and stay out.
  const controls = requestControls(req.parameters);
  if (controls) {
    const id = controls.correlationId;
    if (id !== undefined) yield* field(typeof id === 'string' ? 'qs' : 'qn', String(id));
    if (controls.flags !== undefined) yield* field('f', String(controls.flags));
    if (controls.timeoutUs !== undefined) yield* field('u', String(controls.timeoutUs));
  }
}

/** An LRU cache of responses bounded by the bytes of their tensors. */
export class ResponseCache {
  readonly capacity: number;
  /** Insertion order is recency order (a hit moves the entry to the end). */
  readonly #entries = new Map<string, Entry>();
  #bytes = 0;
  #hits = 0;
  #misses = 0;
  #evictions = 0;
  #lookupNs = 0;
  #insertNs = 0;

  /** @param capacity largest total size of the cached tensors, in bytes */
  constructor(capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity <= 0) throw new RangeError('response cache size must be a positive integer (bytes)');
    this.capacity = capacity;
  }

  /**
   * The key of a request to `model` version `version` (a number, or a string naming one load of
   * it). Every client-chosen string goes in with its length in front, so no choice of names and
   * values can spell another request's key; an integer parameter keys the same whether it came
   * as a number or a 64-bit integer. Hashed in one go: see `keyAsync` for requests of any size.
   */
  static key(req: InferenceRequest, model: string, version: number | string): string {
    const h = createHash('sha256');
    for (const part of keyParts(req, model, version)) h.update(part);
    return h.digest('base64');
  }

  /** True when `keyAsync` hashes the request's inputs in slices (more than KEY_HASH_CHUNK_BYTES in all); else `key` makes the same key at once. */
  static hashedInSlices(req: InferenceRequest): boolean {
    let total = 0;
    for (const t of req.inputs) total += t.data.byteLength;
    return total > KEY_HASH_CHUNK_BYTES;
  }

  /**
   * The same key as `key`, for a request of any size: its inputs are hashed
   * {@link KEY_HASH_CHUNK_BYTES} at a time with the event loop served in between (hashed in one
   * go, a 2 GiB gRPC input held the event loop for 1.7 s).
   */
  static async keyAsync(req: InferenceRequest, model: string, version: number | string): Promise<string> {
    if (!ResponseCache.hashedInSlices(req)) return ResponseCache.key(req, model, version);
    const h = createHash('sha256');
    let hashed = 0;
    for (const part of keyParts(req, model, version)) {
      if (typeof part === 'string') {
        h.update(part);
        continue;
      }
      for (let at = 0; at < part.byteLength; at += KEY_HASH_CHUNK_BYTES) {
        const n = Math.min(KEY_HASH_CHUNK_BYTES, part.byteLength - at);
        h.update(part.subarray(at, at + n));
        hashed += n;
        if (hashed >= KEY_HASH_CHUNK_BYTES) {
          hashed = 0;
          await new Promise<void>((resolve) => setImmediate(resolve));
        }
      }
    }
    return h.digest('base64');
  }

  /** A copy of the cached response, or undefined. */
  lookup(key: string): InferenceResponse | undefined {
    const t0 = performance.now();
    const e = this.#entries.get(key);
    if (!e) {
      this.#misses++;
      this.#lookupNs += (performance.now() - t0) * 1e6;
      return undefined;
    }
    this.#hits++;
    this.#entries.delete(key);
    this.#entries.set(key, e);
    // One copy of the entry's buffer (never a view of it, nor `slice()` of a Node Buffer), viewed by every output.
    const buffer = new Uint8Array(e.data.byteLength);
    buffer.set(e.data);
    const outputs = e.tensors.map((t): Tensor => ({
      name: t.name,
      datatype: t.datatype,
      shape: [...t.shape],
      data: new t.array(buffer.buffer, t.offset, t.byteLength / t.array.BYTES_PER_ELEMENT),
      owned: true,
    }));
    const hit: InferenceResponse = { ...e.head, outputs };
    this.#lookupNs += (performance.now() - t0) * 1e6;
    return hit;
  }

  /** Stores a copy of a response (not when it alone is larger than the cache). */
  insert(key: string, response: InferenceResponse): void {
    const t0 = performance.now();
    try {
      this.#insert(key, response);
    } finally {
      this.#insertNs += (performance.now() - t0) * 1e6;
    }
  }

  #insert(key: string, response: InferenceResponse): void {
    const bytes = entryBytes(key.length, response);
    if (bytes > this.capacity || this.#entries.has(key)) return;
    const tensors: CachedTensor[] = [];
    let size = 0;
    for (const t of response.outputs) {
      tensors.push({ name: t.name, datatype: t.datatype, shape: [...t.shape], array: plainTypedArrayClass(t.data), offset: size, byteLength: t.data.byteLength });
      size += aligned(t.data.byteLength);
    }
    // `new Uint8Array(n)`, never through an ArrayBuffer: V8 keeps a small one (64 bytes or less)
    // inside its object, with no backing store, as long as nothing asks for its `buffer`.
    const data = new Uint8Array(size);
    response.outputs.forEach((t, i) => data.set(new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength), tensors[i]!.offset));
    // The id is the request's: each hit answers with its own.
    const { id: _id, outputs: _outputs, ...head } = response;
    this.#entries.set(key, { head, tensors, data, bytes });
    this.#bytes += bytes;
    for (const [k, e] of this.#entries) {
      if (this.#bytes <= this.capacity) break;
      this.#entries.delete(k);
      this.#bytes -= e.bytes;
      this.#evictions++;
    }
  }

  stats(): ResponseCacheStats {
    return { entries: this.#entries.size, bytes: this.#bytes, capacity: this.capacity, hits: this.#hits, misses: this.#misses, evictions: this.#evictions, lookupNs: this.#lookupNs, insertNs: this.#insertNs };
  }
}
