/**
 * @module Model warmup: the `model_warmup` samples a model runs before it is declared READY.
 * Triton: core/src/backend_model_instance.cc (WarmUp, GenerateWarmupData)
 */
import { randomFillSync } from 'node:crypto';
import { join } from 'node:path';
import { Errors } from './errors.js';
import type { InferenceRequest } from './infer-request.js';
import type { ModelConfig, ModelWarmup } from './model-config/model-config.js';
import { readRepositoryFile, resolveInside } from './model-repository/repository-fs.js';
import { deserializeBytesTensor } from './tensor/bytes-tensor.js';
import { configTypeToDataType, dataTypeByteSize, elementCount, typedArrayView } from './tensor/data-type.js';
import type { Tensor } from './tensor/tensor.js';

/** A warmup sample's `input_data_file`, from the model's `warmup/` folder (a regular file, at most one input's limit). */
function readWarmupFile(modelPath: string, file: string): Buffer {
  return readRepositoryFile(resolveInside(join(modelPath, 'warmup'), file), `warmup file '${file}'`, MAX_WARMUP_INPUT_BYTES);
}

/** The most bytes one input of a warmup sample may hold (a config cannot make a load allocate without bound). */
export const MAX_WARMUP_INPUT_BYTES = 256 * 1024 * 1024;
/** The most bytes all the inputs of one warmup sample may hold together. */
export const MAX_WARMUP_SAMPLE_BYTES = 512 * 1024 * 1024;
/**
 * The most elements a BYTES input of a warmup sample may have: as many as a request body of the
 * default --http-max-input-size (64 MiB) can carry, 4 bytes each at least. Each element becomes a
 * string in the backend, far more than its 4 bytes: a byte limit alone let a config of 64M empty
 * strings take gigabytes.
 */
export const MAX_WARMUP_BYTES_ELEMENTS = 16 * 1024 * 1024;

/**
 * The requests of one warmup sample (each batch item as the sample's dims, batched when allowed),
 * made one at a time as they are run: `count` costs time (bounded by the load timeout), not memory.
 * @throws TriodeError INVALID_ARG for an input over `MAX_WARMUP_INPUT_BYTES` or with bad dims.
 */
