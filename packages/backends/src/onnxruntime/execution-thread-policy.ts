/**
 * @module Where an onnxruntime instance runs a batch: on its own thread, or on the main thread when
 * its runs take less time than handing them to the thread costs. Triode's own (Triton runs every
 * instance on a thread of its own); the `execution_thread` model parameter.
 *
 * Measured (bench/handoff.mjs, `simple`, 2 vCPU): a piscina round trip to an instance thread costs
 * the main thread 41-52 µs of CPU and a request 85-107 µs of latency; running the same batch on the
 * main thread costs it 21-27 µs (12 µs of it inside onnxruntime). Under HTTP load the same batch
 * measures 40-120 µs on either thread (the threads and the load generator share 2 cores).
 * Only a lone request on an idle instance runs on the main thread: that is where the hand-off's
 * latency is the whole cost. Under load the dynamic batcher spreads the hand-off over a batch and
 * the instance threads use the other cores, so batches, and requests that queue behind one, go to
 * the thread. The default threshold, 100 µs of compute, is the hand-off's latency.
 */
import { Errors, type ModelConfig } from '@triode/core';

/** The `execution_thread` parameter: `auto` (the default), `main` or `instance`. */
export type ExecutionThread = 'auto' | 'main' | 'instance';

/** Where one batch runs. */
export type ExecutionPath = 'main' | 'thread';

/** Default of `execution_thread_threshold_us`: the hand-off's latency cost (see above). */
export const DEFAULT_EXECUTION_THREAD_THRESHOLD_US = 100;

/** Batches with at least this much input always run on the thread (1 MiB: see ARENA_CHECK_MIN_INPUT_BYTES). */
export const MAX_MAIN_THREAD_INPUT_BYTES = 1024 * 1024;

/** The execution-thread parameters of a model config. */
export interface ExecutionThreadSettings {
  mode: ExecutionThread;
  /** Compute time of a batch (input + infer + output) under which `auto` runs on the main thread, ns. */
  thresholdNs: number;
}

/**
 * Reads `execution_thread` (`auto` | `main` | `instance`, default `auto`) and
 * `execution_thread_threshold_us` (default 50).
 * @throws TriodeError INVALID_ARG for another value
 */
export function executionThreadSettings(config: ModelConfig): ExecutionThreadSettings {
  const mode = config.parameters?.['execution_thread']?.string_value || 'auto';
  if (mode !== 'auto' && mode !== 'main' && mode !== 'instance') {
    throw Errors.invalidArg(`parameter 'execution_thread' of model '${config.name ?? ''}' must be 'auto', 'main' or 'instance', got '${mode}'`);
  }
  const t = config.parameters?.['execution_thread_threshold_us']?.string_value;
  const us = t === undefined || t === '' ? DEFAULT_EXECUTION_THREAD_THRESHOLD_US : Number(t);
  if (!Number.isFinite(us) || us < 0) {
    throw Errors.invalidArg(`parameter 'execution_thread_threshold_us' of model '${config.name ?? ''}' must be a non-negative number, got '${t}'`);
  }
  return { mode, thresholdNs: us * 1000 };
}

/** Options of an ExecutionThreadPolicy. */
export interface ExecutionThreadPolicyOptions {
  /** See ExecutionThreadSettings.thresholdNs. @default 100 µs */
  thresholdNs?: number;
  /** Batches measured on the thread before `auto` first moves to the main thread. @default 32 */
  warmup?: number;
  /** Batches an instance stays on its thread after leaving the main thread, doubled each time it leaves (up to 64 times this). @default 64 */
  backoff?: number;
  /** The estimate moves the instance back to its thread once over this many times the threshold. @default 2 */
  leaveFactor?: number;
  /** Two main-thread batches in a row that each take this many times the threshold move the instance back at once. @default 20 */
  guardFactor?: number;
  /** See MAX_MAIN_THREAD_INPUT_BYTES. @default 1 MiB */
  maxMainInputBytes?: number;
}

/** A move from one path to the other, for the log. */
export interface PathChange {
  to: ExecutionPath;
  /** Moving estimate of a batch's compute time when it moved, ns. */
  estimateNs: number;
  /** The bound it crossed, ns. */
  boundNs: number;
  /** The batch that moved it, ns. */
  lastNs: number;
}

/** The batch to place, and what the instance holds right now. */
export interface InstanceLoad {
  /** Batches handed to the thread and not finished. */
  threadBusy: number;
  /** Batches running or waiting on the main thread. */
  mainBusy: number;
  /** Requests in the batch. */
  requests: number;
  /** Bytes of input of the batch. */
  inputBytes: number;
}

const EWMA_WEIGHT = 1 / 8;

/**
 * Above this share of recent batches that met another (an EWMA, weight 1/16: two in the last 16
 * or so), lone requests go to the thread too: requests are arriving concurrently, the main thread
 * is busy with their I/O, and the instance threads add cores. Measured (bench/inthread-http.mjs):
 * running lone requests on the main thread under 16-64 connections cost JSON 20-30% of its rate.
 */
const MAX_CONTENTION = 0.125;

