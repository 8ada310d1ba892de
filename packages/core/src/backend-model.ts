/**
 * @module A model version run by a backend: its config, labels, backend instances, scheduler and
 * statistics (the `Model` that is not an ensemble).
 * Triton: core/src/backend_model.cc, backend_model_instance.cc
 */
import type { Backend, BackendModel, BackendModelInstance, ExecuteRequest, ExecuteResponse, ExecuteTimings, ModelContext } from './backend-api.js';
import { classify } from './classification.js';
import { abortable, settleWithin, systemClock, type Clock } from './clock.js';
import { Errors, TriodeError } from './errors.js';
import { applyReshape, customParameters, normalizeRequest, requestControls, schedulePolicyParams, sequenceParams, type InferenceRequest, type RequestControls, type InferenceResponse, type ResponseHandler } from './infer-request.js';
import type { ModelConfig, ModelInstanceGroup } from './model-config/model-config.js';
import { type Labels, readModelLabels } from './model-repository/label-provider.js';
import { batchShapeKey, raggedInputNames } from './scheduler/batch-shape-key.js';
import { createScheduler } from './scheduler/create-scheduler.js';
import type { Model } from './model.js';
import { ResponseCache } from './cache/response-cache.js';
import type { RateLimitedInstance, RateLimitedInstanceSpec, RateLimiter } from './scheduler/rate-limiter.js';
import type { Schedulable, Scheduler } from './scheduler/scheduler.js';
import type { SequenceInfo } from './scheduler/sequence-batch-scheduler.js';
import { SequenceStates, checkCorrelationId, checkSequenceControls, controlTensors } from './scheduler/sequence-state.js';
import { InferStats } from './stats/infer-stats.js';
import type { Tensor } from './tensor/tensor.js';

interface Pending extends Schedulable {
  req: InferenceRequest;
  exec: ExecuteRequest;
  startNs: number;
  /** Decoupled: when the first response went out (ns since startNs), for the first-response histogram. */
  firstResponseNs?: number;
  /** Sequence parameters (sequence batching models only). */
  sequence: SequenceInfo;
  /** Arrival number, for preserve_ordering. */
  seqNo: number;
  resolve: (r: InferenceResponse) => void;
  reject: (e: TriodeError) => void;
  /** Decoupled models: each response as it comes (`resolve` is called after the final one). */
  onResponse?: ResponseHandler;
}

const NO_SEQUENCE: SequenceInfo = { key: '', correlationId: '', start: false, end: false };
/** The `parameters` a backend gets for a request that has none (shared: backends only read it). */
const NO_PARAMETERS: Record<string, never> = Object.freeze({});

/** The last of `tensors` named `name` (as a Map built from them would hold it). */
function lastNamed(tensors: readonly Tensor[], name: string): Tensor | undefined {
  for (let i = tensors.length - 1; i >= 0; i--) if (tensors[i]!.name === name) return tensors[i];
  return undefined;
}

/**
 * The device of the `k`-th instance of a group that got `count` instances: KIND_GPU instances go
 * one per GPU in turn (the listed ones, else GPUs 0..n-1); every other kind runs on device 0.
 */
function instanceDevice(g: ModelInstanceGroup, k: number, count: number): number {
  if (g.kind !== 'KIND_GPU') return 0;
  if (g.gpus?.length) return g.gpus[k % g.gpus.length]!;
  return k % Math.max(1, Math.floor(count / Math.max(1, g.count ?? 1)));
}

/** Releases responses in arrival order (dynamic_batching.preserve_ordering). */
class ResponseOrder {
  #next = 0;
  #ready = new Map<number, () => void>();
  #released = false;

  deliver(seqNo: number, send: () => void): void {
    if (this.#released) {
      send();
      return;
    }
    this.#ready.set(seqNo, send);
    while (this.#ready.has(this.#next)) {
      const f = this.#ready.get(this.#next)!;
      this.#ready.delete(this.#next);
      this.#next++;
      f();
    }
  }

