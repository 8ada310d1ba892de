/**
 * @module What every loaded model version is to the server, the model repository manager and
 * ensembles, whatever runs it: a backend (`ModelVersion`, backend-model.ts) or other models
 * (`EnsembleModel`). Schedulers see a model only through their runner and `Schedulable` requests;
 * backends through `ModelContext` (backend-api.ts).
 * Triton: core/src/model.h (Model)
 */
import type { Labels } from './model-repository/label-provider.js';
import type { InferenceRequest, InferenceResponse, ResponseHandler } from './infer-request.js';
import type { ModelConfig } from './model-config/model-config.js';
import type { InferStats } from './stats/infer-stats.js';

/** A loaded model version. Every method that runs a request rejects with a TriodeError. */
export interface Model {
  readonly name: string;
  readonly version: number;
  /** The config it was loaded with (normalized and validated). */
  readonly config: ModelConfig;
  /** Class labels per output name (`label_filename`), for classification outputs. */
  readonly labels: ReadonlyMap<string, Labels>;
  /** Its statistics (the statistics extension and the metrics read them). */
  readonly stats: InferStats;
  /** Runs one request to its (single) response. */
  infer(req: InferenceRequest): Promise<InferenceResponse>;
  /**
   * Runs one request and calls `onResponse` for each response: one for a regular model, 0..N for
   * a decoupled one. Resolves after the last.
   */
  inferStream(req: InferenceRequest, onResponse: ResponseHandler): Promise<void>;
  /** Requests waiting to run (`nv_inference_pending_request_count`). */
  pendingCount(): number;
  /** Requests running now. */
  inflightCount(): number;
  /** Resolves once nothing is waiting or running. */
  idle(): Promise<void>;
  /**
   * A server shutdown began (Triton's StopAllModels): its scheduler refuses new requests, except
   * those that continue a live sequence; what it holds runs on.
   */
  stopAccepting(): void;
  /** Resolves once nothing is waiting or running and no sequence of it is live. */
  quiesced(): Promise<void>;
  /** Sequences live now (holding a slot or waiting for one); absent: none. */
  activeSequenceCount?(): number;
  /**
   * Stops taking requests, lets those it holds finish (at most `timeoutMs`, if given) and frees
   * what it holds (at most `releaseMs`). Resolves false when something did not finish in time.
   */
  unload(options?: { timeoutMs?: number; releaseMs?: number }): Promise<boolean>;
}
