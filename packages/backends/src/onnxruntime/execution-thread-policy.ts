/**
 * @module Where an onnxruntime instance runs a batch: on its own thread, or on the main thread when
 * its runs take less time than handing them to the thread costs. Triode's own (Triton runs every
 * instance on a thread of its own); the `execution_thread` model parameter.
 *
 * Measured (bench/handoff.mjs, `simple`, 2 vCPU): a piscina round trip to an instance thread costs
 * the main thread 41-52 µs of CPU and a request 85-107 µs of latency; running the same batch on the
 * main thread costs it 21-27 µs (12 µs of it inside onnxruntime). Under HTTP load the same batch
 * measures 40-120 µs on either thread (the threads and the load generator share 2 cores).
 * Two rules, one per cost. A lone request on an idle instance runs on the main thread when its
 * compute is under the threshold (default 100 µs, the hand-off's latency): there the latency is the
 * whole cost. Under load, what counts is the main thread's CPU, which bounds a tiny model's rate:
 * a batch runs there when the instance's measured compute for batches of its size is under the
 * hand-off's main-thread CPU in a busy server (HANDOFF_CPU_NS), since running it costs the main
 * thread less than handing it off would. Measured over HTTP (bench/http.mjs, `simple`, server on
 * one core): batches on the main thread cost the main thread 57-74 µs a request against 77-106 µs
 * on the instance thread, at c=16 and 64; on two cores (bench/busy-handoff.sh, bench/RESULTS.md,
 * 2026-11-27) 50-62 µs against 52-70 µs, and 6-20% more requests a second.
 */
import { Errors, type ModelConfig } from '@triode/core';

/** The `execution_thread` parameter: `auto` (the default), `main` or `instance`. */
export type ExecutionThread = 'auto' | 'main' | 'instance';

/** Where one batch runs. */
export type ExecutionPath = 'main' | 'thread';

/** Default of `execution_thread_threshold_us`: the hand-off's latency cost (see above). */
export const DEFAULT_EXECUTION_THREAD_THRESHOLD_US = 100;

/**
 * What a hand-off to the instance thread costs the main thread in CPU. In a server under load it
 * measured 39-55 µs a batch (bench/RESULTS.md, 2026-11-27: `simple` at c=16 and 64 on two cores,
 * bench/busy-handoff.sh, the main thread's CPU a request with every batch on the instance threads
 * against every batch on the main thread, where a batch's run measured 37-39 µs; alone,
 * bench/handoff.mjs, a round trip costs it 36-56 µs). That was in a fast phase of the VM; in its
 * slow phases everything runs up to 1.5x slower, the compute this is compared with included (it is
 * measured as it runs), so the bound is 55 x 1.5. Under load, a batch size whose compute on the
 * main thread is under this runs there, and stays there until its moving estimate passes 1.5 times
 * this (ExecutionThreadPolicy); capped at the threshold.
 */
export const HANDOFF_CPU_NS = 80_000;

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
 * `execution_thread_threshold_us` (default 100).
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
  /** See HANDOFF_CPU_NS (capped at the threshold). @default 80 µs */
  handoffCpuNs?: number;
  /**
   * Cores the process may run on (`os.availableParallelism()`, which follows `taskset`). With one,
   * the instance thread shares the main thread's core: a hand-off adds no compute, only its own
   * cost, so under load every batch runs on the main thread (while the instance prefers it), and
   * while it prefers its thread, every batch expected to take at most `guardFactor` times the
   * threshold does too. Its runs there cannot be measured fairly either: the instance threads
   * preempt it. @default 2
   */
  cores?: number;
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
 * or so), the instance counts as loaded: a lone request follows the rule for batches under load
 * (its size's compute under the hand-off's CPU), not the latency rule (under the threshold).
 */
const MAX_CONTENTION = 0.125;

/** Where a size class's batches run under load (ExecutionThreadPolicy.choose). */
const MEASURING = 0;
const ON_MAIN = 1;
const ON_THREAD = 2;