  /**
   * Sends what waits, in order, and from now on sends at once: for an unload that gave up on a
   * request that never ends (what waits behind it would wait for ever).
   */
  release(): void {
    this.#released = true;
    for (const seqNo of [...this.#ready.keys()].sort((a, b) => a - b)) {
      const f = this.#ready.get(seqNo)!;
      this.#ready.delete(seqNo);
      f();
    }
  }
}

/** Numbers each load of a model version (ModelVersion's load id). */
let nextLoadId = 1;

/** A model version that is loaded and can execute requests. */
export class ModelVersion implements Model {
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  readonly stats = new InferStats();
  /** Labels per output name (from `label_filename`). */
  readonly labels: ReadonlyMap<string, Labels>;
  readonly #backendModel: BackendModel;
  readonly #instances: BackendModelInstance[];
  readonly #scheduler: Scheduler<Pending>;
  /** stopAccepting was called (a server shutdown): a cached model answers no new request. */
  #refusing = false;
  readonly #clock: Clock;
  readonly #outputNames: string[];
  /** The BLS chain of a client's request: this model alone (shared: backends only read it). */
  readonly #ownChain: string[];
  readonly #batching: boolean;
  /** Inputs with `allow_ragged_batch`: left out of the shape check that forms batches. */
  readonly #ragged: ReadonlySet<string>;
  /** Outputs with a `reshape`: the shape the backend makes (`reshape.shape`) and the one clients see (`dims`). */
  readonly #outputReshapes: Map<string, { from: number[]; to: number[] }>;
  readonly #states: SequenceStates | undefined;
  readonly #order: ResponseOrder | undefined;
  #arrivals = 0;
  /** Seats at the server's rate limiter, one per instance (`--rate-limit=execution_count` only). */
  readonly #seats: { limiter: RateLimiter; instances: RateLimitedInstance[] } | undefined;
  /** The error requests get once the version is not ready (an instance was lost). */
  #notReady: TriodeError | undefined;
  /**
   * This load of the model (a reload of the same version is a new one): in its response cache
   * keys, so a reload with other files or config never answers from the old one's entries.
   */
  readonly #loadId = `${process.pid}.${nextLoadId++}`;
  /** The lost instance's error: why the version is not ready. */
  #lost: TriodeError | undefined;
  /** See `onNotReady`. */
  #notReadyListener: ((reason: TriodeError) => void) | undefined;
  /**
   * Decoupled requests whose execution returned but whose final response has not come (a model
   * that goes on sending from a timer or a stream): each fails its request. Unload waits for them,
   * as Triton holds a model until its last response.
   */
  readonly #streaming = new Set<(error: TriodeError) => void>();
  /** Resolved when `#streaming` empties (unload's wait). */
  #streamingDone: (() => void) | undefined;

