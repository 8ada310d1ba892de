/**
 * @module One onnxruntime session and how a batch runs on it: the same code on an instance thread
 * (onnxruntime-thread.ts) and, for a model that runs in less time than a hand-off to a thread
 * costs, on the main thread (onnxruntime-instance.ts). Every run failure is returned as data.
 * Triton: onnxruntime_backend/src/onnxruntime.cc (ModelInstanceState::ProcessRequests)
 */
import * as ort from 'onnxruntime-node';
import { Errors, TriodeError, echo, deserializeBytesTensor, serializeBytesTensor, toWireError, type TensorData, type WireError } from '@triode/core';
import { collectBatchInputs } from '../common/backend-input-collector.js';
import { respondBatchOutputs } from '../common/backend-output-responder.js';
import type { ExecuteProviderList, ExecuteResult, ExecuteTask, LoadReply, LoadTask, RaggedBatchConfig, SessionSettings, WireTensor } from './messages.js';
import { dataTypeToOrtType, ortTypeToDataType } from './onnxruntime-utils.js';
import { classifyGpuFailure, gpuFailureMessage } from './gpu-errors.js';
import { checkModelIo, onnxIo } from './model-io-check.js';
import { onnxGraphInputNames } from './onnx-graph-inputs.js';
import { OnnxLoader, type OrtFeed, type OrtSession } from './onnxruntime-loader.js';

/** Runs with less input than this are not checked for arena growth (see SessionSettings.arenaResetBytes). */
export const ARENA_CHECK_MIN_INPUT_BYTES = 1024 * 1024;

const decoder = new TextDecoder();

/**
 * A remake of the session after a run (see SessionSettings.arenaResetBytes), reported with that
 * run's result so the instance can log it: plain data that rides the reply already sent, nothing
 * more crosses the thread.
 */
export interface SessionRemake {
  /** How much the process's memory grew during the run (less the run's outputs), in bytes. */
  grewBytes: number;
  /** arena_reset_bytes. */
  limitBytes: number;
  /** How long the remake took, in ms. */
  ms: number;
  /** Why the session could not be made anew: the next run loads it again first. */
  error?: string;
}

/** A batch's result, with the remake that followed its run, if any. */
export type SessionRunResult = ExecuteResult & { remade?: SessionRemake };

/**
 * The buffers of a batch's outputs, each once, for a thread to move to its caller: every output
 * is a buffer of this run's (or a view of one), which no one else holds. Only the thread needs
 * them; on the main thread the result is handed over as it is.
 */
export function outputBuffers(result: ExecuteResult): ArrayBuffer[] {
  const seen = new Set<ArrayBufferLike>();
  for (const r of result.responses) {
    if ('error' in r) continue;
    for (const t of r.outputs) seen.add(t.data.buffer);
  }
  return [...seen].filter((b): b is ArrayBuffer => b instanceof ArrayBuffer);
}

/** A session, remade after an outsized run and dropped when its GPU is lost. */
export class OnnxSession {
  #session: OrtSession | undefined;
  /** What the session was made from, to make it anew (see SessionSettings.arenaResetBytes). */
  #made: { file: string; settings: SessionSettings; providers: ExecuteProviderList; gpu: string | undefined } | undefined;
  /** Set once the instance's GPU was lost: every later run answers UNAVAILABLE with it. */
  #lost: string | undefined;
  /** The model's name, and its config inputs the session does not list (overridable initializers). */
  #model = '';
  #initializers: ReadonlySet<string> = new Set();
  /** Set for a model that takes ragged batches (LoadTask.raggedBatch). */
  #ragged: RaggedBatchConfig | undefined;
  /** Why the last remake failed, with what it was for: the next run loads the session again first. */
  #remakeFailed: string | undefined;
  /**
   * The end of the last operation on the session: loads, runs (remake included), failures and
   * unloads happen one at a time. An instance thread holds two tasks at once (its pool's
   * concurrentTasksPerWorker), and the main thread any number: without this, a run that came in
   * while another remade the session found none ("the instance has no session") or ran the one
   * just released ("Session already disposed"). Runs lose nothing by it: onnxruntime-node's run
   * blocks its thread, so two never overlapped anyway.
   */
  #tail: Promise<unknown> = Promise.resolve();
  /** Operations started and not settled: with none, the next one starts at once (no hop through `#tail`). */
  #busy = 0;
  readonly #settled = (): void => { this.#busy--; };