/** Main-thread samples a size class needs before its estimate decides; until then it runs there to be measured. */
const MIN_SIZE_SAMPLES = 4;

/**
 * A size class placed on the thread is measured on the main thread again (a cold run, then
 * MIN_SIZE_SAMPLES) after this many of its batches while under 1.5 times the hand-off CPU, or 16
 * times as many (under `guardFactor` times the threshold; over it, never), to follow a model that
 * got faster or a measurement that was unlucky. Under 1.5 times the hand-off, the first time after
 * REMEASURE_FIRST batches, doubling each time the size stays on the thread: the measurements made
 * as load starts read cold caches (an instance that just moved to the main thread, the other
 * instance's batches still on their thread), and took `simple` 1-4 s to settle with 64 each time.
 */
const REMEASURE_EVERY = 64;
const REMEASURE_FIRST = 8;

/**
 * One core: under load a thread run measures the waits for the core too (ppocr_cls at c=16: 2-4 ms
 * for a ~1 ms run). A size with no main-thread run yet whose fastest run is over the guard but under
 * this many times it is measured on the main thread one batch in REMEASURE_FIRST (see #shortOnOneCore).
 */
const PROBE_FACTOR = 4;

/** How much one slower main-thread run raises a size class's floor at most, on one core (see #recordFloor). */
const FLOOR_RISE = 1.125;

/** An estimate moved by one sample: the sample itself at first, else an EWMA of samples clipped at twice the estimate. */
function movedEstimate(estimate: number, samples: number, ns: number): number {
  return samples === 0 ? ns : estimate + (Math.min(ns, 2 * estimate) - estimate) * EWMA_WEIGHT;
}

/** The size class of a batch: log2 of its input bytes (compute grows with the input). */
function sizeClass(inputBytes: number): number {
  return inputBytes <= 1 ? 0 : Math.min(47, Math.floor(Math.log2(inputBytes)));
}

/**
 * Keeps moving estimates of an instance's compute time (EWMAs, weight 1/8, of samples clipped at
 * twice the estimate: a GC pause or a preemption moves one by 12.5% at most, a model that really
 * slows down doubles it in 6 batches): one for one-request batches measured on either path, which
 * moves the instance between its paths, and one per size class of batch (log2 of its input bytes)
 * measured on the main thread only, which says whether a batch under load costs the main thread
 * less to run than to hand off. Only main-thread runs count there: a run measured on the instance
 * thread includes the time that thread waited for a core, which on a loaded machine is most of it
 * (`simple`, server on one core: 99 µs on the thread, 12 µs on the main thread).
 *
 * `auto`: the thread first; the main thread once `warmup` one-request batches put their estimate
 * at or under the threshold; the thread again once it goes over `leaveFactor` times the threshold
 * (a margin against flapping on noise) or two main-thread batches in a row take `guardFactor`
 * times it, for `backoff` batches (doubling each time) before it may come back. While it prefers
 * the main thread, a batch runs there when its input is under `maxMainInputBytes` and either it is
 * a lone request on a quiet instance (see MAX_CONTENTION), or its size class is placed there: the
 * fastest of its first `MIN_SIZE_SAMPLES` runs there (after a cold one, not counted) under the
 * hand-off's CPU (HANDOFF_CPU_NS); it stays placed there until its moving estimate passes 1.5 times
 * the hand-off's CPU. The instance runs it after its batch on the thread, if any. A size class is
 * measured there until it has those samples, unless its two fastest runs take more than
 * `guardFactor` times the threshold; one placed on the thread is measured there again from scratch
 * after REMEASURE_FIRST of its batches, then twice as many each time up to REMEASURE_EVERY (16
 * times that once over 1.5 times the hand-off's CPU,
 * never once over the guard). With one core (`cores`), every batch under the large
 * input bound that is expected to take at most `guardFactor` times the threshold runs on the main
 * thread, whichever path the instance prefers (see #shortOnOneCore). An
 * instance's batches never overlap, on one path or across both (a main-thread run blocks the
 * thread), so the instance count still bounds concurrency. Time is not read here: callers pass
 * what they measured.
 */