  private constructor(ctx: ModelContext, backendModel: BackendModel, instances: BackendModelInstance[], labels: Map<string, Labels>, clock: Clock, states: SequenceStates | undefined, seats?: { limiter: RateLimiter; instances: RateLimitedInstance[] }) {
    this.name = ctx.name;
    this.version = ctx.version;
    this.config = ctx.config;
    this.labels = labels;
    this.#backendModel = backendModel;
    this.#instances = instances;
    this.#clock = clock;
    this.#outputNames = (ctx.config.output ?? []).map((o) => o.name);
    this.#ownChain = Object.freeze([ctx.name]) as string[];
    this.#batching = (ctx.config.max_batch_size ?? 0) > 0;
    this.#ragged = raggedInputNames(ctx.config);
    this.#outputReshapes = new Map((ctx.config.output ?? []).filter((o) => o.reshape).map((o) => [o.name, { from: o.reshape?.shape ?? [], to: o.dims ?? [] }]));
    const sb = ctx.config.sequence_batching;
    this.#states = states;
    // A decoupled model's responses stream as they are made: preserve_ordering orders only the
    // answers of regular models (a decoupled success went out at once, its failures waited for turns).
    this.#order = ctx.config.dynamic_batching?.preserve_ordering && !ctx.config.model_transaction_policy?.decoupled ? new ResponseOrder() : undefined;
    this.#seats = seats;
    // The sequence batcher runs a sequence's requests strictly one after another (implicit state
    // needs the previous output), so it never hands an instance a second batch ahead.
    const pipelineDepth = sb ? 1 : Math.min(...instances.map((i) => i.pipelineDepth ?? 1));
    this.#scheduler = createScheduler<Pending>(ctx.config, instances.length, (i, b) => this.#run(i, b), {
      clock,
      pipelineDepth,
      onReject: (p, e) => this.#fail(p, e),
      onSequenceEnd: (key) => this.#states?.drop(key),
      ...(seats ? { gates: seats.instances } : {}),
      ...(states ? { sequenceBatchKey: (p: Pending) => states.shapeKey(p.sequence.key, p.sequence.start) } : {}),
    });
  }

  /**
   * Loads a version: labels, the backend model, then every instance of every instance group.
   * When `ctx.signal` aborts, the load rejects at once with its reason; the instances made so far
   * (and any that a backend finishes later) are finalized. With `rateLimiter`, the instances are
   * registered with it; a resource count it cannot meet fails the load (INVALID_ARG, Triton's text).
   */
  static async load(ctx: ModelContext, backend: Backend, clock: Clock = systemClock, rateLimiter?: RateLimiter): Promise<ModelVersion> {
    const signal = ctx.signal;
    signal?.throwIfAborted();
    // Sequence controls and initial states are checked (and made) before anything else, as Triton
    // makes its control tensors and initial state data at load.
    const sb = ctx.config.sequence_batching;
    const batching = (ctx.config.max_batch_size ?? 0) > 0;
    if (sb) checkSequenceControls(sb, batching, ctx.config.name ?? ctx.name, (ctx.config.input ?? []).map((i) => i.name));
    const states = sb?.state?.length ? new SequenceStates(sb, batching, ctx.modelPath) : undefined;
    // review: each distinct file once, shared by the outputs that name it, and capped per model.
    const labels = readModelLabels(ctx.modelPath, ctx.config);
    const model = await abortable(backend.modelInitialize(ctx), signal, (m) => m.finalize());
    const instances: BackendModelInstance[] = [];
    let seats: { limiter: RateLimiter; instances: RateLimitedInstance[] } | undefined;
    try {
      let index = 0;
      const specs: RateLimitedInstanceSpec[] = [];
      for (const g of ctx.config.instance_group ?? [{}]) {
        const count = model.instanceCount ? await model.instanceCount(g) : (g.count ?? 1);
        for (let i = 0; i < count; i++) {
          signal?.throwIfAborted();
          instances.push(await abortable(model.instanceInitialize(g, index++), signal, (x) => x.finalize()));
          if (rateLimiter) specs.push({ device: instanceDevice(g, i, count), ...(g.rate_limiter ? { rateLimiter: g.rate_limiter } : {}) });
        }
      }
      // Last, with nothing awaited after it: a registered version always comes back (and unregisters at unload).
      if (rateLimiter && instances.length > 0) seats = { limiter: rateLimiter, instances: rateLimiter.register(specs) };
    } catch (err) {
      await Promise.allSettled(instances.map((x) => x.finalize()));
      await model.finalize().catch(() => undefined);
      throw err;
    }
    if (instances.length === 0) throw Errors.invalidArg(`model '${ctx.name}' has no instances`);
    return new ModelVersion(ctx, model, instances, labels, clock, states, seats);
  }

  /**
   * Applies a new instance count without reloading: new instances are initialized and join;
   * removed ones (from the end) take no new work, finish what they hold, then are finalized.
   * Only the last instance group's count may change (the others keep their instances).
   * @returns false when this model's scheduler cannot change its instance count (sequence
   *   batcher): the caller reloads instead.
   */
  async setInstanceGroups(groups: NonNullable<ModelConfig['instance_group']>): Promise<boolean> {
    const resize = this.#scheduler.resize?.bind(this.#scheduler);
    const drained = this.#scheduler.drained?.bind(this.#scheduler);
    // Rate limited: a reload registers the new instances (and checks their resources).
    if (!resize || !drained || groups.length === 0 || this.#seats) return false;
    const want = groups.reduce((a, g) => a + (g.count ?? 1), 0);
    const have = this.#instances.length;
    if (want > have) {
      const last = groups[groups.length - 1]!;
      const fresh: BackendModelInstance[] = [];
      try {
        for (let k = have; k < want; k++) fresh.push(await this.#backendModel.instanceInitialize(last, k));
      } catch (err) {
        await Promise.allSettled(fresh.map((x) => x.finalize()));
        throw err;
      }
      this.#instances.push(...fresh);
      resize(want);
    } else if (want < have) {
      resize(want);
      await Promise.all(Array.from({ length: have - want }, (_, k) => drained(want + k)));
      const gone = this.#instances.splice(want);
      await Promise.allSettled(gone.map((x) => x.finalize()));
    }
    this.config.instance_group = groups;
    return true;
  }

  /**
   * Why the version is not ready, once one of its instances reported that it can run nothing
   * more (an error with `instanceLost`: its GPU was lost); undefined while it is ready. It does not
   * come back: the model is loaded again (a new version object) to serve again.
   */
  get notReady(): TriodeError | undefined {
    return this.#lost;
  }

  /**
   * Called once, with the lost instance's error, when the version goes not ready (see
   * `notReady`); the model lifecycle marks its slot UNAVAILABLE with it. Called at once when it
   * already is.
   */
  set onNotReady(listener: ((reason: TriodeError) => void) | undefined) {
    this.#notReadyListener = listener;
    if (listener && this.#lost) listener(this.#lost);
  }

  /**
   * An instance can run nothing more. Keep it simple and safe: the whole version goes not ready,
   * even with instances on other devices (a lost GPU may take the driver's other devices with it,
   * and an instance count that silently shrinks is worse than a clear state); requests still
   * queued, and batches not started, fail with the reason.
   */
  #markNotReady(e: TriodeError): void {
    if (this.#lost) return;
    this.#lost = new TriodeError(e.code, e.message, { cause: e });
    this.#notReady = Errors.modelNotReady(this.name, this.version, e.message);
    this.#notReadyListener?.(this.#lost);
  }

  /** Instances serving now. */
  get instanceCount(): number {
    return this.#instances.length;
  }

  /** Requests waiting in the queue. */
  pendingCount(): number {
    return this.#scheduler.pendingCount();
  }

  /** Requests queued or executing. */
  inflightCount(): number {
    return this.#scheduler.pendingCount() + this.#scheduler.inflightInferenceCount();
  }

  /** True for `model_transaction_policy { decoupled: true }`: 0..N responses per request. */
  get decoupled(): boolean {
    return this.config.model_transaction_policy?.decoupled === true;
  }

  /**
   * The server's response cache, set when the model enables it (`response_cache { enable: true }`);
   * not used for decoupled or sequence models, whose answers depend on more than the request.
   */
  responseCache: ResponseCache | undefined;

  /** Validates and queues a request; resolves with its response. */
  infer(req: InferenceRequest): Promise<InferenceResponse> {
    if (this.decoupled) {
      return Promise.reject(Errors.decoupledInfer(this.name));
    }
    if (this.responseCache && !this.config.sequence_batching) return this.#cachedInfer(req, this.responseCache);
    return this.#enqueue(req);
  }

  async #cachedInfer(req: InferenceRequest, cache: ResponseCache): Promise<InferenceResponse> {
    const start = this.#clock.nowNs();
    // A request is checked before it is looked up, as Triton does: an invalid one (a bad input, a
    // priority of -1) gets its error on a hit as on a miss. (#enqueue checks again: it holds.)
    try {
      normalizeRequest(req, this.config);
      schedulePolicyParams(req.parameters);
      requestControls(req.parameters);
    } catch (err) {
      this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - start);
      throw TriodeError.from(err);
    }
    // Not ready (its instance was lost): the error, as on a miss, not a cached answer.
    if (this.#notReady) throw this.#notReady;
    // Stopping: refused before the lookup, as Triton's dynamic batcher checks stop_ first.
    if (this.#refusing) {
      this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - start);
      throw Errors.schedulerStopping();
    }
    // Large inputs are hashed a slice at a time, the event loop served between (see keyAsync);
    // small ones at once, with no promise to wait on. After a wait, the model may have stopped.
    const version = `${this.version}@${this.#loadId}`;
    let key: string;
    if (ResponseCache.hashedInSlices(req)) {
      key = await ResponseCache.keyAsync(req, this.name, version);
      if (this.#notReady) throw this.#notReady;
      if (this.#refusing) {
        this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - start);
        throw Errors.schedulerStopping();
      }
    } else {
      key = ResponseCache.key(req, this.name, version);
    }
    const hit = cache.lookup(key);
    const lookupNs = this.#clock.nowNs() - start;
    if (hit) {
      this.stats.recordCacheHit(this.#clock.epochMs(), this.#clock.nowNs() - start, lookupNs);
      return req.id !== undefined ? { ...hit, id: req.id } : hit;
    }
    const response = await this.#enqueue(req);
    const insertStart = this.#clock.nowNs();
    cache.insert(key, response);
    this.stats.recordCacheMiss(lookupNs + this.#clock.nowNs() - insertStart);
    return response;
  }

  /**
   * Runs a request and calls `onResponse` for each response as it comes: once for a regular
   * model, 0..N times for a decoupled one. Resolves after the last.
   */
  async inferStream(req: InferenceRequest, onResponse: ResponseHandler): Promise<void> {
    if (!this.decoupled) {
      // A streamed request to a regular model is looked up in the cache as any other (Triton
      // looks it up in the scheduler, whatever the endpoint).
      void onResponse(await this.infer(req));
      return;
    }
    await this.#enqueue(req, onResponse);
  }

  #enqueue(req: InferenceRequest, onResponse?: ResponseHandler): Promise<InferenceResponse> {
    // The server sends nothing to a version that is not ready; a caller holding it gets why.
    if (this.#notReady) return Promise.reject(this.#notReady);
    const startNs = this.#clock.nowNs();
    let batchSize: number;
    let sequence = NO_SEQUENCE;
    let policy: { priority: number; timeoutUs: number };
    let controls: RequestControls | undefined;
    try {
      batchSize = normalizeRequest(req, this.config);
      policy = schedulePolicyParams(req.parameters);
      if (this.config.sequence_batching) sequence = this.#sequenceOf(req, batchSize);
      controls = requestControls(req.parameters);
    } catch (err) {
      this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - startNs);
      return Promise.reject(TriodeError.from(err));
    }
    const outputNames = req.outputs?.length ? req.outputs.map((o) => o.name) : this.#outputNames;
    const shapeKey = batchShapeKey(req.inputs, this.#ragged);
    req.trace?.timestamps.push({ name: 'REQUEST_START', ns: startNs }, { name: 'QUEUE_START', ns: startNs });
    const signal = req.signal;
    if (signal?.aborted) {
      this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - startNs, 'CANCELED');
      return Promise.reject(Errors.cancelled());
    }
    return new Promise<InferenceResponse>((settle, fail) => {
      let resolve = settle;
      let reject = fail;
      if (signal) {
        const onAbort = (): void => {
          if (this.#scheduler.cancel(pending)) this.#fail(pending, Errors.cancelled());
        };
        signal.addEventListener('abort', onAbort, { once: true });
        resolve = (r) => { signal.removeEventListener('abort', onAbort); settle(r); };
        reject = (e) => { signal.removeEventListener('abort', onAbort); fail(e); };
      }
      const exec: ExecuteRequest = {
        inputs: req.inputs,
        outputNames,
        batchSize,
        // As Triton: the model gets the custom parameters; the core acts on the others itself.
        parameters: req.parameters ? customParameters(req.parameters) : NO_PARAMETERS,
        blsDepth: req.blsDepth ?? 0,
        blsChain: req.blsChain?.length ? [...req.blsChain, this.name] : this.#ownChain,
      };
      if (req.id !== undefined) exec.id = req.id;
      if (signal) exec.signal = signal;
      // What the core read of the parameters it acts on, as Triton's backends read it of the
      // request; set only when the request has any (most have none: nothing more is made).
      if (controls) {
        if (controls.correlationId !== undefined) exec.correlationId = controls.correlationId;
        if (controls.flags !== undefined) exec.flags = controls.flags;
        if (controls.timeoutUs !== undefined) exec.timeoutUs = controls.timeoutUs;
      }
      const pending: Pending = {
        req,
        exec,
        batchSize: Math.max(batchSize, 1),
        shapeKey,
        enqueueNs: startNs,
        deadlineNs: 0,
        priority: policy.priority,
        timeoutUs: policy.timeoutUs,
        startNs,
        sequence,
        seqNo: -1,
        resolve,
        reject,
      };
      // Time already spent queued upstream (in Redis, for a cluster request) counts against the
      // batcher's delay. Never before now minus that, whatever the clocks of two machines say.
      if (req.queuedSinceMs !== undefined) pending.delayFromNs = startNs - Math.max(0, this.#clock.epochMs() - req.queuedSinceMs) * 1e6;
      if (onResponse) pending.onResponse = onResponse;
      // Numbered before it is queued: a batch that runs (and fails) inside enqueue is answered in
      // its turn; numbered after, its number never came, and every later answer was held.
      if (this.#order) pending.seqNo = this.#arrivals++;
      try {
        this.#scheduler.enqueue(pending);
      } catch (err) {
        // Refused: its turn is passed over.
        if (pending.seqNo >= 0) this.#order!.deliver(pending.seqNo, () => undefined);
        this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - startNs);
        reject(TriodeError.from(err));
      }
    });
  }

  #sequenceOf(req: InferenceRequest, batchSize: number): SequenceInfo {
    // Batch size first, then the correlation id: Triton's SequenceBatchScheduler::Enqueue order,
    // so a request wrong in both gets Triton's error.
    if ((this.config.max_batch_size ?? 0) > 0 && batchSize !== 1) {
      throw Errors.invalidArg(`inference request to model '${this.name}' must specify batch-size 1 due to requirements of sequence batcher`);
    }
    const seq = sequenceParams(req.parameters);
    if (!seq) {
      throw Errors.invalidArg(`inference request to model '${this.name}' must specify a non-zero or non-empty correlation ID`);
    }
    checkCorrelationId(this.config.sequence_batching!, seq.correlationId, this.name);
    return seq;
  }

  /**
   * Answers a request with an error (queue timeout: REJECTED; execution failure: BACKEND). An
   * error of a lost instance makes the version not ready; the client gets it without the flag, so
   * it does not travel on (a BLS caller that rethrows it must not go not ready too).
   */
  #fail(p: Pending, error: TriodeError): void {
    let e = error;
    if (e.instanceLost) {
      this.#markNotReady(e);
      e = new TriodeError(e.code, e.message, { cause: e });
    }
    const reason = e.rejected ? 'REJECTED' : e.code === 'CANCELLED' ? 'CANCELED' : 'BACKEND';
    this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - p.startNs, reason);
    if (reason !== 'BACKEND' && this.#order && p.seqNo >= 0) {
      // Taken out of the queue (its timeout, a cancel): answered at once, as Triton's scheduler
      // answers it outside preserve_ordering, and its turn is passed over (review: it waited for
      // every request before it to finish).
      p.req.trace?.timestamps.push({ name: 'REQUEST_END', ns: this.#clock.nowNs() });
      this.#order.deliver(p.seqNo, () => undefined);
      p.reject(e);
      return;
    }
    this.#send(p, () => p.reject(e));
  }

  #send(p: Pending, f: () => void): void {
    p.req.trace?.timestamps.push({ name: 'REQUEST_END', ns: this.#clock.nowNs() });
    if (this.#order && p.seqNo >= 0) this.#order.deliver(p.seqNo, f);
    else f();
  }

  /** The request as the instance gets it: with control and state tensors for sequence models. */
  #execRequest(p: Pending): ExecuteRequest {
    const sb = this.config.sequence_batching;
    if (!sb) return p.exec;
    const batching = (this.config.max_batch_size ?? 0) > 0;
    const inputs = [...p.exec.inputs, ...controlTensors(sb, batching, p.sequence, this.name)];
    let outputNames = p.exec.outputNames;
    if (this.#states) {
      if (p.sequence.start) this.#states.drop(p.sequence.key);
      inputs.push(...this.#states.inputs(p.sequence.key));
      outputNames = [...outputNames, ...this.#states.outputNames()];
    }
    return { ...p.exec, inputs, outputNames };
  }

  async #run(instance: number, batch: Pending[]): Promise<void> {
    const execStart = this.#clock.nowNs();
    let responses: ExecuteResponse[];
    let timings: ExecuteTimings | undefined;
    const notReady = this.#notReady;
    if (notReady) {
      // No instance takes work once the version is not ready: what was queued fails with why.
      for (const p of batch) this.#fail(p, notReady);
      return;
    }
    if (this.decoupled) {
      await this.#runDecoupled(instance, batch, execStart);
      return;
    }
    try {
      const requests = new Array<ExecuteRequest>(batch.length);
      for (let i = 0; i < batch.length; i++) requests[i] = this.#execRequest(batch[i]!);
      const result = await this.#instances[instance]!.execute(requests);
      responses = result.responses;
      timings = result.timings;
      if (responses.length !== batch.length) {
        throw Errors.internal(`backend returned ${responses.length} responses for ${batch.length} requests`);
      }
    } catch (err) {
      const e = TriodeError.from(err);
      responses = batch.map(() => ({ error: e }));
    }
    const end = this.#clock.nowNs();
    const t = timings ?? { computeInputNs: 0, computeInferNs: end - execStart, computeOutputNs: 0 };
    let inferences = 0;
    let succeeded = false;
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      p.req.trace?.timestamps.push(
        { name: 'COMPUTE_START', ns: execStart }, { name: 'COMPUTE_INPUT_END', ns: execStart + t.computeInputNs },
        { name: 'COMPUTE_OUTPUT_START', ns: end - t.computeOutputNs }, { name: 'COMPUTE_END', ns: end },
      );
      inferences += p.batchSize;
      if (!responses[i]!.error) succeeded = true;
    }
    if (succeeded) this.stats.recordExecution(inferences, t.computeInputNs, t.computeInferNs, t.computeOutputNs);
    const epoch = this.#clock.epochMs();
    for (let i = 0; i < batch.length; i++) {
      const p = batch[i]!;
      const r = responses[i]!;
      if (r.error) {
        this.#fail(p, r.error);
        continue;
      }
      try {
        if (this.#states) this.#states.save(p.sequence.key, r.outputs);
        const response = this.#respond(p, r.outputs);
        this.stats.recordSuccess(epoch, this.#clock.nowNs() - p.startNs, execStart - p.enqueueNs, t.computeInputNs, t.computeInferNs, t.computeOutputNs);
        this.#resolve(p, response);
      } catch (err) {
        this.#fail(p, TriodeError.from(err));
      }
    }
  }

  /** Sends a response (`#send` without a closure when responses need no ordering). */
  #resolve(p: Pending, response: InferenceResponse): void {
    if (this.#order && p.seqNo >= 0) {
      this.#send(p, () => p.resolve(response));
      return;
    }
    p.req.trace?.timestamps.push({ name: 'REQUEST_END', ns: this.#clock.nowNs() });
    p.resolve(response);
  }

  /**
   * A decoupled model's batch: each request's responses go to its stream as the backend sends
   * them; the request is done at its final response (or with the error that failed it).
   */
  async #runDecoupled(instance: number, batch: Pending[], execStart: number): Promise<void> {
    const done = new Array<boolean>(batch.length).fill(false);
    const open = new Array<((error: TriodeError) => void) | undefined>(batch.length);
    const finish = (i: number, error?: TriodeError) => {
      if (done[i]) return;
      done[i] = true;
      const closer = open[i];
      if (closer) {
        this.#streaming.delete(closer);
        if (this.#streaming.size === 0) this.#streamingDone?.();
      }
      const p = batch[i]!;
      if (error) {
        this.#fail(p, error);
        return;
      }
      const total = this.#clock.nowNs() - p.startNs;
      this.stats.recordSuccess(this.#clock.epochMs(), total, execStart - p.enqueueNs, 0, this.#clock.nowNs() - execStart, 0, p.firstResponseNs ?? total);
      p.req.trace?.timestamps.push({ name: 'REQUEST_END', ns: this.#clock.nowNs() });
      p.resolve({ modelName: this.name, modelVersion: String(this.version), outputs: [] });
    };
    const requests = batch.map((p, i) => ({
      ...this.#execRequest(p),
      respond: (r: ExecuteResponse | undefined, final: boolean): void | Promise<void> => {
        if (done[i]) return;
        if (r?.error) {
          finish(i, r.error);
          return;
        }
        let ready: void | Promise<void> = undefined;
        if (r) {
          try {
            p.firstResponseNs ??= this.#clock.nowNs() - p.startNs;
            ready = p.onResponse?.({ ...this.#respond(p, r.outputs), final });
          } catch (err) {
            finish(i, TriodeError.from(err));
            return;
          }
        }
        if (final) finish(i);
        return ready;
      },
    }));
    try {
      await this.#instances[instance]!.execute(requests);
      this.stats.recordExecution(batch.reduce((a, p) => a + p.batchSize, 0), 0, this.#clock.nowNs() - execStart, 0);
      for (let i = 0; i < batch.length; i++) {
        if (done[i]) continue;
        const closer = (error: TriodeError): void => finish(i, error);
        open[i] = closer;
        this.#streaming.add(closer);
      }
    } catch (err) {
      const e = TriodeError.from(err);
      batch.forEach((_p, i) => finish(i, e));
    }
  }

  #respond(p: Pending, outputs: Tensor[]): InferenceResponse {
    // A few outputs are found faster by a scan than through a Map built per response.
    const byName = outputs.length > 8 ? new Map(outputs.map((o) => [o.name, o])) : undefined;
    const batching = this.#batching;
    const out: Tensor[] = [];
    const requested = p.req.outputs?.length ? p.req.outputs : undefined;
    const count = requested ? requested.length : p.exec.outputNames.length;
    for (let k = 0; k < count; k++) {
      const name = requested ? requested[k]!.name : p.exec.outputNames[k]!;
      const classCount = requested?.[k]!.classCount;
      const made = byName ? byName.get(name) : lastNamed(outputs, name);
      if (!made) throw Errors.internal(`backend did not produce output '${name}' for model '${this.name}'`);
      const t = this.#reshapeOutput(made, batching);
      out.push(classCount ? classify(t, classCount, batching, this.labels.get(name)) : t);
    }
    const response: InferenceResponse = { modelName: this.name, modelVersion: String(this.version), outputs: out };
    if (p.req.id !== undefined) response.id = p.req.id;
    return response;
  }

  /**
   * An output as clients see it: with a `reshape` in the config, the backend made it in
   * `reshape.shape` and the response carries the batch dim (when batching) plus `dims`, their -1s
   * filled from the backend's shape. The one place output reshape is applied, for every backend.
   * Triton: InferenceResponse::Output::Reshape
   */
  #reshapeOutput(t: Tensor, batching: boolean): Tensor {
    const r = this.#outputReshapes.get(t.name);
    if (!r) return t;
    try {
      return { ...t, shape: applyReshape(t.shape, r.from, r.to, batching) };
    } catch (err) {
      throw Errors.internal(`output '${t.name}' of model '${this.name}': ${(err as Error).message}`, err);
    }
  }

  /**
   * Runs one warmup request on every instance, one instance after another, without the scheduler
   * (Triton warms each instance itself before the model is READY). Rejects with the first
   * instance's error; the outputs are checked as a response's would be, then dropped.
   * Triton: TritonModelInstance::WarmUp (backend_model_instance.cc)
   */
  async warmup(req: InferenceRequest): Promise<void> {
    const batchSize = normalizeRequest(req, this.config);
    const sb = this.config.sequence_batching;
    // A sequence model's sample is a whole sequence of one request (START and END), never kept.
    const sequence: SequenceInfo = sb ? { key: 'warmup', correlationId: 0n, start: true, end: true } : NO_SEQUENCE;
    for (const instance of this.#instances) {
      const p: Pending = {
        req,
        exec: { inputs: req.inputs.map((t) => ({ ...t, owned: false })), outputNames: this.#outputNames, batchSize, parameters: {}, blsDepth: 0, blsChain: [this.name] },
        batchSize: Math.max(batchSize, 1), shapeKey: '', enqueueNs: 0, deadlineNs: 0, priority: 0, timeoutUs: 0,
        startNs: 0, sequence, seqNo: -1, resolve: () => undefined, reject: () => undefined,
      };
      try {
        await this.#warmupOn(instance, this.#execRequest(p), p);
      } finally {
        this.#states?.drop(sequence.key);
      }
    }
  }

  async #warmupOn(instance: BackendModelInstance, exec: ExecuteRequest, p: Pending): Promise<void> {
    if (this.decoupled) {
      let failure: TriodeError | undefined;
      let finished!: () => void;
      const final = new Promise<void>((r) => { finished = r; });
      await instance.execute([{ ...exec, respond: (r, last) => {
        if (r?.error) failure ??= r.error;
        else if (r) {
          // A response the model got wrong fails the warmup (it was thrown into the backend's
          // message handler, out of the main thread's reach: the process ended).
          try {
            this.#respond(p, r.outputs);
          } catch (err) {
            failure ??= TriodeError.from(err);
            finished();
            return;
          }
        }
        if (last || r?.error) finished();
      } }]);
      await final;
      if (failure) throw failure;
      return;
    }
    const { responses } = await instance.execute([exec]);
    const r = responses[0];
    if (!r) throw Errors.internal(`backend returned no response for a warmup request of model '${this.name}'`);
    if (r.error) throw r.error;
    this.#respond(p, r.outputs);
  }

  /**
   * Waits for queued and running requests, then releases the instances and the model. With
   * `timeoutMs`, waits at most that long for the requests, and at most `releaseMs` (default:
   * `timeoutMs`) for the release: a request or a finalize that never ends does not hold an
   * unload or a shutdown up.
   * @returns false when the time ran out (what still ran was left behind).
   */
  async unload(options: { timeoutMs?: number; releaseMs?: number } = {}): Promise<boolean> {
    const t = options.timeoutMs;
    // Queued and running requests, then decoupled ones still sending after their execution.
    const quiet = this.#scheduler.idle().then(() => this.#streamsEnded());
    const drained = t === undefined ? await quiet.then(() => true) : await settleWithin(quiet, t);
    await this.#scheduler.stop();
    // What still waits will never run: it is answered, not left hanging (its client, and the
    // server's in-flight count, would wait for ever).
    // Nothing runs after the scheduler stops, so there is nothing left to order: what waits for a
    // turn that will not come (a request that never ended) is sent now.
    this.#order?.release();
    if (!drained) {
      this.#scheduler.rejectAll(Errors.unavailable(`model '${this.name}' version ${this.version} was unloaded before the request could run`));
      // A stream the model did not end in time ends here: its instance is about to be released.
      const ended = Errors.unavailable(`model '${this.name}' version ${this.version} was unloaded before the request sent its final response`);
      for (const fail of [...this.#streaming]) fail(ended);
    }
    this.#seats?.limiter.unregister(this.#seats.instances);
    const giveUp = new AbortController();
    const release = Promise.allSettled(this.#instances.map((i) => i.finalize(giveUp.signal))).then(() => this.#backendModel.finalize());
    if (t === undefined) {
      await release;
      return drained;
    }
    const released = await settleWithin(release, options.releaseMs ?? t);
    // An instance still finalizing is told the wait is over: it ends what it still runs (the
    // javascript backend's thread stuck behind an execute that never returns spun a core for good).
    if (!released) giveUp.abort(Errors.unavailable(`model '${this.name}' version ${this.version}: its instances were not released in time`));
    return released && drained;
  }

  /** Resolves when no decoupled request is still sending after its execution. */
  #streamsEnded(): Promise<void> {
    if (this.#streaming.size === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const before = this.#streamingDone;
      this.#streamingDone = () => {
        this.#streamingDone = undefined;
        before?.();
        resolve();
      };
    });
  }

  activeSequenceCount(): number {
    return this.#scheduler.activeSequenceCount?.() ?? 0;
  }

  stopAccepting(): void {
    this.#refusing = true;
    this.#scheduler.stopAccepting();
  }

  quiesced(): Promise<void> {
    const quiet = this.#scheduler.quiesced();
    return this.#streaming.size === 0 ? quiet : quiet.then(() => this.#streamsEnded());
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    // Decoupled requests still sending after their execution count too: a graceful stop waits
    // for their final responses (it cut them at once, as an exit timeout that had expired).
    return this.#streaming.size === 0 ? this.#scheduler.idle() : this.#scheduler.idle().then(() => this.#streamsEnded());
  }
}
