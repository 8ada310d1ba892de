/**
 * @module Model lifecycle: the versions of a model and their states. Loads versions (beside the
 * serving ones, which the repository manager swaps out once the new ones are READY), warms them up
 * before READY, bounds loads by slots, a timeout and aborts, changes instance counts in place, and
 * retires versions. Triton: core/src/model_lifecycle.cc
 */
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Backend } from '../backend-api.js';
import type { Clock } from '../clock.js';
import { Errors, TriodeError, echo } from '../errors.js';
import type { InferenceRequest, InferenceResponse } from '../infer-request.js';
import { ModelVersion } from '../backend-model.js';
import { abortable } from '../clock.js';
import type { Model } from '../model.js';
import { EnsembleModel, validateEnsemble } from '../ensemble-model.js';
import { warmupRequests } from '../model-warmup.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { PLATFORMS } from '../model-config/normalize-model-config.js';
import { modelConfigToJson } from '../model-config/model-config-json.js';
import type { ResponseCache } from '../cache/response-cache.js';
import type { RateLimiter } from '../scheduler/rate-limiter.js';
import type { Logger } from '../logger.js';
import type { LatencyObservation } from '../stats/infer-stats.js';
import { modelMetricSettings, type ModelMetricSettings } from '../model-config/metric-reporter-config.js';
import { removeOverride } from './load-override.js';
import { statusString } from './load-error.js';
import { clientLoadMessage } from './load-error.js';
import { readModelLabels, type Labels } from './label-provider.js';

/** Triton's model states (repository index `state`). */
export type ModelReadyState = 'READY' | 'UNAVAILABLE' | 'LOADING' | 'UNLOADING';

/** A loaded model version: one run by a backend, or an ensemble of other models. */
/** A loaded model version (a backend's or an ensemble). */
export type LoadedModel = Model;

/** The errors of loads that were given up (timeout, unload, shutdown): see VersionSlot.interrupted. */
const interruptions = new WeakSet<object>();

/** One version of a model: its state, and the model once loaded. Triton: ModelLifeCycle::ModelInfo */
export interface VersionSlot {
  state: ModelReadyState;
  reason: string;
  /** The code of the error that made the version UNAVAILABLE. */
  code?: TriodeError['code'];
  /** Its load was given up (Triode's load timeout, an unload, a shutdown), not failed by the model. */
  interrupted?: boolean;
  /** How long the version took to load, seconds (a backend model's; 0 for an ensemble, as Triton reports it). */
  loadSeconds?: number;
  model?: LoadedModel;
}

/** A model as its lifecycle sees it: where its files are, its config and its versions. */
export interface LifecycleModel {
  name: string;
  path: string;
  config?: ModelConfig;
  /**
   * Loaded from `file:` overrides: the directory mkdtemp made (`path` is inside it), removed, by
   * this exact path, when the model is retired or its load fails.
   */
  overrideRoot?: string;
  versions: Map<number, VersionSlot>;
}

/** What the lifecycle asks of the server around it. */
export interface ModelLifecycleHost {
  /** Runs a request: a model's BLS calls and an ensemble's steps go through the server. */
  infer(request: InferenceRequest): Promise<InferenceResponse>;
  /**
   * The loaded version `version` of a model, or its highest ready version (an ensemble's steps
   * are checked against it). @throws when there is none
   */
  getModel(name: string, version?: number): LoadedModel;
}

/** The model lifecycle's slice of the server options (`ServerOptions`, defaults applied). */
export interface ModelLifecycleOptions {
  /** Backends by name (`config.backend`). */
  backends: ReadonlyMap<string, Backend>;
  /** Per-backend settings (`--backend-config`). */
  backendConfig: Record<string, Record<string, string>>;
  /** The repositories: a load message clients see does not show them. */
  modelRepositories: string[];
  /** How long a version may take to load, warmup included (ms). */
  modelLoadTimeoutMs: number;
  /** How many times a failed load is tried again. */
  modelLoadRetryCount: number;
  /** How many versions load at once. */
  modelLoadThreadCount: number;
  /** The response cache models with `response_cache { enable: true }` use (none without). */
  responseCache: ResponseCache | undefined;
  /** The server's rate limiter (`--rate-limit=execution_count`; none when off). */
  rateLimiter?: RateLimiter | undefined;
  clock: Clock;
  logger: Logger;
}

/** Loads, warms up and retires model versions. Triton: ModelLifeCycle */
export class ModelLifecycle {
  readonly #host: ModelLifecycleHost;
  readonly #opts: ModelLifecycleOptions;
  #latencyListener: ((model: string, version: string, o: LatencyObservation, settings?: ModelMetricSettings) => void) | undefined;
  /** Loads running now, and those waiting for a free load slot. */
  #activeLoads = 0;
  #loadQueue: (() => void)[] = [];
  /** Per model name: the loads in progress, aborted by an unload of that model or a shutdown. */
  readonly #loadAborts = new Map<string, Set<AbortController>>();

  constructor(host: ModelLifecycleHost, options: ModelLifecycleOptions) {
    this.#host = host;
    this.#opts = options;
  }

