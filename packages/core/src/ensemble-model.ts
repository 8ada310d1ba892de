/**
 * @module Ensembles: a DAG of steps over other models, each step run as soon as its inputs exist
 * (independent branches in parallel). An ensemble runs where its request entered, calling the
 * composing models through the server.
 * Triton: core/src/ensemble_scheduler/ensemble_scheduler.cc, ensemble_utils.cc (ValidateEnsembleConfig)
 */
import { classify } from './classification.js';
import { systemClock, type Clock } from './clock.js';
import { Errors, TriodeError } from './errors.js';
import { normalizeRequest, type InferenceRequest, type InferenceResponse } from './infer-request.js';
import type { EnsembleStep, ModelConfig, ModelInput, ModelOutput } from './model-config/model-config.js';
import { InferStats } from './stats/infer-stats.js';
import type { Tensor } from './tensor/tensor.js';

/** What an ensemble needs to know of a composing model, to validate the graph at load. */
export interface ComposingModel {
  config: ModelConfig;
}

/** Checks the ensemble graph: every step's model and tensors exist and agree, no cycles. */
export function validateEnsemble(config: ModelConfig, lookup: (name: string, version: number) => ComposingModel | undefined): void {
  const name = config.name ?? '';
  const steps = config.ensemble_scheduling?.step ?? [];
  if (steps.length === 0) throw Errors.invalidArg(`ensemble ${name} must specify at least one step`);
  // Ensemble tensor -> data type, and who produces it.
  const types = new Map<string, string>();
  const producer = new Map<string, number>();
  for (const i of config.input ?? []) types.set(i.name, i.data_type ?? '');
  const models = steps.map((s, k) => {
    const m = lookup(s.model_name ?? '', s.model_version ?? -1);
    if (!m) throw Errors.invalidArg(`ensemble ${name} contains model '${s.model_name ?? ''}' (step ${k}) which is not loaded or not ready`);
    return m;
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
      if (!i.optional && !(i.name in (s.input_map ?? {}))) {
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
  // Cycles: a step that (transitively) needs its own output.
  const state = new Array<number>(steps.length).fill(0);
  const visit = (k: number, path: string[]): void => {
    if (state[k] === 2) return;
    if (state[k] === 1) throw Errors.invalidArg(`ensemble ${name} contains a cycle: ${[...path, steps[k]!.model_name ?? ''].join(' -> ')}`);
    state[k] = 1;
    for (const tensor of Object.values(steps[k]!.input_map ?? {})) {
      const p = producer.get(tensor);
      if (p !== undefined) visit(p, [...path, steps[k]!.model_name ?? '']);
    }
    state[k] = 2;
  };
  steps.forEach((_s, k) => visit(k, []));
}

/** A loaded ensemble: runs its steps through `infer` (the server). */
export class EnsembleModel {
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  readonly stats = new InferStats();
  readonly labels: ReadonlyMap<string, string[]>;
  readonly #infer: (r: InferenceRequest) => Promise<InferenceResponse>;
  readonly #clock: Clock;
  #inflight = 0;
  #idle: (() => void)[] = [];

  constructor(config: ModelConfig, version: number, infer: (r: InferenceRequest) => Promise<InferenceResponse>, options: { clock?: Clock; labels?: Map<string, string[]> } = {}) {
    this.name = config.name ?? '';
    this.version = version;
    this.config = config;
    this.#infer = infer;
    this.#clock = options.clock ?? systemClock;
    this.labels = options.labels ?? new Map();
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
    const steps = this.config.ensemble_scheduling?.step ?? [];
    const tensors = new Map<string, Tensor>(req.inputs.map((t) => [t.name, t]));
    const waiting = new Map<string, ((t: Tensor) => void)[]>();
    let failed: TriodeError | undefined;
    const available = (name: string): Promise<Tensor> => {
      const t = tensors.get(name);
      if (t) return Promise.resolve(t);
      return new Promise((resolve) => {
        const list = waiting.get(name) ?? [];
        list.push(resolve);
        waiting.set(name, list);
      });
    };
    const publish = (name: string, t: Tensor) => {
      tensors.set(name, t);
      for (const f of waiting.get(name) ?? []) f(t);
      waiting.delete(name);
    };
    const runStep = async (s: EnsembleStep, k: number): Promise<void> => {
      const inputs = await Promise.all(Object.entries(s.input_map ?? {}).map(async ([modelIn, tensor]) => ({ ...(await available(tensor)), name: modelIn })));
      if (failed) return;
      const outputMap = s.output_map ?? {};
      const stepReq: InferenceRequest = {
        modelName: s.model_name ?? '',
        inputs,
        outputs: Object.keys(outputMap).map((name) => ({ name })),
        parameters: req.parameters ?? {},
        ...(s.model_version !== undefined && s.model_version >= 0 ? { modelVersion: s.model_version } : {}),
        ...(req.blsChain ? { blsChain: req.blsChain } : {}),
        ...(req.blsDepth !== undefined ? { blsDepth: req.blsDepth } : {}),
      };
      let res: InferenceResponse;
      try {
        res = await this.#infer(stepReq);
      } catch (err) {
        const e = TriodeError.from(err);
        failed ??= new TriodeError(e.code, `in ensemble '${this.name}', step ${k} (model '${s.model_name ?? ''}') failed: ${e.message}`, { cause: e });
        throw failed;
      }
      for (const o of res.outputs) {
        const tensor = outputMap[o.name];
        if (tensor !== undefined) publish(tensor, { ...o, name: tensor });
      }
    };
    // Every step starts at once and waits for its own inputs: branches run in parallel.
    const results = await Promise.allSettled(steps.map((s, k) => runStep(s, k)));
    if (failed) throw failed;
    const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (rejected) throw TriodeError.from(rejected.reason);
    const requested = req.outputs?.length ? req.outputs : (this.config.output ?? []).map((o) => ({ name: o.name, classCount: undefined }));
    const outputs = requested.map((ro) => {
      const t = tensors.get(ro.name);
      if (!t) throw Errors.internal(`ensemble '${this.name}' did not produce output '${ro.name}'`);
      return ro.classCount ? classify(t, ro.classCount, batch > 0, this.labels.get(ro.name)) : t;
    });
    const response: InferenceResponse = { modelName: this.name, modelVersion: String(this.version), outputs };
    if (req.id !== undefined) response.id = req.id;
    return response;
  }

  idle(): Promise<void> {
    if (this.#inflight === 0) return Promise.resolve();
    return new Promise((r) => this.#idle.push(r));
  }

  async unload(): Promise<void> {
    await this.idle();
  }
}