export class ExecutionThreadPolicy {
  readonly mode: ExecutionThread;
  readonly #threshold: number;
  readonly #leave: number;
  readonly #guard: number;
  readonly #maxBackoff: number;
  readonly #maxInput: number;
  readonly #handoff: number;
  /** A size class placed on the main thread stays there while its estimate is at most this: 1.5 times the hand-off's CPU. */
  readonly #stay: number;
  readonly #oneCore: boolean;
  /** Per size class: main-thread estimate (ns), its samples, batches placed while over the hand-off CPU, and whether its first (cold) run was seen. */
  readonly #sized = new Float64Array(48);
  readonly #sizedSamples = new Uint32Array(48);
  readonly #sizedSkipped = new Uint32Array(48);
  readonly #sizedCold = new Uint8Array(48);
  /** Per size class, where batches of it run under load: MEASURING, ON_MAIN or ON_THREAD. */
  readonly #sizedPlace = new Uint8Array(48);
  /** One core: per size class, the floor of its runs on either path (ns, 0 before the first; see #recordFloor). */
  readonly #floor = new Float64Array(48);
  /** Per size class on the thread under 1.5 times the hand-off: batches before its next measurement (0: REMEASURE_FIRST). */
  readonly #sizedEvery = new Uint8Array(48);
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
  /** The fastest one-request batch recorded, ns (see #shortOnOneCore). */
  #fastest = Infinity;

  constructor(mode: ExecutionThread, options: ExecutionThreadPolicyOptions = {}) {
    this.mode = mode;
    this.#threshold = options.thresholdNs ?? DEFAULT_EXECUTION_THREAD_THRESHOLD_US * 1000;
    this.#leave = this.#threshold * (options.leaveFactor ?? 2);
    this.#guard = this.#threshold * (options.guardFactor ?? 20);
    this.#wait = options.warmup ?? 32;
    this.#backoff = options.backoff ?? 64;
    this.#maxBackoff = this.#backoff * 64;
    this.#maxInput = options.maxMainInputBytes ?? MAX_MAIN_THREAD_INPUT_BYTES;
    this.#handoff = Math.min(this.#threshold, options.handoffCpuNs ?? HANDOFF_CPU_NS);
    this.#stay = 1.5 * this.#handoff;
    this.#oneCore = (options.cores ?? 2) <= 1;
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

  /** Moving estimate of a main-thread batch's compute time with `inputBytes` of input, ns (0 until measured `MIN_SIZE_SAMPLES` times). */
  sizeEstimateNs(inputBytes: number): number {
    const k = sizeClass(inputBytes);
    return this.#sizedSamples[k]! >= MIN_SIZE_SAMPLES ? this.#sized[k]! : 0;
  }

  /** A main-thread run of size class `k`; its first (cold) run is not counted: onnxruntime plans its memory for a new shape then. */
  #recordSize(k: number, ns: number): boolean {
    if (!this.#sizedCold[k]) {
      this.#sizedCold[k] = 1;
      return false;
    }
    const n = this.#sizedSamples[k]!;
    // Its first samples give the fastest: a run is never faster than it can be, while one that
    // met a preemption or cold caches is slower (`simple` at c=16 on two cores: batches of 5-8
    // measured 57-382 µs when a size class was first met, 46-52 µs once it ran there).
    this.#sized[k] = n > 0 && n < MIN_SIZE_SAMPLES ? Math.min(this.#sized[k]!, ns) : movedEstimate(this.#sized[k]!, n, ns);
    this.#sizedSamples[k]!++;
    return true;
  }

