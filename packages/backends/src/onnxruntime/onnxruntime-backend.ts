/**
 * @module The onnxruntime backend: each model instance is a thread (a one-thread piscina pool)
 * holding its own onnxruntime session, plus one main-thread session a model, shared by its
 * instances that run there (`execution_thread`, see onnxruntime-instance.ts). Errors cross as `{ code, message }`.
 * Triton: onnxruntime_backend/src/onnxruntime.cc
 */
import { existsSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import {
  Errors, TriodeError, abortable, echo, readRepositoryFile, instancePlacements, placeInstance, queryGpus, resolveInside,
  type Backend, type BackendModel, type BackendModelInstance, type GpuExecutionProvider,
  type GpuInventory, type Logger, type ModelConfig, type ModelContext, type ModelInstanceGroup, type AutoCompleteContext, type ProviderStatus,
} from '@triode/core';
import type { LoadTask } from './messages.js';
import { threadFile } from '../common/thread-file.js';
import { raggedBatchConfig, sessionSettings } from './onnxruntime-utils.js';
import { autoCompleteOnnxConfig } from './autocomplete-config.js';
import { ProviderProbe } from './gpu-provider.js';
import { chooseInstanceDevices, gpuProviderFor, type DeviceChoiceContext } from './instance-devices.js';
import { ExecutionThreadPolicy, executionThreadSettings, type ExecutionThreadSettings } from './execution-thread-policy.js';
import { OnnxInstance, mainThreadPath, sharedPath, threadPath, type ExecutionPathRunner } from './onnxruntime-instance.js';
import { MAX_SCANNED_MODEL_BYTES, mainThreadRisk } from './main-thread-eligibility.js';

export { transferList } from './onnxruntime-instance.js';

/**
 * The thread's entry file: beside this module when running the build, or the build's copy when
 * this module runs from its TypeScript source (tests).
 */
const THREAD_FILE = threadFile(import.meta.url, 'onnxruntime', 'onnxruntime-thread.js');

/** Options of the onnxruntime backend. */
export interface OnnxRuntimeBackendOptions {
  /** Piscina `atomics` mode for instance threads. @default 'sync' */
  atomics?: 'sync' | 'async' | 'disabled';
  /**
   * The GPUs instances may use (`queryGpus`), or how to find them (asked once, when a model first
   * needs them). @default queryGpus() with `nvidia-smi` on the PATH and this process's CUDA_VISIBLE_DEVICES
   */
  gpus?: GpuInventory | (() => Promise<GpuInventory>);
  /** Where the device chosen for each instance group, and KIND_AUTO's CPU fallbacks, are logged. @default silent */
  logger?: Logger;
  /** Whether a GPU execution provider works here. @default a session of the model with that provider alone (answers cached) */
  probe?: (provider: GpuExecutionProvider, modelFile: string) => Promise<ProviderStatus>;
}

const SILENT: Logger = { error() {}, warning() {}, info() {}, verbose() {} };

class OnnxModel implements BackendModel {
  readonly #ctx: ModelContext;
  readonly #file: string;
  readonly #atomics: 'sync' | 'async' | 'disabled';
  readonly #devices: () => Promise<DeviceChoiceContext>;
  /** Instances made so far per group: the n-th instance of a KIND_GPU group goes to its n-th placement. */
  readonly #made = new Map<ModelInstanceGroup, number>();
  readonly #execution: ExecutionThreadSettings;
  readonly #logger: Logger;
  /** Leases on the model's main-thread session (see #main). */
  #mainPath: (() => Promise<ExecutionPathRunner>) | undefined;
  /** Why `auto` keeps this model off the main thread ('' for no reason); undefined until read. */
  #risk: string | undefined;

  constructor(ctx: ModelContext, file: string, atomics: 'sync' | 'async' | 'disabled', devices: () => Promise<DeviceChoiceContext>, logger: Logger) {
    this.#ctx = ctx;
    this.#file = file;
    this.#atomics = atomics;
    this.#devices = devices;
    this.#logger = logger;
    this.#execution = executionThreadSettings(ctx.config);
  }

  /** The load task of an instance: CPU, or the group's provider on the GPU this instance is placed on. */
  async #loadTask(group: ModelInstanceGroup, index: number): Promise<LoadTask> {
    const ragged = raggedBatchConfig(this.#ctx.config);
    const c = this.#ctx.config;
    const ioCheck = { name: c.name ?? this.#ctx.name, input: c.input ?? [], output: c.output ?? [], max_batch_size: c.max_batch_size ?? 0, batch_output: c.batch_output ?? [], batch_input: c.batch_input ?? [], ...(c.sequence_batching ? { sequence_batching: c.sequence_batching } : {}) };
    const task: LoadTask = { op: 'load', modelFile: this.#file, sessionOptions: sessionSettings(c), ioCheck, ...(ragged ? { raggedBatch: ragged } : {}) };
    if (group.kind !== 'KIND_GPU') return task;
    const devices = await this.#devices();
    const provider = await gpuProviderFor(this.#ctx.config, group, this.#file, devices);
    const ordinal = this.#made.get(group) ?? 0;
    this.#made.set(group, ordinal + 1);
    const gpu = placeInstance(group, ordinal, devices.gpus.gpus);
    const where = `GPU ${gpu.cudaId} (${gpu.name})`;
    devices.logger.info(`model "${this.#ctx.name}" instance ${index} of group "${group.name ?? ''}": ${where}, execution provider ${provider}`, { model: this.#ctx.name });
    // CPU last: onnxruntime runs there what the GPU provider cannot.
    return { ...task, executionProviders: [provider === 'webgpu' ? { name: provider } : { name: provider, deviceId: gpu.cudaId }, { name: 'cpu' }], gpu: where };
  }

  /** Triton's rule: `count` instances of a KIND_GPU group on each GPU it lists (all when none). */
  async instanceCount(group: ModelInstanceGroup): Promise<number> {
    if (group.kind !== 'KIND_GPU') return group.count ?? 1;
    return instancePlacements(group, (await this.#devices()).gpus.gpus).length;
  }

  async instanceInitialize(group: ModelInstanceGroup, index: number): Promise<BackendModelInstance> {
    const task = await this.#loadTask(group, index);
    const label = `model "${this.#ctx.name}" instance ${index}`;
    // A GPU instance's runs are the GPU's: they never block the main thread. `auto` considers the
    // main thread only for a model whose cost a request cannot raise (main-thread-eligibility.ts).
    const mode = group.kind === 'KIND_GPU' ? 'instance' : this.#execution.mode === 'auto' && this.#mainThreadRisk() ? 'instance' : this.#execution.mode;
    const policy = new ExecutionThreadPolicy(mode, { thresholdNs: this.#execution.thresholdNs, cores: availableParallelism() });
    const batching = (this.#ctx.config.max_batch_size ?? 0) > 0;
    const common = { policy, batching, logger: this.#logger, label, model: this.#ctx.name };
    if (mode === 'main') {
      const main = await this.#load(index, () => this.#main(task));
      this.#logger.info(`${label} runs on the main thread (execution_thread "main")`, { model: this.#ctx.name });
      return new OnnxInstance({ ...common, main });
    }
    const thread = await this.#load(index, () => this.#thread(task));
    return new OnnxInstance({ ...common, thread, ...(mode === 'auto' ? { openMain: () => this.#main(task) } : {}) });
  }

  /**
   * A lease on the model's one main-thread session (sharedPath), made from the first CPU instance's
   * load task: every CPU instance of a model loads the same file with the same settings.
   */
  #main(task: LoadTask): Promise<ExecutionPathRunner> {
    const name = this.#ctx.name;
    this.#mainPath ??= sharedPath(() => mainThreadPath(task), () => this.#logger.verbose(1, `model "${name}": released its main-thread session`, { model: name }));
    return this.#mainPath();
  }

  /** See mainThreadRisk: read once per model load, and logged. */
  #mainThreadRisk(): string | undefined {
    if (this.#risk === undefined) {
      let risk: string | undefined;
      try {
        // Opened without blocking and checked on the open descriptor (core's readRepositoryFile), so
        // a file swapped for a FIFO or a device after checkRegularFile is not read either.
        risk = mainThreadRisk(readRepositoryFile(this.#file, 'the model file', MAX_SCANNED_MODEL_BYTES), this.#ctx.config);
      } catch (err) {
        risk = err instanceof TriodeError ? err.message : 'the model file could not be read';
      }
      this.#risk = risk ?? '';
      if (risk) this.#logger.verbose(1, `model "${this.#ctx.name}" runs on its instance threads only (execution_thread auto): ${risk}`, { model: this.#ctx.name });
    }
    return this.#risk || undefined;
  }

  /** Loads an instance's session on a path, with the load failure Triton reports. */
  async #load(index: number, open: () => Promise<ExecutionPathRunner>): Promise<ExecutionPathRunner> {
    try {
      return await open();
    } catch (err) {
      if (err instanceof TriodeError) throw new TriodeError(err.code, `failed to load model '${this.#ctx.name}' instance ${index}: ${err.message}`, { cause: err });
      throw Errors.internal(`failed to load model '${this.#ctx.name}' instance ${index}: ${(err as Error).message}`, err);
    }
  }

  /** The instance thread, with its session loaded. */
  async #thread(task: LoadTask): Promise<ExecutionPathRunner> {
    const pool = new Piscina({
      filename: THREAD_FILE,
      name: 'default',
      minThreads: 1,
      maxThreads: 1,
      idleTimeout: Infinity,
      // Two tasks may sit in the thread at once so the next one is already there when the thread
      // finishes a run (no idle round trip). The thread's one JS event loop still runs them one
      // after another: session.run blocks it for the whole inference.
      concurrentTasksPerWorker: 2,
      atomics: this.#atomics,
      // The core keeps its own statistics; piscina's per-task histograms are pure overhead here.
      recordTiming: false,
      // An instance is one thread; its queue lives in the core's scheduler, not here.
      maxQueue: 'auto',
    });
    // The load's signal (--model-load-timeout-secs, an unload, a shutdown): a session build that
    // outlived it (a huge thread count kept growing memory) went on in the thread for good, and
    // the live thread kept the process from ending on SIGTERM.
    // Raced here rather than given to piscina's run: piscina's own abort ends the thread but starts
    // a fresh one in its place (minThreads), which then outlived the pool's destroy().
    const signal = this.#ctx.signal;
    try {
      await abortable(pool.run(task), signal);
    } catch (err) {
      // Closing the pool ends the thread, and with it whatever the failed session had allocated.
      // A load given up: destroy() terminates the thread at once (close() waits for the running
      // task, which may never end).
      if (signal?.aborted) await pool.destroy();
      else await pool.close({ force: true });
      throw err;
    }
    const name = this.#ctx.name;
    return threadPath(pool, task, (err) => this.#logger.error(`model '${name}': an instance thread ended${err ? ` (${err.message})` : ''}; its session is loaded again before its next execution`, { model: name }));
  }

  async finalize(): Promise<void> {}
}

/**
 * The `onnxruntime` backend (platform `onnxruntime_onnx`).
 * @example new InferenceServer({ backends: [new OnnxRuntimeBackend()], ... })
 */
export class OnnxRuntimeBackend implements Backend {
  readonly name = 'onnxruntime';
  /** Ragged inputs, `batch_input` and `batch_output` are joined and split as Triton's onnxruntime backend does (see OnnxSession.run). */
  readonly raggedBatching = true;
  readonly #atomics: 'sync' | 'async' | 'disabled';
  readonly #gpus: () => Promise<GpuInventory>;
  readonly #logger: Logger;
  readonly #probe: (provider: GpuExecutionProvider, modelFile: string) => Promise<ProviderStatus>;

  constructor(options: OnnxRuntimeBackendOptions = {}) {
    this.#atomics = options.atomics ?? (process.env['TRIODE_PISCINA_ATOMICS'] as 'sync' | 'async' | 'disabled' | undefined) ?? 'sync';
    const gpus = options.gpus ?? (() => queryGpus({ cudaVisibleDevices: process.env['CUDA_VISIBLE_DEVICES'] }));
    let found: Promise<GpuInventory> | undefined;
    this.#gpus = typeof gpus === 'function' ? () => (found ??= gpus()) : () => Promise.resolve(gpus);
    this.#logger = options.logger ?? SILENT;
    const probe = new ProviderProbe();
    this.#probe = options.probe ?? ((p, file) => probe.status(p, file));
  }

  #devices = async (): Promise<DeviceChoiceContext> => ({ gpus: await this.#gpus(), probe: this.#probe, logger: this.#logger });

  async autoCompleteConfig(config: ModelConfig, ctx: AutoCompleteContext): Promise<void> {
    if (!ctx.versionPath) return;
    const file = modelFile(ctx.versionPath, config);
    if (!existsSync(file)) return;
    checkRegularFile(file, ctx.name);
    await autoCompleteOnnxConfig(config, file, ctx.backendConfig, ctx.signal);
    await chooseInstanceDevices(config, file, await this.#devices());
  }

  async modelInitialize(ctx: ModelContext): Promise<BackendModel> {
    const file = modelFile(ctx.versionPath, ctx.config);
    if (!existsSync(file)) throw Errors.unavailable(`unable to find '${file}' for model instance '${ctx.name}'`);
    checkRegularFile(file, ctx.name);
    return new OnnxModel(ctx, file, this.#atomics, this.#devices, this.#logger);
  }
}

/**
 * Refuses a model file that is not a regular file: onnxruntime (and the main-thread eligibility
 * scan) read it to its end, so a FIFO blocked the event loop for good and a link to /dev/zero
 * read until memory ran out. stat() neither opens nor blocks.
 */
function checkRegularFile(file: string, model: string): void {
  if (!statSync(file).isFile()) throw Errors.invalidArg(`model file '${file}' of model '${model}' is not a regular file`);
}

/** `<version>/<default_model_filename>`, or `<version>/model.onnx/model.onnx` for a folder with external data. */
function modelFile(versionPath: string, config: ModelConfig): string {
  const name = config.default_model_filename || 'model.onnx';
  const p = resolveInside(versionPath, name);
  if (p === versionPath) throw Errors.invalidArg(`default_model_filename '${echo(name)}' names the version directory, not a file`);
  const nested = resolveInside(p, name);
  return existsSync(nested) ? nested : p;
}