export function* warmupRequests(sample: ModelWarmup, config: ModelConfig, modelPath: string): Generator<InferenceRequest> {
  const batching = (config.max_batch_size ?? 0) > 0;
  // As Triton (GenerateWarmupData): a sample of batch size 0, or none given, is skipped.
  if (!sample.batch_size) return;
  const batch = sample.batch_size;
  // Triton's first check (GenerateWarmupData), in its words. review: a -1 dim was reported as
  // "over the limit", and two of them made a one-element input.
  for (const [name, spec] of Object.entries(sample.inputs ?? {})) {
    if ((spec.dims ?? []).some((d) => d < 0)) throw Errors.invalidArg(`warmup setting expects all variable-size dimensions are specified for input '${name}'`);
  }
  // Each file is read once a sample, and the files of a sample together are bounded as its inputs
  // are: one file named by many inputs was read again (synchronously, on the event loop: no load
  // timeout or unload stops it) for each of them, whatever the input took of it.
  const files = new Map<string, Buffer>();
  let filesBytes = 0;
  const fileOf = (file: string): Buffer => {
    let data = files.get(file);
    if (!data) {
      data = readWarmupFile(modelPath, file);
      filesBytes += data.byteLength;
      if (filesBytes > MAX_WARMUP_SAMPLE_BYTES) {
        throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': its input files (up to '${file}') are over the limit of ${MAX_WARMUP_SAMPLE_BYTES} bytes for one sample`);
      }
      files.set(file, data);
    }
    return data;
  };
  // Sizes first, all of them: nothing is made for a sample whose inputs together are over the limit.
  let total = 0;
  for (const [name, spec] of Object.entries(sample.inputs ?? {})) {
    const dt = configTypeToDataType(spec.data_type ?? '');
    const n = elementCount(batching ? [batch, ...(spec.dims ?? [])] : spec.dims ?? []);
    let size = n * (dt === 'BYTES' || !dt ? 4 : dataTypeByteSize(dt));
    // A BYTES input from a file is that file once per batch item, whatever its element count
    // (review: 8 inputs naming one 1 MiB file, batch 250, made 2 GB past the sample's limit).
    if (dt === 'BYTES' && spec.input_data_file && Number.isSafeInteger(n) && n >= 0) {
      let file: Buffer;
      try {
        file = fileOf(spec.input_data_file);
      } catch {
        // Refused below, in its own words.
        continue;
      }
      size = Math.max(size, (batching ? batch : 1) * file.byteLength);
    }
    // An input that is bad on its own is refused below, in its own words.
    if (!Number.isSafeInteger(n) || n < 0 || size > MAX_WARMUP_INPUT_BYTES) continue;
    total += size;
    if (total > MAX_WARMUP_SAMPLE_BYTES) {
      throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': its inputs (up to '${name}') are over the limit of ${MAX_WARMUP_SAMPLE_BYTES} bytes for one sample`);
    }
  }
  const inputs: Tensor[] = Object.entries(sample.inputs ?? {}).map(([name, spec]) => {
    const dt = configTypeToDataType(spec.data_type ?? '');
    if (!dt) throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': input '${name}' has no valid data_type`);
    const dims = spec.dims ?? [];
    const shape = batching ? [batch, ...dims] : dims;
    const n = elementCount(shape);
    const size = n * (dt === 'BYTES' ? 1 : dataTypeByteSize(dt));
    if (!Number.isSafeInteger(n) || n < 0 || size > MAX_WARMUP_INPUT_BYTES) {
      throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': input '${name}' of shape [${shape.join(',')}] is over the limit of ${MAX_WARMUP_INPUT_BYTES} bytes`);
    }
    if (dt === 'BYTES') {
      if (n > MAX_WARMUP_BYTES_ELEMENTS) {
        throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': input '${name}' of shape [${shape.join(',')}] is over the limit of ${MAX_WARMUP_BYTES_ELEMENTS} BYTES elements`);
      }
      if (spec.input_data_file) {
        // As Triton: the file is the serialized tensor of one batch item (each element a 4-byte
        // little-endian length and its bytes), repeated for each item of the batch.
        const file = fileOf(spec.input_data_file);
        const per = elementCount(dims);
        const found = deserializeBytesTensor(file, undefined, `warmup file '${spec.input_data_file}'`).length;
        if (found !== per) throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': file '${spec.input_data_file}' holds ${found} BYTES elements, input '${name}' of dims [${dims.join(',')}] needs ${per}`);
        const items = batching ? batch : 1;
        if (items * file.byteLength > MAX_WARMUP_INPUT_BYTES) {
          throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': input '${name}' of shape [${shape.join(',')}] is over the limit of ${MAX_WARMUP_INPUT_BYTES} bytes`);
        }
        const data = Buffer.alloc(items * file.byteLength, file);
        return { name, datatype: dt, shape, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
      }
      // Zero data: every element empty (a zero length), made at once, not a JS array of n.
      const data = Buffer.alloc(n * 4);
      return { name, datatype: dt, shape, data: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
    }
    const bytes = n * dataTypeByteSize(dt);
    let raw: Uint8Array;
    if (spec.input_data_file) {
      const file = fileOf(spec.input_data_file);
      if (file.byteLength < bytes) throw Errors.invalidArg(`warmup sample '${sample.name ?? ''}': file '${spec.input_data_file}' holds ${file.byteLength} bytes, input '${name}' needs ${bytes}`);
      raw = new Uint8Array(file.subarray(0, bytes));
    } else {
      raw = new Uint8Array(bytes);
      if (spec.random_data) {
        // Native: a JS loop over 256 MiB blocked the event loop for seconds.
        randomFillSync(raw);
        // Random bits can make NaN/Inf floats: keep random floats in [0, 1), each from its own
        // random bits (read before the float overwrites them; FP64 reads the first word of its own 8 bytes).
        if (dt === 'FP32' || dt === 'FP64') {
          const v = typedArrayView(dt, raw.buffer, 0, n) as Float32Array;
          const words = new Uint32Array(raw.buffer, 0, bytes >>> 2);
          const step = dt === 'FP64' ? 2 : 1;
          for (let i = 0; i < n; i++) v[i] = words[i * step]! / 2 ** 32;
        }
      }
    }
    return { name, datatype: dt, shape, data: typedArrayView(dt, raw.buffer, 0, n) };
  });
  // The inputs hold what they need: the files are not kept while the sample runs.
  files.clear();
  const count = Math.max(1, sample.count ?? 1);
  for (let i = 0; i < count; i++) yield { modelName: config.name ?? '', inputs: inputs.map((t) => ({ ...t, data: t.data.slice() })) };
}
