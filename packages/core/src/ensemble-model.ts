/**
 * @module Ensembles: a DAG of steps over other models, each step run as soon as its inputs exist
 * (independent branches in parallel). An ensemble runs where its request entered, calling the
 * composing models through the server.
 * Triton: core/src/ensemble_scheduler/ensemble_scheduler.cc, ensemble_utils.cc (ValidateEnsembleConfig)
 */
import { classify } from './classification.js';
import { settleWithin, systemClock, type Clock } from './clock.js';
import { Errors, TriodeError } from './errors.js';
import { normalizeRequest, type InferenceRequest, type InferenceResponse, type ResponseHandler } from './infer-request.js';
import type { EnsembleStep, ModelConfig, ModelInput, ModelOutput } from './model-config/model-config.js';
import type { Model } from './model.js';
import type { Labels } from './model-repository/label-provider.js';
import { InferStats } from './stats/infer-stats.js';
import type { Tensor } from './tensor/tensor.js';
import { isOwned } from './tensor/transferable.js';

/** What an ensemble needs to know of a composing model, to validate the graph at load. */
export interface ComposingModel {
  config: ModelConfig;
}

/**
 * Checks the ensemble graph: every step's model and tensors exist and agree, no cycles.
 * @returns per step, whether its model batches (max_batch_size > 0)
 */
