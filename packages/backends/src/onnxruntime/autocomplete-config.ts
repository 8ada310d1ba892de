/**
 * @module Auto-complete of a config from the ONNX model's own inputs and outputs.
 * Triton: onnxruntime_backend/src/onnxruntime.cc AutoCompleteConfig, AutoCompleteMaxBatch, AutoCompleteIO
 */
import { Worker } from 'node:worker_threads';
import { Errors, dataTypeToConfigType, echo, type ModelConfig, type ModelInput, type ModelOutput } from '@triode/core';
import { ortTypeToDataType } from './onnxruntime-utils.js';
import type { OnnxIo } from './model-io-check.js';
import { threadFile } from '../common/thread-file.js';

/** The metadata thread's file: beside this module in the build, the build's copy from the TypeScript source (tests). */
const THREAD_FILE = threadFile(import.meta.url, 'onnxruntime', 'autocomplete-thread.js');

/** A session's inputs or outputs, with a dim the model leaves open (or a rank it does not give) as -1 / []. */
function meta(list: readonly OnnxIo[]): { name: string; type: string; dims: number[] }[] {
  return list.map((m) => ({ name: m.name, type: m.type, dims: m.dims ?? [] }));
}

/**
 * The model's inputs and outputs, read in a one-off thread (autocomplete-thread.ts): building the
 * session on the main thread stalled every request and health check for as long as the model took
 * to parse. `signal` (the load given up) terminates the thread.
 */
function readIo(file: string, signal: AbortSignal | undefined): Promise<{ ins: OnnxIo[]; outs: OnnxIo[] }> {
  signal?.throwIfAborted();
  return new Promise((resolve, reject) => {
    const worker = new Worker(THREAD_FILE, { workerData: { file } });
    let settled = false;
    const settle = (f: () => void): void => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      f();
    };
    const onAbort = (): void => settle(() => {
      void worker.terminate();
      reject(signal?.reason);
    });
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.once('message', (m: { ins: OnnxIo[]; outs: OnnxIo[] } | { error: string }) => settle(() => ('error' in m ? reject(new Error(m.error)) : resolve(m))));
    worker.once('error', (err) => settle(() => reject(err)));
    worker.once('exit', (code) => settle(() => reject(new Error(`the thread reading the model's inputs and outputs ended (exit code ${code})`))));
  });
}

type IoMeta = ReturnType<typeof meta>[number];

/**
 * `default-max-batch-size` as Triton's ParseIntValue reads it (std::stoi: leading blanks, a sign
 * and the digits that follow; the rest ignored), 4 when not given, and never below 0
 * (AutoCompleteMaxBatch takes max(value, 0)). A value with no number refuses the load.
 * Triton: backend/src/backend_common.cc ParseIntValue; onnxruntime.cc TRITONBACKEND_Initialize
 */
export function defaultMaxBatchSize(backendConfig: Record<string, string>): number {
  const raw = backendConfig['default-max-batch-size'];
  if (raw === undefined) return 4;
  const m = /^\s*([+-]?\d+)/.exec(raw);
  const n = m ? Number(m[1]) : NaN;
  if (!Number.isSafeInteger(n) || n > 2 ** 31 - 1 || n < -(2 ** 31)) {
    throw Errors.invalidArg(`failed to convert '${echo(raw)}' to integral number`);
  }
  return Math.max(n, 0);
}

/**
 * One autocompleted input or output, as Triton's AutoCompleteIO writes it. A tensor whose type has
 * no Triton data type (INT4, UINT4; onnxruntime-node refuses BFLOAT16 and the others when the model
 * is read) refuses the load by name: Triton writes TYPE_INVALID there and fails later with
 * "must specify 'data_type'", which named neither the cause nor the type.
 * Triton: onnxruntime_backend/src/onnxruntime_utils.cc OnnxDataTypeToModelConfigDataType
 */
function completeIo(model: string, kind: 'input' | 'output', m: IoMeta, maxBatchSize: number): ModelInput & ModelOutput {
  const dt = ortTypeToDataType(m.type);
  if (!dt) {
    const type = m.type ? `ONNX type ${m.type.toUpperCase()}` : 'a value that is not a tensor';
    throw Errors.invalidArg(`unable to autofill model '${model}': ${kind} '${m.name}' of the model has ${type}, which the onnxruntime backend does not support`);
  }
  const io: ModelInput & ModelOutput = { name: m.name, data_type: dataTypeToConfigType(dt) };
  const dims = maxBatchSize > 0 ? m.dims.slice(1) : m.dims;
  if (dims.length > 0) {
    io.dims = dims;
  } else {
    io.dims = [1];
    // A batching model's tensor that is the batch dim alone: [1] per request, reshaped to [].
    // Without batching an empty reshape is invalid (a model scalar takes dims [1] as it is).
    if (maxBatchSize > 0) io.reshape = { shape: [] };
  }
  return io;
}

/**
 * Fills inputs, outputs, max_batch_size and `dynamic_batching` as Triton's onnxruntime backend
 * does: nothing when the config lists both inputs (or batch inputs) and outputs; otherwise
 * max_batch_size from the model when it is 0 or absent, `dynamic_batching {}` for a batching
 * model without a scheduler, and the side(s) the config leaves empty, listed in full from the
 * model (a side the config gives is kept as given). The session is opened in a thread of its
 * own (readIo) and released there at once (the instances open their own).
 */
export async function autoCompleteOnnxConfig(config: ModelConfig, file: string, backendConfig: Record<string, string>, signal?: AbortSignal): Promise<void> {
  const inputCount = (config.input?.length ?? 0) + (config.batch_input?.length ?? 0);
  const outputCount = config.output?.length ?? 0;
  if (inputCount > 0 && outputCount > 0) return;
  const defaultMbs = defaultMaxBatchSize(backendConfig);
  const io = await readIo(file, signal);
  const ins = meta(io.ins);
  const outs = meta(io.outs);
  const batchable = [...ins, ...outs].every((m) => m.dims.length > 0 && m.dims[0] === -1);
  let mbs = config.max_batch_size ?? 0;
  if (batchable) {
    if (mbs === 0) mbs = defaultMbs;
    config.max_batch_size = mbs;
    if (mbs > 1 && !config.sequence_batching && !config.dynamic_batching) config.dynamic_batching = {};
  } else if (mbs !== 0) {
    throw Errors.invalidArg(
      `autofill failed for model '${config.name ?? ''}': model does not support batching while non-zero max_batch_size is specified`,
    );
  }
  const model = config.name ?? '';
  if (inputCount === 0) config.input = ins.map((m) => completeIo(model, 'input', m, mbs));
  if (outputCount === 0) config.output = outs.map((m) => completeIo(model, 'output', m, mbs));
}
