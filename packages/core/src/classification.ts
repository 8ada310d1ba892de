/**
 * @module The classification extension: an output returned as its top-N "value:index[:label]" strings.
 * Triton: server/src/http_server.cc, core/src/infer_response.cc (TopkClassifications); values are
 * formatted as C++ std::to_string does (6 decimals for floats).
 */
import { Errors } from './errors.js';
import { serializeBytesTensor } from './tensor/bytes-tensor.js';
import type { Tensor } from './tensor/tensor.js';

function fmt(v: number | bigint, isFloat: boolean): string {
  if (!isFloat) return String(v);
  const n = Number(v);
  if (Number.isNaN(n)) return n.toString().toLowerCase() === 'nan' ? 'nan' : '-nan';
  if (!Number.isFinite(n)) return n > 0 ? 'inf' : '-inf';
  return n.toFixed(6);
}

/**
 * Turns `tensor` into a BYTES tensor of shape `[batch, k]` (or `[k]` when the model does not
 * batch) holding the top-`count` elements of each batch item, highest first.
 */
export function classify(tensor: Tensor, count: number, batching: boolean, labels?: readonly string[]): Tensor {
  if (tensor.datatype === 'BYTES' || tensor.datatype === 'FP16' || tensor.datatype === 'BF16') {
    throw Errors.invalidArg(`class result not available for output '${tensor.name}' due to unsupported type '${tensor.datatype}'`);
  }
  const isFloat = tensor.datatype === 'FP32' || tensor.datatype === 'FP64';
  const data = tensor.data;
  const items = batching ? Math.max(tensor.shape[0] ?? 1, 0) : 1;
  const per = items === 0 ? 0 : data.length / items;
  const k = Math.min(count, per);
  const strings: string[] = [];
  for (let b = 0; b < items; b++) {
    const idx = Array.from({ length: per }, (_, i) => i);
    const base = b * per;
    idx.sort((x, y) => {
      const a = data[base + x]!;
      const c = data[base + y]!;
      return a < c ? 1 : a > c ? -1 : x - y;
    });
    for (let i = 0; i < k; i++) {
      const j = idx[i]!;
      const label = labels?.[j];
      strings.push(`${fmt(data[base + j]!, isFloat)}:${j}${label !== undefined ? `:${label}` : ''}`);
    }
  }
  return { name: tensor.name, datatype: 'BYTES', shape: batching ? [items, k] : [k], data: serializeBytesTensor(strings) };
}
