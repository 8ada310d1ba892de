/**
 * @module A Backplane that counts what passes through it: the gateway's own ("frontend") view of
 * the requests it relays, per model and version, in the same families as a worker's metrics
 * (success, failure by reason, request duration, requests in flight as pending). Workers report
 * queue and compute times; a gateway knows only the whole round trip.
 */
import {
  Errors, InferStats, TriodeError,
  type Backplane, type FailureReason, type InferenceRequest, type InferenceResponse, type InferStreamOptions, type ResponseHandler, type LatencyObservation, type LoadOptions,
  type ModelIndexEntry, type ModelMetadata, type ModelStatistics, type ServerMetadata, type ClusterWorkerInfo, type UnloadOptions,
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
  /** Requests in flight per model and requested version ('' when none was asked for), series or not yet. */
  readonly #inflight = new Map<string, number>();
  /** Per model, the version that answered last: requests that name none are counted under it. */
  readonly #lastVersion = new Map<string, string>();
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
      // A request that named no version and got no response to tell it (a decoupled model that sent
      // none) is counted under the version that would answer it, not a "" series (review).
      const version = versionOf(r) ?? (requested !== '' ? requested : this.#lastVersion.get(req.modelName) ?? (await this.#latestVersion(req.modelName, undefined)) ?? '');
      if (version !== '') this.#lastVersion.set(req.modelName, version);
      this.#counted(req.modelName, version).stats.recordSuccess(Date.now(), ns, 0, 0, 0, 0, first === undefined ? ns : Number(first - start));
      return r;
    } catch (err) {
      // A failure makes a series only for a model the cluster knows: names clients make up get
      // none (they would grow the metrics without bound), whether they failed NOT_FOUND or, with
      // no worker live or Redis away, UNAVAILABLE. A request that named no version is counted
      // under the version that would have answered it, beside its successes (not a "" series).
      const ns = Number(process.hrtime.bigint() - start);
      // A model or version the cluster does not list gets none (any client could grow the metrics
      // without bound with made-up names or version numbers).
      const version = requested
        ? (this.#models.has(key) || (await this.#lists(req.modelName, requested, err)) ? requested : undefined)
        : this.#lastVersion.get(req.modelName) ?? (await this.#latestVersion(req.modelName, err));
      if (version !== undefined) {
        this.#counted(req.modelName, version).stats.recordFailure(Date.now(), ns, reasonOf(err));
      }
      throw err;
    } finally {
      this.#inflightBy(key, -1);
    }
  }

  /** The inner backplane's repository index rows of `model` (none for NOT_FOUND, or when it cannot be read). */
  async #rows(model: string, err: unknown): Promise<ModelIndexEntry[]> {
    if (err instanceof TriodeError && err.code === 'NOT_FOUND') return [];
    try {
      return (await this.#inner.repositoryIndex()).filter((m) => m.name === model);
    } catch {
      return [];
    }
  }

  /** True when the inner backplane's repository index lists `version` of `model`. */
  async #lists(model: string, version: string, err: unknown): Promise<boolean> {
    return (await this.#rows(model, err)).some((m) => m.version === version);
  }

  /**
   * The latest version of `model` the inner backplane's repository index lists (a ready one
   * first; '' for an entry with no version), or undefined for a model it does not list.
   */
  async #latestVersion(model: string, err: unknown): Promise<string | undefined> {
    const rows = await this.#rows(model, err);
    if (rows.length === 0) return undefined;
    const ready = rows.filter((m) => m.state === 'READY');
    return (ready.length > 0 ? ready : rows).map((m) => m.version ?? '').sort((a, b) => Number(b) - Number(a))[0] ?? '';
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
      // Requests that named no version wait under the version that answers them.
      const unversioned = this.#lastVersion.get(name) === version ? this.#inflight.get(`${name}\u0000`) ?? 0 : 0;
      return { name, version, stats: c.stats.toJson(name, version), failures: { ...c.stats.failures }, pending: (this.#inflight.get(key) ?? 0) + unversioned };
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
  unloadModel(name: string, options?: UnloadOptions): Promise<void> { return this.#inner.unloadModel(name, options); }
  clusterWorkers(): Promise<ClusterWorkerInfo[]> {
    return this.#inner.clusterWorkers ? this.#inner.clusterWorkers() : Promise.reject(Errors.unsupported(NO_CLUSTER));
  }
}

