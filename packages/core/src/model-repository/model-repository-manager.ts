/**
 * @module Model repository manager: scans the repositories, applies the model control mode
 * (NONE / EXPLICIT / POLL), keeps the index of models and their versions, and loads, reloads and
 * unloads models (load overrides, dependent ensembles) through the model lifecycle.
 * Triton: core/src/model_repository_manager/model_repository_manager.cc
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Backend } from '../backend-api.js';
import { abortable, timerMs } from '../clock.js';
import { Errors, TriodeError, echo, thrownText } from '../errors.js';
import type { EnsembleStep, ModelConfig } from '../model-config/model-config.js';
import { PLATFORMS, autoCompleteBackendFields, normalizeModelConfig } from '../model-config/normalize-model-config.js';
import { validateModelConfig } from '../model-config/validate-model-config.js';
import { checkMetricReporterConfig } from '../model-config/metric-reporter-config.js';
import { checkUnimplementedConfig } from '../model-config/unimplemented-config.js';
import { setConfigWarnings } from '../model-config/config-warnings.js';
import type { Logger } from '../logger.js';
import { pollFailure, removeOverride, writeOverrideFiles } from './load-override.js';
import { failureOfModel, loadFailed, loadFailureReason, statusString } from './load-error.js';
import { readAutoCompletedConfig } from './autocomplete-result.js';
import { checkLoadModelName, checkModelName, compareModelNames, modelNameProblem } from './model-name.js';
import { runRepositoryAgents } from './repository-agent.js';
import { findInRepositories, listVersionFiles, listVersions, readModelConfig, scanRepositories, scanRepositoriesAsync, selectVersions, type RepositoryModel } from './repository-fs.js';
import type { LifecycleModel, LoadedModel, ModelLifecycle, ModelReadyState, VersionSlot } from './model-lifecycle.js';

/** One row of the repository index. */
export interface ModelIndexEntry {
  name: string;
  version?: string;
  state: ModelReadyState;
  reason: string;
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
 * The instances a config asks for, as they are placed: a group's `count`, on each GPU it lists
 * (a GPU listed twice counts twice, as Triton places it twice). A KIND_GPU group that lists no GPU
 * counts `count` here; it gets `count` on each visible GPU.
 */
export function instanceCountOf(config: ModelConfig): number {
  const groups = config.instance_group?.length ? config.instance_group : [{}];
  // review: `count: 16, gpus: [0 x 1000]` counted 16 and placed 16,000. Any kind but CPU and
  // MODEL, as an override is checked before KIND_AUTO is resolved (to KIND_GPU when it lists GPUs).
  const placed = (g: NonNullable<ModelConfig['instance_group']>[number]) => (g.kind !== 'KIND_CPU' && g.kind !== 'KIND_MODEL' && g.gpus?.length ? g.gpus.length : 1);
  return groups.reduce((a, g) => a + (g.count ?? 1) * placed(g), 0);
}

/** A model of the repositories and what became of it. Triton: ModelRepositoryManager::ModelInfo */
export interface ModelEntry extends LifecycleModel {
  /** Set when the model failed before any version was loaded (config or repository problem). */
  error?: TriodeError;
  /** In the repository but not loaded (explicit mode, or unloaded). */
  unloaded?: boolean;
  /** Signature of the model's files other than its config, when it was prepared. */
  filesSig?: string;
  /**
   * Loaded because it was asked for (a load request or a startup model naming it, or any model in
   * modes none and poll), not only as a step of an ensemble being loaded; an unload with
   * unload_dependents leaves such a step loaded. Triton: ModelInfo::explicitly_load_.
   */
  explicit?: boolean;
}

/** The repository manager's slice of the server options (`ServerOptions`, defaults applied). */
export interface ModelRepositoryManagerOptions {
  /** Repository paths; a model found in two of them is unavailable. */
  modelRepositories: string[];
  /** Backends by name (`config.backend`). */
  backends: ReadonlyMap<string, Backend>;
  /** Per-backend settings (`--backend-config`), given to a backend's config auto-completion. */
  backendConfig: Record<string, Record<string, string>>;
  /** NONE, EXPLICIT or POLL (`--model-control-mode`). */
  modelControlMode: 'none' | 'explicit' | 'poll';
  /** Poll mode: how often the repositories are re-read (ms). */
  repositoryPollMs: number;
  /** Models to load at start in explicit mode (`*` loads all). */
  startupModels: string[];
  /** Fill missing config parts from the model. */
  autoCompleteConfig: boolean;
  /** Use `configs/<name>.pbtxt` when present. */
  modelConfigName?: string;
  /** Most instances one model version may have. */
  maxInstancesPerModel: number;
  /** How long a backend's config auto-completion may take (the load timeout). @default 300000 */
  modelLoadTimeoutMs?: number;
  /** Most `loadModel` calls under way at once; past it a call is refused UNAVAILABLE. @default no limit */
  maxLoadCalls?: number;
  logger: Logger;
}

/** The models of the repositories: which are loaded, and loading, reloading and unloading them. */
export class ModelRepositoryManager {
  readonly #lifecycle: ModelLifecycle;
  readonly #opts: ModelRepositoryManagerOptions;
  /** Serializes load/unload calls of one model. */
  readonly #loading = new Map<string, Promise<unknown>>();
  /** Poll mode: each model directory's file signature at the last poll, and the poll timer. */
  readonly #signatures = new Map<string, string>();
  #pollTimer: ReturnType<typeof setInterval> | undefined;
  #polling = false;
  /** Poll mode: the models removed from the repositories whose unload is still under way. */
  readonly #pollUnloads = new Set<string>();
  readonly #models = new Map<string, ModelEntry>();
  /** Per model name: the loads in progress (an ensemble's from when its steps start loading). */
  readonly #loadsInProgress = new Map<string, number>();
  /** Per model name: the entry its load in progress is making, once made (not yet serving). */
  readonly #candidates = new Map<string, ModelEntry>();
  #stopping = false;
  /** `loadModel` calls under way (at most `maxLoadCalls`). */
  #loadCalls = 0;
  /**
   * Repository directories already warned of as not usable model names (warned once each): those
   * the last scan found, at most MAX_SKIPPED_DIRS. `#skippedFull`: past it, warned of once.
   */
  readonly #skippedDirs = new Set<string>();
  #skippedFull = false;

