/** @module The contract between the main thread and a JavaScript model's instance thread. */
import type { MessagePort } from 'node:worker_threads';
import type { ModelConfig, ParameterValue, WireError } from '@triode/core';
import type { Tensor } from './model-api.js';

/** Imports the model file and calls `initialize`. */
export interface JsLoadTask {
  op: 'load';
  file: string;
  config: ModelConfig;
  name: string;
  version: number;
  repository: string;
  instanceName: string;
  instanceKind: 'CPU' | 'GPU' | 'MODEL';
  /** The BLS and logging channel to the main thread. */
  port: MessagePort;
  /** A SharedArrayBuffer's Int32Array of 2 x FLOW_SLOTS: per open decoupled request, responses posted and not yet taken, then their KiB (model-api.ts `flow`). */
  flow: Int32Array;
  /** How long a decoupled sender waits on a client that takes none of its responses (model-api.ts `flow`). */
  clientStallMs: number;
}

/** Decoupled requests open at once on one instance thread whose responses wait for their client. */
export const FLOW_SLOTS = 1024;

/** Runs the model's static `autoCompleteConfig(config)`, if it has one. */
export interface JsAutoCompleteTask {
  op: 'autocomplete';
  file: string;
  config: ModelConfig;
}

/** Calls `execute(requests)`, or `executeBatch(batch)` when the model defines it (not decoupled). */
export interface JsExecuteTask {
  op: 'execute';
  /** Set for decoupled models: responses come over the bridge port tagged with it. */
  token?: number;
  /**
   * `batchSize`: the first dim when the model batches, else 0 (ExecuteRequest.batchSize);
   * `correlationId`, `flags`, `timeoutUs`: ExecuteRequest's, only when set.
   */
  requests: JsExecuteRequest[];
}

/** One request of a JsExecuteTask. */
export interface JsExecuteRequest {
  id?: string;
  inputs: Tensor[];
  outputNames: string[];
  parameters: Record<string, ParameterValue>;
  chain: string[];
  batchSize: number;
  correlationId?: bigint | string;
  flags?: number;
  timeoutUs?: number;
}

/** Calls `finalize()`. */
export interface JsUnloadTask {
  op: 'unload';
}

export type JsTask = JsLoadTask | JsAutoCompleteTask | JsExecuteTask | JsUnloadTask;

/**
 * The answer to a JsExecuteTask: per request, its outputs or the error that fails only it; or the
 * error that failed the whole batch. Errors cross as `{ code, message }` (a thrown Error would
 * arrive without its code).
 */
export type JsExecuteReply = { responses: ({ outputs: Tensor[] } | { error: WireError })[]; computeInferNs: number } | { error: WireError };
