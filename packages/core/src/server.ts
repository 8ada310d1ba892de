/**
 * @module InferenceServer: the in-process server (Triton's C API). Owns the options, the lifecycle
 * of the server, readiness, metadata, the inference entry points and statistics; the models are
 * kept by the model repository manager and loaded by the model lifecycle. Frontends and embedding
 * applications call it.
 * Triton: core/src/server.cc, core/src/tritonserver.cc
 */
import { availableParallelism } from 'node:os';
import type { Backend } from './backend-api.js';
import { settleWithin, systemClock, type Clock } from './clock.js';
import { Errors } from './errors.js';
import type { InferenceRequest, InferenceResponse, InferStreamOptions, ResponseHandler } from './infer-request.js';
import { modelConfigToJson } from './model-config/model-config-json.js';
import type { ModelConfig } from './model-config/model-config.js';
import { withConfigWarnings } from './model-config/config-warnings.js';
import { modelMetricSettings, type ModelMetricSettings } from './model-config/metric-reporter-config.js';
import { ModelLifecycle, type LoadedModel } from './model-repository/model-lifecycle.js';
import { ModelRepositoryManager, type LoadOptions, type ModelIndexEntry } from './model-repository/model-repository-manager.js';
import { compareModelNames } from './model-repository/model-name.js';
import { ResponseCache, type ResponseCacheStats } from './cache/response-cache.js';
import { RateLimiter, type RateLimitResource } from './scheduler/rate-limiter.js';
import { silentLogger, type Logger } from './logger.js';
import type { LatencyObservation, ModelStatistics } from './stats/infer-stats.js';
import { configTypeToDataType, type DataType } from './tensor/data-type.js';

// Declared beside the concept that owns them; part of the server's API, so exported from here too.
export { onlyLastInstanceCountDiffers, type LoadedModel, type ModelReadyState } from './model-repository/model-lifecycle.js';
export { instanceCountOf, type LoadOptions, type ModelIndexEntry } from './model-repository/model-repository-manager.js';
export { parseModelVersion } from './model-version.js';

/** Model metadata as the KServe v2 protocol reports it. */
export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: { name: string; datatype: DataType; shape: number[] }[];
  outputs: { name: string; datatype: DataType; shape: number[] }[];
}

/** Server metadata (`GET /v2`). */
export interface ServerMetadata {
  name: string;
  version: string;
  extensions: string[];
}

/** Options of an InferenceServer (Triton's TRITONSERVER_ServerOptions). */
export interface ServerOptions {
  /** Repository paths; a model found in two of them is unavailable. */
  modelRepositories: string[];
  /** Backends by name (`config.backend`). */
  backends: Backend[];
  /**
   * Size of the response cache in bytes (`--cache-config local,size=N`); models opt in with
   * `response_cache { enable: true }`. @default 0 (no cache)
   */
  responseCacheBytes?: number;
  /**
   * `execution_count`: an instance executes only while it holds the resources its instance group's
   * `rate_limiter` lists, and waiting instances go by `rate_limiter.priority` across models
   * (`--rate-limit`). `off`: `rate_limiter` is ignored, as in Triton. @default "off"
   */
  rateLimit?: 'off' | 'execution_count';
  /**
   * Available resource counts (`--rate-limit-resource=<name>:<count>[:<device>]`); with any given,
   * a resource none names has count 0. @default [] (each: the largest count a loaded instance needs)
   */
  rateLimitResources?: RateLimitResource[];
  /** Server name in the metadata (`--id`). @default "triton" */
  id?: string;
  /** Version string in the metadata. @default "0.1.0" */
  version?: string;
  /** Extensions listed in the server metadata. @default the core's own */
  extensions?: string[];
  /** Ready only when every model is ready (`--strict-readiness`). @default true */
  strictReadiness?: boolean;
  /** Fill missing config parts from the model (`--disable-auto-complete-config` turns it off). @default true */
  autoCompleteConfig?: boolean;
  /** Use `configs/<name>.pbtxt` when present (`--model-config-name`). */
  modelConfigName?: string;
  /**
   * `none`: load every model at start, no load/unload API. `explicit`: load only `startupModels`
   * at start; `loadModel` / `unloadModel` do the rest. @default "none"
   */
  modelControlMode?: 'none' | 'explicit' | 'poll';
  /** Poll mode: how often the repositories are re-read (ms; `--repository-poll-secs` x 1000). @default 15000 */
  repositoryPollMs?: number;
  /** How many times a failed model load is tried again (`--model-load-retry-count`). @default 0 */
  modelLoadRetryCount?: number;
  /** How many model versions load at once (`--model-load-thread-count`). @default 4 */
  modelLoadThreadCount?: number;
  /**
   * Most instances one model version may have, summed over its instance groups
   * (`--max-instances-per-model`). A load that asks for more fails INVALID_ARG before anything is
   * created. @default max(16, 4 x os.availableParallelism())
   */
  maxInstancesPerModel?: number;
  /**
   * How long a model version may take to load, warmup included (ms; `--model-load-timeout-secs`
   * x 1000). A version still loading then fails UNAVAILABLE and its partial instances are released.
   * @default 300000
   */
  modelLoadTimeoutMs?: number;
  /**
   * Most `loadModel` calls under way at once (each holds the config and files it carries until
   * its turn); past it a load is refused UNAVAILABLE, try again. Unloads are never refused.
   * `triode serve` uses MAX_LOAD_CALLS. @default no limit
   */
  maxLoadCalls?: number;
  /** Models to load at start in explicit mode (`--load-model`; `*` loads all). @default [] */
  startupModels?: string[];
  /** Per-backend settings (`--backend-config=<backend>,<k>=<v>`). @default {} */
  backendConfig?: Record<string, Record<string, string>>;
  /** @default silentLogger */
  logger?: Logger;
  /** @default systemClock */
  clock?: Clock;
}

