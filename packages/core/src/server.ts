/**
 * @module InferenceServer: the in-process server (Triton's C API). Owns the repository, the model
 * lifecycle and one scheduler per loaded model version; frontends and embedding applications call it.
 * Triton: core/src/server.cc, core/src/tritonserver.cc, model_repository_manager/model_lifecycle.cc
 */
import { readdirSync, statSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Backend } from './backend-api.js';
import { settleWithin, systemClock, type Clock } from './clock.js';
import { Errors, TriodeError, echo } from './errors.js';
import type { InferenceRequest, InferenceResponse } from './infer-request.js';
import { ModelVersion, abortable } from './model.js';
import { EnsembleModel, validateEnsemble } from './ensemble-model.js';
import { warmupRequests } from './model-warmup.js';
import type { ModelConfig } from './model-config/model-config.js';
import { PLATFORMS, autoCompleteBackendFields, normalizeModelConfig } from './model-config/normalize-model-config.js';
import { validateModelConfig } from './model-config/validate-model-config.js';
import { checkUnimplementedConfig } from './model-config/unimplemented-config.js';
import { modelConfigToJson } from './model-config/model-config-json.js';
import { pollFailure, removeOverride, writeOverrideFiles } from './model-repository/load-override.js';
import { clientLoadMessage, loadFailed } from './model-repository/load-error.js';
import { checkModelName } from './model-repository/model-name.js';
import { runRepositoryAgents } from './model-repository/repository-agent.js';
import { ResponseCache, type ResponseCacheStats } from './cache/response-cache.js';
import { listVersionFiles, listVersions, readLabels, readModelConfig, scanRepositories, selectVersions } from './model-repository/repository-fs.js';
import { silentLogger, type Logger } from './logger.js';
import type { LatencyObservation, ModelStatistics } from './stats/infer-stats.js';
import { configTypeToDataType, type DataType } from './tensor/data-type.js';

/** Triton's model states (repository index `state`). */
export type ModelReadyState = 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

/** One row of the repository index. */
export interface ModelIndexEntry {
  name: string;
  version?: string;
  state: ModelReadyState;
  reason: string;
}

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
  /** Models to load at start in explicit mode (`--load-model`; `*` loads all). @default [] */
  startupModels?: string[];
  /** Per-backend settings (`--backend-config=<backend>,<k>=<v>`). @default {} */
  backendConfig?: Record<string, Record<string, string>>;
  /** @default silentLogger */
  logger?: Logger;
  /** @default systemClock */
  clock?: Clock;
}

/** A loaded model version: one run by a backend, or an ensemble of other models. */
export type LoadedModel = ModelVersion | EnsembleModel;

/** The least time `stop` gives models to release their instances after the requests are done. */
const STOP_RELEASE_MIN_MS = 1000;

/** How deep models may call models (BLS) before a request is refused: stops endless recursion. */
export const MAX_BLS_DEPTH = 16;

/** The default of `ServerOptions.maxInstancesPerModel`, sized to this machine: max(16, 4 x its CPUs). */
export function defaultMaxInstancesPerModel(): number {
  return Math.max(16, 4 * availableParallelism());
}

/** The default of `ServerOptions.modelLoadTimeoutMs`: 5 minutes. */
export const DEFAULT_MODEL_LOAD_TIMEOUT_MS = 300_000;

/** The instances a (normalized) config asks for: the sum of its instance groups' counts. */
export function instanceCountOf(config: ModelConfig): number {
  const groups = config.instance_group?.length ? config.instance_group : [{}];
  return groups.reduce((a, g) => a + (g.count ?? 1), 0);
}

/** The extensions the core implements (frontends may add their own). */
export const CORE_EXTENSIONS = ['classification', 'binary_tensor_data', 'statistics', 'model_configuration'];

interface VersionSlot {
  state: ModelReadyState;
  reason: string;
  /** The code of the error that made the version UNAVAILABLE. */
  code?: TriodeError['code'];
  model?: LoadedModel;
}

interface ModelEntry {
  name: string;
  path: string;
  config?: ModelConfig;
  /** Set when the model failed before any version was loaded (config or repository problem). */
  error?: TriodeError;
  /** In the repository but not loaded (explicit mode, or unloaded). */
  unloaded?: boolean;
  /**
   * Loaded from `file:` overrides: the directory mkdtemp made (`path` is inside it), removed, by
   * this exact path, when the model is retired or its load fails.
   */
  overrideRoot?: string;
  /** Signature of the model's files other than its config, when it was prepared. */
  filesSig?: string;
  versions: Map<number, VersionSlot>;
}

/** Options of an explicit load: a config override and `file:` overrides of the model's files. */
export interface LoadOptions {
  /** Replaces the model's config file (the `config` parameter). */
  config?: ModelConfig;
  /**
   * The model's files, keyed by path relative to the model directory (`1/model.onnx`); when
   * given, the model is loaded from these instead of the repository, and `config` is required.
   */
  files?: Record<string, Uint8Array>;
}