export function validateEnsemble(config: ModelConfig, lookup: (name: string, version: number) => ComposingModel | undefined): boolean[] {
  const name = config.name ?? '';
  const steps = config.ensemble_scheduling?.step ?? [];
  if (steps.length === 0) throw Errors.invalidArg(`ensemble ${name} must specify at least one step`);
  // Ensemble tensor -> data type, and who produces it.
  const types = new Map<string, string>();
  const producer = new Map<string, number>();
  for (const i of config.input ?? []) types.set(i.name, i.data_type ?? '');
  const models = steps.map((s, k) => {
    // Before the lookup: on a reload, the ensemble found under its own name is the old one.
    if (s.model_name === name) throw Errors.invalidArg(`circular dependency between ensembles: ${name} -> ${name} (step ${k})`);
    const m = lookup(s.model_name ?? '', s.model_version ?? -1);
    if (!m) throw Errors.invalidArg(`ensemble ${name} contains model '${s.model_name ?? ''}' (step ${k}) which is not loaded or not ready`);
    return m;
  });
  // An ensemble among the steps whose own steps lead back here (a -> b -> a).
  const seen = new Set<string>();
  const through = (m: ComposingModel, path: string[]): void => {
    for (const s of m.config.ensemble_scheduling?.step ?? []) {
      const step = s.model_name ?? '';
      if (step === name) throw Errors.invalidArg(`circular dependency between ensembles: ${[name, ...path, name].join(' -> ')}`);
      const inner = seen.has(step) ? undefined : lookup(step, s.model_version ?? -1);
      seen.add(step);
      if (inner?.config.ensemble_scheduling) through(inner, [...path, step]);
    }
  };
  models.forEach((m, k) => { if (m.config.ensemble_scheduling) through(m, [steps[k]!.model_name ?? '']); });
  // A decoupled step answers 0..N times: the ensemble would have to become decoupled (as Triton's
  // does); Triode runs ensembles one request, one answer, and says so at load.
  steps.forEach((s, k) => {
    if (models[k]!.config.model_transaction_policy?.decoupled) {
      throw Errors.unsupported(`ensemble ${name} contains decoupled model '${s.model_name ?? ''}' (step ${k}), which Triode does not support in an ensemble`);
    }
  });
  // A batching step must take the ensemble's batches (a non-batching one gets each request whole).
  const ensembleBatch = config.max_batch_size ?? 0;
  steps.forEach((s, k) => {
    const mbs = models[k]!.config.max_batch_size ?? 0;
    if (mbs !== 0 && mbs < ensembleBatch) {
      throw Errors.invalidArg(`ensemble ${name} allows maximum batch size ${ensembleBatch}, but it contains model ${s.model_name ?? ''} which only allows maximum batch size to be ${mbs}`);
    }
  });
  steps.forEach((s, k) => {
    const outs = new Map((models[k]!.config.output ?? []).map((o: ModelOutput) => [o.name, o]));
    for (const [modelOut, tensor] of Object.entries(s.output_map ?? {})) {
      const o = outs.get(modelOut);
      if (!o) throw Errors.invalidArg(`in ensemble ${name}, ensemble tensor ${tensor} is mapped from non-existing output ${modelOut} of model ${s.model_name ?? ''}`);
      if (producer.has(tensor) || (config.input ?? []).some((i) => i.name === tensor)) {
        throw Errors.invalidArg(`ensemble tensor ${tensor} can appear in an output map only once for ensemble ${name} step ${k}`);
      }
      producer.set(tensor, k);
      types.set(tensor, o.data_type ?? '');
    }
  });
  steps.forEach((s, k) => {
    const ins = new Map((models[k]!.config.input ?? []).map((i: ModelInput) => [i.name, i]));
    for (const [modelIn, tensor] of Object.entries(s.input_map ?? {})) {
      const i = ins.get(modelIn);
      if (!i) throw Errors.invalidArg(`in ensemble ${name}, ensemble tensor ${tensor} is mapped to non-existing input ${modelIn} of model ${s.model_name ?? ''}`);
      const t = types.get(tensor);
      if (t === undefined) throw Errors.invalidArg(`in ensemble ${name}, step ${k} (${s.model_name ?? ''}) reads ensemble tensor ${tensor}, which no input or step provides`);
      if (t !== i.data_type) {
        throw Errors.invalidArg(`in ensemble ${name}, ensemble tensor ${tensor} has data type ${t} but input ${modelIn} of model ${s.model_name ?? ''} expects ${i.data_type ?? ''}`);
      }
    }
    for (const i of models[k]!.config.input ?? []) {
      if (!i.optional && !Object.hasOwn(s.input_map ?? {}, i.name)) {
        throw Errors.invalidArg(`in ensemble ${name}, input ${i.name} of model ${s.model_name ?? ''} (step ${k}) is not mapped`);
      }
    }
  });
  for (const o of config.output ?? []) {
    if (!producer.has(o.name)) throw Errors.invalidArg(`ensemble output ${o.name} of ensemble ${name} is not produced by any step`);
    if (types.get(o.name) !== o.data_type) {
      throw Errors.invalidArg(`ensemble output ${o.name} of ensemble ${name} has data type ${o.data_type ?? ''} but its step produces ${types.get(o.name) ?? ''}`);
    }
  }
  // Cycles: a step that (transitively) needs its own output. A depth-first walk with its own stack
  // (review: recursing once per step, copying the path at each, a valid 10,000-step chain ran out
  // of call stack); the path is built only for the message, from the stack.
  const state = new Array<number>(steps.length).fill(0);
  for (let root = 0; root < steps.length; root++) {
    if (state[root] !== 0) continue;
    const stack: { k: number; needs: number[]; next: number }[] = [];
    const enter = (k: number) => {
      state[k] = 1;
      const needs = Object.values(steps[k]!.input_map ?? {}).map((t) => producer.get(t)).filter((p): p is number => p !== undefined);
      stack.push({ k, needs, next: 0 });
    };
    enter(root);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.next === top.needs.length) {
        state[top.k] = 2;
        stack.pop();
        continue;
      }
      const p = top.needs[top.next++]!;
      if (state[p] === 1) {
        const path = [...stack.map((f) => steps[f.k]!.model_name ?? ''), steps[p]!.model_name ?? ''];
        throw Errors.invalidArg(`ensemble ${name} contains a cycle: ${path.join(' -> ')}`);
      }
      if (state[p] === 0) enter(p);
    }
  }
  return models.map((m) => (m.config.max_batch_size ?? 0) > 0);
}

/**
 * The steps that produce `outputs`, and the steps those need, in config order: a step whose
 * outputs no needed step and no requested output reads is left out.
 */
export function neededSteps(steps: readonly EnsembleStep[], outputs: readonly string[]): EnsembleStep[] {
  const producer = new Map<string, number>();
  steps.forEach((s, k) => { for (const t of Object.values(s.output_map ?? {})) producer.set(t, k); });
  const needed = new Array<boolean>(steps.length).fill(false);
  const want = [...outputs];
  for (let t = want.pop(); t !== undefined; t = want.pop()) {
    const k = producer.get(t);
    if (k === undefined || needed[k]) continue;
    needed[k] = true;
    want.push(...Object.values(steps[k]!.input_map ?? {}));
  }
  return steps.filter((_s, k) => needed[k]);
}

