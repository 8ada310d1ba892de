/**
 * @module Auto-complete of a config from the ONNX model's own inputs and outputs.
 * Triton: onnxruntime_backend/src/onnxruntime.cc AutoCompleteConfig, AutoCompleteMaxBatch, AutoCompleteIO
 */
import { Worker } from 'node:worker_threads';
import { Errors, dataTypeToConfigType, type ModelConfig, type ModelInput, type ModelOutput } from '@triode/core';
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
 * Fills inputs, outputs, max_batch_size and `dynamic_batching` as Triton's onnxruntime backend
 * does. Skipped when the config lists both inputs and outputs. The session is opened in a
 * thread of its own (readIo) and released there at once (the instances open their own).
 */
export async function autoCompleteOnnxConfig(config: ModelConfig, file: string, backendConfig: Record<string, string>, signal?: AbortSignal): Promise<void> {
  const haveIn = (config.input ?? []).length > 0;
  const haveOut = (config.output ?? []).length > 0;
  if (haveIn && haveOut && config.max_batch_size !== undefined) return;
  const io = await readIo(file, signal);
  const ins = meta(io.ins);
  const outs = meta(io.outs);
  const all = [...ins, ...outs];
  const batchable = all.length > 0 && all.every((m) => m.dims.length > 0 && m.dims[0] === -1);
  const defaultMbs = Number(backendConfig['default-max-batch-size'] ?? 4);
  if (config.max_batch_size === undefined) {
    config.max_batch_size = batchable ? defaultMbs : 0;
    if (batchable && config.max_batch_size > 1 && !config.dynamic_batching && !config.sequence_batching && !config.ensemble_scheduling) {
      config.dynamic_batching = {};
    }
  } else if (config.max_batch_size > 0 && !batchable && (!haveIn || !haveOut)) {
    throw Errors.invalidArg(
      `autofill failed for model '${config.name ?? ''}': model does not support batching while non-zero max_batch_size is specified`,
    );
  }
  const strip = (config.max_batch_size ?? 0) > 0;
  const complete = <T extends ModelInput | ModelOutput>(have: T[] | undefined, found: IoMeta[]): T[] => {
    const out = have?.length ? have : found.map((m) => ({ name: m.name }) as T);
    for (const io of out) {
      const m = found.find((f) => f.name === io.name);
      if (!m) continue;
      if (!io.data_type) {
        const dt = ortTypeToDataType(m.type);
        if (dt) io.data_type = dataTypeToConfigType(dt);
      }
      if (!io.dims?.length && !io.reshape) {
        const dims = strip ? m.dims.slice(1) : m.dims;
        if (dims.length === 0) {
          io.dims = [1];
          io.reshape = { shape: [] };
        } else {
          io.dims = dims;
        }
      }
    }
    return out;
  };
  config.input = complete(config.input, ins);
  config.output = complete(config.output, outs);
}