  /** Where the next batch runs. */
  choose(load: InstanceLoad): ExecutionPath {
    if (this.mode !== 'auto') return this.#preferred;
    const contended = load.requests !== 1 || load.threadBusy > 0 || load.mainBusy > 0;
    this.#contention += ((contended ? 1 : 0) - this.#contention) / 16;
    // Large inputs take long, and would grow the main thread's session arena.
    if (load.inputBytes >= this.#maxInput) return 'thread';
    if (this.#preferred === 'thread') return this.#oneCore && this.#shortOnOneCore(load) ? 'main' : 'thread';
    // Quiet: the hand-off's latency is the cost, and the one-request estimate is under the threshold.
    if (!contended && this.#contention <= MAX_CONTENTION) return 'main';
    // Loaded: the main thread's CPU is the cost; a batch runs there (after the instance's batch on
    // its thread, if it has one) when that costs it less than a hand-off.
    if (this.#oneCore) return 'main';
    const k = sizeClass(load.inputBytes);
    const n = this.#sizedSamples[k]!;
    const est = this.#sized[k]!;
    // A size class is measured on the main thread first (MIN_SIZE_SAMPLES runs after a cold one,
    // or two when both take more than the guard: one preempted run does not decide), then placed:
    // on the main thread when its estimate is under the hand-off's CPU, and it stays there until
    // its moving estimate passes 1.5 times that. The margin keeps a size whose runs measure near
    // the bound (a busy server's, 35-110 µs for `simple`) from moving at every sample: moving back
    // and forth costs both paths, since each waits for the other's batch.
    let place = this.#sizedPlace[k]!;
    if (place === MEASURING) {
      if (n === 0 || (n < MIN_SIZE_SAMPLES && (n < 2 || est <= this.#guard))) return 'main';
      place = n >= MIN_SIZE_SAMPLES && est <= this.#handoff ? ON_MAIN : ON_THREAD;
    } else if (place === ON_MAIN && est > this.#stay) {
      place = ON_THREAD;
    }
    this.#sizedPlace[k] = place;
    if (place === ON_MAIN) {
      this.#sizedEvery[k] = 0;
      return 'main';
    }
    const near = est <= this.#stay;
    const every = near ? this.#sizedEvery[k]! || REMEASURE_FIRST : est <= this.#guard ? REMEASURE_EVERY * 16 : 0;
    if (every === 0 || ++this.#sizedSkipped[k]! % every !== 0) return 'thread';
    if (near) this.#sizedEvery[k] = Math.min(REMEASURE_EVERY, every * 2);
    // Measured again from scratch: a lone run on the main thread between batches on the thread
    // finds its caches cold and measures dear (`simple`, two cores: 77-98 µs against 46-52 µs in a
    // row), which would keep the size on the thread for good. So the size runs there again as if
    // new: its first run is not counted, its estimate is the fastest of the next ones.
    this.#sizedSamples[k] = 0;
    this.#sizedCold[k] = 0;
    this.#sizedSkipped[k] = 0;
    this.#sizedPlace[k] = MEASURING;
    return 'main';
  }

  /**
   * With one core, whether a batch is expected to run within `guardFactor` times the threshold (2 ms
   * by default): its size class's floor (see #recordFloor), or before its first counted main-thread run the fastest
   * one-request batch so far (either path) times the batch's requests. On one core the instance
   * threads and the main thread share the core, so a run on either path may measure the others'
   * runs too (ppocr_cls at c=16: 2-4 ms a ~1 ms run on its thread; on the main thread too, once
   * the model's other instance runs on its thread). A moving estimate of such runs left ppocr_cls
   * on its threads for good in some starts: one instance moved there, its runs made the other's
   * main-thread runs measure over the guard, and that one followed (bench/RESULTS.md, 2026-11-27).
   * A floor only rises through runs that are all slow. On one core a hand-off buys no parallelism
   * (the thread would run on the main thread's core) and costs the core the thread switches: 403
   * µs of main-thread CPU a request in the server against ~110 µs in all on the main thread
   * (`simple`, bench/RESULTS.md); the guard bounds how long the main thread stops serving other
   * connections for one run. A size class whose floor is over the guard is measured on the main
   * thread again one batch in REMEASURE_EVERY while the fastest run says it could be under it; one
   * with no floor yet, one batch in REMEASURE_FIRST while its fastest is under PROBE_FACTOR times it.
   */
  #shortOnOneCore(load: InstanceLoad): boolean {
    const k = sizeClass(load.inputBytes);
    const fastest = this.#fastest * load.requests;
    const floor = this.#floor[k]!;
    // No main-thread run yet: the fastest run decides. Thread runs under load measure the waits
    // too, so one over the guard may still be a short run: measured on the main thread now and
    // then (before, ppocr_cls stayed on its threads the first ~8 s of load, bench/RESULTS.md),
    // unless it is over PROBE_FACTOR times the guard (then it blocks the main thread too long).
    if (floor === 0) return fastest <= this.#guard || (fastest <= PROBE_FACTOR * this.#guard && ++this.#sizedSkipped[k]! % REMEASURE_FIRST === 0);
    if (floor <= this.#guard) return true;
    return fastest <= this.#guard && ++this.#sizedSkipped[k]! % REMEASURE_EVERY === 0;
  }

  /**
   * One core: the floor of size class `k`'s runs, a decaying minimum. A run cannot take less than
   * it costs, while one that shared the core took more, so the floor follows the fastest runs: any
   * run lowers it to itself; a main-thread run slower than it raises it by FLOOR_RISE at most (a
   * model that really slowed down passes the guard after a few such runs, ~6 from half of it); a
   * thread run never raises it (on one core it measures the main thread's work too) and only lowers
   * one that main-thread runs made: the first thread runs, as load starts and before the main
   * thread's session is open, measure the waits (2-4 ms for ppocr_cls) and would set a floor
   * over the guard that no later run lowers. The size's first main-thread run is not counted
   * either (see #recordSize). Until the floor has a main-thread run, the fastest one-request run
   * decides (#shortOnOneCore). So a model
   * whose run time varies with its data is placed by its faster runs: its slower ones may hold the
   * main thread past the guard now and then (on one core a thread would take that CPU from the
   * main thread all the same, only in slices).
   */
  #recordFloor(k: number, ns: number, path: ExecutionPath): void {
    const f = this.#floor[k]!;
    if (path === 'thread') {
      if (f !== 0) this.#floor[k] = Math.min(ns, f);
      return;
    }
    this.#floor[k] = f === 0 ? ns : Math.min(ns, f * FLOOR_RISE);
  }

  /**
   * Records the compute time (`ns`) of a batch of `requests` requests with `inputBytes` of input,
   * measured on `path`; answers the move it caused, if any (only one-request batches move it; only
   * main-thread batches feed their size class).
   */
  record(path: ExecutionPath, ns: number, requests = 1, inputBytes?: number): PathChange | undefined {
    if (inputBytes !== undefined) {
      const k = sizeClass(inputBytes);
      // A size's first main-thread run (onnxruntime plans its memory for a new shape) is not counted.
      const counted = path === 'main' ? this.#recordSize(k, ns) : true;
      if (this.#oneCore && counted) this.#recordFloor(k, ns, path);
    }
    if (requests !== 1) return undefined;
    this.#fastest = Math.min(this.#fastest, ns);
    // While the instance prefers the main thread, a lone request still runs on its thread when its
    // size is placed there under load; that run measures the wait for a core too (two cores, the
    // thread beside wrk: 100-400 µs for `simple`'s 40), and would move the instance off the main
    // thread for a cost its main-thread runs do not have. Only main-thread runs move it then.
    if (this.#preferred === 'main' && path === 'thread' && this.mode === 'auto') return undefined;
    this.#estimate = movedEstimate(this.#estimate, this.#samples, ns);
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