/**
 * The in-process inference server. Create it with `InferenceServer.create`, then `infer`.
 * @example
 * const server = await InferenceServer.create({ modelRepositories: ['./model_repository'], backends: [new OnnxRuntimeBackend()] });
 * const res = await server.infer({ modelName: 'simple', inputs: [...] });
 * await server.stop();
 */
export class InferenceServer {
  readonly #opts: Required<Omit<ServerOptions, 'modelConfigName'>> & { modelConfigName?: string };
  /** Serializes load/unload calls of one model. */
  readonly #loading = new Map<string, Promise<unknown>>();
  /** Poll mode: each model directory's file signature at the last poll, and the poll timer. */
  readonly #signatures = new Map<string, string>();
  #pollTimer: ReturnType<typeof setInterval> | undefined;
  #polling = false;
  #latencyListener: ((model: string, version: string, o: LatencyObservation) => void) | undefined;
  #responseCache: ResponseCache | undefined;
  /** Loads running now, and those waiting for a free load slot. */
  #activeLoads = 0;
  #loadQueue: (() => void)[] = [];
  readonly #backends: Map<string, Backend>;
  readonly #models = new Map<string, ModelEntry>();
  /** Per model name: the loads in progress, aborted by an unload of that model or a shutdown. */
  readonly #loadAborts = new Map<string, Set<AbortController>>();
  #stopping = false;
  #draining = false;
  #inflight = 0;

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
      ...options,
      maxInstancesPerModel: options.maxInstancesPerModel ?? defaultMaxInstancesPerModel(),
      modelLoadTimeoutMs: options.modelLoadTimeoutMs ?? DEFAULT_MODEL_LOAD_TIMEOUT_MS,
    };
    for (const key of ['maxInstancesPerModel', 'modelLoadTimeoutMs'] as const) {
      const v = this.#opts[key];
      if (!Number.isSafeInteger(v) || v < 1) throw new RangeError(`options.${key} must be a positive integer, got ${String(v)}`);
    }
    this.#backends = new Map(options.backends.map((b) => [b.name, b]));
    if (options.responseCacheBytes) this.#responseCache = new ResponseCache(options.responseCacheBytes);
  }

  /** Creates a server and loads every model of the repositories (model control mode NONE). */
  static async create(options: ServerOptions): Promise<InferenceServer> {
    if (!options.modelRepositories?.length) throw new TypeError('options.modelRepositories must name at least one repository');
    const server = new InferenceServer(options);
    await server.#loadAll();
    if (server.#opts.modelControlMode === 'poll') {
      for (const m of scanRepositories(server.#opts.modelRepositories).values()) server.#signatures.set(m.name, signature(m.path));
      server.#pollTimer = setInterval(() => { void server.pollRepository(); }, server.#opts.repositoryPollMs);
      server.#pollTimer.unref();
    }
    return server;
  }

  get logger(): Logger {
    return this.#opts.logger;
  }

  async #loadAll(): Promise<void> {
    const found = scanRepositories(this.#opts.modelRepositories);
    const entries: { entry: ModelEntry; versions: number[] }[] = [];
    const startup = this.#opts.startupModels;
    const selected = (name: string) => this.#opts.modelControlMode !== 'explicit' || startup.includes('*') || startup.includes(name);
    for (const name of startup) {
      if (name !== '*' && !found.has(name)) this.logger.error(`failed to load '${echo(name)}', failed to poll from model repository: model not found in any model repository`);
    }
    await Promise.all([...found.values()].map(async (m) => {
      const entry: ModelEntry = { name: m.name, path: m.path, versions: new Map() };
      this.#models.set(m.name, entry);
      if (!selected(m.name)) {
        entry.unloaded = true;
        return;
      }
      if (m.error) {
        entry.error = m.error;
        return;
      }
      const versions = await this.#prepare(entry);
      if (versions) entries.push({ entry, versions });
    }));
    // Models first, then ensembles in dependency order (an ensemble checks its steps at load).
    const isEnsemble = (e: ModelEntry) => e.config?.platform === PLATFORMS.ensemble;
    await Promise.all(entries.filter((e) => !isEnsemble(e.entry)).map((e) => this.#loadVersions(e.entry, e.versions)));
    let pending = entries.filter((e) => isEnsemble(e.entry));
    while (pending.length > 0) {
      const names = new Set(pending.map((e) => e.entry.name));
      const ready = pending.filter((e) => !(e.entry.config?.ensemble_scheduling?.step ?? []).some((s) => names.has(s.model_name ?? '')));
      if (ready.length === 0) {
        for (const e of pending) e.entry.error = Errors.invalidArg(`ensemble '${e.entry.name}' is part of a circular dependency between ensembles`);
        break;
      }
      await Promise.all(ready.map((e) => this.#loadVersions(e.entry, e.versions)));
      pending = pending.filter((e) => !ready.includes(e));
    }
    for (const row of this.repositoryIndex()) {
      if (row.reason === 'unloaded') continue;
      if (row.state !== 'READY') this.logger.error(`failed to load '${row.name}'${row.version ? ` version ${row.version}` : ''}: ${row.reason}`, { model: row.name });
      else this.logger.info(`successfully loaded '${row.name}' version ${row.version ?? ''}`, { model: row.name });
    }
  }

  /** Reads, completes, normalizes and validates a model's config. */
  async #prepareConfig(entry: ModelEntry, override?: ModelConfig): Promise<{ config: ModelConfig; versions: number[] }> {
    const autoComplete = this.#opts.autoCompleteConfig;
    const config = override ? structuredClone(override) : readModelConfig(entry.path, { configName: this.#opts.modelConfigName, autoComplete });
    if (!config.name) config.name = entry.name;
    // Agents see the files before anything reads them (Triton: TRITONREPOAGENT_ACTION_LOAD).
    runRepositoryAgents(config, entry.path);
    autoCompleteBackendFields(config, listVersionFiles(entry.path));
    const available = listVersions(entry.path);
    const backend = config.backend ? this.#backends.get(config.backend) : undefined;
    if (config.backend && !backend && config.platform !== 'ensemble') {
      throw Errors.invalidArg(`unable to find backend '${config.backend}' for model '${entry.name}'`);
    }
    if (autoComplete && backend?.autoCompleteConfig) {
      const latest = available[available.length - 1];
      await backend.autoCompleteConfig(config, {
        name: entry.name,
        modelPath: entry.path,
        versionPath: latest === undefined ? undefined : join(entry.path, String(latest)),
        backendConfig: this.#opts.backendConfig[backend.name] ?? {},
      });
    }
    normalizeModelConfig(config);
    validateModelConfig(config, entry.name);
    this.#checkInstanceCount(entry.name, config);
    for (const warning of checkUnimplementedConfig(config)) this.logger.warning(warning, { model: entry.name });
    return { config, versions: selectVersions(available, config.version_policy) };
  }

  /** Refuses a config that asks for more than `maxInstancesPerModel` instances (before any is made). */
  #checkInstanceCount(name: string, config: ModelConfig): void {
    const n = instanceCountOf(config);
    const max = this.#opts.maxInstancesPerModel;
    if (n > max) {
      throw Errors.invalidArg(`model '${name}' asks for ${n} instances, more than the limit of ${max} instances per model (--max-instances-per-model)`);
    }
  }

  /** The directories a client-facing load message must not show: repositories, temp directory, an override. */
  #hiddenDirs(entry?: ModelEntry): string[] {
    return [...this.#opts.modelRepositories.map((r) => resolve(r)), ...(entry?.overrideRoot ? [entry.overrideRoot] : []), resolve(tmpdir())];
  }

  /** A load error as clients see it (no paths, no stack); the full detail goes to the log when it differs. */
  #clientError(entry: ModelEntry, err: unknown, code: TriodeError['code']): TriodeError {
    const e = TriodeError.from(err, code);
    const message = clientLoadMessage(e.message, this.#hiddenDirs(entry));
    if (message === e.message) return e;
    this.logger.error(`failed to load '${entry.name}': ${e.message}`, { model: entry.name });
    return new TriodeError(e.code, message, { cause: e });
  }

  /** Prepares a model's config; returns the versions to load, or undefined (entry.error set). */
  async #prepare(entry: ModelEntry, override?: ModelConfig): Promise<number[] | undefined> {
    let prepared: { config: ModelConfig; versions: number[] };
    try {
      prepared = await this.#prepareConfig(entry, override);
    } catch (err) {
      entry.error = this.#clientError(entry, err, 'INVALID_ARG');
      return undefined;
    }
    entry.config = prepared.config;
    entry.filesSig = modelFilesSignature(entry.path);
    if (prepared.versions.length === 0) {
      entry.error = Errors.unavailable(`at least one version must be available under the version policy of model '${entry.name}'`);
      return undefined;
    }
    return prepared.versions;
  }

  /**
   * Loads the versions of a prepared model (an ensemble after the models it uses). `signal` gives
   * a load up (an unload of the model, a shutdown); each version also has `modelLoadTimeoutMs`.
   */
  async #loadVersions(entry: ModelEntry, versions: number[], signal?: AbortSignal): Promise<void> {
    const config = entry.config!;
    const backend = this.#backends.get(config.backend ?? '');
    const infer = (request: InferenceRequest) => this.infer(request);
    await Promise.all(versions.map(async (version) => {
      const slot: VersionSlot = { state: 'LOADING', reason: '' };
      entry.versions.set(version, slot);
      try {
        if (config.platform === PLATFORMS.ensemble) {
          validateEnsemble(config, (name, v) => {
            try {
              return this.getModel(name, v >= 0 ? v : undefined);
            } catch {
              return undefined;
            }
          });
          const labels = new Map<string, string[]>();
          for (const o of config.output ?? []) if (o.label_filename) labels.set(o.name, readLabels(entry.path, o.label_filename));
          slot.model = new EnsembleModel(config, version, infer, { clock: this.#opts.clock, labels });
          this.#observe(entry.name, version, slot.model);
        } else {
          if (!backend) throw Errors.unsupported(`backend '${config.backend || config.platform || ''}' is not supported`);
          const model = await this.#withLoadSlot(signal, () => this.#timeLimited(version, signal, (s) => this.#loadVersion(entry, version, backend, s)));
          slot.model = model;
          this.#observe(entry.name, version, model);
          if (config.response_cache?.enable && this.#responseCache) model.responseCache = this.#responseCache;
        }
        slot.state = 'READY';
      } catch (err) {
        const e = this.#clientError(entry, err, 'INTERNAL');
        slot.state = 'UNAVAILABLE';
        slot.reason = e.message;
        slot.code = e.code;
      }
    }));
  }

  /** One version of a backend model: its instances, then its warmup samples (READY only after them). */
  async #loadVersion(entry: ModelEntry, version: number, backend: Backend, signal: AbortSignal): Promise<ModelVersion> {
    const config = entry.config!;
    const model = await this.#retry(() => ModelVersion.load(
      {
        name: entry.name,
        version,
        modelPath: entry.path,
        versionPath: join(entry.path, String(version)),
        config,
        backendConfig: this.#opts.backendConfig[backend.name] ?? {},
        infer: (request: InferenceRequest) => this.infer(request),
        signal,
      },
      backend,
      this.#opts.clock,
    ), `'${entry.name}' version ${version}`, signal);
    try {
      await abortable((async () => {
        for (const sample of config.model_warmup ?? []) {
          for (const req of warmupRequests(sample, config, entry.path)) {
            // A fast model answers in microtasks only: yield so timers (the load timeout) and I/O run.
            await new Promise((r) => setImmediate(r));
            if (signal.aborted) return;
            // Each sample runs on every instance, not through the scheduler (which would warm one).
            await model.warmup({ ...req, modelVersion: version });
          }
        }
      })(), signal);
    } catch (err) {
      // Not awaited: a warmup request that never ends must not hold the load up.
      void model.unload().catch(() => undefined);
      if (signal.aborted) throw signal.reason;
      throw Errors.invalidArg(`warmup sample failed: ${(err as Error).message}`);
    }
    return model;
  }

  /**
   * Runs `f` with a signal that aborts after `modelLoadTimeoutMs` (UNAVAILABLE) or with `outer`;
   * rejects as soon as it aborts, whatever `f` is doing.
   */
  async #timeLimited<T>(version: number, outer: AbortSignal | undefined, f: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const ms = this.#opts.modelLoadTimeoutMs;
    const control = new AbortController();
    const onOuter = (): void => control.abort(outer?.reason);
    if (outer?.aborted) onOuter();
    outer?.addEventListener('abort', onOuter, { once: true });
    const clock = this.#opts.clock;
    const timer = clock.setTimeout(() => control.abort(Errors.unavailable(`version ${version} did not finish loading within ${ms} ms (--model-load-timeout-secs)`)), ms);
    try {
      return await abortable(f(control.signal), control.signal);
    } finally {
      clock.clearTimeout(timer);
      outer?.removeEventListener('abort', onOuter);
    }
  }

  /** Runs `f` when fewer than `modelLoadThreadCount` loads are running (or rejects when `signal` aborts first). */
  async #withLoadSlot<T>(signal: AbortSignal | undefined, f: () => Promise<T>): Promise<T> {
    if (this.#activeLoads >= Math.max(1, this.#opts.modelLoadThreadCount)) {
      let wake: () => void = () => undefined;
      const turn = new Promise<void>((r) => { wake = r; this.#loadQueue.push(r); });
      try {
        await abortable(turn, signal);
      } catch (err) {
        const i = this.#loadQueue.indexOf(wake);
        // Still waiting: leave the queue. Already woken: pass the turn on.
        if (i >= 0) this.#loadQueue.splice(i, 1);
        else this.#loadQueue.shift()?.();
        throw err;
      }
    }
    this.#activeLoads++;
    try {
      signal?.throwIfAborted();
      return await f();
    } finally {
      this.#activeLoads--;
      this.#loadQueue.shift()?.();
    }
  }

  /** Tries a load again up to `modelLoadRetryCount` times (not once `signal` aborted). */
  async #retry<T>(f: () => Promise<T>, what: string, signal?: AbortSignal): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await f();
      } catch (err) {
        if (attempt >= this.#opts.modelLoadRetryCount || signal?.aborted) throw err;
        this.logger.warning(`loading ${what} failed (${(err as Error).message}); retrying (${attempt + 1} of ${this.#opts.modelLoadRetryCount})`);
      }
    }
  }

  /** The server is live until `stop` is called. */
  isLive(): boolean {
    return !this.#stopping;
  }

  /** Ready: not stopping and, with strict readiness, every model has a ready version. */
  isReady(): boolean {
    if (this.#stopping || this.#draining) return false;
    if (!this.#opts.strictReadiness) return true;
    for (const m of this.#models.values()) {
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
    const rows: ModelIndexEntry[] = [];
    for (const m of [...this.#models.values()].sort((a, b) => a.name.localeCompare(b.name))) {
      if (m.unloaded) {
        if (!readyOnly) rows.push({ name: m.name, state: 'UNAVAILABLE', reason: 'unloaded' });
        continue;
      }
      if (m.error && m.versions.size === 0) {
        if (!readyOnly) rows.push({ name: m.name, state: 'UNAVAILABLE', reason: m.error.message });
        continue;
      }
      for (const [v, slot] of [...m.versions.entries()].sort((a, b) => a[0] - b[0])) {
        if (readyOnly && slot.state !== 'READY') continue;
        rows.push({ name: m.name, version: String(v), state: slot.state, reason: slot.reason });
      }
    }
    return rows;
  }

  #entry(name: string): ModelEntry {
    const m = this.#models.get(name);
    if (!m) throw Errors.unknownModel(name);
    return m;
  }

  /**
   * The loaded version `version` of a model, or its highest ready version.
   * @throws NOT_FOUND for an unknown model, UNAVAILABLE for one that is not ready.
   */
  getModel(name: string, version?: number): LoadedModel {
    const m = this.#entry(name);
    if (version !== undefined && version !== -1) {
      const slot = m.versions.get(version);
      if (!slot) throw Errors.unknownModel(name, version);
      if (slot.state !== 'READY' || !slot.model) throw Errors.modelNotReady(name, version, slot.reason);
      return slot.model;
    }
    const ready = [...m.versions.entries()].filter(([, s]) => s.state === 'READY' && s.model).sort((a, b) => b[0] - a[0]);
    if (ready.length === 0) throw Errors.modelNotReady(name, undefined, m.error?.message ?? [...m.versions.values()][0]?.reason);
    return ready[0]![1].model!;
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
      : [...this.#entry(name).versions.entries()].filter(([, s]) => s.state === 'READY').map(([v]) => String(v)).sort((a, b) => Number(a) - Number(b));
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
    return modelConfigToJson(this.getModel(name, version).config);
  }

  /** Statistics of every loaded version, of one model, or of one version. */
  modelStatistics(name?: string, version?: number): ModelStatistics[] {
    if (name === undefined || name === '') {
      const out: ModelStatistics[] = [];
      for (const m of [...this.#models.values()].sort((a, b) => a.name.localeCompare(b.name))) {
        for (const [v, s] of [...m.versions.entries()].sort((a, b) => a[0] - b[0])) {
          if (s.model) out.push(s.model.stats.toJson(m.name, String(v)));
        }
      }
      return out;
    }
    const m = this.#entry(name);
    if (version !== undefined) {
      const s = m.versions.get(version);
      if (!s?.model) throw Errors.unknownModel(name, version);
      return [s.model.stats.toJson(name, String(version))];
    }
    const rows = [...m.versions.entries()].filter(([, s]) => s.model).sort((a, b) => a[0] - b[0]);
    if (rows.length === 0) throw Errors.modelNotReady(name);
    return rows.map(([v, s]) => s.model!.stats.toJson(name, String(v)));
  }

  #checkControl(action: 'load' | 'unload', name: string): void {
    if (this.#opts.modelControlMode === 'poll') {
      throw Errors.unsupported(`failed to ${action} '${name}': explicit model load / unload is not allowed if polling is enabled`);
    }
    if (this.#opts.modelControlMode !== 'explicit') {
      throw Errors.unsupported(`failed to ${action} '${name}': explicit model load / unload is not allowed if model control mode is ${this.#opts.modelControlMode.toUpperCase()}`);
    }
    if (this.#stopping) throw Errors.serverStopping();
  }

  /** Runs load/unload calls of one model one after another. */
  async #serialize<T>(name: string, f: () => Promise<T>): Promise<T> {
    const prev = this.#loading.get(name) ?? Promise.resolve();
    const next = prev.catch(() => undefined).then(f);
    this.#loading.set(name, next);
    try {
      return await next;
    } finally {
      if (this.#loading.get(name) === next) this.#loading.delete(name);
    }
  }

  /**
   * Loads a model, or reloads it (explicit mode). The new versions load beside the serving ones
   * and replace them only when ready, so requests keep being answered; a failed load leaves the
   * old versions serving. `config` replaces the model's config file (a load override).
   * @throws TriodeError "failed to load '<name>': ..." when the model cannot be loaded.
   */
  async loadModel(name: string, options: LoadOptions = {}): Promise<void> {
    checkModelName(name);
    this.#checkControl('load', name);
    await this.#load(name, options);
  }

  /** Loads a model; an unload of it or a shutdown gives the load up (UNAVAILABLE). */
  async #load(name: string, options: LoadOptions = {}): Promise<void> {
    const control = new AbortController();
    const mine = this.#loadAborts.get(name) ?? new Set<AbortController>();
    mine.add(control);
    this.#loadAborts.set(name, mine);
    try {
      await this.#serialize(name, () => this.#loadNow(name, options, control.signal));
    } finally {
      mine.delete(control);
      if (mine.size === 0 && this.#loadAborts.get(name) === mine) this.#loadAborts.delete(name);
    }
  }

  async #loadNow(name: string, options: LoadOptions, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    let entry: ModelEntry;
    if (options.files && Object.keys(options.files).length > 0) {
      if (!options.config) throw Errors.invalidArg(`failed to load '${name}': a 'config' parameter must be given with 'file:' overrides`);
      // The instance limit is checked before any file is written (and again once normalized).
      try {
        this.#checkInstanceCount(name, options.config);
      } catch (err) {
        throw Errors.invalidArg(`failed to load '${name}': ${(err as Error).message}`);
      }
      try {
        const dir = writeOverrideFiles(name, options.files);
        entry = { name, path: dir.modelDir, overrideRoot: dir.root, versions: new Map() };
      } catch (err) {
        const cause = (err as Error).cause;
        if (cause instanceof Error) this.logger.error(`failed to load '${name}': ${cause.message}`, { model: name });
        throw err;
      }
    } else {
      const found = scanRepositories(this.#opts.modelRepositories).get(name);
      if (!found || found.error) {
        // Triton's answer; the detail (which can name directories) goes to the log only.
        this.logger.error(`failed to poll model '${name}': ${found?.error?.message ?? 'model not found in any model repository'}`, { model: name });
        throw pollFailure(name);
      }
      entry = { name, path: found.path, versions: new Map() };
    }
    let committed = false;
    try {
      const versions = await this.#prepare(entry, options.config);
      if (!versions) throw Errors.invalidArg(`failed to load '${name}': ${entry.error?.message ?? 'no version to load'}`);
      if (await this.#updateInstancesInPlace(entry, versions)) return;
      signal.throwIfAborted();
      await this.#loadVersions(entry, versions, signal);
      const failed = [...entry.versions.entries()].filter(([, v]) => v.state !== 'READY');
      if (failed.length === entry.versions.size) {
        const code = failed.every(([, v]) => v.code === 'UNAVAILABLE') ? 'UNAVAILABLE' : 'INVALID_ARG';
        throw loadFailed(name, failed.map(([v, slot]) => `version ${v} is at ${slot.state} state: ${slot.reason};`).join(' '), code);
      }
      // An unload that came while the versions loaded wins: they are not installed.
      signal.throwIfAborted();
      const old = this.#models.get(name);
      this.#models.set(name, entry);
      committed = true;
      this.logger.info(`successfully loaded '${name}'`, { model: name });
      // The old versions finish what they hold, then go.
      if (old) void this.#retire(old);
    } finally {
      // Whatever was made for a load that did not go through is released (and its override removed).
      if (!committed) await this.#retire(entry);
    }
  }

  /** Gives up the loads of `name` in progress (all loads without a name). */
  #abortLoads(name: string | undefined, reason: TriodeError): void {
    for (const [n, controls] of this.#loadAborts) {
      if (name === undefined || n === name) for (const c of controls) c.abort(reason);
    }
  }

  /**
   * A reload whose only change is the instance count of the (last) instance group, with the same
   * versions and model files, changes the serving versions' instances in place: no reload, no
   * pause (Triton does the same). `candidate` is the prepared new entry. Returns false when a full
   * reload is needed.
   */
  async #updateInstancesInPlace(candidate: ModelEntry, versions: number[]): Promise<boolean> {
    const old = this.#models.get(candidate.name);
    if (!old?.config || !candidate.config || old.unloaded || old.overrideRoot || candidate.overrideRoot || old.path !== candidate.path || old.filesSig !== candidate.filesSig) return false;
    const prepared = { config: candidate.config, versions };
    const groups = prepared.config.instance_group ?? [];
    if (!onlyLastInstanceCountDiffers(old.config, prepared.config)) return false;
    const slots = [...old.versions.entries()];
    const serving = slots.filter(([, v]) => v.state === 'READY' && v.model instanceof ModelVersion);
    if (serving.length !== slots.length || serving.length !== prepared.versions.length || !serving.every(([v]) => prepared.versions.includes(v))) return false;
    if (prepared.config.sequence_batching) return false;
    for (const [, slot] of serving) {
      if (!(await (slot.model as ModelVersion).setInstanceGroups(structuredClone(groups)))) return false;
    }
    old.config = prepared.config;
    const n = groups.reduce((a, g) => a + (g.count ?? 1), 0);
    this.logger.info(`updated '${candidate.name}' to ${n} instances without reloading`, { model: candidate.name });
    return true;
  }

  /**
   * Unloads a model (explicit mode): it stops taking requests at once and finishes those it holds.
   * With `unloadDependents`, the ensembles that use it are unloaded too.
   */
  async unloadModel(name: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    checkModelName(name);
    this.#checkControl('unload', name);
    await this.#unload(name, options);
  }

  async #unload(name: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    // A load of this model still in progress is given up rather than waited for.
    this.#abortLoads(name, Errors.unavailable(`failed to load '${name}': the load was cancelled by an unload of the model`));
    await this.#serialize(name, async () => {
      const old = this.#models.get(name);
      if (!old) throw Errors.invalidArg(`failed to unload '${name}': no model named '${name}' in the model repositories`);
      this.#models.set(name, { name, path: old.path, versions: new Map(), unloaded: true });
      await this.#retire(old);
      this.logger.info(`successfully unloaded '${name}'`, { model: name });
    });
    if (options.unloadDependents) {
      const dependents = [...this.#models.values()].filter((m) => !m.unloaded && (m.config?.ensemble_scheduling?.step ?? []).some((s) => s.model_name === name));
      for (const d of dependents) await this.#unload(d.name, options);
    }
  }

  /**
   * Poll mode: re-reads the repositories; a model whose files changed is reloaded (beside the
   * serving version, which stays if the reload fails), a new one loaded, a removed one unloaded.
   * Runs every `repositoryPollMs`; callable directly.
   */
  async pollRepository(): Promise<void> {
    if (this.#polling || this.#stopping) return;
    this.#polling = true;
    try {
      const found = scanRepositories(this.#opts.modelRepositories);
      for (const [name, m] of found) {
        const sig = signature(m.path);
        if (this.#signatures.get(name) === sig) continue;
        this.#signatures.set(name, sig);
        try {
          await this.#load(name);
        } catch (err) {
          this.logger.error((err as Error).message, { model: name });
          // A model that never loaded shows why in the index.
          const entry = this.#models.get(name);
          if (!entry || entry.unloaded) this.#models.set(name, { name, path: m.path, versions: new Map(), error: TriodeError.from(err) });
        }
      }
      for (const name of [...this.#models.keys()]) {
        if (found.has(name) || this.#models.get(name)?.unloaded) continue;
        this.#signatures.delete(name);
        await this.#unload(name).catch((err: unknown) => this.logger.error((err as Error).message, { model: name }));
      }
    } catch (err) {
      this.logger.error(`failed to poll from model repository: ${(err as Error).message}`);
    } finally {
      this.#polling = false;
    }
  }

  async #retire(entry: ModelEntry): Promise<void> {
    await Promise.allSettled([...entry.versions.values()].map(async (slot) => {
      if (!slot.model) return;
      slot.state = 'UNLOADING';
      // Bounded like a load: requests that never end do not make the unload hang.
      if (slot.model instanceof ModelVersion) {
        const ms = this.#opts.modelLoadTimeoutMs;
        if (!(await slot.model.unload({ timeoutMs: ms }))) this.logger.warning(`unloading '${entry.name}': requests or instances still busy after ${ms} ms were left behind`, { model: entry.name });
      } else {
        await slot.model.unload();
      }
      slot.state = 'UNAVAILABLE';
      slot.reason = 'unloaded';
    }));
    if (entry.overrideRoot) removeOverride(entry.overrideRoot);
  }

  /**
   * Calls `listener` with every successful request's latencies, per model version (for latency
   * histograms and summaries). One listener; a new call replaces it.
   */
  observeLatencies(listener: (model: string, version: string, o: LatencyObservation) => void): void {
    this.#latencyListener = listener;
    for (const m of this.#models.values()) {
      for (const [v, slot] of m.versions) if (slot.model) this.#observe(m.name, v, slot.model);
    }
  }

  #observe(name: string, version: number, model: LoadedModel): void {
    const listener = this.#latencyListener;
    model.stats.observer = listener ? (o) => listener(name, String(version), o) : undefined;
  }

  /** The response cache's counters (undefined without a cache). */
  responseCacheStats(): ResponseCacheStats | undefined {
    return this.#responseCache?.stats();
  }

  /** Per loaded model version: its statistics and queue depth, for the metrics endpoint. */
  metricsSnapshot(): { name: string; version: string; stats: ModelStatistics; failures: Record<string, number>; pending: number }[] {
    const out: { name: string; version: string; stats: ModelStatistics; failures: Record<string, number>; pending: number }[] = [];
    for (const m of this.#models.values()) {
      for (const [v, slot] of m.versions) {
        if (!slot.model) continue;
        out.push({ name: m.name, version: String(v), stats: slot.model.stats.toJson(m.name, String(v)), failures: { ...slot.model.stats.failures }, pending: slot.model.pendingCount() });
      }
    }
    return out;
  }

  /** Runs one inference request; rejects with a TriodeError. */
  async infer(request: InferenceRequest): Promise<InferenceResponse> {
    if (this.#stopping) throw Errors.serverStopping();
    if ((request.blsDepth ?? 0) > MAX_BLS_DEPTH) {
      throw Errors.invalidArg(`BLS call chain deeper than ${MAX_BLS_DEPTH} requests (does model '${request.modelName}' call itself without end?)`);
    }
    const model = this.getModel(request.modelName, request.modelVersion);
    this.#inflight++;
    try {
      return await model.infer(request);
    } finally {
      this.#inflight--;
    }
  }

  /**
   * Runs a request and calls `onResponse` for each of its responses: one for a regular model,
   * 0..N for a decoupled one (`model_transaction_policy { decoupled: true }`). Resolves after the
   * last response; rejects with a TriodeError.
   */
  async inferStream(request: InferenceRequest, onResponse: (r: InferenceResponse) => void): Promise<void> {
    if (this.#stopping) throw Errors.serverStopping();
    const model = this.getModel(request.modelName, request.modelVersion);
    this.#inflight++;
    try {
      if (model instanceof ModelVersion) await model.inferStream(request, onResponse);
      else onResponse(await model.infer(request));
    } finally {
      this.#inflight--;
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
    this.#abortLoads(undefined, Errors.unavailable('Server is stopping, model loads in progress were cancelled'));
  }

  /**
   * Stops accepting requests, waits up to `timeoutMs` for those in flight, then unloads every model.
   * Resolves to the number of requests still in flight when the timeout ran out.
   */
  async stop(timeoutMs = 30_000): Promise<number> {
    this.#stopping = true;
    clearInterval(this.#pollTimer);
    this.#abortLoads(undefined, Errors.unavailable('Server is stopping, model loads in progress were cancelled'));
    const models = [...this.#models.values()].flatMap((m) => [...m.versions.values()].map((v) => v.model).filter((x): x is LoadedModel => !!x));
    const deadline = Date.now() + timeoutMs;
    await settleWithin(Promise.all(models.map((m) => m.idle())), timeoutMs);
    const left = this.#inflight;
    if (left > 0) this.logger.warning(`exit timeout expired with ${left} inference requests in flight`);
    // What is still running after the timeout is not waited for again; releasing gets what is
    // left of the timeout (at least a second).
    const grace = Math.max(STOP_RELEASE_MIN_MS, deadline - Date.now());
    await Promise.allSettled(models.map((m) => (m instanceof ModelVersion ? m.unload({ timeoutMs: left > 0 ? 0 : grace, releaseMs: grace }) : m.unload())));
    for (const b of this.#backends.values()) await b.finalize?.();
    return left;
  }
}

/** What changes when a model's files change: every path, size and mtime under its directory. */
/** JSON with object keys sorted: equal for equal configs whatever order fields were written in. */
function stableJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(stableJson).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${stableJson((v as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** True when two configs differ only in the count of their last instance group. */
export function onlyLastInstanceCountDiffers(a: ModelConfig, b: ModelConfig): boolean {
  // Compared in the JSON form, which spells out every default: a config read from config.pbtxt
  // and the same config given as a load override compare equal.
  const ja = modelConfigToJson(a) as Record<string, unknown> & { instance_group?: Record<string, unknown>[] };
  const jb = modelConfigToJson(b) as Record<string, unknown> & { instance_group?: Record<string, unknown>[] };
  const ga = ja.instance_group ?? [];
  const gb = jb.instance_group ?? [];
  if (ga.length === 0 || ga.length !== gb.length) return false;
  if (stableJson({ ...ja, instance_group: [] }) !== stableJson({ ...jb, instance_group: [] })) return false;
  for (let i = 0; i < ga.length - 1; i++) if (stableJson(ga[i]) !== stableJson(gb[i])) return false;
  const la = ga[ga.length - 1]!;
  const lb = gb[gb.length - 1]!;
  return (la.count ?? 1) !== (lb.count ?? 1) && stableJson({ ...la, count: 0 }) === stableJson({ ...lb, count: 0 });
}

/** Signature of a model directory's files other than its config (`config.pbtxt`, `configs/`). */
function modelFilesSignature(dir: string): string {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => n !== 'config.pbtxt' && n !== 'configs').sort();
  } catch {
    return '';
  }
  return names.map((n) => {
    const p = join(dir, n);
    let st;
    try {
      st = statSync(p);
    } catch {
      return '';
    }
    return st.isDirectory() ? `${n}/[${signature(p, 1)}]` : `${n}:${st.size}:${st.mtimeMs};`;
  }).join('');
}

function signature(dir: string, depth = 0): string {
  if (depth > 4) return '';
  let out = '';
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return '';
  }
  for (const n of names) {
    const p = join(dir, n);
    let st;
    try {
      st = statSync(p);
    } catch {
      continue;
    }
    out += st.isDirectory() ? `${n}/[${signature(p, depth + 1)}]` : `${n}:${st.size}:${st.mtimeMs};`;
  }
  return out;
}

/** Parses a version string: "" means the policy's choice; anything but digits is an error. */
export function parseModelVersion(version: string | undefined): number | undefined {
  if (version === undefined || version === '') return undefined;
  if (!/^\d+$/.test(version) || !Number.isSafeInteger(Number(version))) throw Errors.badVersion(version);
  return Number(version);
}
