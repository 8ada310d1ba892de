/** @module The scheduler seam. Triton: core/src/scheduler.h */
import type { TriodeError } from '../errors.js';
import type { QueueItem } from './priority-queue.js';

/** What a scheduler needs to know of a queued request. */
export interface Schedulable extends QueueItem {
  /** Inferences the request holds: its first dim when the model batches, else 1. */
  batchSize: number;
  /** Requests batch together only when their keys (non-batch dims of every input) match. */
  shapeKey: string;
  /** When the request entered the queue (Clock.nowNs). */
  enqueueNs: number;
  /**
   * When its queue delay started, if before `enqueueNs` (a cluster request: when its gateway
   * queued it). `max_queue_delay_microseconds` counts from here; statistics from `enqueueNs`.
   */
  delayFromNs?: number;
  /** Request `priority` parameter (0: the model's default level). */
  priority?: number;
  /** Request `timeout` parameter in µs (0: none). */
  timeoutUs?: number;
}

/** Runs one batch on instance `instance`; resolves when the instance is done with it. */
export type BatchRunner<T> = (instance: number, batch: T[]) => Promise<void>;

/**
 * An instance's turn under the rate limiter (`--rate-limit=execution_count`): an idle instance with
 * work stages itself, takes a batch only once allocated, and releases when that batch is done.
 * Triton: RateLimiter::ModelInstanceContext (Stage, Allocate, Release)
 */
export interface InstanceGate {
  /** Asks for the instance's resources; `onAllocate` runs when they are granted (maybe at once, inside this call). */
  stage(onAllocate: () => void): void;
  /**
   * Gives the resources back. `executed`: a batch ran (it counts toward the instance's priority).
   * `next`: the instance has more work: it is staged again, with its new count, before anyone
   * else is allocated (Triton's OnRelease order).
   */
  release(executed: boolean, next?: () => void): void;
}

/** Answers a request the scheduler gives up on (timed out, stopped) with an error. */
export type RejectHandler<T> = (request: T, error: TriodeError) => void;

/** A model version's scheduler. */
export interface Scheduler<T extends Schedulable> {
  /**
   * Queues a request; the runner is called with it (alone or in a batch) once an instance is free.
   * @throws TriodeError when it cannot be queued (e.g. "Exceeds maximum queue size").
   */
  enqueue(request: T): void;
  /** Removes a request that has not started; false if it already runs or ran. */
  cancel(request: T): boolean;
  /** Requests queued, not yet executing (`nv_inference_pending_request_count`). */
  pendingCount(): number;
  /** Requests executing now. */
  inflightInferenceCount(): number;
  /** Resolves once nothing is queued or executing. */
  idle(): Promise<void>;
  /**
   * Triton's Scheduler::Stop, for a server shutdown: new requests are refused UNAVAILABLE
   * ("Server is stopping, scheduler for model has stopped accepting new inference requests"); the
   * sequence batcher refuses only those that start a sequence, so live sequences can finish.
   * Queued and running work, and the timers (batch delays, the sequence idle timeout), go on.
   */
  stopAccepting(): void;
  /**
   * Resolves once nothing is queued or executing and no sequence is live (what a server shutdown
   * waits for: Triton's InflightInferenceCount counts a sequence batcher's live sequences).
   */
  quiesced(): Promise<void>;
  /** Sequences live now (the sequence batcher). */
  activeSequenceCount?(): number;
  /** Stops timers; queued requests are left to the caller (see `rejectAll`). */
  stop(): Promise<void>;
  /**
   * Answers every queued request (not the running ones) with `error` through the reject handler:
   * for an unload or a stop that gave up waiting, so that no request is left unanswered.
   */
  rejectAll(error: TriodeError): void;
  /** Changes the number of instances that get work (schedulers that support it). */
  resize?(instanceCount: number): void;
  /** Resolves once an instance has no batch outstanding (with `resize`). */
  drained?(instance: number): Promise<void>;
}
