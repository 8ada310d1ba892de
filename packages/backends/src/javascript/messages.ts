/** @module The contract between the main thread and a JavaScript model's instance thread. */
import type { MessagePort } from 'node:worker_threads';
import type { ModelConfig, ParameterValue } from '@triode/core';
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
}

/** Runs the model's static `autoCompleteConfig(config)`, if it has one. */
export interface JsAutoCompleteTask {
  op: 'autocomplete';
  file: string;
  config: ModelConfig;
}

/** Calls `execute(requests)`. */
export interface JsExecuteTask {
  op: 'execute';
  /** Set for decoupled models: responses come over the bridge port tagged with it. */
  token?: number;
  requests: { id?: string; inputs: Tensor[]; outputNames: string[]; parameters: Record<string, ParameterValue>; chain: string[] }[];
}

/** Calls `finalize()`. */
export interface JsUnloadTask {
  op: 'unload';
}

export type JsTask = JsLoadTask | JsAutoCompleteTask | JsExecuteTask | JsUnloadTask;

/** Per request: its outputs or its error message. */
export interface JsExecuteReply {
  responses: ({ outputs: Tensor[] } | { error: string })[];
  computeInferNs: number;
}