  /** Runs `fn` once every operation before it has settled. */
  #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const idle = this.#busy === 0;
    this.#busy++;
    const p = idle ? fn() : this.#tail.then(fn);
    this.#tail = p.then(this.#settled, this.#settled);
    return p;
  }

  /** Creates the session (releasing any previous one). */
  load(task: LoadTask): Promise<LoadReply> {
    return this.#exclusive(async () => {
      this.#lost = undefined;
      this.#remakeFailed = undefined;
      this.#ragged = task.raggedBatch;
      const reply = await this.#load(task.modelFile, task.sessionOptions, task.executionProviders, task.gpu);
      if (task.ioCheck) {
        try {
          checkModelIo(task.ioCheck, onnxIo(this.#session!.inputMetadata), onnxIo(this.#session!.outputMetadata), () => onnxGraphInputNames(task.modelFile));
        } catch (err) {
          await this.#unload();
          throw err;
        }
        this.#model = task.ioCheck.name ?? '';
        const listed = new Set(this.#session!.inputNames);
        this.#initializers = new Set((task.ioCheck.input ?? []).map((i) => i.name).filter((n) => !listed.has(n)));
      }
      return reply;
    });
  }

  async #load(file: string, s: SessionSettings, providers: ExecuteProviderList = [{ name: 'cpu' }], gpu?: string): Promise<LoadReply> {
    if (this.#session) await this.#session.release();
    this.#session = undefined;
    this.#made = { file, settings: s, providers, gpu };
    const options: ort.InferenceSession.SessionOptions = {
      intraOpNumThreads: s.intraOpNumThreads,
      interOpNumThreads: s.interOpNumThreads,
      executionMode: s.executionMode,
      graphOptimizationLevel: s.graphOptimizationLevel,
      enableCpuMemArena: s.enableCpuMemArena,
      enableMemPattern: s.enableMemPattern,
      executionProviders: providers.map((p) => (p.deviceId === undefined ? p.name : { name: p.name, deviceId: p.deviceId }) as ort.InferenceSession.ExecutionProviderConfig),
    };
    if (Object.keys(s.configEntries).length > 0) {
      // ORT takes session config entries as a nested object: "session.intra_op.allow_spinning" -> extra.session.intra_op.allow_spinning
      // Objects without a prototype, so that no key can reach Object.prototype (the keys are also
      // checked at load: sessionSettings refuses '__proto__' and the like).
      const extra = Object.create(null) as Record<string, unknown>;
      for (const [k, v] of Object.entries(s.configEntries)) {
        const parts = k.split('.');
        let o = extra;
        for (const p of parts.slice(0, -1)) o = (o[p] ??= Object.create(null)) as Record<string, unknown>;
        o[parts[parts.length - 1]!] = v;
      }
      options.extra = extra;
    }
    try {
      this.#session = await OnnxLoader.create(file, options);
    } catch (err) {
      // Out of GPU memory at load: the thread (and with it what was allocated) goes when the pool closes.
      const msg = gpu ? gpuFailureMessage(errorText(err), gpu, 'create the session') : undefined;
      if (msg) throw new TriodeError('UNAVAILABLE', msg);
      throw err;
    }
    return { ok: true };
  }

  /**
   * The growth of the process's memory during one run over which the session is made anew
   * (arena_reset_bytes; 0: never).
   *
   * Only a session on the CPU alone, with its CPU memory arena: the arena is what keeps an
   * outsized run's memory. A GPU session's activations live in the device's memory, which the
   * process's RSS does not show (what RSS shows there is its CPU fallback nodes, staging buffers
   * and other threads' allocations), and remaking it costs a GPU session (seconds of kernel or
   * shader compilation, device memory reserved anew) for nothing it could give back. Without an
   * arena, onnxruntime frees what a run used: a remake frees nothing more.
   */
  #arenaLimit(): number {
    const m = this.#made;
    if (!m || m.gpu !== undefined || m.providers.some((p) => p.name !== 'cpu') || !m.settings.enableCpuMemArena) return 0;
    return m.settings.arenaResetBytes;
  }

  /**
   * Makes the session anew: onnxruntime keeps what its CPU memory arena grew to (one outsized
   * request grew it by gigabytes) until the session is released. Done before the reply, not after
   * it: between tasks piscina blocks an instance thread (Atomics.wait), so deferred work would not
   * run. A failure leaves no session and is reported: the next run loads it again first.
   */
  async #remake(grewBytes: number, limitBytes: number): Promise<SessionRemake | undefined> {
    const m = this.#made;
    if (!m) return undefined;
    const t0 = performance.now();
    try {
      await this.#load(m.file, m.settings, m.providers, m.gpu);
      return { grewBytes, limitBytes, ms: performance.now() - t0 };
    } catch (err) {
      this.#session = undefined;
      const error = errorText(err);
      this.#remakeFailed = `after a run grew the process's memory by ${mib(grewBytes)} (over arena_reset_bytes, ${mib(limitBytes)}), the session could not be made anew: ${error}`;
      return { grewBytes, limitBytes, ms: performance.now() - t0, error };
    }
  }

  /**
   * Loads the session a failed remake left out, before a run. If that fails too, the instance is
   * lost (the core marks the version not ready) with both reasons, and every later run answers so.
   */
  async #reloadAfterFailedRemake(): Promise<void> {
    const first = this.#remakeFailed!;
    const m = this.#made;
    try {
      if (!m) throw new Error('the session settings are gone');
      await this.#load(m.file, m.settings, m.providers, m.gpu);
      this.#remakeFailed = undefined;
    } catch (err) {
      this.#session = undefined;
      this.#remakeFailed = undefined;
      this.#lost = `the instance has no session: ${first}; loading it again failed too: ${errorText(err)}`;
      throw Errors.instanceLost(this.#lost);
    }
  }

  /** Releases the session; the next run answers UNAVAILABLE until `load`. */
  unload(): Promise<void> {
    return this.#exclusive(() => this.#unload());
  }

  async #unload(): Promise<void> {
    const s = this.#session;
    this.#session = undefined;
    this.#made = undefined;
    this.#lost = undefined;
    this.#remakeFailed = undefined;
    this.#ragged = undefined;
    await s?.release();
  }

  /**
   * Runs a batch. The inputs' buffers are read where they are (never detached, never copied
   * unless several requests are concatenated); the outputs are new buffers.
   * @throws what `failure` turns into an answer
   */
  run(task: ExecuteTask): Promise<SessionRunResult> {
    return this.#exclusive(() => this.#run(task));
  }

  async #run(task: ExecuteTask): Promise<SessionRunResult> {
    if (this.#lost) throw Errors.instanceLost(this.#lost);
    if (this.#remakeFailed !== undefined) await this.#reloadAfterFailedRemake();
    const session = this.#session;
    if (!session) throw new TriodeError('UNAVAILABLE', 'the instance has no session (model not loaded)');
    // Reading RSS costs a syscall (~5-10 us): only runs with a large input are checked, which is
    // where an outsized arena comes from (the 22 MB ppocr_rec request), not every tiny request.
    const limit = this.#arenaLimit();
    const checked = limit > 0 && inputBytes(task) >= ARENA_CHECK_MIN_INPUT_BYTES;
    const t0 = performance.now();
    const feeds: Record<string, OrtFeed> = {};
    const reqs = task.requests;
    const ragged = this.#ragged;
    // A config input the session does not list is an overridable initializer (model-io-check.ts):
    // onnxruntime-node's run feeds only the inputs it lists, so the value sent would be dropped and
    // the model's own used, silently (such an input is optional, so the model does not batch).
    if (this.#initializers.size > 0) {
      for (const r of reqs) {
        for (const t of r.inputs) {
          if (this.#initializers.has(t.name)) throw Errors.unsupported(`input '${echo(t.name)}' of model '${echo(this.#model)}' is an overridable initializer of the ONNX model, which the onnxruntime backend cannot pass (onnxruntime-node feeds a model's required inputs only): send the request without it to use the model's value`);
        }
      }
    }
    if (ragged) {
      // Triton's SetInputTensors: a ragged input is every request's elements as one [total
      // elements] tensor, the others are joined along the batch dim, and the batch inputs are
      // made. Joined tensors are new buffers; a lone request's are read where they are.
      for (const t of collectBatchInputs(reqs, ragged)) feeds[t.name] = toOrt(t);
    } else if (reqs.length === 1 || !task.batching) {
      for (const t of reqs[0]!.inputs) feeds[t.name] = toOrt(t);
    } else {
      for (const t of reqs[0]!.inputs) feeds[t.name] = toOrt(concat(reqs.map((r) => r.inputs.find((x) => x.name === t.name)!)));
    }
    const t1 = performance.now();
    // RSS is the whole process's: the window is the native run alone (this run's joined inputs
    // are made before it, its outputs are taken off after), but what other threads allocate
    // meanwhile (other instances' runs, the main thread receiving request bodies) still counts.
    // A needless remake costs one session creation, no request: see SessionRemake.
    const rssBefore = checked ? process.memoryUsage.rss() : 0;
    let started = t1;
    let results: ort.InferenceSession.OnnxValueMapType;
    if (session.immediate) {
      // The native session runs here and now (onnxruntime-loader.ts): no hop, no promise.
      results = session.run(feeds, task.outputNames);
    } else {
      // onnxruntime-common's run calls the native run in an immediate of its own: one queued
      // just before it marks when the run starts, so compute_infer leaves out whatever the event
      // loop did in between (on the main thread, other requests' I/O).
      setImmediate(() => { started = performance.now(); });
      results = await session.run(feeds, task.outputNames);
    }
    const grew = checked ? process.memoryUsage.rss() - rssBefore - outputBytes(results) : 0;
    const t2 = performance.now();
    const produced = (name: string): WireTensor => {
      const r = results[name];
      if (!r) throw new TriodeError('INTERNAL', `model did not produce output '${name}'`);
      return fromOrt(name, r);
    };
    // Triton's ReadOutputTensors: a batch output (ragged batching) is scattered with each
    // request's input shape; the others are split along the batch dim, each request taking its
    // batch size's rows (views of the output's buffer), a lone request too.
    const perRequest = respondBatchOutputs(task.outputNames.map(produced), reqs, ragged ?? (task.batching ? BATCHING : NOT_BATCHING));
    const t3 = performance.now();
    const remade = checked && grew > limit ? await this.#remake(grew, limit) : undefined;
    const result: SessionRunResult = {
      responses: perRequest.map((outputs) => ({ outputs })),
      computeInputNs: (t1 - t0) * 1e6,
      computeInferNs: (t2 - Math.max(t1, started)) * 1e6,
      computeOutputNs: (t3 - t2) * 1e6,
    };
    if (remade) result.remade = remade;
    return result;
  }

  /**
   * A failed run as the client sees it. On a GPU, out of memory fails this batch only (what it
   * allocated is freed with its tensors): UNAVAILABLE. A lost device also drops the session, and
   * its error says `instanceLost` (the core then marks the model version not ready); every later
   * run answers the same. Any other failure is INTERNAL, as in Triton's onnxruntime backend.
   */
  failure(err: unknown): Promise<{ error: WireError }> {
    // After the runs queued before it: none of them may find the session released mid-run.
    return this.#exclusive(() => this.#failure(err));
  }

  async #failure(err: unknown): Promise<{ error: WireError }> {
    if (err instanceof TriodeError) return { error: toWireError(err) };
    const text = errorText(err);
    const gpu = this.#made?.gpu;
    const msg = gpu ? gpuFailureMessage(text, gpu, 'run the model') : undefined;
    if (msg && classifyGpuFailure(text) === 'device-lost') {
      this.#lost = msg;
      await this.#session?.release().catch(() => undefined);
      this.#session = undefined;
      return { error: toWireError(Errors.instanceLost(msg)) };
    }
    return { error: msg ? { code: 'UNAVAILABLE', message: msg } : { code: 'INTERNAL', message: `onnx runtime error: ${text}` } };
  }
}

