/**
 * @module Per-model-version statistics as the statistics extension reports them.
 * Triton: core/src/infer_stats.cc (InferenceStatsAggregator)
 */

/** A count and a cumulative duration in nanoseconds. */
export interface StatDuration {
  count: number;
  ns: number;
}

/** One entry of `model_stats` in `GET /v2/models/stats`. */
export interface ModelStatistics {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: Record<'success' | 'fail' | 'queue' | 'compute_input' | 'compute_infer' | 'compute_output' | 'cache_hit' | 'cache_miss', StatDuration>;
  response_stats: Record<string, never>;
  batch_stats: { batch_size: number; compute_input: StatDuration; compute_infer: StatDuration; compute_output: StatDuration }[];
  memory_usage: { type: string; id: number; byte_size: number }[];
}

const zero = (): StatDuration => ({ count: 0, ns: 0 });

/** Why a request failed, as the `reason` label of `nv_inference_request_failure` says it. */
export type FailureReason = 'REJECTED' | 'CANCELED' | 'BACKEND' | 'OTHER';

/** One successful request's latencies (ns), for histograms and summaries. */
export interface RequestLatencies {
  requestNs: number;
  queueNs: number;
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
  /** Time to the first response (the whole request for a regular model). */
  firstResponseNs: number;
  /** A request answered from the response cache: the lookup's time. @default none: not a cache hit */
  cacheHitNs?: number;
}

/** A response cache miss: the lookup and the insertion of the computed response (ns). */
export interface CacheMissLatency {
  cacheMissNs: number;
}

/** What `InferStats.observer` is called with: a request's latencies, or a cache miss's time. */
export type LatencyObservation = RequestLatencies | CacheMissLatency;

/** Accumulates a model version's statistics. Durations are cumulative and monotonic. */
export class InferStats {
  /** Called with each successful request's latencies (set by whoever keeps histograms). */
  observer: ((o: LatencyObservation) => void) | undefined;
  /** Failed requests by reason (for the metrics endpoint). */
  readonly failures: Record<FailureReason, number> = { REJECTED: 0, CANCELED: 0, BACKEND: 0, OTHER: 0 };
  #success = zero();
  #fail = zero();
  #queue = zero();
  #computeInput = zero();
  #computeInfer = zero();
  #computeOutput = zero();
  #inferenceCount = 0;
  #executionCount = 0;
  #lastInference = 0;
  #cacheHit = zero();
  #cacheMiss = zero();
  #batches = new Map<number, { compute_input: StatDuration; compute_infer: StatDuration; compute_output: StatDuration }>();

  /** A request that succeeded: end-to-end, queue and the compute phases of its execution (ns). */
  recordSuccess(epochMs: number, requestNs: number, queueNs: number, inputNs: number, inferNs: number, outputNs: number, firstResponseNs = requestNs): void {
    this.#lastInference = epochMs;
    add(this.#success, requestNs);
    add(this.#queue, queueNs);
    add(this.#computeInput, inputNs);
    add(this.#computeInfer, inferNs);
    add(this.#computeOutput, outputNs);
    this.observer?.({ requestNs, queueNs, computeInputNs: inputNs, computeInferNs: inferNs, computeOutputNs: outputNs, firstResponseNs });
  }

  /**
   * A request answered from the response cache: a success (end to end `requestNs`) and a cache
   * hit (`lookupNs`); no execution, so no queue or compute time, but counted in them as Triton
   * counts them (its queue and compute counts are the success count: UpdateSuccessCacheHit).
   */
  recordCacheHit(_epochMs: number, requestNs: number, lookupNs: number): void {
    // last_inference is not moved: nothing executed (Triton's UpdateSuccessCacheHit leaves it).
    add(this.#success, requestNs);
    add(this.#cacheHit, lookupNs);
    add(this.#queue, 0);
    add(this.#computeInput, 0);
    add(this.#computeInfer, 0);
    add(this.#computeOutput, 0);
    this.observer?.({ requestNs, queueNs: 0, computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0, firstResponseNs: requestNs, cacheHitNs: lookupNs });
  }

  /**
   * A cache miss: the time spent looking up and inserting (`ns`). It is part of the request's
   * time too: added to the success duration (not its count, already made when the execution
   * answered), as Triton's UpdateSuccessCacheMiss adds it to request_duration.
   */
  recordCacheMiss(ns: number): void {
    add(this.#cacheMiss, ns);
    this.#success.ns += Math.round(ns);
    this.observer?.({ cacheMissNs: ns });
  }

  /** A request that failed after `requestNs`. */
  recordFailure(_epochMs: number, requestNs: number, reason: FailureReason = 'OTHER'): void {
    // last_inference is not moved (Triton's UpdateFailure leaves it): a refused request ran nothing.
    add(this.#fail, requestNs);
    this.failures[reason]++;
  }

  /** One execution of `batchSize` inferences. */
  recordExecution(batchSize: number, inputNs: number, inferNs: number, outputNs: number): void {
    this.#executionCount++;
    this.#inferenceCount += batchSize;
    let b = this.#batches.get(batchSize);
    if (!b) this.#batches.set(batchSize, (b = { compute_input: zero(), compute_infer: zero(), compute_output: zero() }));
    add(b.compute_input, inputNs);
    add(b.compute_infer, inferNs);
    add(b.compute_output, outputNs);
  }

  get executionCount(): number {
    return this.#executionCount;
  }

  /** The statistics in the extension's JSON shape. */
  toJson(name: string, version: string): ModelStatistics {
    return {
      name,
      version,
      last_inference: this.#lastInference,
      inference_count: this.#inferenceCount,
      execution_count: this.#executionCount,
      inference_stats: {
        success: { ...this.#success },
        fail: { ...this.#fail },
        queue: { ...this.#queue },
        compute_input: { ...this.#computeInput },
        compute_infer: { ...this.#computeInfer },
        compute_output: { ...this.#computeOutput },
        cache_hit: { ...this.#cacheHit },
        cache_miss: { ...this.#cacheMiss },
      },
      response_stats: {},
      batch_stats: [...this.#batches.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([batch_size, s]) => ({
          batch_size,
          compute_input: { ...s.compute_input },
          compute_infer: { ...s.compute_infer },
          compute_output: { ...s.compute_output },
        })),
      memory_usage: [],
    };
  }
}

function add(d: StatDuration, ns: number): void {
  d.count++;
  d.ns += Math.round(ns);
}
