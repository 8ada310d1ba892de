/**
 * @module One loaded model version: its config, labels, backend instances, scheduler and statistics.
 * Triton: core/src/model.h, backend_model.cc, backend_model_instance.cc
 */
import type { Backend, BackendModel, BackendModelInstance, ExecuteRequest, ExecuteResponse, ExecuteTimings, ModelContext } from './backend-api.js';
import { classify } from './classification.js';
import { systemClock, type Clock } from './clock.js';
import { Errors, TriodeError } from './errors.js';
import { normalizeRequest, type InferenceRequest, type InferenceResponse } from './infer-request.js';
import type { ModelConfig } from './model-config/model-config.js';
import { readLabels } from './model-repository/repository-fs.js';
import { DynamicBatchScheduler } from './scheduler/dynamic-batch-scheduler.js';
import type { Schedulable, Scheduler } from './scheduler/scheduler.js';
import { InferStats } from './stats/infer-stats.js';
import type { Tensor } from './tensor/tensor.js';

interface Pending extends Schedulable {
  req: InferenceRequest;
  exec: ExecuteRequest;
  startNs: number;
  resolve: (r: InferenceResponse) => void;
  reject: (e: TriodeError) => void;
}

/** Creates the scheduler a config asks for. Triton: TritonModel::SetConfiguredScheduler */
export function createScheduler<T extends Schedulable>(
  config: ModelConfig,
  instanceCount: number,
  runner: (instance: number, batch: T[]) => Promise<void>,
  options: { clock: Clock; pipelineDepth: number },
): Scheduler<T> {
  const db = config.dynamic_batching;
  if (db && (config.max_batch_size ?? 0) > 0) {
    return new DynamicBatchScheduler<T>(instanceCount, runner, {
      maxBatchSize: config.max_batch_size ?? 0,
      preferredBatchSizes: db.preferred_batch_size ?? [],
      maxQueueDelayUs: db.max_queue_delay_microseconds ?? 0,
      ...options,
    });
  }
  return new DynamicBatchScheduler<T>(instanceCount, runner, { maxBatchSize: 1, ...options });
}

/** A model version that is loaded and can execute requests. */
export class ModelVersion {
  readonly name: string;
  readonly version: number;
  readonly config: ModelConfig;
  readonly stats = new InferStats();
  /** Labels per output name (from `label_filename`). */
  readonly labels: ReadonlyMap<string, string[]>;
  readonly #backendModel: BackendModel;
  readonly #instances: BackendModelInstance[];
  readonly #scheduler: Scheduler<Pending>;
  readonly #clock: Clock;
  readonly #outputNames: string[];

  private constructor(ctx: ModelContext, backendModel: BackendModel, instances: BackendModelInstance[], labels: Map<string, string[]>, clock: Clock) {
    this.name = ctx.name;
    this.version = ctx.version;
    this.config = ctx.config;
    this.labels = labels;
    this.#backendModel = backendModel;
    this.#instances = instances;
    this.#clock = clock;
    this.#outputNames = (ctx.config.output ?? []).map((o) => o.name);
    const pipelineDepth = Math.min(...instances.map((i) => i.pipelineDepth ?? 1));
    this.#scheduler = createScheduler<Pending>(ctx.config, instances.length, (i, b) => this.#run(i, b), { clock, pipelineDepth });
  }

  /** Loads a version: labels, the backend model, then every instance of every instance group. */
  static async load(ctx: ModelContext, backend: Backend, clock: Clock = systemClock): Promise<ModelVersion> {
    const labels = new Map<string, string[]>();
    for (const o of ctx.config.output ?? []) {
      if (o.label_filename) labels.set(o.name, readLabels(ctx.modelPath, o.label_filename));
    }
    const model = await backend.modelInitialize(ctx);
    const instances: BackendModelInstance[] = [];
    try {
      let index = 0;
      for (const g of ctx.config.instance_group ?? [{}]) {
        for (let i = 0; i < (g.count ?? 1); i++) instances.push(await model.instanceInitialize(g, index++));
      }
    } catch (err) {
      await Promise.allSettled(instances.map((x) => x.finalize()));
      await model.finalize().catch(() => undefined);
      throw err;
    }
    if (instances.length === 0) throw Errors.invalidArg(`model '${ctx.name}' has no instances`);
    return new ModelVersion(ctx, model, instances, labels, clock);
  }

