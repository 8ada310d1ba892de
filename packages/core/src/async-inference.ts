/**
 * @module The seam between the HTTP frontend's async routes (`infer_async`, `/v2/jobs/...`) and
 * whatever keeps the jobs (cluster mode: BullMQ in the cluster's Redis). Frontends see only this.
 */
import type { InferenceRequest, InferenceResponse } from './infer-request.js';

/** Which outputs a client asked for as binary (HTTP's `binary_data` / `binary_data_output`). */
export interface OutputEncoding {
  /** Output name -> send as binary (read only: requests without any share one empty map). */
  binary: ReadonlyMap<string, boolean>;
  /** Request-level `binary_data_output`. */
  defaultBinary: boolean;
}

/** A job as `GET /v2/jobs/{id}` reports it. */
export interface JobStatus {
  job_id: string;
  /** Left out, with a cluster secret, when it is not signed as the job's own (someone else wrote it to Redis). */
  model_name?: string;
  /** 'cancelled': by a DELETE while its request waited for a worker (a job cancelled before any gateway took it is removed). */
  state: 'waiting' | 'active' | 'completed' | 'failed' | 'delayed' | 'cancelled' | 'unknown';
  progress: number;
  created_ms: number;
  finished_ms?: number;
  error?: string;
}

/** Async inference: submit now, fetch the answer later. Every method may reject with a TriodeError. */
export interface AsyncInference {
  /** The largest request a job may carry, in bytes as encoded. */
  readonly maxRequestBytes: number;
  /** Queues a request (already validated against its model) and answers the job id. */
  submit(request: InferenceRequest, encoding: OutputEncoding): Promise<string>;
  status(id: string): Promise<JobStatus>;
  /** A finished job's response, with the encoding its client asked for. */
  result(id: string): Promise<{ response: InferenceResponse; encoding: OutputEncoding }>;
  /** Cancels a job not started yet ('cancelled'), or deletes a finished one and its result ('deleted'). */
  cancel(id: string): Promise<'cancelled' | 'deleted'>;
}
