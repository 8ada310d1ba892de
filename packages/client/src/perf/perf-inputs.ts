/**
 * @module The input tensors `triode perf` sends: shapes from the model's metadata (variable
 * dims from --shape, the batch dim from -b), data random, zero, or read from a JSON file in
 * perf_analyzer's `--input-data` format.
 * Triton: perf_analyzer docs/input_data.md
 */
import { readFileSync } from 'node:fs';
import { dataTypeByteSize, viewBytesAs, type DataType, type ModelMetadata } from '@triode/core';
import type { InferInput, InputData } from '../types.js';

/** How the input data is made. */
export type InputDataSource = 'random' | 'zero' | { file: string };

/** Builds the sets of inputs to cycle through (one set unless the file gives several). */
export function perfInputs(
  meta: ModelMetadata, maxBatchSize: number, batchSize: number, source: InputDataSource, shapes: Readonly<Record<string, number[]>>,
): InferInput[][] {
  const shapeOf = (name: string, dims: number[]): number[] => {
    const body = maxBatchSize > 0 ? dims.slice(1) : dims;
    const given = shapes[name];
    if (given) {
      if (given.length !== body.length) throw new Error(`--shape ${name}: expected ${body.length} dims (without the batch dim), got ${given.length}`);
      body.forEach((d, i) => {
        if (d !== -1 && d !== given[i]) throw new Error(`--shape ${name}: dim ${i} must be ${d}`);
      });
    } else if (body.includes(-1)) {
      throw new Error(`input '${name}' has variable dims [${dims.join(',')}]: give its shape with --shape ${name}:<dims>`);
    }
    const full = given ?? body;
    return maxBatchSize > 0 ? [batchSize, ...full] : full;
  };
  const withBatch = (body: number[]) => (maxBatchSize > 0 ? [batchSize, ...body] : body);
  if (typeof source === 'object') return fileInputs(meta, source.file, shapeOf, withBatch);
  return [meta.inputs.map((i) => {
    const shape = shapeOf(i.name, i.shape);
    return { name: i.name, datatype: i.datatype, shape, data: makeData(i.datatype, shape.reduce((a, d) => a * d, 1), source) };
  })];
}

function makeData(dt: DataType, n: number, source: 'random' | 'zero'): InputData {
  const rnd = source === 'random';
  const int = (hi: number) => (rnd ? Math.floor(Math.random() * hi) : 0);
  switch (dt) {
    case 'BYTES': return Array.from({ length: n }, () => String(int(100)));
    case 'BOOL': return Array.from({ length: n }, () => int(2) === 1);
    case 'FP32': return Float32Array.from({ length: n }, () => (rnd ? Math.random() : 0));
    case 'FP64': return Float64Array.from({ length: n }, () => (rnd ? Math.random() : 0));
    case 'FP16':
    case 'BF16': return new Uint16Array(n);
    case 'INT64': return BigInt64Array.from({ length: n }, () => BigInt(int(100)));
    case 'UINT64': return BigUint64Array.from({ length: n }, () => BigInt(int(100)));
    default: return Array.from({ length: n }, () => int(100));
  }
}

/** perf_analyzer's JSON: `{"data": [{"<input>": [values] | {"content": [...], "shape": [...]} | {"b64": "..."}}, ...]}`. */
function fileInputs(
  meta: ModelMetadata, file: string, shapeOf: (name: string, dims: number[]) => number[], withBatch: (body: number[]) => number[],
): InferInput[][] {
  const doc = JSON.parse(readFileSync(file, 'utf8')) as { data?: Record<string, unknown>[] };
  if (!Array.isArray(doc.data) || doc.data.length === 0) throw new Error(`${file}: expected {"data": [ {<input>: ...}, ... ]}`);
  return doc.data.map((entry, k) => meta.inputs.map((i) => {
    const v = entry[i.name];
    if (v === undefined) throw new Error(`${file}: data[${k}] has no '${i.name}'`);
    if (Array.isArray(v)) return { name: i.name, datatype: i.datatype, shape: shapeOf(i.name, i.shape), data: v.flat(Infinity as 1) as InputData };
    const o = v as { content?: unknown[]; shape?: number[]; b64?: string };
    // A shape in the file is the shape without the batch dim (as perf_analyzer reads it).
    const fixed = o.shape ? withBatch(o.shape) : shapeOf(i.name, i.shape);
    if (o.b64 !== undefined) {
      const bytes = new Uint8Array(Buffer.from(o.b64, 'base64'));
      if (i.datatype === 'BYTES') return { name: i.name, datatype: i.datatype, shape: fixed, data: [bytes] };
      // Raw little-endian elements: the client takes them as a typed array of the datatype.
      const size = dataTypeByteSize(i.datatype);
      if (bytes.byteLength % size !== 0) throw new Error(`${file}: data[${k}] '${i.name}': ${bytes.byteLength} bytes of b64 are not whole ${i.datatype} elements`);
      return { name: i.name, datatype: i.datatype, shape: fixed, data: viewBytesAs(i.datatype, bytes) };
    }
    return { name: i.name, datatype: i.datatype, shape: fixed, data: (o.content ?? []).flat(Infinity as 1) as InputData };
  }));
}