  constructor(lifecycle: ModelLifecycle, options: ModelRepositoryManagerOptions) {
    this.#lifecycle = lifecycle;
    this.#opts = options;
  }

  get #logger(): Logger {
    return this.#opts.logger;
  }

  /** Loads the models the control mode asks for at start, then (poll mode) starts polling. */
  async start(): Promise<void> {
    await this.#loadAll();
    if (this.#opts.modelControlMode === 'poll') {
      for (const m of this.#scan().values()) this.#signatures.set(m.name, signature(m.path));
      this.#pollTimer = setInterval(() => { void this.pollRepository(); }, timerMs(this.#opts.repositoryPollMs));
      this.#pollTimer.unref();
    }
  }

  /** Stops polling and refuses load/unload calls from now on (the server is stopping). */
  stop(): void {
    this.#stopping = true;
    clearInterval(this.#pollTimer);
  }

  /**
   * The models of the repositories; a directory whose name is not a usable model name is left out,
   * with a warning the first time it is seen.
   */
  #scan(): Map<string, RepositoryModel> {
    const skips = this.#skipRecord();
    const found = scanRepositories(this.#opts.modelRepositories, { onSkip: skips.onSkip });
    skips.end();
    return found;
  }

  /** `#scan`, serving the event loop while it runs (a poll's). */
  async #scanAsync(): Promise<Map<string, RepositoryModel>> {
    const skips = this.#skipRecord();
    const found = await scanRepositoriesAsync(this.#opts.modelRepositories, { onSkip: skips.onSkip });
    skips.end();
    return found;
  }

  /**
   * What one scan skips: a directory not warned of before is warned of, up to MAX_SKIPPED_DIRS
   * remembered (past it, one warning for the others); `end`, once the scan is complete, forgets
   * those it did not find (review: in poll mode, the set grew by each new name, for good).
   */
  #skipRecord(): { onSkip: (name: string, repository: string, problem: string) => void; end: () => void } {
    const seen = new Set<string>();
    return {
      onSkip: (name, repository, problem) => {
        const key = `${repository}/${name}`;
        if (this.#skippedDirs.has(key)) {
          seen.add(key);
          return;
        }
        if (this.#skippedDirs.size >= MAX_SKIPPED_DIRS) {
          if (!this.#skippedFull) this.#logger.warning(`model repositories hold more than ${MAX_SKIPPED_DIRS} directories whose names are not usable model names: the others are skipped without a warning each`);
          this.#skippedFull = true;
          return;
        }
        this.#skippedDirs.add(key);
        seen.add(key);
        this.#logger.warning(`skipping directory '${echo(name)}' of model repository '${repository}': invalid model name: ${problem}`);
      },
      end: () => {
        for (const key of this.#skippedDirs) if (!seen.has(key)) this.#skippedDirs.delete(key);
        if (this.#skippedDirs.size < MAX_SKIPPED_DIRS) this.#skippedFull = false;
      },
    };
  }

  async #loadAll(): Promise<void> {
    const found = this.#scan();
    const entries: { entry: ModelEntry; versions: number[] }[] = [];
    const startup = this.#opts.startupModels;
    const selected = (name: string) => this.#opts.modelControlMode !== 'explicit' || startup.includes('*') || startup.includes(name);
    for (const name of startup) {
      if (name !== '*' && !found.has(name)) this.#logger.error(`failed to load '${echo(name)}', failed to poll from model repository: model not found in any model repository`);
    }
    const prepare = async (m: RepositoryModel, entry: ModelEntry): Promise<void> => {
      if (m.error) {
        // As clients see it (the repository index): without the repositories' paths.
        entry.error = this.#lifecycle.clientError(entry, m.error, 'INVALID_ARG');
        return;
      }
      try {
        const versions = await this.#prepare(entry);
        if (versions) entries.push({ entry, versions });
      } catch (err) {
        this.#failedUnexpectedly(entry, err);
      }
    };
    // One model's load must never fail the start (the others are served; --exit-on-error reads the index).
    const load = async ({ entry, versions }: { entry: ModelEntry; versions: number[] }): Promise<void> => {
      try {
        await this.#lifecycle.loadVersions(entry, versions);
      } catch (err) {
        this.#failedUnexpectedly(entry, err);
      }
    };
    await Promise.all([...found.values()].map(async (m) => {
      const entry: ModelEntry = { name: m.name, path: m.path, versions: new Map(), explicit: selected(m.name) };
      this.#models.set(m.name, entry);
      if (!selected(m.name)) {
        entry.unloaded = true;
        return;
      }
      await prepare(m, entry);
    }));
    // Explicit mode: an ensemble asked for brings the models of its steps (Triton's PollModels
    // follows ensemble steps), and theirs, until none is left out.
    for (;;) {
      const wanted = new Set(entries.flatMap((e) => ensembleSteps(e.entry.config).map((st) => st.model_name ?? '')));
      const more = [...wanted].filter((n) => found.has(n) && this.#models.get(n)?.unloaded);
      if (more.length === 0) break;
      await Promise.all(more.map(async (n) => {
        const m = found.get(n)!;
        const entry: ModelEntry = { name: n, path: m.path, versions: new Map() };
        this.#models.set(n, entry);
        await prepare(m, entry);
      }));
    }
    // Models first, then ensembles in dependency order (an ensemble checks its steps at load).
    const isEnsemble = (e: ModelEntry) => e.config?.platform === PLATFORMS.ensemble;
    await Promise.all(entries.filter((e) => !isEnsemble(e.entry)).map(load));
    let pending = entries.filter((e) => isEnsemble(e.entry));
    while (pending.length > 0) {
      const names = new Set(pending.map((e) => e.entry.name));
      const ready = pending.filter((e) => !ensembleSteps(e.entry.config).some((s) => names.has(s.model_name ?? '')));
      if (ready.length === 0) {
        for (const e of pending) e.entry.error = Errors.invalidArg(`ensemble '${e.entry.name}' is part of a circular dependency between ensembles`);
        break;
      }
      await Promise.all(ready.map(load));
      pending = pending.filter((e) => !ready.includes(e));
    }
    for (const row of this.repositoryIndex()) {
      if (row.reason === 'unloaded') continue;
      if (row.state !== 'READY') this.#logger.error(`failed to load '${row.name}'${row.version ? ` version ${row.version}` : ''}: ${row.reason}`, { model: row.name });
      else this.#logger.info(`successfully loaded '${row.name}' version ${row.version ?? ''}`, { model: row.name });
    }
  }

  /**
   * A throw no check foresaw (not a TriodeError from a check) while model `entry` was prepared or
   * loaded at start: that model is UNAVAILABLE with an INTERNAL reason that names it, its
   * versions not loaded with it; the detail goes to the log only (a TypeError's text tells a
   * client nothing).
   */
  #failedUnexpectedly(entry: ModelEntry, err: unknown): void {
    const e = err instanceof TriodeError ? err : Errors.internal(`failed to load '${entry.name}': an unexpected error occurred (see the server log)`, err);
    if (!(err instanceof TriodeError)) this.#logger.error(`failed to load '${entry.name}': unexpected error: ${thrownText(err)}`, { model: entry.name });
    entry.error = e;
    for (const slot of entry.versions.values()) {
      if (slot.state === 'READY') continue;
      slot.state = 'UNAVAILABLE';
      slot.reason = statusString(e.code, e.message);
      slot.code = e.code;
    }
  }

  /** Reads, completes, normalizes and validates a model's config. */
  async #prepareConfig(entry: ModelEntry, override?: ModelConfig): Promise<{ config: ModelConfig; versions: number[] }> {
    const autoComplete = this.#opts.autoCompleteConfig;
    let config = override ? structuredClone(override) : readModelConfig(entry.path, { configName: this.#opts.modelConfigName, autoComplete });
    if (!config.name) config.name = entry.name;
    // Agents see the files before anything reads them (Triton: TRITONREPOAGENT_ACTION_LOAD).
    await runRepositoryAgents(config, entry.path);
    autoCompleteBackendFields(config, listVersionFiles(entry.path));
    // Triton's warning for each folder that gives no version, at most MAX_VERSION_WARNINGS a load
    // (a model directory holds up to 10,000 entries, and a client can load it again and again).
    let ignored = 0;
    const available = listVersions(entry.path, (warning) => {
      if (++ignored <= MAX_VERSION_WARNINGS) this.#logger.warning(warning, { model: entry.name });
    });
    if (ignored > MAX_VERSION_WARNINGS) this.#logger.warning(`ignored ${ignored - MAX_VERSION_WARNINGS} more version directories of model '${entry.name}'`, { model: entry.name });
    const backend = config.backend ? this.#opts.backends.get(config.backend) : undefined;
    if (config.backend && !backend && config.platform !== 'ensemble') {
      throw Errors.invalidArg(`unable to find backend '${echo(config.backend)}' for model '${entry.name}'`);
    }
    if (autoComplete && backend?.autoCompleteConfig) {
      // The newest version the policy loads (none: no file is read; the load fails below for want
      // of a version). Triton completes each loaded version from its own file (the backend's
      // ModelState::AutoCompleteConfig -> LoadModel reads <repo>/<Version()>/<file>); Triode keeps
      // one config per model, so the newest loaded version speaks for all (README, Differences).
      // The newest on disk was read before, a version the policy may not load at all.
      const latest = selectVersions(available, config.version_policy).at(-1);
      // Bounded like the load itself: a model's auto-complete code that never settles must not
      // hold the load (and every later load or unload of the model) for good.
      const ms = this.#opts.modelLoadTimeoutMs ?? 300_000;
      const control = new AbortController();
      const timer = setTimeout(() => control.abort(Errors.unavailable(`auto-complete of model '${entry.name}' did not finish within ${ms} ms (--model-load-timeout-secs)`)), timerMs(ms));
      try {
        await abortable(backend.autoCompleteConfig(config, {
          name: entry.name,
          modelPath: entry.path,
          versionPath: latest === undefined ? undefined : join(entry.path, String(latest)),
          backendConfig: this.#opts.backendConfig[backend.name] ?? {},
          signal: control.signal,
        }), control.signal);
      } finally {
        clearTimeout(timer);
      }
      // What the model's code returned is read again through the schema (no raw object goes on).
      config = readAutoCompletedConfig(config, entry.name);
    }
    normalizeModelConfig(config);
    validateModelConfig(config, entry.name);
    const versions = selectVersions(available, config.version_policy);
    // Each version loads its own instances: the limit holds for them all (a policy of all versions
    // over 100 override files made 200 instance threads and 3 GB from one ~40 KB request, review).
    this.#checkInstanceCount(entry.name, config, config.platform === 'ensemble' ? 1 : versions.length);
    // Hints not applied (an unknown metric family, fields Triode does not implement): in the log
    // and in the model's config response.
    const warnings = [...checkMetricReporterConfig(config, entry.name), ...checkUnimplementedConfig(config, backend ? { backend } : {})];
    for (const warning of warnings) this.#logger.warning(warning, { model: entry.name });
    setConfigWarnings(config, warnings);
    return { config, versions };
  }

  /**
   * Refuses a config that asks for more than `maxInstancesPerModel` instances (before any is made),
   * counting those of each of the `versions` it loads.
   */
  #checkInstanceCount(name: string, config: ModelConfig, versions = 1): void {
    const each = instanceCountOf(config);
    const n = each * versions;
    const max = this.#opts.maxInstancesPerModel;
    if (n > max) {
      const detail = versions > 1 ? ` (${versions} versions of ${each})` : '';
      throw Errors.invalidArg(`model '${name}' asks for ${n} instances${detail}, more than the limit of ${max} instances per model (--max-instances-per-model)`);
    }
  }

  /** Prepares a model's config; returns the versions to load, or undefined (entry.error set). */
  async #prepare(entry: ModelEntry, override?: ModelConfig): Promise<number[] | undefined> {
    let prepared: { config: ModelConfig; versions: number[] };
    try {
      prepared = await this.#prepareConfig(entry, override);
    } catch (err) {
      entry.error = this.#lifecycle.clientError(entry, err, 'INVALID_ARG');
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
   * Every model version with its state (the repository index). A model being loaded that has no
   * version serving is LOADING (its versions once known); one serving keeps its rows while it
   * reloads.
   */
  repositoryIndex(readyOnly = false): ModelIndexEntry[] {
    const rows: ModelIndexEntry[] = [];
    const names = [...new Set([...this.#models.keys(), ...this.#loadsInProgress.keys()])].sort(compareModelNames);
    for (const name of names) {
      if (this.#loadsInProgress.has(name) && !this.#hasReadyVersion(name)) {
        if (readyOnly) continue;
        const versions = [...(this.#candidates.get(name)?.versions.keys() ?? [])].sort((a, b) => a - b);
        if (versions.length === 0) rows.push({ name, state: 'LOADING', reason: '' });
        for (const v of versions) rows.push({ name, version: String(v), state: 'LOADING', reason: '' });
        continue;
      }
      const m = this.#models.get(name);
      if (!m) continue;
      if (m.unloaded) {
        if (readyOnly) continue;
        // One never loaded is listed by name (Triton: by name only, README); one unloaded by version.
        if (m.versions.size === 0) rows.push({ name: m.name, state: 'UNAVAILABLE', reason: UNLOADED });
        for (const [v, slot] of [...m.versions.entries()].sort((a, b) => a[0] - b[0])) rows.push({ name: m.name, version: String(v), state: slot.state, reason: slot.reason });
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

  /** Every model of the repositories (in the order they were first seen). */
  entries(): IterableIterator<ModelEntry> {
    return this.#models.values();
  }

  /** Removes the override directories of the models loaded with file overrides (at shutdown, once they are unloaded). */
  async removeOverrides(): Promise<void> {
    const roots: string[] = [];
    for (const m of this.#models.values()) {
      if (m.overrideRoot) roots.push(m.overrideRoot);
      delete m.overrideRoot;
    }
    await Promise.all(roots.map(removeOverride));
  }

  /** The model named `name`. @throws NOT_FOUND when there is none */
  entry(name: string): ModelEntry {
    const m = this.#models.get(name);
    if (!m) throw Errors.unknownModel(name);
    return m;
  }

  /**
   * The loaded version `version` of a model, or its highest ready version.
   * @throws NOT_FOUND for an unknown model, UNAVAILABLE for one that is not ready.
   */
  getModel(name: string, version?: number): LoadedModel {
    const m = this.entry(name);
    if (version !== undefined && version !== -1) {
      const slot = m.versions.get(version);
      if (!slot) throw Errors.unknownModel(name, version);
      if (slot.state !== 'READY' || !slot.model) throw Errors.modelNotReady(name, version, m.unloaded ? undefined : slot.reason);
      return slot.model;
    }
    // The highest ready version, without sorting on every request.
    let ready: LoadedModel | undefined;
    let highest = -Infinity;
    for (const [v, s] of m.versions) {
      if (s.state === 'READY' && s.model && v > highest) {
        ready = s.model;
        highest = v;
      }
    }
    if (!ready) throw Errors.modelNotReady(name, undefined, m.unloaded ? undefined : m.error?.message ?? [...m.versions.values()][0]?.reason);
    return ready;
  }

  #checkControl(): void {
    // Triton answers both NONE and POLL so (model_repository_manager.cc, LoadUnloadModel): UNAVAILABLE, 503.
    if (this.#opts.modelControlMode !== 'explicit') throw Errors.unavailable('explicit model load / unload is not allowed if polling is enabled');
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
    this.#checkControl();
    checkLoadModelName(name);
    // Each call waiting its turn holds what it carries (file overrides: up to the request size
    // limit each): 30 loads of 40 MB behind one that never finished held 2.5 GB (review). Triton
    // has no such limit (its HTTP threads bound it, gRPC starts a thread a load); an unload is
    // never refused (it is how a stuck load is given up).
    const max = this.#opts.maxLoadCalls ?? Number.POSITIVE_INFINITY;
    if (this.#loadCalls >= max) throw Errors.unavailable(`failed to load '${name}': ${max} load calls are under way on this server, try again when they end`);
    this.#loadCalls++;
    try {
      await this.#load(name, options);
    } finally {
      this.#loadCalls--;
    }
  }

  /**
   * Loads a model; an unload of it or a shutdown gives the load up (UNAVAILABLE). An ensemble's
   * steps are loaded first, before its own turn in the queue: a load waiting on another model's
   * must hold no queue of its own (two ensembles naming each other, loaded at once, waited on
   * each other for good).
   * @param chain the ensembles whose loads led here
   * @param ifNotReady load only when no version is ready by the model's turn (a step's load: one
   *   that another call is loading, an override perhaps, is not loaded again over it)
   */
  async #load(name: string, options: LoadOptions = {}, chain: ReadonlySet<string> = new Set(), ifNotReady = false): Promise<void> {
    // Tracked from the start, steps included: an unload or a shutdown while an ensemble's steps
    // loaded found nothing to give up, answered 200, and the ensemble then loaded and served
    // (review). The steps' own loads go on: they are models of their own.
    this.#loadsInProgress.set(name, (this.#loadsInProgress.get(name) ?? 0) + 1);
    try {
      await this.#lifecycle.trackLoad(name, async (signal) => {
        try {
          await abortable(this.#loadComposing(name, options, chain), signal);
        } catch (err) {
          if (!signal.aborted) this.#showFailure(name, err);
          throw err;
        }
        await this.#serialize(name, async () => {
          if (ifNotReady && this.#hasReadyVersion(name)) return;
          await this.#loadNow(name, options, signal, !ifNotReady);
        });
      });
    } finally {
      const n = (this.#loadsInProgress.get(name) ?? 1) - 1;
      if (n > 0) this.#loadsInProgress.set(name, n);
      else this.#loadsInProgress.delete(name);
    }
  }

  /**
   * An ensemble's load first loads the models of its steps that have no ready version, as Triton
   * does (its PollModels follows ensemble steps, its dependency graph loads them first). One that
   * fails fails the ensemble's load with Triton's words. Names already on `chain` are left to the
   * ensemble check, which reports the cycle. The steps are read from the config as given or as on
   * disk; a config that cannot be read is left to the load itself to report.
   */
  async #loadComposing(name: string, options: LoadOptions, chain: ReadonlySet<string>): Promise<void> {
    let config = options.config;
    if (!config) {
      const found = findInRepositories(this.#opts.modelRepositories, name);
      if (!found || found.error) return;
      try {
        config = readModelConfig(found.path, { configName: this.#opts.modelConfigName, autoComplete: false });
      } catch {
        return;
      }
    }
    if (config.platform !== PLATFORMS.ensemble) return;
    const next = new Set([...chain, name]);
    const steps = [...new Set(ensembleSteps(config).map((st) => st.model_name ?? ''))];
    for (const step of steps) {
      if (!step || next.has(step) || this.#hasReadyVersion(step) || modelNameProblem(step) !== undefined) continue;
      try {
        await this.#load(step, {}, next, true);
      } catch (err) {
        // A step's load given up (an unload of the step, its load timeout) fails the ensemble's
        // with the step's UNAVAILABLE: try again, as the step's own answer says (review: INVALID_ARG).
        const code = err instanceof TriodeError && err.code === 'UNAVAILABLE' ? 'UNAVAILABLE' : 'INVALID_ARG';
        throw loadFailed(name, `ensemble '${name}' depends on '${step}' which has no loaded version. Model '${step}' loading failed with error: ${loadFailureReason(err)}`, code);
      }
    }
  }

  #hasReadyVersion(name: string): boolean {
    const m = this.#models.get(name);
    return !!m && !m.unloaded && [...m.versions.values()].some((v) => v.state === 'READY');
  }

  async #loadNow(name: string, options: LoadOptions, signal: AbortSignal, explicit: boolean): Promise<void> {
    signal.throwIfAborted();
    let entry: ModelEntry;
    try {
      entry = await this.#candidateEntry(name, options);
    } catch (err) {
      if (!signal.aborted) this.#showFailure(name, err);
      throw err;
    }
    this.#candidates.set(name, entry);
    try {
      const versions = await this.#prepare(entry, options.config);
      if (!versions) throw Errors.invalidArg(`failed to load '${name}': ${entry.error?.message ?? 'no version to load'}`);
      if (await this.#updateInstancesInPlace(entry, versions)) {
        const served = this.#models.get(name);
        if (explicit && served) served.explicit = true;
        return;
      }
      signal.throwIfAborted();
      await this.#lifecycle.loadVersions(entry, versions, signal);
      // As Triton's OnLoadFinal: a version that failed fails the load, whatever the others did;
      // those are released and the versions serving before (a reload) go on serving. INVALID_ARG,
      // except a load Triode gave up (its load timeout, a shutdown): UNAVAILABLE, try again.
      const failed = [...entry.versions.entries()].filter(([, v]) => v.state !== 'READY');
      if (failed.length > 0) {
        const code = failed.every(([, v]) => v.interrupted && v.code === 'UNAVAILABLE') ? 'UNAVAILABLE' : 'INVALID_ARG';
        throw loadFailed(name, failed.map(([v, slot]) => `version ${v} is at ${slot.state} state: ${slot.reason};`).join(''), code);
      }
      // An unload that came while the versions loaded wins: they are not installed.
      signal.throwIfAborted();
      const old = this.#models.get(name);
      // Once asked for, a model stays asked for across reloads (Triton: explicitly_load_ |=).
      entry.explicit = explicit || (!!old && !old.unloaded && !!old.explicit);
      this.#models.set(name, entry);
      this.#logger.info(`successfully loaded '${name}'`, { model: name });
      // The old versions finish what they hold, then go.
      if (old) void this.#lifecycle.retire(old);
    } catch (err) {
      // What the index shows of it: its failed versions, or its error (taken before the release).
      const failedVersions = new Map([...entry.versions].filter(([, v]) => v.state !== 'READY').map(([v, { state, reason, code }]) => [v, { state, reason, ...(code ? { code } : {}) }]));
      // Whatever was made for a load that did not go through is released (and its override removed).
      await this.#lifecycle.retire(entry);
      // A load given up (an unload, a shutdown) shows nothing: the unload's answer stands.
      if (!signal.aborted) this.#showFailure(name, entry.error ?? err, failedVersions);
      throw err;
    } finally {
      if (this.#candidates.get(name) === entry) this.#candidates.delete(name);
    }
  }

  /**
   * The entry a load makes: from its `file:` overrides (written to a directory of their own), or
   * from the repository.
   */
  async #candidateEntry(name: string, options: LoadOptions): Promise<ModelEntry> {
    if (options.files && Object.keys(options.files).length > 0) {
      if (!options.config) throw Errors.invalidArg(`failed to load '${name}': a 'config' parameter must be given with 'file:' overrides`);
      // The instance limit is checked before any file is written (and again once normalized).
      try {
        this.#checkInstanceCount(name, options.config);
      } catch (err) {
        throw Errors.invalidArg(`failed to load '${name}': ${(err as Error).message}`);
      }
      try {
        const dir = await writeOverrideFiles(name, options.files);
        return { name, path: dir.modelDir, overrideRoot: dir.root, versions: new Map() };
      } catch (err) {
        const cause = (err as Error).cause;
        if (cause instanceof Error) this.#logger.error(`failed to load '${name}': ${cause.message}`, { model: name });
        throw err;
      }
    }
    const found = findInRepositories(this.#opts.modelRepositories, name);
    if (!found || found.error) {
      // Triton's answer; the detail (which can name directories) goes to the log only.
      this.#logger.error(`failed to poll model '${name}': ${found?.error?.message ?? 'model not found in any model repository'}`, { model: name });
      throw pollFailure(name);
    }
    return { name, path: found.path, versions: new Map() };
  }

  /**
   * After a failed load of a model with no version serving, the index lists it UNAVAILABLE with
   * the reason, as the startup scan does: its failed `versions` with theirs, or the model with its
   * error (`err`, or the repository's: a model found twice). A model that keeps a version serving
   * is left as it is; one the repository directories do not hold (file overrides only) is not
   * listed, as on unload (review: a failed load left the model 'unloaded', or not listed at all).
   */
  #showFailure(name: string, err: unknown, versions = new Map<number, VersionSlot>()): void {
    if (this.#hasReadyVersion(name)) return;
    let found: RepositoryModel | undefined;
    try {
      found = findInRepositories(this.#opts.modelRepositories, name);
    } catch {
      return;
    }
    if (!found) return;
    const entry: ModelEntry = { name, path: found.path, versions: found.error ? new Map() : versions };
    if (found.error || versions.size === 0) entry.error = this.#lifecycle.clientError(entry, found.error ?? failureOfModel(err), 'INVALID_ARG');
    const old = this.#models.get(name);
    this.#models.set(name, entry);
    // What the entry it replaces still holds (a version no longer ready, say) is released.
    if (old) void this.#lifecycle.retire(old);
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
    return this.#lifecycle.updateInstanceCount(old, candidate.config, versions);
  }

  /**
   * Unloads a model (explicit mode): it stops taking requests at once and finishes those it holds.
   * An ensemble using it is unloaded too; with `unloadDependents`, so are the steps it brought
   * with it (loaded only as its steps, used by no other loaded model), as Triton's dependency graph.
   */
  async unloadModel(name: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    checkModelName(name);
    this.#checkControl();
    await this.#unload(name, options);
  }

  /**
   * What an unload of `name` does first, alone: the model's loads in progress (waiting for their
   * turn too) are given up, UNAVAILABLE "...the load was cancelled by an unload of the model".
   * A cluster worker calls it as an unload command arrives, before the commands ahead of it run.
   * @returns false, giving up nothing, where an unload would be refused (not explicit mode, stopping)
   */
  cancelLoads(name: string): boolean {
    if (this.#opts.modelControlMode !== 'explicit' || this.#stopping) return false;
    this.#lifecycle.abortLoads(name, cancelledByUnload(name));
    return true;
  }

  /**
   * The models a load or unload of `name` may change: `name`; with `steps`, the models of its
   * ensemble steps and theirs in turn (from `config`, the loaded config and the one on disk: a
   * load's, or an unload's with `unloadDependents`); and the ensembles loaded or loading that use
   * any of these (an unload takes them with it). Triton locks the same nodes of its dependency
   * graph for a load or unload, so that those that share none run at once. A name that is not
   * one stands alone. Reads each config file involved.
   */
  modelsAffectedBy(name: string, options: { config?: ModelConfig; steps?: boolean } = {}): string[] {
    const affected = new Set([name]);
    if (modelNameProblem(name) !== undefined) return [name];
    if (options.steps) {
      const todo = [name];
      for (let m = todo.pop(); m !== undefined; m = todo.pop()) {
        const configs = [this.#models.get(m)?.config, this.#candidates.get(m)?.config, this.#configOnDisk(m), m === name ? options.config : undefined];
        for (const st of configs.flatMap((c) => ensembleSteps(c))) {
          // An override's config is not read yet: anything may stand where a step should.
          const step: unknown = typeof st === 'object' && st !== null ? st.model_name : undefined;
          if (typeof step === 'string' && !affected.has(step) && modelNameProblem(step) === undefined) {
            affected.add(step);
            todo.push(step);
          }
        }
      }
    }
    const ensembles = [...this.#models.values(), ...this.#candidates.values()].filter((m) => !m.unloaded && ensembleSteps(m.config).length > 0);
    for (let grew = true; grew;) {
      grew = false;
      for (const e of ensembles) {
        if (!affected.has(e.name) && ensembleSteps(e.config).some((st) => affected.has(st.model_name ?? ''))) {
          affected.add(e.name);
          grew = true;
        }
      }
    }
    return [...affected];
  }

  /** A model's config as its directory has it (not auto-completed); undefined when it cannot be read. */
  #configOnDisk(name: string): ModelConfig | undefined {
    try {
      const found = findInRepositories(this.#opts.modelRepositories, name);
      return found && !found.error ? readModelConfig(found.path, { configName: this.#opts.modelConfigName, autoComplete: false }) : undefined;
    } catch {
      return undefined;
    }
  }

  async #unload(name: string, options: { unloadDependents?: boolean } = {}): Promise<void> {
    // A load of this model still in progress is given up rather than waited for.
    this.#lifecycle.abortLoads(name, cancelledByUnload(name));
    let old: ModelEntry | undefined;
    await this.#serialize(name, async () => {
      old = this.#models.get(name);
      // Nothing by that name: nothing to unload, and it succeeds, as Triton's does (LoadUnloadModels
      // skips names it does not know; tritonserver.h: unloading a model not loaded "has no affect").
      const unloading = old;
      // An unloaded model stays so (and keeps its rows).
      if (!unloading || unloading.unloaded) return;
      // review: a model that exists only through 'file:' overrides is forgotten (each uniquely
      // named override load stayed listed as unloaded for good); as in Triton, the index lists the
      // models of the repository directories.
      const inRepository = this.#inRepository(name);
      if (inRepository === false) this.#models.delete(name);
      // Its versions stay listed as in Triton's index (its lifecycle keeps each version it has
      // loaded): UNLOADING while those serving finish what they hold, then UNAVAILABLE 'unloaded'
      // (review: the rows lost their version, and UNLOADING was never shown).
      const versions = unloadingVersions(unloading);
      if (inRepository !== false) this.#models.set(name, { name, path: typeof inRepository === 'string' ? inRepository : unloading.path, versions, unloaded: true });
      try {
        await this.#lifecycle.retire(unloading);
      } finally {
        for (const slot of versions.values()) Object.assign(slot, { state: 'UNAVAILABLE', reason: UNLOADED });
      }
      this.#logger.info(`successfully unloaded '${name}'`, { model: name });
    });
    // As Triton's dependency graph: an ensemble with a step no longer loaded can no longer be
    // served, and is unloaded too (its steps are left as they are).
    const users = [...this.#models.values()].filter((m) => !m.unloaded && ensembleSteps(m.config).some((st) => st.model_name === name));
    for (const u of users) await this.#unload(u.name);
    // unload_dependents: the models this one brought with it, as Triton's cascading removal: each
    // step loaded only for an ensemble (not asked for) that no loaded model uses any more.
    if (options.unloadDependents) {
      const unloaded = old as ModelEntry | undefined;
      for (const step of new Set(ensembleSteps(unloaded?.config).map((st) => st.model_name ?? ''))) {
        const m = this.#models.get(step);
        if (!m || m.unloaded || m.explicit) continue;
        if ([...this.#models.values()].some((o) => !o.unloaded && ensembleSteps(o.config).some((st) => st.model_name === step))) continue;
        await this.#unload(step, options);
      }
    }
  }

  /**
   * Where model `name` is in the repository directories: its directory, false when it is in none,
   * true when that cannot be told (a repository that cannot be read, a name in two of them).
   */
  #inRepository(name: string): string | boolean {
    try {
      const found = findInRepositories(this.#opts.modelRepositories, name);
      return found ? (found.error ? true : found.path) : false;
    } catch {
      return true;
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
      const found = await this.#scanAsync();
      if (this.#stopping) return;
      for (const [name, m] of found) {
        // One model's files at a time, the server serving between them: read in one go, 20
        // models of 10,000 files each held the event loop ~1 s on every poll (review).
        await new Promise((r) => setImmediate(r));
        if (this.#stopping) return;
        // Back while its unload still runs: its load would wait behind the unload (and hold the
        // poll). Its signature stays unset, so a poll after the unload loads it.
        if (this.#pollUnloads.has(name)) continue;
        const sig = signature(m.path);
        if (this.#signatures.get(name) === sig) continue;
        this.#signatures.set(name, sig);
        try {
          // A model that never loaded shows why in the index (the load puts it there).
          await this.#load(name);
        } catch (err) {
          this.#logger.error((err as Error).message, { model: name });
        }
      }
      for (const name of [...this.#models.keys()]) {
        if (found.has(name) || this.#models.get(name)?.unloaded || this.#pollUnloads.has(name)) continue;
        this.#signatures.delete(name);
        // Not waited for, as Triton's poll (AsyncUnload): the unload waits up to the load timeout
        // for the model's requests, and one that never ended held every later poll that long
        // (review). The next poll does not start another.
        this.#pollUnloads.add(name);
        void this.#unload(name)
          .catch((err: unknown) => this.#logger.error((err as Error).message, { model: name }))
          .finally(() => this.#pollUnloads.delete(name));
      }
    } catch (err) {
      this.#logger.error(`failed to poll from model repository: ${(err as Error).message}`);
    } finally {
      this.#polling = false;
    }
  }
}

/** A load's answer when an unload of its model gave it up. */
export function cancelledByUnload(name: string): TriodeError {
  return Errors.unavailable(`failed to load '${name}': the load was cancelled by an unload of the model`);
}

/** The most warnings of ignored version folders a load of one model logs (then one line for the rest). */
const MAX_VERSION_WARNINGS = 20;

/** The most repository directories with unusable names remembered as warned of (each warned once). */
export const MAX_SKIPPED_DIRS = 1000;

/** The index's reason for a model, or version, that is not loaded. */
const UNLOADED = 'unloaded';

/**
 * The versions a model being unloaded lists (no model held): each one it had, UNLOADING where one
 * was serving, else UNAVAILABLE 'unloaded'.
 */
function unloadingVersions(old: ModelEntry): Map<number, VersionSlot> {
  return new Map([...old.versions].map(([v, slot]) => [v, slot.model ? { state: 'UNLOADING', reason: '' } : { state: 'UNAVAILABLE', reason: UNLOADED }]));
}

/**
 * An ensemble config's steps; none when it has no list of them. The config is schema-read, so
 * this only guards against what a future path might let through unread.
 */
function ensembleSteps(config: ModelConfig | undefined): EnsembleStep[] {
  const steps = config?.ensemble_scheduling?.step;
  return Array.isArray(steps) ? steps : [];
}

/** The most entries a signature reads (a model directory holds a handful of files). */
const MAX_SIGNATURE_ENTRIES = 10_000;

/** What a signature walk has seen: each directory once (symlinks followed), and a bound on entries. */
interface SignatureWalk {
  seen: Set<string>;
  entries: number;
}

/** Signature of a model directory's files other than its config (`config.pbtxt`, `configs/`). */
function modelFilesSignature(dir: string): string {
  return signature(dir, 0, undefined, (n) => n !== 'config.pbtxt' && n !== 'configs');
}

/**
 * What changes when a model's files change: every path, size and mtime under its directory.
 * Symlinks are followed, but a directory is read once (its device and inode): links that loop
 * (`l1 -> .`, `l2 -> .`, ...) made the walk grow as links^depth (24 of them blocked the event
 * loop 28 s on every load and poll). At most MAX_SIGNATURE_ENTRIES entries are read in all.
 */
export function signature(dir: string, depth = 0, walk: SignatureWalk = { seen: new Set(), entries: 0 }, keep?: (name: string) => boolean): string {
  if (depth > 4) return '';
  try {
    const st = statSync(dir);
    const id = `${st.dev}:${st.ino}`;
    if (walk.seen.has(id)) return '@';
    walk.seen.add(id);
  } catch {
    return '';
  }
  let out = '';
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch {
    return '';
  }
  for (const n of names) {
    if (keep && !keep(n)) continue;
    if (++walk.entries > MAX_SIGNATURE_ENTRIES) return `${out}...`;
    const p = join(dir, n);
    let st;
    try {
      st = statSync(p);
    } catch {
      continue;
    }
    out += st.isDirectory() ? `${n}/[${signature(p, depth + 1, walk)}]` : `${n}:${st.size}:${st.mtimeMs};`;
  }
  return out;
}