/** A loaded ensemble: runs its steps through `infer` (the server). */
export class EnsembleModel implements Model {
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  readonly stats = new InferStats();
  readonly labels: ReadonlyMap<string, Labels>;
  readonly #infer: (r: InferenceRequest) => Promise<InferenceResponse>;
  readonly #clock: Clock;
  /** Per step (config order), whether its model batches: see `#forStep`. */
  readonly #stepBatching: readonly boolean[] | undefined;
  #inflight = 0;
  #idle: (() => void)[] = [];

  constructor(config: ModelConfig, version: number, infer: (r: InferenceRequest) => Promise<InferenceResponse>, options: { clock?: Clock; labels?: ReadonlyMap<string, Labels>; stepBatching?: boolean[] } = {}) {
    this.name = config.name ?? '';
    this.version = version;
    this.config = config;
    this.#infer = infer;
    this.#clock = options.clock ?? systemClock;
    this.labels = options.labels ?? new Map();
    this.#stepBatching = options.stepBatching;
  }

  /**
   * A tensor's shape as step `k`'s model takes it, or as the ensemble takes that model's output
   * (`back`), as Triton's ensemble scheduler reshapes them: between a batching ensemble and a step
   * that does not batch, a batch of 1 loses its batch dim on the way in and gets it back on the
   * way out (and the other way round for a step that batches in an ensemble that does not).
   * @throws TriodeError INVALID_ARG for a batch of more than 1 to a step that does not batch
   */
  #forStep(k: number, shape: number[], back: boolean, model: string): number[] {
    const step = this.#stepBatching?.[k];
    const ensemble = (this.config.max_batch_size ?? 0) > 0;
    if (step === undefined || step === ensemble) return shape;
    // Batch dims are added where the receiving side batches and the sending side does not.
    const addBatch = back ? ensemble : step;
    if (addBatch) return [1, ...shape];
    if (shape[0] !== 1) {
      throw Errors.invalidArg(`in ensemble '${this.name}', step ${k} (model '${model}') ${back ? 'made' : 'takes'} a tensor of shape [${shape.join(',')}], but only a batch of 1 passes between a model that batches and one that does not`);
    }
    return shape.slice(1);
  }

  pendingCount(): number {
    return 0;
  }

  inflightCount(): number {
    return this.#inflight;
  }

  async infer(req: InferenceRequest): Promise<InferenceResponse> {
    const start = this.#clock.nowNs();
    this.#inflight++;
    try {
      const response = await this.#run(req);
      this.stats.recordSuccess(this.#clock.epochMs(), this.#clock.nowNs() - start, 0, 0, 0, 0);
      return response;
    } catch (err) {
      this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - start);
      throw TriodeError.from(err);
    } finally {
      this.#inflight--;
      if (this.#inflight === 0) for (const f of this.#idle.splice(0)) f();
    }
  }

  async #run(req: InferenceRequest): Promise<InferenceResponse> {
    const batch = normalizeRequest(req, this.config);
    const all = this.config.ensemble_scheduling?.step ?? [];
    const requested = req.outputs?.length ? req.outputs : (this.config.output ?? []).map((o) => ({ name: o.name, classCount: undefined }));
    // Only the steps the requested outputs need run, as in Triton (a branch that feeds only an
    // output not asked for neither runs nor fails the request).
    const steps = neededSteps(all, requested.map((o) => o.name));
    const owners = new Lender(steps, requested.map((o) => o.name));
    const tensors = new Map<string, Tensor>();
    const waiting = new Map<string, { resolve: (t: Tensor | undefined) => void; reject: (e: TriodeError) => void }[]>();
    let failed: TriodeError | undefined;
    // Per tensor, the steps still to finish that may produce it: one that none will produce (an
    // optional input the request left out, an output a step did not return) is absent, and the
    // steps that read it go on without it instead of waiting for ever.
    const producers = new Map<string, number>();
    for (const st of steps) for (const t of Object.values(st.output_map ?? {})) producers.set(t, (producers.get(t) ?? 0) + 1);
    const absent = (name: string): boolean => !tensors.has(name) && !(producers.get(name)! > 0);
    const available = (name: string): Promise<Tensor | undefined> => {
      const t = tensors.get(name);
      if (t) return Promise.resolve(t);
      if (failed) return Promise.reject(failed);
      if (absent(name)) return Promise.resolve(undefined);
      return new Promise((resolve, reject) => {
        const list = waiting.get(name) ?? [];
        list.push({ resolve, reject });
        waiting.set(name, list);
      });
    };
    const publish = (group: Tensor[]) => {
      owners.add(group);
      for (const t of group) {
        tensors.set(t.name, t);
        for (const w of waiting.get(t.name) ?? []) w.resolve(t);
        waiting.delete(t.name);
      }
    };
    /** A failed step fails the steps still waiting for a tensor (they would wait for ever). */
    const fail = (e: TriodeError): TriodeError => {
      failed ??= e;
      for (const list of waiting.values()) for (const w of list) w.reject(failed);
      waiting.clear();
      return failed;
    };
    /** Step `s` is done: a tensor it was to produce and no other step will is absent now. */
    const finished = (s: EnsembleStep) => {
      for (const name of Object.values(s.output_map ?? {})) {
        producers.set(name, producers.get(name)! - 1);
        if (!absent(name)) continue;
        for (const w of waiting.get(name) ?? []) w.resolve(undefined);
        waiting.delete(name);
      }
    };
    publish(req.inputs);
    const runStep = async (s: EnsembleStep, k: number): Promise<void> => {
      let ready: { modelIn: string; t: Tensor }[];
      try {
        const all = await Promise.all(Object.entries(s.input_map ?? {}).map(async ([modelIn, tensor]) => ({ modelIn, t: await available(tensor) })));
        // An absent tensor is left out of the step's request (its model refuses it if it needs it).
        ready = all.filter((x): x is { modelIn: string; t: Tensor } => x.t !== undefined);
      } catch {
        ready = [];
      }
      if (failed) {
        owners.done(k);
        return;
      }
      // A client that went away: no further step starts.
      if (req.signal?.aborted) {
        owners.done(k);
        throw fail(Errors.cancelled());
      }
      // Lent, unless this step is the last one that needs the buffer and the ensemble owns it.
      const mine = owners.take(k, ready.map((x) => x.t));
      const at = all.indexOf(s);
      let inputs: Tensor[];
      try {
        inputs = ready.map(({ modelIn, t }) => ({ ...t, name: modelIn, shape: this.#forStep(at, t.shape, false, s.model_name ?? ''), owned: mine.has(t.data.buffer) }));
      } catch (err) {
        owners.done(k);
        throw fail(TriodeError.from(err));
      }
      const outputMap = s.output_map ?? {};
      const stepReq: InferenceRequest = {
        modelName: s.model_name ?? '',
        inputs,
        outputs: Object.keys(outputMap).map((name) => ({ name })),
        parameters: req.parameters ?? {},
        ...(s.model_version !== undefined && s.model_version >= 0 ? { modelVersion: s.model_version } : {}),
        // The ensemble joins the chain: a step that leads back to it (or to a model that called it) is refused.
        blsChain: [...(req.blsChain ?? []), this.name],
        // Nesting is not a BLS call: ensembles deeper than MAX_BLS_DEPTH loaded READY and then
        // failed every request with a BLS message (Triton has no nesting limit); cycles are refused
        // at load, and at run time by the chain above (review).
        ...(req.blsDepth !== undefined ? { blsDepth: req.blsDepth } : {}),
        // A cancel reaches the step that runs (Triton cancels the step's request too).
        ...(req.signal ? { signal: req.signal } : {}),
      };
      let res: InferenceResponse;
      try {
        res = await this.#infer(stepReq);
      } catch (err) {
        const e = TriodeError.from(err);
        throw fail(new TriodeError(e.code, `in ensemble '${this.name}', step ${all.indexOf(s)} (model '${s.model_name ?? ''}') failed: ${e.message}`, { cause: e }));
      } finally {
        owners.done(k);
      }
      const produced: Tensor[] = [];
      try {
        for (const o of res.outputs) {
          const tensor = outputMap[o.name];
          if (tensor !== undefined) produced.push({ ...o, name: tensor, shape: this.#forStep(at, o.shape, true, s.model_name ?? '') });
        }
      } catch (err) {
        throw fail(TriodeError.from(err));
      }
      publish(produced);
    };
    // Every step starts at once and waits for its own inputs: branches run in parallel.
    const results = await Promise.allSettled(steps.map((s, k) => runStep(s, k).finally(() => finished(s))));
    if (failed) throw failed;
    const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (rejected) throw TriodeError.from(rejected.reason);
    const outputs = requested.map((ro) => {
      const t = tensors.get(ro.name);
      if (!t) throw Errors.internal(`ensemble '${this.name}' did not produce output '${ro.name}'`);
      // Every step is done: what the ensemble owns, its caller now owns.
      return ro.classCount ? classify(t, ro.classCount, batch > 0, this.labels.get(ro.name)) : { ...t, owned: owners.owns(t.data.buffer) };
    });
    const response: InferenceResponse = { modelName: this.name, modelVersion: String(this.version), outputs };
    if (req.id !== undefined) response.id = req.id;
    return response;
  }

  idle(): Promise<void> {
    if (this.#inflight === 0) return Promise.resolve();
    return new Promise((r) => this.#idle.push(r));
  }

  /** Nothing to stop: its steps' models refuse what they no longer take (Triton's ensemble scheduler). */
  stopAccepting(): void {}

  quiesced(): Promise<void> {
    return this.idle();
  }

  /** A regular model's one response (an ensemble is never decoupled). */
  async inferStream(req: InferenceRequest, onResponse: ResponseHandler): Promise<void> {
    void onResponse(await this.infer(req));
  }

  /** Waits for its requests (they finish or time out in the models they call); it holds nothing else. */
  async unload(options: { timeoutMs?: number } = {}): Promise<boolean> {
    if (options.timeoutMs === undefined) {
      await this.idle();
      return true;
    }
    return settleWithin(this.idle(), options.timeoutMs);
  }
}

interface Holding {
  owned: boolean;
  tap: boolean;
  users: Set<number>;
}

/**
 * Who holds each buffer of an ensemble request's tensors (its inputs and every step's outputs).
 * The ensemble owns a buffer when all the tensors it got on it were owned. It lends the buffer to
 * every step that reads it, and gives it to the last one only once all the others are done with
 * it; a buffer under a tensor the ensemble returns (a tap) is only ever lent. Counted per buffer,
 * not per tensor: two inputs of one request body share one buffer, and moving it for one consumer
 * would detach the other.
 */
class Lender {
  /** Per buffer: whether the ensemble owns it, whether it returns a tensor on it, and the steps that still need it. */
  readonly #buffers = new Map<ArrayBufferLike, Holding>();
  /** Per ensemble tensor: the steps that read it. */
  readonly #readers = new Map<string, number[]>();
  readonly #returned: Set<string>;

  constructor(steps: readonly EnsembleStep[], returned: readonly string[]) {
    this.#returned = new Set(returned);
    steps.forEach((s, k) => {
      for (const tensor of Object.values(s.input_map ?? {})) {
        const list = this.#readers.get(tensor) ?? [];
        if (!list.includes(k)) list.push(k);
        this.#readers.set(tensor, list);
      }
    });
  }

  /** Tensors that arrived together (the request's inputs, or one step's outputs). */
  add(group: readonly Tensor[]): void {
    const fresh = new Map<ArrayBufferLike, Holding>();
    for (const t of group) {
      const b = t.data.buffer;
      let e = fresh.get(b);
      if (!e) {
        // A buffer seen before (a step handed back a view of its input) is never the ensemble's to give.
        e = { owned: !this.#buffers.has(b), tap: false, users: new Set() };
        fresh.set(b, e);
      }
      e.owned &&= isOwned(t);
      e.tap ||= this.#returned.has(t.name);
      for (const k of this.#readers.get(t.name) ?? []) e.users.add(k);
    }
    for (const [b, e] of fresh) {
      const old = this.#buffers.get(b);
      if (old) {
        old.owned = false;
        old.tap ||= e.tap;
        for (const k of e.users) old.users.add(k);
      } else this.#buffers.set(b, e);
    }
  }

  /** The buffers step `k` may take (move) among those of its inputs: it is their last user. */
  take(k: number, inputs: readonly Tensor[]): Set<ArrayBufferLike> {
    const mine = new Set<ArrayBufferLike>();
    for (const t of inputs) {
      const e = this.#buffers.get(t.data.buffer);
      if (e?.owned && !e.tap && e.users.size === 1 && e.users.has(k)) mine.add(t.data.buffer);
    }
    for (const b of mine) this.#buffers.get(b)!.owned = false;
    return mine;
  }

  /** Step `k` is done with every buffer it read. */
  done(k: number): void {
    for (const e of this.#buffers.values()) e.users.delete(k);
  }

  /** True if the ensemble owns `b` (a buffer it never lent away for good). */
  owns(b: ArrayBufferLike): boolean {
    return this.#buffers.get(b)?.owned === true;
  }
}
