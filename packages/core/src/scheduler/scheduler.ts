/** @module The scheduler seam. Triton: core/src/scheduler.h */

/** What a scheduler needs to know of a queued request. */
export interface Schedulable {
  /** Inferences the request holds: its first dim when the model batches, else 1. */
  batchSize: number;
  /** Requests batch together only when their keys (non-batch dims of every input) match. */
  shapeKey: string;
  /** When the request entered the queue (Clock.nowNs). */
  enqueueNs: number;
}

/** Runs one batch on instance `instance`; resolves when the instance is free again. */
export type BatchRunner<T> = (instance: number, batch: T[]) => Promise<void>;

/** A model version's scheduler. */
export interface Scheduler<T extends Schedulable> {
  /** Queues a request; the runner is called with it (alone or in a batch) once an instance is free. */
  enqueue(request: T): void;
  /** Requests queued, not yet executing (`nv_inference_pending_request_count`). */
  pendingCount(): number;
  /** Requests executing now. */
  inflightInferenceCount(): number;
  /** Resolves once nothing is queued or executing. */
  idle(): Promise<void>;
  /** Stops timers; queued requests are left to the caller. */
  stop(): Promise<void>;
}
