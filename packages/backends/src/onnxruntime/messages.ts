/**
 * @module The whole contract between the main thread and an onnxruntime instance thread.
 * Plain data only: tensors cross as typed arrays (owned ones moved, lent ones copied), errors as
 * `{ code, message }` (a thrown Error would lose its code on the way).
 */
import type { DataType, ModelConfig, TensorData, WireError } from '@triode/core';
import type { IoCheckConfig } from './model-io-check.js';

/** A tensor as it crosses the thread boundary. */
export interface WireTensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: TensorData;
  /** As on `Tensor`: set by the main thread, ignored by the instance thread. */
  owned?: boolean;
}

/** An execution provider of the instance's session (`deviceId`: the CUDA id, for cuda and tensorrt). */
export interface ExecutionProviderSetting {
  name: 'cpu' | 'webgpu' | 'cuda' | 'tensorrt';
  deviceId?: number;
}

/** A session's providers, in order. */
export type ExecuteProviderList = ExecutionProviderSetting[];

/** Creates the instance's session. */
export interface LoadTask {
  op: 'load';
  modelFile: string;
  sessionOptions: SessionSettings;
  /** The session's providers, in order (CPU last, for what the others cannot run). @default ['cpu'] */
  executionProviders?: ExecuteProviderList;
  /** The GPU in words (`GPU 0 (NVIDIA H100)`), for an instance on one: its errors are read as GPU failures. */
  gpu?: string;
  /** Set for a model that takes ragged batches: its batches are joined and split by it. @default regular batches */
  raggedBatch?: RaggedBatchConfig;
  /** The config's inputs and outputs, checked against the model's when the session is made (model-io-check.ts). @default not checked */
  ioCheck?: IoCheckConfig;
}

/**
 * The config fields a ragged batch is joined and split by (common/backend-input-collector.ts,
 * common/backend-output-responder.ts): a model with an `allow_ragged_batch` input, a `batch_input`
 * or a `batch_output` has them. Plain data, made once at load.
 */
export type RaggedBatchConfig = Pick<ModelConfig, 'input' | 'output' | 'batch_input' | 'batch_output' | 'max_batch_size'>;

/** Runs one batch of requests. */
export interface ExecuteTask {
  op: 'execute';
  requests: { inputs: WireTensor[]; batchSize: number }[];
  outputNames: string[];
  /** True when the model batches (first dim is the batch dim). */
  batching: boolean;
}

/** Releases the session. */
export interface UnloadTask {
  op: 'unload';
}

export type ThreadTask = LoadTask | ExecuteTask | UnloadTask;

/** Session settings derived from the model config (plain data, so they can cross threads). */
export interface SessionSettings {
  intraOpNumThreads: number;
  interOpNumThreads: number;
  executionMode: 'sequential' | 'parallel';
  graphOptimizationLevel: 'disabled' | 'basic' | 'extended' | 'all';
  enableCpuMemArena: boolean;
  enableMemPattern: boolean;
  /** ORT session config entries (`session.intra_op.allow_spinning`, ...). */
  configEntries: Record<string, string>;
  /**
   * When one run (with at least 1 MiB of input) grows the process's memory by more than this many
   * bytes (an outsized request grew the session's memory arena, which onnxruntime never gives
   * back), the session is made anew after it, so the memory returns. 0: never.
   */
  arenaResetBytes: number;
}

/** The answer to an ExecuteTask: the batch's responses, or the error that failed the whole batch. */
export type ExecuteReply = ExecuteResult | { error: WireError };

/** A batch's responses. */
export interface ExecuteResult {
  /** Per request: its outputs, or the error that fails only it. */
  responses: ({ outputs: WireTensor[] } | { error: WireError })[];
  /** ns */
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

/** The answer to a LoadTask or an UnloadTask. */
export interface LoadReply {
  ok: true;
}