  get #logger(): Logger {
    return this.#opts.logger;
  }

  /**
   * Calls `listener` with every successful request's latencies, per model version, for the
   * versions of `models` and every version loaded later. One listener; a new call replaces it.
   */
  observeLatencies(listener: (model: string, version: string, o: LatencyObservation, settings?: ModelMetricSettings) => void, models: Iterable<LifecycleModel>): void {
    this.#latencyListener = listener;
    for (const m of models) {
      for (const [v, slot] of m.versions) if (slot.model) this.#observe(m.name, v, slot.model);
    }
  }

  #observe(name: string, version: number, model: LoadedModel): void {
    const listener = this.#latencyListener;
    const settings = modelMetricSettings(model.config);
    const label = String(version);
    model.stats.observer = listener ? (o) => listener(name, label, o, settings) : undefined;
  }

  /** The directories a client-facing load message must not show: repositories, temp directory, an override. */
  #hiddenDirs(model?: LifecycleModel): string[] {
    return [...this.#opts.modelRepositories.map((r) => resolve(r)), ...(model?.overrideRoot ? [model.overrideRoot] : []), resolve(tmpdir())];
  }

  /** A load error as clients see it (no paths, no stack); the full detail goes to the log when it differs. */
  clientError(model: LifecycleModel, err: unknown, code: TriodeError['code']): TriodeError {
    const e = TriodeError.from(err, code);
    const message = clientLoadMessage(e.message, this.#hiddenDirs(model));
    if (message === e.message) return e;
    this.#logger.error(`failed to load '${model.name}': ${e.message}`, { model: model.name });
    return new TriodeError(e.code, message, { cause: e });
  }

  /** Runs the load `f` of model `name` with a signal that `abortLoads` of that model (or of all) aborts. */
  async trackLoad<T>(name: string, f: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const control = new AbortController();
    const mine = this.#loadAborts.get(name) ?? new Set<AbortController>();
    mine.add(control);
    this.#loadAborts.set(name, mine);
    try {
      return await f(control.signal);
    } finally {
      mine.delete(control);
      if (mine.size === 0 && this.#loadAborts.get(name) === mine) this.#loadAborts.delete(name);
    }
  }

  /** Gives up the loads of `name` in progress (all loads without a name). */
  abortLoads(name: string | undefined, reason: TriodeError): void {
    for (const [n, controls] of this.#loadAborts) {
      if (name === undefined || n === name) for (const c of controls) c.abort(reason);
    }
  }

  /**
   * Loads the versions of a prepared model (an ensemble after the models it uses). `signal` gives
   * a load up (an unload of the model, a shutdown); each version also has `modelLoadTimeoutMs`.
   */
  async loadVersions(entry: LifecycleModel, versions: number[], signal?: AbortSignal): Promise<void> {
    const config = entry.config!;
    const backend = this.#opts.backends.get(config.backend ?? '');
    const infer = (request: InferenceRequest) => this.#host.infer(request);
    // An ensemble's label files are the model's (beside its config), not a version's: read once
    // and shared by its versions, whose number the instance limit does not bound (review: each
    // version read and kept its own copy, 20 versions of a 40 MiB file held 1 GB). A failure too
    // is read once.
    let ensembleLabels: { labels: Map<string, Labels> } | { error: unknown } | undefined;
    const labelsOfEnsemble = (): Map<string, Labels> => {
      if (!ensembleLabels) {
        try {
          ensembleLabels = { labels: readModelLabels(entry.path, config) };
        } catch (error) {
          ensembleLabels = { error };
        }
      }
      if ('error' in ensembleLabels) throw ensembleLabels.error;
      return ensembleLabels.labels;
    };
    await Promise.all(versions.map(async (version) => {
      const slot: VersionSlot = { state: 'LOADING', reason: '' };
      entry.versions.set(version, slot);
      let watched: ModelVersion | undefined;
      try {
        if (config.platform === PLATFORMS.ensemble) {
          const stepBatching = validateEnsemble(config, (name, v) => {
            try {
              return this.#host.getModel(name, v >= 0 ? v : undefined);
            } catch {
              return undefined;
            }
          });
          const labels = labelsOfEnsemble();
          slot.model = new EnsembleModel(config, version, infer, { clock: this.#opts.clock, labels, stepBatching });
          // Triton gives every model, ensembles too, a reporter with the load-time gauge; only backend models set it.
          slot.loadSeconds = 0;
          this.#observe(entry.name, version, slot.model);
        } else {
          if (!backend) throw Errors.unsupported(`backend '${echo(config.backend || config.platform || '')}' is not supported`);
          const model = await this.#withLoadSlot(signal, async () => {
            // From when its load starts (not while it waits for a load slot), as Triton's nv_model_load_duration_secs.
            const t0 = performance.now();
            const loaded = await this.#timeLimited(version, signal, (s) => this.#loadVersion(entry, version, backend, s));
            slot.loadSeconds = (performance.now() - t0) / 1000;
            return loaded;
          });
          slot.model = model;
          this.#observe(entry.name, version, model);
          if (config.response_cache?.enable && this.#opts.responseCache) model.responseCache = this.#opts.responseCache;
          watched = model;
        }
        slot.state = 'READY';
        if (watched) watched.onNotReady = (reason) => this.#notReady(entry.name, version, slot, reason);
      } catch (err) {
        const e = this.clientError(entry, err, 'INTERNAL');
        slot.state = 'UNAVAILABLE';
        // As Triton's CreateModel keeps it: the status with its code ("Internal: ...").
        slot.reason = statusString(e.code, e.message);
        slot.code = e.code;
        // Given up by `signal` while it waited for a load slot counts too (review: such a load,
        // cancelled by an unload, answered INVALID_ARG where one already loading answered UNAVAILABLE).
        slot.interrupted = interruptions.has(err as object) || (!!signal?.aborted && err === signal.reason);
      }
    }));
  }

  /**
   * A READY version whose instance was lost (its GPU): UNAVAILABLE with the reason until the model
   * is loaded again (an explicit load, or a poll that sees its files change, makes a new version).
   * A version being retired keeps its state.
   */
  #notReady(name: string, version: number, slot: VersionSlot, reason: TriodeError): void {
    if (slot.state !== 'READY') return;
    slot.state = 'UNAVAILABLE';
    slot.reason = reason.message;
    slot.code = reason.code;
    this.#logger.error(`model '${name}' version ${version} is not ready until it is loaded again: ${reason.message}`, { model: name });
  }

  /** One version of a backend model: its instances, then its warmup samples (READY only after them). */
  async #loadVersion(entry: LifecycleModel, version: number, backend: Backend, signal: AbortSignal): Promise<ModelVersion> {
    const config = entry.config!;
    const model = await this.#retry(() => ModelVersion.load(
      {
        name: entry.name,
        version,
        modelPath: entry.path,
        versionPath: join(entry.path, String(version)),
        config,
        backendConfig: this.#opts.backendConfig[backend.name] ?? {},
        infer: (request: InferenceRequest) => this.#host.infer(request),
        signal,
      },
      backend,
      this.#opts.clock,
      this.#opts.rateLimiter,
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
      // Not awaited: a warmup request that never ends must not hold the load up. Bounded like
      // any unload: past it, the instances are told to end what still runs (a warmup execute
      // stuck in a loop kept its javascript thread spinning for good).
      void model.unload({ timeoutMs: this.#opts.modelLoadTimeoutMs }).catch(() => undefined);
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
    } catch (err) {
      if (control.signal.aborted && err === control.signal.reason && typeof err === 'object' && err !== null) interruptions.add(err);
      throw err;
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
        this.#logger.warning(`loading ${what} failed (${(err as Error).message}); retrying (${attempt + 1} of ${this.#opts.modelLoadRetryCount})`);
      }
    }
  }

  /**
   * Changes the instances of the serving versions of `old` in place, when `config` (the prepared
   * new config, loading `versions`) differs from the serving one only in the instance count of the
   * (last) instance group and the versions are the same: no reload, no pause (Triton does the
   * same). The caller has checked that the model files are the same. Returns false when a full
   * reload is needed.
   */
  async updateInstanceCount(old: LifecycleModel, config: ModelConfig, versions: number[]): Promise<boolean> {
    const groups = config.instance_group ?? [];
    if (!old.config || !onlyLastInstanceCountDiffers(old.config, config)) return false;
    const slots = [...old.versions.entries()];
    const serving = slots.filter(([, v]) => v.state === 'READY' && v.model instanceof ModelVersion);
    if (serving.length !== slots.length || serving.length !== versions.length || !serving.every(([v]) => versions.includes(v))) return false;
    if (config.sequence_batching) return false;
    for (const [, slot] of serving) {
      if (!(await (slot.model as ModelVersion).setInstanceGroups(structuredClone(groups)))) return false;
    }
    old.config = config;
    const n = groups.reduce((a, g) => a + (g.count ?? 1), 0);
    this.#logger.info(`updated '${old.name}' to ${n} instances without reloading`, { model: old.name });
    return true;
  }

  /** Unloads every version of a model (they finish the requests they hold first), then removes its override. */
  async retire(entry: LifecycleModel): Promise<void> {
    await Promise.allSettled([...entry.versions.values()].map(async (slot) => {
      if (!slot.model) return;
      slot.state = 'UNLOADING';
      // Bounded like a load: requests that never end do not make the unload hang (an ensemble's
      // too: one request stuck in a step held its unload, and every later load of the name, for
      // good; review).
      const ms = this.#opts.modelLoadTimeoutMs;
      if (!(await slot.model.unload({ timeoutMs: ms }))) this.#logger.warning(`unloading '${entry.name}': requests or instances still busy after ${ms} ms were left behind`, { model: entry.name });
      slot.state = 'UNAVAILABLE';
      slot.reason = 'unloaded';
    }));
    if (entry.overrideRoot) await removeOverride(entry.overrideRoot);
  }
}

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
