/**
 * @module The classification extension: an output returned as its top-N "value:index[:label]" strings.
 * Triton: server/src/http_server.cc, core/src/infer_response.cc (TopkClassifications); values are
 * formatted as C++ std::to_string does (6 decimals for floats).
 */
import { Errors } from './errors.js';
import { serializeBytesTensor } from './tensor/bytes-tensor.js';
import type { Labels } from './model-repository/label-provider.js';
import type { Tensor } from './tensor/tensor.js';

function fmt(v: number | bigint, isFloat: boolean): string {
  if (!isFloat) return String(v);
  const n = Number(v);
  if (Number.isNaN(n)) return n.toString().toLowerCase() === 'nan' ? 'nan' : '-nan';
  if (!Number.isFinite(n)) return n > 0 ? 'inf' : '-inf';
  return n.toFixed(6);
}

/**
 * The most class strings one output of one response may hold (its top `count` of each batch item,
 * together). Triton has no such limit; here a class_count of 1e9 on a 60M-element output sorted
 * and formatted every element, held the event loop for 20 s and ran the heap out (review).
 */
export const MAX_CLASSIFICATIONS = 100_000;

/**
 * Turns `tensor` into a BYTES tensor of shape `[batch, k]` (or `[k]` when the model does not
 * batch) holding the top-`count` elements of each batch item, highest first.
 */
export function classify(tensor: Tensor, count: number, batching: boolean, labels?: Pick<Labels, 'at'>): Tensor {
  // Triton's TopkClassifications takes the integer types, FP32 and FP64 only, and its message
  // names no output (server src/classification.cc; server qa/L0_http asserts the text).
  if (tensor.datatype === 'BYTES' || tensor.datatype === 'FP16' || tensor.datatype === 'BF16' || tensor.datatype === 'BOOL') {
    throw Errors.invalidArg(`class result not available for output due to unsupported type '${tensor.datatype}'`);
  }
  const isFloat = tensor.datatype === 'FP32' || tensor.datatype === 'FP64';
  const data = tensor.data;
  const items = batching ? Math.max(tensor.shape[0] ?? 1, 0) : 1;
  const per = items === 0 ? 0 : data.length / items;
  const k = Math.min(count, per);
  if (k * items > MAX_CLASSIFICATIONS) {
    throw Errors.invalidArg(`classification of ${k} classes a batch item for output '${tensor.name}' gives ${k * items} results, over the limit of ${MAX_CLASSIFICATIONS}`);
  }
  const strings: string[] = [];
  for (let b = 0; b < items; b++) {
    const base = b * per;
    for (const j of topK(data, base, per, k)) {
      const label = labels?.at(j);
      strings.push(`${fmt(data[base + j]!, isFloat)}:${j}${label !== undefined ? `:${label}` : ''}`);
    }
  }
  return { name: tensor.name, datatype: 'BYTES', shape: batching ? [items, k] : [k], data: serializeBytesTensor(strings) };
}

/**
 * The indexes (within the item) of the `k` highest of `data[base .. base + n)`, highest first;
 * equal values in index order, NaN after every number. For a small k a bounded heap
 * (O(n log k)), not a sort of every index: one request asking the top 1 of a 16M-element output
 * used to hold the event loop for seconds.
 */
function topK(data: ArrayLike<number | bigint>, base: number, n: number, k: number): number[] {
  /** True when element x comes before element y in the answer. */
  const before = (x: number, y: number) => {
    const a = data[base + x]!;
    const c = data[base + y]!;
    // NaN compares false with everything: ordered as it was, it made the order inconsistent, and
    // the sort dropped a real maximum (review: [1, NaN, 3] top 2 gave 1 and NaN).
    const aNaN = a !== a;
    const cNaN = c !== c;
    if (aNaN !== cNaN) return cNaN;
    return a > c || (!(a < c) && x < y);
  };
  if (k <= 0) return [];
  if (k * 4 >= n) {
    const idx = Uint32Array.from({ length: n }, (_, i) => i);
    idx.sort((x, y) => (before(x, y) ? -1 : before(y, x) ? 1 : 0));
    return Array.from(idx.subarray(0, k));
  }
  // heap[0] is the kept element that comes last: the one a better element replaces.
  const heap: number[] = [];
  const siftDown = (i: number) => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let last = i;
      if (l < heap.length && before(heap[last]!, heap[l]!)) last = l;
      if (r < heap.length && before(heap[last]!, heap[r]!)) last = r;
      if (last === i) return;
      [heap[i], heap[last]] = [heap[last]!, heap[i]!];
      i = last;
    }
  };
  for (let i = 0; i < n; i++) {
    if (heap.length < k) {
      heap.push(i);
      for (let c = heap.length - 1; c > 0;) {
        const p = (c - 1) >> 1;
        if (!before(heap[p]!, heap[c]!)) break;
        [heap[p], heap[c]] = [heap[c]!, heap[p]!];
        c = p;
      }
    } else if (before(i, heap[0]!)) {
      heap[0] = i;
      siftDown(0);
    }
  }
  return heap.sort((x, y) => (before(x, y) ? -1 : 1));
}