  /** Requests waiting in the queue. */
  pendingCount(): number {
    return this.#scheduler.pendingCount();
  }

  /** Requests queued or executing. */
  inflightCount(): number {
    return this.#scheduler.pendingCount() + this.#scheduler.inflightInferenceCount();
  }

  /** Validates and queues a request; resolves with its response. */
  infer(req: InferenceRequest): Promise<InferenceResponse> {
    const startNs = this.#clock.nowNs();
    let batchSize: number;
    try {
      batchSize = normalizeRequest(req, this.config);
    } catch (err) {
      this.stats.recordFailure(this.#clock.epochMs(), this.#clock.nowNs() - startNs);
      return Promise.reject(TriodeError.from(err));
    }
    const outputNames = req.outputs?.length ? req.outputs.map((o) => o.name) : this.#outputNames;
    let shapeKey = '';
    for (const t of req.inputs) shapeKey += `${t.name}:${t.shape.slice(1).join(',')};`;
    return new Promise<InferenceResponse>((resolve, reject) => {
      this.#scheduler.enqueue({
        req,
        exec: { inputs: req.inputs, outputNames, batchSize, parameters: req.parameters ?? {} },
        batchSize: Math.max(batchSize, 1),
        shapeKey,
        enqueueNs: startNs,
        startNs,
        resolve,
        reject,
      });
    });
  }

  async #run(instance: number, batch: Pending[]): Promise<void> {
    const execStart = this.#clock.nowNs();
    let responses: ExecuteResponse[];
    let timings: ExecuteTimings | undefined;
    try {
      const result = await this.#instances[instance]!.execute(batch.map((p) => p.exec));
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
    const inferences = batch.reduce((a, p) => a + p.batchSize, 0);
    if (responses.some((r) => !r.error)) this.stats.recordExecution(inferences, t.computeInputNs, t.computeInferNs, t.computeOutputNs);
    const epoch = this.#clock.epochMs();
    batch.forEach((p, i) => {
      const r = responses[i]!;
      if (r.error) {
        this.stats.recordFailure(epoch, end - p.startNs);
        p.reject(r.error);
        return;
      }
      try {
        const response = this.#respond(p, r.outputs);
        this.stats.recordSuccess(epoch, this.#clock.nowNs() - p.startNs, execStart - p.enqueueNs, t.computeInputNs, t.computeInferNs, t.computeOutputNs);
        p.resolve(response);
      } catch (err) {
        this.stats.recordFailure(epoch, end - p.startNs);
        p.reject(TriodeError.from(err));
      }
    });
  }

  #respond(p: Pending, outputs: Tensor[]): InferenceResponse {
    const byName = new Map(outputs.map((o) => [o.name, o]));
    const batching = (this.config.max_batch_size ?? 0) > 0;
    const out: Tensor[] = [];
    const requested = p.req.outputs?.length ? p.req.outputs : p.exec.outputNames.map((name) => ({ name, classCount: undefined }));
    for (const ro of requested) {
      const t = byName.get(ro.name);
      if (!t) throw Errors.internal(`backend did not produce output '${ro.name}' for model '${this.name}'`);
      out.push(ro.classCount ? classify(t, ro.classCount, batching, this.labels.get(ro.name)) : t);
    }
    const response: InferenceResponse = { modelName: this.name, modelVersion: String(this.version), outputs: out };
    if (p.req.id !== undefined) response.id = p.req.id;
    return response;
  }

  /** Waits for queued and running requests, then releases the instances and the model. */
  async unload(): Promise<void> {
    await this.#scheduler.idle();
    await this.#scheduler.stop();
    await Promise.allSettled(this.#instances.map((i) => i.finalize()));
    await this.#backendModel.finalize();
  }

  /** Resolves when nothing is queued or running. */
  idle(): Promise<void> {
    return this.#scheduler.idle();
  }
}
