/**
 * @module A Backplane that counts what passes through it: the gateway's own ("frontend") view of
 * the requests it relays, per model and version, in the same families as a worker's metrics
 * (success, failure by reason, request duration, requests in flight as pending). Workers report
 * queue and compute times; a gateway knows only the whole round trip.
 */
import {
  Errors, InferStats, TriodeError,
  type Backplane, type FailureReason, type InferenceRequest, type InferenceResponse, type InferStreamOptions, type ResponseHandler, type LatencyObservation, type LoadOptions,
  type ModelIndexEntry, type ModelMetadata, type ModelStatistics, type ServerMetadata, type ClusterWorkerInfo,
} from '@triode/core';
import type { MetricsSource } from './metrics.js';
import { NO_CLUSTER } from '../http/routes/cluster.js';

interface Counted {
  stats: InferStats;
}

function reasonOf(err: unknown): FailureReason {
  const e = TriodeError.from(err);
  if (e.code === 'CANCELLED') return 'CANCELED';
  if (e.rejected) return 'REJECTED';
  if (e.code === 'INTERNAL' || e.code === 'UNKNOWN') return 'BACKEND';
  return 'OTHER';
}

/** Wraps a backplane; implements MetricsSource for `startMetricsServer`. */
export class MeasuredBackplane implements Backplane, MetricsSource {
  readonly #inner: Backplane;
  /** Series per model and version: made only for models that exist (a name a client made up gets none). */
  readonly #models = new Map<string, Counted>();
  /** Requests in flight per model and version, series or not yet. */
  readonly #inflight = new Map<string, number>();
  #listener: ((model: string, version: string, o: LatencyObservation) => void) | undefined;

  constructor(inner: Backplane) {
    this.#inner = inner;
  }

  #counted(model: string, version: string): Counted {
    const key = `${model}\u0000${version}`;
    let c = this.#models.get(key);
    if (!c) {
      c = { stats: new InferStats() };
      const listener = this.#listener;
      if (listener) c.stats.observer = (o) => listener(model, version, o);
      this.#models.set(key, c);
    }
    return c;
  }

  #inflightBy(key: string, delta: number): void {
    const n = (this.#inflight.get(key) ?? 0) + delta;
    if (n > 0) this.#inflight.set(key, n);
    else this.#inflight.delete(key);
  }

  async #measure<T>(req: InferenceRequest, run: (onFirst: () => void) => Promise<T>, versionOf: (r: T) => string | undefined): Promise<T> {
    const start = process.hrtime.bigint();
    const requested = req.modelVersion === undefined ? '' : String(req.modelVersion);
    const key = `${req.modelName}\u0000${requested}`;
    this.#inflightBy(key, 1);
    let first: bigint | undefined;
    try {
      const r = await run(() => { first ??= process.hrtime.bigint(); });
      const ns = Number(process.hrtime.bigint() - start);
      this.#counted(req.modelName, versionOf(r) ?? requested).stats.recordSuccess(Date.now(), ns, 0, 0, 0, 0, first === undefined ? ns : Number(first - start));
      return r;
    } catch (err) {
      // A failure makes a series only for a model the cluster knows: names clients make up get
      // none (they would grow the metrics without bound), whether they failed NOT_FOUND or, with
      // no worker live or Redis away, UNAVAILABLE.
      const ns = Number(process.hrtime.bigint() - start);
      if (this.#models.has(key) || (await this.#known(req.modelName, err))) {
        this.#counted(req.modelName, requested).stats.recordFailure(Date.now(), ns, reasonOf(err));
      }
      throw err;
    } finally {
      this.#inflightBy(key, -1);
    }
  }

  /** True when the inner backplane's repository index lists `model` (in any state). */
  async #known(model: string, err: unknown): Promise<boolean> {
    if (err instanceof TriodeError && err.code === 'NOT_FOUND') return false;
    try {
      return (await this.#inner.repositoryIndex()).some((m) => m.name === model);
    } catch {
      return false;
    }
  }

  infer(request: InferenceRequest): Promise<InferenceResponse> {
    return this.#measure(request, () => this.#inner.infer(request), (r) => r.modelVersion);
  }

  inferStream(request: InferenceRequest, onResponse: ResponseHandler, options?: InferStreamOptions): Promise<void> {
    let version: string | undefined;
    return this.#measure(request, (onFirst) => this.#inner.inferStream(request, (r) => {
      onFirst();
      version ??= r.modelVersion;
      return onResponse(r);
    }, options), () => version);
  }

  metricsSnapshot(): ReturnType<MetricsSource['metricsSnapshot']> {
    return [...this.#models.entries()].map(([key, c]) => {
      const [name, version] = key.split('\u0000') as [string, string];
      return { name, version, stats: c.stats.toJson(name, version), failures: { ...c.stats.failures }, pending: this.#inflight.get(key) ?? 0 };
    });
  }

  observeLatencies(listener: (model: string, version: string, o: LatencyObservation) => void): void {
    this.#listener = listener;
    for (const [key, c] of this.#models) {
      const [name, version] = key.split('\u0000') as [string, string];
      c.stats.observer = (o) => listener(name, version, o);
    }
  }

  isLive(): Promise<boolean> { return this.#inner.isLive(); }
  isReady(): Promise<boolean> { return this.#inner.isReady(); }
  serverMetadata(): Promise<ServerMetadata> { return this.#inner.serverMetadata(); }
  modelReady(name: string, version?: number): Promise<boolean> { return this.#inner.modelReady(name, version); }
  modelMetadata(name: string, version?: number): Promise<ModelMetadata> { return this.#inner.modelMetadata(name, version); }
  modelConfig(name: string, version?: number): Promise<Record<string, unknown>> { return this.#inner.modelConfig(name, version); }
  modelStatistics(name?: string, version?: number): Promise<ModelStatistics[]> { return this.#inner.modelStatistics(name, version); }
  repositoryIndex(readyOnly?: boolean): Promise<ModelIndexEntry[]> { return this.#inner.repositoryIndex(readyOnly); }
  loadModel(name: string, options?: LoadOptions): Promise<void> { return this.#inner.loadModel(name, options); }
  unloadModel(name: string, options?: { unloadDependents?: boolean }): Promise<void> { return this.#inner.unloadModel(name, options); }
  clusterWorkers(): Promise<ClusterWorkerInfo[]> {
    return this.#inner.clusterWorkers ? this.#inner.clusterWorkers() : Promise.reject(Errors.unsupported(NO_CLUSTER));
  }
}