/** The least time `stop` gives models to release their instances after the requests are done. */
const STOP_RELEASE_MIN_MS = 1000;

/** How deep models may call models (BLS) before a request is refused: stops endless recursion. */
export const MAX_BLS_DEPTH = 16;

/**
 * Refuses a request made on behalf of models (BLS calls, ensemble steps) that would wait on
 * itself: one nested too deep, or to a model already in its call chain (a model that calls an
 * ensemble that runs the model, or an ensemble among its own steps): its instances, or the
 * ensemble's own request, would wait on themselves for good.
 */
function checkCallChain(request: InferenceRequest): void {
  if ((request.blsDepth ?? 0) > MAX_BLS_DEPTH) {
    throw Errors.invalidArg(`BLS call chain deeper than ${MAX_BLS_DEPTH} requests (does model '${request.modelName}' call itself without end?)`);
  }
  if (request.blsChain?.includes(request.modelName)) {
    throw Errors.invalidArg(`request to model '${request.modelName}' refused: it is already in the call chain (${[...request.blsChain, request.modelName].join(' -> ')}), and would wait on itself`);
  }
}

/** The default of `ServerOptions.maxInstancesPerModel`, sized to this machine: max(16, 4 x its CPUs). */
export function defaultMaxInstancesPerModel(): number {
  return Math.max(16, 4 * availableParallelism());
}

/** `ServerOptions.maxLoadCalls` of `triode serve`: as many as a cluster gateway runs (MAX_CONTROL_CALLS). */
export const MAX_LOAD_CALLS = 16;

/** The default of `ServerOptions.modelLoadTimeoutMs`: 5 minutes. */
export const DEFAULT_MODEL_LOAD_TIMEOUT_MS = 300_000;

/** The extensions the core implements (frontends may add their own). */
export const CORE_EXTENSIONS = ['classification', 'binary_tensor_data', 'statistics', 'model_configuration'];

/**
 * The in-process inference server. Create it with `InferenceServer.create`, then `infer`.
 * @example
 * const server = await InferenceServer.create({ modelRepositories: ['./model_repository'], backends: [new OnnxRuntimeBackend()] });
 * const res = await server.infer({ modelName: 'simple', inputs: [...] });
 * await server.stop();
 */