/** Bytes of input a batch carries. */
export function inputBytes(task: Pick<ExecuteTask, 'requests'>): number {
  let n = 0;
  for (const r of task.requests) for (const t of r.inputs) n += t.data.byteLength;
  return n;
}

/** Bytes of a run's outputs (new buffers of this run's, not arena). */
function outputBytes(results: ort.InferenceSession.OnnxValueMapType): number {
  let n = 0;
  for (const t of Object.values(results)) {
    const d = (t as ort.Tensor).data;
    if (ArrayBuffer.isView(d)) n += d.byteLength;
  }
  return n;
}

/** Bytes in MiB, for messages. */
export const mib = (bytes: number): string => `${Math.round(bytes / 2 ** 20)} MiB`;

/** What the output responder reads of a model that is not ragged: whether it batches. */
const BATCHING = { max_batch_size: 1 } as const;
const NOT_BATCHING = { max_batch_size: 0 } as const;

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** A tensor as the native run takes it (see OrtFeed): the core has checked its data against its shape. */
function toOrt(t: WireTensor): OrtFeed {
  if (t.datatype === 'BYTES') {
    const strings = deserializeBytesTensor(t.data as Uint8Array).map((b) => decoder.decode(b));
    return { location: 'cpu', type: 'string', dims: t.shape, data: strings };
  }
  return { location: 'cpu', type: dataTypeToOrtType(t.datatype), dims: t.shape, data: t.data };
}