/**
 * Keeps a moving estimate of an instance's compute time for a one-request batch, from what each
 * such batch measured on either path (an EWMA, weight 1/8, of samples clipped at twice the
 * estimate: a GC pause or a preemption moves it by 12.5% at most, a model that really slows down
 * doubles it in 6 batches), and picks the path of the next batch.
 *
 * `auto`: the thread first; the main thread once `warmup` batches put the estimate at or under the
 * threshold; the thread again once the estimate goes over `leaveFactor` times the threshold (a
 * margin against flapping on noise) or two main-thread batches in a row take `guardFactor` times
 * it, for `backoff` batches (doubling each time) before it may come back. Even while it prefers
 * the main thread, a batch runs there only when it is one request, its input is under
 * `maxMainInputBytes`, the instance holds no other batch (nothing waits behind it, no batch is
 * forming) and few recent batches met another (see MAX_CONTENTION): otherwise it goes to the
 * thread, after the instance's main-thread batch if there is one. An instance's batches therefore never overlap, on one path or across both, so the instance
 * count still bounds concurrency. Time is not read here: callers pass what they measured.
 */
export class ExecutionThreadPolicy {
  readonly mode: ExecutionThread;
  readonly #threshold: number;
  readonly #leave: number;
  readonly #guard: number;
  readonly #maxBackoff: number;
  readonly #maxInput: number;
  #preferred: ExecutionPath;
  #estimate = 0;
  #samples = 0;
  /** Batches recorded since the last move. */
  #since = 0;
  /** Batches to record before moving to the main thread. */
  #wait: number;
  #backoff: number;
  /** Main-thread batches in a row over the guard. */
  #overGuard = 0;
  /** Recent share of batches that met another (see MAX_CONTENTION). */
  #contention = 0;

  constructor(mode: ExecutionThread, options: ExecutionThreadPolicyOptions = {}) {
    this.mode = mode;
    this.#threshold = options.thresholdNs ?? DEFAULT_EXECUTION_THREAD_THRESHOLD_US * 1000;
    this.#leave = this.#threshold * (options.leaveFactor ?? 2);
    this.#guard = this.#threshold * (options.guardFactor ?? 20);
    this.#wait = options.warmup ?? 32;
    this.#backoff = options.backoff ?? 64;
    this.#maxBackoff = this.#backoff * 64;
    this.#maxInput = options.maxMainInputBytes ?? MAX_MAIN_THREAD_INPUT_BYTES;
    this.#preferred = mode === 'main' ? 'main' : 'thread';
  }

  /** The path `auto` prefers now (`main` and `instance` never change). */
  get preferred(): ExecutionPath {
    return this.#preferred;
  }

  /** See ExecutionThreadSettings.thresholdNs. */
  get thresholdNs(): number {
    return this.#threshold;
  }

  /** Moving estimate of a one-request batch's compute time, ns (0 before the first). */
  get estimateNs(): number {
    return this.#estimate;
  }

  /** Where the next batch runs. */
  choose(load: InstanceLoad): ExecutionPath {
    if (this.mode !== 'auto') return this.#preferred;
    const contended = load.requests !== 1 || load.threadBusy > 0 || load.mainBusy > 0;
    this.#contention += ((contended ? 1 : 0) - this.#contention) / 16;
    if (this.#preferred === 'thread' || contended || this.#contention > MAX_CONTENTION) return 'thread';
    // Large inputs take long, and would grow the main thread's session arena.
    if (load.inputBytes >= this.#maxInput) return 'thread';
    return 'main';
  }

  /**
   * Records the compute time (`ns`) of a batch of `requests` requests measured on `path`; answers
   * the move it caused, if any. Only one-request batches count (the only ones `auto` runs on the
   * main thread).
   */
  record(path: ExecutionPath, ns: number, requests = 1): PathChange | undefined {
    if (requests !== 1) return undefined;
    const sample = this.#samples === 0 ? ns : Math.min(ns, 2 * this.#estimate);
    this.#estimate = this.#samples === 0 ? ns : this.#estimate + (sample - this.#estimate) * EWMA_WEIGHT;
    this.#samples++;
    this.#since++;
    if (this.mode !== 'auto') return undefined;
    if (this.#preferred === 'main') {
      this.#overGuard = path === 'main' && ns >= this.#guard ? this.#overGuard + 1 : 0;
      const guarded = this.#overGuard >= 2;
      if (this.#estimate <= this.#leave && !guarded) return undefined;
      this.#preferred = 'thread';
      this.#since = 0;
      this.#overGuard = 0;
      this.#wait = this.#backoff;
      this.#backoff = Math.min(this.#backoff * 2, this.#maxBackoff);
      if (guarded) this.#estimate = Math.max(this.#estimate, ns);
      return { to: 'thread', estimateNs: this.#estimate, boundNs: guarded ? this.#guard : this.#leave, lastNs: ns };
    }
    if (this.#since >= this.#wait && this.#estimate <= this.#threshold) {
      this.#preferred = 'main';
      this.#since = 0;
      return { to: 'main', estimateNs: this.#estimate, boundNs: this.#threshold, lastNs: ns };
    }
    return undefined;
  }

  /** The main thread cannot be used (its session failed to load): the thread from now on. */
  disableMain(): void {
    this.#wait = Infinity;
    this.#preferred = 'thread';
  }
}