export class InferenceServer {
  readonly #opts: Required<Omit<ServerOptions, 'modelConfigName' | 'maxLoadCalls'>> & { modelConfigName?: string; maxLoadCalls?: number };
  #responseCache: ResponseCache | undefined;
  readonly #backends: Map<string, Backend>;
  readonly #lifecycle: ModelLifecycle;
  readonly #repository: ModelRepositoryManager;
  #stopping = false;
  /**
   * The wait of `stop` is over (models unloading): every request is refused. Before it, while
   * stopping, requests still reach the models, whose schedulers refuse all but those continuing a
   * live sequence (Triton's InferAsync accepts inference while the server exits).
   */
  #stopped = false;
  #draining = false;
  #inflight = 0;
  /** `infer`'s reactions, made once: they count an answered (or failed) request out. */
  readonly #answered = (response: InferenceResponse): InferenceResponse => {
    this.#countOut();
    return response;
  };
  readonly #failed = (err: unknown): never => {
    this.#countOut();
    throw err;
  };
  /** What `stop` waits on: the last request in flight answered. */
  #noneInflight: (() => void)[] = [];

  #countOut(): void {
    if (--this.#inflight === 0 && this.#noneInflight.length > 0) for (const w of this.#noneInflight.splice(0)) w();
  }

  /** Resolves once no request accepted by `infer` or `inferStream` is still unanswered. */
  #answeredAll(): Promise<void> {
    return this.#inflight === 0 ? Promise.resolve() : new Promise((r) => this.#noneInflight.push(r));
  }

  private constructor(options: ServerOptions) {
    this.#opts = {
      id: 'triton',
      version: '0.1.0',
      extensions: CORE_EXTENSIONS,
      strictReadiness: true,
      autoCompleteConfig: true,
      backendConfig: {},
      logger: silentLogger,
      clock: systemClock,
      modelControlMode: 'none',
      startupModels: [],
      repositoryPollMs: 15_000,
      modelLoadRetryCount: 0,
      modelLoadThreadCount: 4,
      responseCacheBytes: 0,
      rateLimit: 'off',
      rateLimitResources: [],
      ...options,
      maxInstancesPerModel: options.maxInstancesPerModel ?? defaultMaxInstancesPerModel(),
      modelLoadTimeoutMs: options.modelLoadTimeoutMs ?? DEFAULT_MODEL_LOAD_TIMEOUT_MS,
    };
    for (const key of ['maxInstancesPerModel', 'modelLoadTimeoutMs', 'maxLoadCalls'] as const) {
      const v = this.#opts[key];
      if (key === 'maxLoadCalls' && v === undefined) continue;
      if (!Number.isSafeInteger(v) || (v as number) < 1) throw new RangeError(`options.${key} must be a positive integer, got ${String(v)}`);
    }
    this.#backends = new Map(options.backends.map((b) => [b.name, b]));
    if (options.responseCacheBytes) this.#responseCache = new ResponseCache(options.responseCacheBytes);
    const o = this.#opts;
    if (o.rateLimit !== 'off' && o.rateLimit !== 'execution_count') throw new RangeError(`options.rateLimit must be "off" or "execution_count", got ${String(o.rateLimit)}`);
    // One pool for every model; none at all when off, so the off path costs nothing per request.
    const rateLimiter = o.rateLimit === 'execution_count' ? new RateLimiter({ resources: o.rateLimitResources }) : undefined;
    // Models call back into the server for BLS requests and ensemble steps.
    const host = { infer: (request: InferenceRequest) => this.infer(request), getModel: (name: string, version?: number) => this.getModel(name, version) };
    this.#lifecycle = new ModelLifecycle(host, {
      backends: this.#backends,
      backendConfig: o.backendConfig,
      modelRepositories: o.modelRepositories,
      modelLoadTimeoutMs: o.modelLoadTimeoutMs,
      modelLoadRetryCount: o.modelLoadRetryCount,
      modelLoadThreadCount: o.modelLoadThreadCount,
      responseCache: this.#responseCache,
      rateLimiter,
      clock: o.clock,
      logger: o.logger,
    });
    this.#repository = new ModelRepositoryManager(this.#lifecycle, {
      modelRepositories: o.modelRepositories,
      backends: this.#backends,
      backendConfig: o.backendConfig,
      modelControlMode: o.modelControlMode,
      repositoryPollMs: o.repositoryPollMs,
      startupModels: o.startupModels,
      autoCompleteConfig: o.autoCompleteConfig,
      modelConfigName: o.modelConfigName,
      maxInstancesPerModel: o.maxInstancesPerModel,
      modelLoadTimeoutMs: o.modelLoadTimeoutMs,
      ...(o.maxLoadCalls !== undefined ? { maxLoadCalls: o.maxLoadCalls } : {}),
      logger: o.logger,
    });
  }

  /** Creates a server and loads every model of the repositories (model control mode NONE). */
  static async create(options: ServerOptions): Promise<InferenceServer> {
    if (!options.modelRepositories?.length) throw new TypeError('options.modelRepositories must name at least one repository');
    const server = new InferenceServer(options);
    await server.#repository.start();
    return server;
  }

  get logger(): Logger {
    return this.#opts.logger;
  }

  /**
   * Shutting down (`beginShutdown` or `stop` called): Triton's SERVER_EXITING, in which it still
   * serves a model's config but refuses readiness, metadata and statistics ("Server not ready").
   */
  get exiting(): boolean {
    return this.#stopping || this.#draining;
  }

  /** The server is live until `stop` is called. */
  isLive(): boolean {
    return !this.#stopping;
  }

  /** Ready: not stopping and, with strict readiness, every model has a ready version. */
  isReady(): boolean {
    if (this.#stopping || this.#draining) return false;
    if (!this.#opts.strictReadiness) return true;
    for (const m of this.#repository.entries()) {
      if (m.unloaded) continue;
      if (m.error || ![...m.versions.values()].some((v) => v.state === 'READY')) return false;
    }
    return true;
  }

  /** Server metadata (`GET /v2`). */
  metadata(): ServerMetadata {
    return { name: this.#opts.id, version: this.#opts.version, extensions: [...this.#opts.extensions] };
  }

  /** Every model version with its state (the repository index). */
  repositoryIndex(readyOnly = false): ModelIndexEntry[] {
    return this.#repository.repositoryIndex(readyOnly);
  }

  /**
   * The loaded version `version` of a model, or its highest ready version.
   * @throws NOT_FOUND for an unknown model, UNAVAILABLE for one that is not ready.
   */
  getModel(name: string, version?: number): LoadedModel {
    return this.#repository.getModel(name, version);
  }

  /** True if the model (version) is loaded and ready. */
  modelReady(name: string, version?: number): boolean {
    try {
      this.getModel(name, version);
      return !this.#stopping;
    } catch {
      return false;
    }
  }

  /** KServe v2 model metadata. */
  modelMetadata(name: string, version?: number): ModelMetadata {
    const model = this.getModel(name, version);
    const c = model.config;
    const batching = (c.max_batch_size ?? 0) > 0;
    const io = (x: { name: string; data_type?: string; dims?: number[] }) => ({
      name: x.name,
      datatype: configTypeToDataType(x.data_type ?? '') ?? ('BYTES' as DataType),
      shape: batching ? [-1, ...(x.dims ?? [])] : [...(x.dims ?? [])],
    });
    const versions = version !== undefined
      ? [String(version)]
      : [...this.#repository.entry(name).versions.entries()].filter(([, s]) => s.state === 'READY').map(([v]) => String(v)).sort((a, b) => Number(a) - Number(b));
    return {
      name,
      versions,
      platform: c.platform || c.backend || '',
      inputs: (c.input ?? []).map(io),
      outputs: (c.output ?? []).map(io),
    };
  }

  /** The model's config in Triton's JSON form. */
  modelConfig(name: string, version?: number): Record<string, unknown> {
    const { config } = this.getModel(name, version);
    return withConfigWarnings(modelConfigToJson(config), config);
  }

  /**
   * Statistics of every ready version of every model, of one model, or of one version. As Triton's
   * TRITONSERVER_ServerModelStatistics, a model with no ready version (an unknown one too) and a
   * version that is not ready are INVALID_ARG, in its words.
   */
  modelStatistics(name?: string, version?: number): ModelStatistics[] {
    const ready = (m: { versions: Map<number, { state: string; model?: LoadedModel }> }) =>
      [...m.versions.entries()].filter(([, s]) => s.state === 'READY' && s.model).sort((a, b) => a[0] - b[0]);
    if (name === undefined || name === '') {
      const out: ModelStatistics[] = [];
      for (const m of [...this.#repository.entries()].sort((a, b) => compareModelNames(a.name, b.name))) {
        for (const [v, s] of ready(m)) out.push(s.model!.stats.toJson(m.name, String(v)));
      }
      return out;
    }
    const m = [...this.#repository.entries()].find((e) => e.name === name);
    const rows = m ? ready(m) : [];
    if (rows.length === 0) throw Errors.statsModelNotAvailable(name);
    if (version === undefined) return rows.map(([v, s]) => s.model!.stats.toJson(name, String(v)));
    const row = rows.find(([v]) => v === version);
    if (!row) throw Errors.statsVersionNotAvailable(name);
    return [row[1].model!.stats.toJson(name, String(version))];
  }

  /**
   * Loads a model, or reloads it (explicit mode). The new versions load beside the serving ones
   * and replace them only when ready, so requests keep being answered; a failed load leaves the
   * old versions serving. `config` replaces the model's config file (a load override).
   * @throws TriodeError "failed to load '<name>': ..." when the model cannot be loaded.
   */
  async loadModel(name: string, options: LoadOptions = {}): Promise<void> {
    await this.#repository.loadModel(name, options);
  }

  /**
   * Unloads a model (explicit mode): it stops taking requests at once and finishes those it holds.
   * An ensemble using it is unloaded too; with `unloadDependents`, so are the steps it brought
   * with it (loaded only as its steps, used by no other loaded model), as Triton's dependency graph.
   */
  async unloadModel(name: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    await this.#repository.unloadModel(name, options);
  }

  /**
   * What `unloadModel(name)` does first, alone: the model's loads in progress are given up
   * (UNAVAILABLE "failed to load '<name>': the load was cancelled by an unload of the model").
   * @returns false, giving up nothing, where an unload would be refused (not explicit mode, stopping)
   */
  cancelLoads(name: string): boolean {
    return this.#repository.cancelLoads(name);
  }

  /**
   * The models a load of `name` (`steps: true`, with its `config` override if any) or an unload
   * (`steps`: its `unloadDependents`) may change: itself, with `steps` the models of its ensemble
   * steps and theirs, and the loaded ensembles that use any of these. Loads and unloads whose sets
   * share no model are independent (a cluster worker runs them at once, as Triton does).
   * @example server.modelsAffectedBy('ensemble_x', { steps: true }) // ['ensemble_x', 'step_a', 'step_b']
   */
  modelsAffectedBy(name: string, options: { config?: ModelConfig; steps?: boolean } = {}): string[] {
    return this.#repository.modelsAffectedBy(name, options);
  }

  /**
   * Poll mode: re-reads the repositories; a model whose files changed is reloaded (beside the
   * serving version, which stays if the reload fails), a new one loaded, a removed one unloaded.
   * Runs every `repositoryPollMs`; callable directly.
   */
  async pollRepository(): Promise<void> {
    await this.#repository.pollRepository();
  }

  /**
   * Calls `listener` with every successful request's latencies, per model version (for latency
   * histograms and summaries), with the version's metric labels and buckets (`metric_tags`,
   * `model_metrics`). One listener; a new call replaces it.
   */
  observeLatencies(listener: (model: string, version: string, o: LatencyObservation, settings?: ModelMetricSettings) => void): void {
    this.#lifecycle.observeLatencies(listener, this.#repository.entries());
  }

  /** The response cache's counters (undefined without a cache). */
  responseCacheStats(): ResponseCacheStats | undefined {
    return this.#responseCache?.stats();
  }

  /**
   * Per loaded model version: its statistics and queue depth, and what its config says of its
   * metrics (`metric_tags` labels, `model_metrics` buckets, decoupled, response cache), for the
   * metrics endpoint.
   */
  metricsSnapshot(): ({ name: string; version: string; stats: ModelStatistics; failures: Record<string, number>; pending: number; loadSeconds?: number } & ModelMetricSettings)[] {
    const out: ReturnType<InferenceServer['metricsSnapshot']> = [];
    for (const m of this.#repository.entries()) {
      for (const [v, slot] of m.versions) {
        if (!slot.model) continue;
        const { labels, histogramBuckets, decoupled, responseCache } = modelMetricSettings(slot.model.config);
        out.push({
          name: m.name, version: String(v), stats: slot.model.stats.toJson(m.name, String(v)), failures: { ...slot.model.stats.failures }, pending: slot.model.pendingCount(),
          labels, histogramBuckets, decoupled, responseCache,
          ...(slot.loadSeconds !== undefined ? { loadSeconds: slot.loadSeconds } : {}),
        });
      }
    }
    return out;
  }

  /** Runs one inference request; rejects with a TriodeError. */
  infer(request: InferenceRequest): Promise<InferenceResponse> {
    // Not an async function: the model's promise is returned with one reaction that counts the
    // request out, instead of an async frame and an await around it.
    let response: Promise<InferenceResponse>;
    try {
      if (this.#stopped) throw Errors.serverStopping();
      checkCallChain(request);
      const model = this.getModel(request.modelName, request.modelVersion);
      this.#inflight++;
      try {
        response = model.infer(request);
      } catch (err) {
        this.#countOut();
        throw err;
      }
    } catch (err) {
      return Promise.reject(err);
    }
    return response.then(this.#answered, this.#failed);
  }

  /**
   * Runs a request and calls `onResponse` for each of its responses: one for a regular model,
   * 0..N for a decoupled one (`model_transaction_policy { decoupled: true }`). Resolves after the
   * last response; rejects with a TriodeError.
   */
  async inferStream(request: InferenceRequest, onResponse: ResponseHandler, options?: InferStreamOptions): Promise<void> {
    if (this.#stopped) throw Errors.serverStopping();
    checkCallChain(request);
    const model = this.getModel(request.modelName, request.modelVersion);
    if (model.config.model_transaction_policy?.decoupled) options?.onDecoupled?.();
    this.#inflight++;
    try {
      await model.inferStream(request, onResponse);
    } finally {
      this.#countOut();
    }
  }

  /** Requests accepted and not yet answered. */
  inflightCount(): number {
    return this.#inflight;
  }

  /**
   * Marks the server not ready (load balancers stop sending) while it still serves what arrives;
   * the first step of a graceful shutdown, before `stop`.
   */
  beginShutdown(): void {
    this.#draining = true;
    // A load in progress would hold the drain up (its request is in flight): give it up.
    this.#lifecycle.abortLoads(undefined, Errors.unavailable('Server is stopping, model loads in progress were cancelled'));
  }

  /**
   * Stops the models' schedulers (new requests are refused UNAVAILABLE, except those continuing a
   * live sequence), waits up to `timeoutMs` for the requests in flight and for live sequences to
   * end (their END, or their idle timeout), then unloads every model. Triton: InferenceServer::Stop.
   * Resolves to the number of requests still in flight when the timeout ran out.
   * `waitForSequences` false: waits for the requests in flight only, not for live sequences (a
   * cluster worker that has left its streams: no continuation can reach it any more).
   */
  async stop(timeoutMs = 30_000, options: { waitForSequences?: boolean } = {}): Promise<number> {
    this.#stopping = true;
    this.#repository.stop();
    this.#lifecycle.abortLoads(undefined, Errors.unavailable('Server is stopping, model loads in progress were cancelled'));
    const models = [...this.#repository.entries()].flatMap((m) => [...m.versions.values()].map((v) => v.model).filter((x): x is LoadedModel => !!x));
    const deadline = Date.now() + timeoutMs;
    for (const m of models) m.stopAccepting();
    // Triton's exit loop logs what each model version still holds.
    for (const m of models) {
      const n = m.inflightCount() + (m.activeSequenceCount?.() ?? 0);
      if (n > 0) this.logger.info(`Model '${m.name}' (version ${m.version}) has ${n} in-flight inferences`);
    }
    // The requests the server itself accepted too: a decoupled request is answered only after its
    // last response is sent.
    const waitSequences = options.waitForSequences ?? true;
    await settleWithin(Promise.all([...models.map((m) => (waitSequences ? m.quiesced() : m.idle())), this.#answeredAll()]), timeoutMs);
    this.#stopped = true;
    const live = models.reduce((n, m) => n + (m.activeSequenceCount?.() ?? 0), 0);
    if (live > 0 && waitSequences) this.logger.warning(`exit timeout expired with ${live} sequences still live`);
    const left = this.#inflight;
    if (left > 0) this.logger.warning(`exit timeout expired with ${left} inference requests in flight`);
    // What is still running after the timeout is not waited for again; releasing gets what is
    // left of the timeout (at least a second).
    const grace = Math.max(STOP_RELEASE_MIN_MS, deadline - Date.now());
    await Promise.allSettled(models.map((m) => m.unload({ timeoutMs: left > 0 ? 0 : grace, releaseMs: grace })));
    // Models loaded with file overrides: their temporary directories go with them, as on unload.
    await this.#repository.removeOverrides();
    for (const b of this.#backends.values()) await b.finalize?.();
    return left;
  }
}