/** Concatenates the requests' tensors of one input along the batch dim. */
function concat(parts: WireTensor[]): WireTensor {
  const first = parts[0]!;
  if (parts.length === 1) return first;
  let bytes = 0;
  for (const p of parts) bytes += p.data.byteLength;
  const out = new Uint8Array(bytes);
  let off = 0;
  let batch = 0;
  for (const p of parts) {
    out.set(new Uint8Array(p.data.buffer, p.data.byteOffset, p.data.byteLength), off);
    off += p.data.byteLength;
    batch += p.shape[0] ?? 0;
  }
  const Ctor = first.data.constructor as new (b: ArrayBuffer, o: number, l: number) => TensorData;
  const el = first.datatype === 'BYTES' ? 1 : first.data.BYTES_PER_ELEMENT;
  return { name: first.name, datatype: first.datatype, shape: [batch, ...first.shape.slice(1)], data: new Ctor(out.buffer, 0, bytes / el) };
}

function fromOrt(name: string, t: ort.Tensor): WireTensor {
  const datatype = ortTypeToDataType(t.type);
  if (!datatype) throw new TriodeError('UNSUPPORTED', `output '${name}' has type '${t.type}', which Triode cannot return`);
  const shape = t.dims.map(Number);
  if (datatype === 'BYTES') {
    return { name, datatype, shape, data: serializeBytesTensor(t.data as string[]) };
  }
  return { name, datatype, shape, data: t.data as TensorData };
}
