/**
 * @module The `javascript` backend: `<model>/<version>/model.js` (or `.mjs`) exporting a model
 * class, run in the instance's thread (Triode's answer to Triton's Python backend). Models can call
 * other models through the server (BLS) from `execute`.
 * Triton: python_backend/src/python_be.cc
 */
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import {
  Errors, TriodeError, abortable, arrayClassName, thrownText as coreThrownText, claimOwnership, echo, fromWireError, isDataOf, isDataType, readAutoCompletedConfig, resolveInside, toWireError, transferList,
  type AutoCompleteContext, type Backend, type BackendModel, type BackendModelInstance, type ExecuteRequest, type ExecuteResponse,
  type DataType, type ExecuteResult, type InferenceRequest, type Logger, type ModelConfig, type ModelContext, type ModelInstanceGroup, type WireError,
} from '@triode/core';
import { threadFile } from '../common/thread-file.js';
import { blsControlsProblem, blsParameters } from './bls-request.js';
import { FLOW_SLOTS, type JsExecuteReply, type JsExecuteRequest, type JsExecuteTask, type JsLoadTask } from './messages.js';
import type { InferRequest, Tensor } from './model-api.js';

const here = (name: string) => threadFile(import.meta.url, 'javascript', name);

const THREAD_FILE = here('javascript-thread.js');

/**
 * A pool of one thread for a model's code. A throw the model's code leaves uncaught outside a task
 * (a timer, a promise nobody awaits) ends the thread and is emitted on the pool: `onError` gets it,
 * where an unheard 'error' event would end the whole server.
 */
function pool(onError: (err: Error) => void): Piscina {
  const p = new Piscina({ filename: THREAD_FILE, minThreads: 1, maxThreads: 1, idleTimeout: Infinity, concurrentTasksPerWorker: 1, atomics: 'disabled', recordTiming: false });
  p.on('error', onError);
  return p;
}

/** What a model's code threw, as text (core's thrownText), cut at 1000 characters unless an Error's message. */
function thrownText(err: unknown): string {
  return err instanceof Error ? err.message : echo(coreThrownText(err), 1000);
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isTypedArray = (v: unknown): boolean => ArrayBuffer.isView(v) && !(v instanceof DataView);

/**
 * Why a BLS request a model sent is not one (undefined when it is): the model's code is not
 * trusted to pass the API's types, and a bad field must fail its call, not the server.
 */
export function blsRequestProblem(r: unknown): string | undefined {
  if (!isObject(r)) return 'the request must be an object';
  if (typeof r['model'] !== 'string' || r['model'] === '') return "'model' must be a model name";
  if (r['version'] !== undefined && !(Number.isSafeInteger(r['version']) && (r['version'] as number) >= 0)) return "'version' must be a version number";
  if (!Array.isArray(r['inputs'])) return "'inputs' must be an array of tensors";
  for (const [i, t] of (r['inputs'] as unknown[]).entries()) {
    if (!isObject(t) || typeof t['name'] !== 'string' || !isDataType(t['datatype']) || !isTypedArray(t['data'])
      || !Array.isArray(t['shape']) || !(t['shape'] as unknown[]).every((d) => Number.isSafeInteger(d) && (d as number) >= 0)) {
      return `input ${i} is not a tensor (use tensor(name, datatype, shape, data))`;
    }
    // Its datatype's own array class (an Int32Array labelled FP32 reached the callee as integers).
    if (!isDataOf(t['datatype'] as DataType, t['data'])) return `input ${i}: ${t['datatype'] as string} data must be a ${arrayClassName(t['datatype'] as DataType)}, got ${(t['data'] as object).constructor.name}`;
  }
  if (r['outputs'] !== undefined && !(Array.isArray(r['outputs']) && (r['outputs'] as unknown[]).every((o) => typeof o === 'string'))) return "'outputs' must be an array of output names";
  if (r['parameters'] !== undefined && !isObject(r['parameters'])) return "'parameters' must be an object";
  // Values as a client's may be (Triton's parameters are strings, integers, booleans, doubles): an
  // object value reached the response cache's key as "[object Object]", so two callers' requests
  // that differed only in it shared one cached answer (review).
  for (const [k, v] of Object.entries((r['parameters'] ?? {}) as Record<string, unknown>)) {
    if (v !== undefined && !['string', 'number', 'boolean', 'bigint'].includes(typeof v)) return `parameter '${k.slice(0, 64)}' must be a string, number, boolean or bigint`;
  }
  return blsControlsProblem(r);
}

function modelFile(versionPath: string, config: ModelConfig): string {
  const name = config.default_model_filename || 'model.js';
  const p = resolveInside(versionPath, name);
  if (p === versionPath) throw Errors.invalidArg(`default_model_filename '${echo(name)}' names the version directory, not a file`);
  if (!existsSync(p) && !config.default_model_filename && existsSync(resolveInside(versionPath, 'model.mjs'))) return resolveInside(versionPath, 'model.mjs');
  return p;
}

/** Where a decoupled model's streamed responses go: per execute call, per request. */
type Responders = Map<number, {
  respond: ((r: ExecuteResponse | undefined, final: boolean) => void | Promise<void>)[];
  open: Set<number>;
  /** Per request: stops telling the thread of its cancellation (once it has ended). */
  unwatch: ((() => void) | undefined)[];
}>;

/**
 * Answers the thread's BLS calls, log lines and decoupled responses on the main thread.
 * @param flow the thread's count of responses posted and not yet taken: one comes off when its
 *   client is ready for the next (model-api.ts `flow`)
 */
function serveBridge(port: MessagePort, ctx: ModelContext, logger: Logger, responders: Responders, flow: Int32Array): void {
  const slots = flow.length >> 1;
  const taken = (slot: unknown, kib: unknown): void => {
    if (typeof slot !== 'number' || !Number.isInteger(slot) || slot < 0 || slot >= slots) return;
    // Its KiB first: a sender woken by the count then sees both.
    if (typeof kib === 'number' && Number.isInteger(kib) && kib > 0) Atomics.sub(flow, slots + slot, kib);
    Atomics.sub(flow, slot, 1);
    Atomics.notify(flow, slot);
  };
  port.on('message', (m: { type: string; id?: number; request?: InferRequest; chain?: string[]; level?: string; msg?: string; token?: number; index?: number; final?: boolean; slot?: number; kib?: number; outputs?: Tensor[]; error?: WireError }) => {
    if (m.type === 'response') {
      const call = responders.get(m.token ?? -1);
      const index = m.index ?? -1;
      const respond = call?.respond[index];
      if (!call || !respond || !call.open.has(index)) {
        taken(m.slot, m.kib);
        return;
      }
      // The outputs arrived in this message, moved or copied: this response owns them.
      const r: ExecuteResponse | undefined = m.error !== undefined ? { error: fromWireError(m.error) } : m.outputs ? { outputs: claimOwnership([m.outputs])[0]! } : undefined;
      let final = m.final === true || m.error !== undefined;
      let ready: void | Promise<void> = undefined;
      try {
        ready = respond(r, final);
      } catch (err) {
        // The response did not fit the request (an output it asked for is missing, ...): that
        // request ends with why. Thrown on, it left this message handler and ended the process.
        logger.warning(`${ctx.name}: a response could not be sent: ${thrownText(err)}`, { model: ctx.name });
        if (!final) {
          try {
            void respond({ error: TriodeError.from(err) }, true);
          } catch {
            // nothing more to tell that request
          }
          final = true;
        }
      } finally {
        // A client not ready for more (a gRPC stream waiting for 'drain') holds the thread's next sends.
        const { slot, kib } = m;
        if (ready) ready.then(() => taken(slot, kib), () => taken(slot, kib));
        else taken(slot, kib);
      }
      if (final) {
        call.open.delete(index);
        call.unwatch[index]?.();
        if (call.open.size === 0) responders.delete(m.token!);
      }
      return;
    }
    if (m.type === 'log') {
      const fields = { model: ctx.name };
      const msg = `${ctx.name}: ${m.msg ?? ''}`;
      if (m.level === 'error') logger.error(msg, fields);
      else if (m.level === 'warning') logger.warning(msg, fields);
      else if (m.level === 'verbose') logger.verbose(1, msg, fields);
      else logger.info(msg, fields);
      return;
    }
    if (m.type !== 'infer' || m.id === undefined || !m.request) return;
    const id = m.id;
    const reply = (payload: { outputs?: Tensor[]; error?: WireError }) => {
      // Outputs this side owns move to the thread; lent ones (a tap another reader still has) are copied.
      port.postMessage({ type: 'infer-result', id, ...payload }, transferList(payload.outputs ?? []));
    };
    const problem = blsRequestProblem(m.request);
    if (problem !== undefined) {
      reply({ error: { code: 'INVALID_ARG', message: `BLS request refused: ${problem}` } });
      return;
    }
    const r = m.request;
    const chain = Array.isArray(m.chain) && m.chain.every((c) => typeof c === 'string') ? m.chain : [ctx.name];
    if (!ctx.infer) {
      reply({ error: { code: 'UNAVAILABLE', message: 'BLS is not available: the model is not running inside a server' } });
      return;
    }
    if (chain.includes(r.model)) {
      reply({ error: { code: 'INVALID_ARG', message: `BLS request to model '${r.model}' refused: it is already in the call chain (${[...chain, r.model].join(' -> ')}), and its instances would wait on themselves` } });
      return;
    }
    const request: InferenceRequest = {
      modelName: r.model,
      // Copies made for this call by the message: the request owns them.
      inputs: claimOwnership([r.inputs])[0]!,
      parameters: blsParameters(r),
      blsDepth: chain.length,
      blsChain: chain,
      ...(r.version !== undefined ? { modelVersion: r.version } : {}),
      ...(r.outputs?.length ? { outputs: r.outputs.map((name) => ({ name })) } : {}),
    };
    ctx.infer(request).then(
      (res) => reply({ outputs: res.outputs }),
      (err: unknown) => reply({ error: toWireError(err) }),
    );
  });
}

/** Starts a model in its pool's thread (imports it, runs initialize) with a new bridge; resolves to the bridge's main-thread end. */
type StartInstance = (signal?: AbortSignal) => Promise<MessagePort>;

let nextToken = 1;

class JsInstance implements BackendModelInstance {
  readonly #pool: Piscina;
  #port: MessagePort;
  readonly #responders: Responders;
  readonly #start: StartInstance;
  readonly #name: string;
  readonly #logger: Logger;
  /** The thread died (an uncaught throw, process.exit): the next execute starts the model again first. */
  #dead = false;
  /** finalize() has begun: the pool's threads end on purpose. */
  closing = false;
  /** Threads the pool has ended (piscina says so before it fails their tasks). */
  threadsEnded = 0;

  constructor(p: Piscina, port: MessagePort, responders: Responders, start: StartInstance, name: string, logger: Logger) {
    this.#pool = p;
    this.#port = port;
    this.#responders = responders;
    this.#start = start;
    this.#name = name;
    this.#logger = logger;
  }

  /**
   * The thread ended with `err` (the pool starts a fresh one, without the model). Decoupled
   * requests it was still sending to will get nothing more: each ends with the error.
   */
  died(err: Error): void {
    if (!this.#dead) this.#logger.error(`model '${this.#name}': its instance thread ended (${err.message}); the model is started again in a new thread before its next execution`, { model: this.#name });
    this.#dead = true;
    this.#endStreams(new TriodeError('INTERNAL', `model '${this.#name}': its instance thread ended before the request's final response (${err.message})`));
  }

  /** Ends every decoupled request still open with `error`. */
  #endStreams(error: TriodeError): void {
    const calls = [...this.#responders.values()];
    this.#responders.clear();
    for (const call of calls) {
      for (const index of call.open) {
        call.unwatch[index]?.();
        try {
          void call.respond[index]?.({ error }, true);
        } catch {
          // the request's own failure is its sender's to report
        }
      }
      call.open.clear();
    }
  }

  /**
   * As Triton's Python backend restarts a stub process that died: the model is imported and
   * initialized again in the pool's new thread. If that fails, the instance is lost (the version
   * goes not ready).
   */
  async #restart(): Promise<void> {
    this.#port.close();
    try {
      this.#port = await this.#start();
    } catch (err) {
      throw Errors.instanceLost(`model '${this.#name}': its instance thread ended and the model could not be started again: ${thrownText(err)}`);
    }
    // Only now: a late word of the same death (the pool's event, deferred) must not start it twice.
    this.#dead = false;
  }

  async execute(requests: ExecuteRequest[]): Promise<ExecuteResult> {
    if (this.#dead) await this.#restart();
    const decoupled = requests.some((r) => r.respond);
    const token = decoupled ? nextToken++ : undefined;
    // A decoupled request the client cancels is told so on the thread (Request.isCancelled()),
    // until it ends (its senders may go on after execute returns), so a model streaming
    // responses can stop instead of running to its end.
    const unwatch: ((() => void) | undefined)[] = [];
    if (token !== undefined) {
      requests.forEach((r, index) => {
        const signal = r.signal;
        if (!signal) return;
        const onAbort = (): void => this.#port.postMessage({ type: 'cancel', token, index });
        if (signal.aborted) onAbort();
        else {
          signal.addEventListener('abort', onAbort, { once: true });
          unwatch[index] = () => signal.removeEventListener('abort', onAbort);
        }
      });
      this.#responders.set(token, { respond: requests.map((r) => r.respond ?? (() => undefined)), open: new Set(requests.map((_r, i) => i)), unwatch });
    }
    const forget = (): void => {
      if (token === undefined) return;
      this.#responders.delete(token);
      for (const f of unwatch) f?.();
    };
    const task: JsExecuteTask = {
      op: 'execute',
      ...(token !== undefined ? { token } : {}),
      requests: requests.map((r) => {
        const t: JsExecuteRequest = {
          ...(r.id !== undefined ? { id: r.id } : {}),
          inputs: r.inputs as Tensor[],
          outputNames: r.outputNames,
          parameters: r.parameters,
          chain: r.blsChain ?? [],
          batchSize: r.batchSize,
        };
        // Only what is set crosses to the thread (most requests have none of them).
        if (r.correlationId !== undefined) t.correlationId = r.correlationId;
        if (r.flags !== undefined) t.flags = r.flags;
        if (r.timeoutUs !== undefined) t.timeoutUs = r.timeoutUs;
        return t;
      }),
    };
    let reply: JsExecuteReply;
    const endedBefore = this.threadsEnded;
    try {
      // Owned inputs move to the thread; lent ones are copied there.
      reply = (await this.#pool.run(task, { transferList: transferList(requests.flatMap((r) => r.inputs)) })) as JsExecuteReply;
    } catch (err) {
      forget();
      // A thread that died under the task (the pool ended it first); any other rejection (a reply
      // that could not be posted back) fails this batch only, and the model goes on in its thread.
      if (this.threadsEnded !== endedBefore) this.died(err as Error);
      // finalize() terminated the thread under an execute that had not returned in the unload's time.
      if (this.closing) throw Errors.unavailable(`model '${this.#name}' was unloaded before its execute returned`);
      throw new TriodeError('INTERNAL', thrownText(err), { cause: err });
    }
    if ('error' in reply) {
      forget();
      throw fromWireError(reply.error);
    }
    // The outputs came in this reply; a buffer that several responses view is lent to each.
    const outputs = claimOwnership(reply.responses.map((r) => ('outputs' in r ? r.outputs : [])));
    return {
      responses: reply.responses.map((r, i) => ('error' in r ? { error: fromWireError(r.error) } : { outputs: outputs[i]! })),
      timings: { computeInputNs: 0, computeInferNs: reply.computeInferNs, computeOutputNs: 0 },
    };
  }

  async finalize(signal?: AbortSignal): Promise<void> {
    this.closing = true;
    // The model's finalize() runs in the thread after the task before it: behind an execute that
    // never returns (a `for (;;)`) it never does. The wait ends when the core's does (`signal`),
    // and the thread is terminated, which stops the loop; left waiting, the thread spun a core
    // for good, one more per load and unload.
    const unloaded = await abortable(this.#pool.run({ op: 'unload' }), signal).then(() => true, () => signal?.aborted !== true);
    // The core waited for open streams (within the unload's time): what is left ends here.
    this.#endStreams(Errors.unavailable(`model '${this.#name}' was unloaded before the request sent its final response`));
    this.#port.close();
    // Nothing runs after the unload task: the pool closes at once. Otherwise close() would wait
    // (30 s) for the task still running, then report it: destroy() terminates the thread now.
    if (unloaded) await this.#pool.close({ force: true });
    else await this.#pool.destroy();
  }
}

class JsModel implements BackendModel {
  readonly #ctx: ModelContext;
  readonly #file: string;
  readonly #logger: Logger;
  readonly #clientStallMs: number;

  constructor(ctx: ModelContext, file: string, logger: Logger, clientStallMs: number) {
    this.#ctx = ctx;
    this.#file = file;
    this.#logger = logger;
    this.#clientStallMs = clientStallMs;
  }

  async instanceInitialize(group: ModelInstanceGroup, index: number): Promise<BackendModelInstance> {
    const ctx = this.#ctx;
    const made: { instance?: JsInstance } = {};
    const p = pool((err) => {
      if (made.instance) made.instance.died(err);
      else this.#logger.error(`model '${ctx.name}': its instance thread ended while loading (${err.message})`, { model: ctx.name });
    });
    const responders: Responders = new Map();
    const start: StartInstance = async (signal) => {
      const { port1, port2 } = new MessageChannel();
      const flow = new Int32Array(new SharedArrayBuffer(4 * 2 * FLOW_SLOTS));
      serveBridge(port1, ctx, this.#logger, responders, flow);
      const task: JsLoadTask = {
        op: 'load',
        file: this.#file,
        config: ctx.config,
        name: ctx.name,
        version: ctx.version,
        repository: dirname(ctx.modelPath),
        instanceName: `${group.name ?? ctx.name}_${index}`,
        instanceKind: group.kind === 'KIND_GPU' ? 'GPU' : group.kind === 'KIND_MODEL' ? 'MODEL' : 'CPU',
        port: port2,
        flow,
        clientStallMs: this.#clientStallMs,
      };
      try {
        await p.run(task, { transferList: [port2], ...(signal ? { signal } : {}) });
      } catch (err) {
        port1.close();
        throw err;
      }
      return port1;
    };
    let port: MessagePort;
    try {
      // A load given up (timeout, unload, shutdown) terminates the thread, even one stuck in initialize().
      port = await start(ctx.signal);
    } catch (err) {
      await p.close({ force: true });
      // A throw in initialize() makes the model UNAVAILABLE with its message.
      throw Errors.internal(`failed to initialize model '${ctx.name}': ${thrownText(err)}`, err);
    }
    const instance = new JsInstance(p, port, responders, start, ctx.name, this.#logger);
    made.instance = instance;
    // A thread that exits while idle (process.exit in a timer) emits no 'error': without this,
    // the next request went to the pool's fresh thread, which has no model. One that failed emits
    // its 'error' right after: it goes first, with what happened.
    p.on('workerDestroy', () => {
      if (instance.closing) return;
      instance.threadsEnded++;
      setImmediate(() => { if (!instance.closing) instance.died(new Error('the thread exited')); });
    });
    return instance;
  }

  async finalize(): Promise<void> {}
}

/** Options of the javascript backend. */
export interface JavaScriptBackendOptions {
  /** Where models' `log.*` lines go. @default the server's logger is not reachable here: silent */
  logger?: Logger;
  /**
   * How long a decoupled model's sender waits on a client that takes none of its request's last
   * 64 responses before that request counts as cancelled (the wait holds the instance thread).
   * @default 10000
   */
  clientStallMs?: number;
}

/**
 * The `javascript` backend (`backend: "javascript"`, or a version folder holding model.js/.mjs).
 * @example new InferenceServer({ backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()], ... })
 */
export class JavaScriptBackend implements Backend {
  readonly name = 'javascript';
  /** Ragged inputs reach `execute` per request as sent, and `executeBatch` joined (with the batch inputs). */
  readonly raggedBatching = true;
  readonly #logger: Logger;

  readonly #clientStallMs: number;

  constructor(options: JavaScriptBackendOptions = {}) {
    this.#logger = options.logger ?? { error() {}, warning() {}, info() {}, verbose() {} };
    this.#clientStallMs = options.clientStallMs ?? 10_000;
  }

  async autoCompleteConfig(config: ModelConfig, ctx: AutoCompleteContext): Promise<void> {
    if (!ctx.versionPath) return;
    const file = modelFile(ctx.versionPath, config);
    if (!existsSync(file)) return;
    const p = pool((err) => this.#logger.warning(`auto-complete of model '${ctx.name}': its thread ended (${err.message})`, { model: ctx.name }));
    let completed: unknown;
    try {
      // The signal ends the task's thread if the model's code never settles (the load timed out).
      completed = await p.run({ op: 'autocomplete', file, config }, ctx.signal ? { signal: ctx.signal } : {});
    } catch (err) {
      if (ctx.signal?.aborted) throw ctx.signal.reason;
      throw Errors.invalidArg(`auto-complete of model '${ctx.name}' failed: ${thrownText(err)}`);
    } finally {
      await p.close({ force: true });
    }
    // The model's own code made it: only what the config schema reads goes into the config (an
    // own __proto__ key, assigned raw, set the config's prototype; 'abc' added fields 0, 1, 2).
    if (typeof completed !== 'object' || completed === null || Array.isArray(completed)) {
      const what = completed === null ? 'null' : Array.isArray(completed) ? 'an array' : `a ${typeof completed}`;
      throw Errors.invalidArg(`auto-complete of model '${ctx.name}' returned an invalid config: autoCompleteConfig() returned ${what}, not a config object`);
    }
    Object.assign(config, readAutoCompletedConfig(completed, ctx.name));
  }

  async modelInitialize(ctx: ModelContext): Promise<BackendModel> {
    const file = modelFile(ctx.versionPath, ctx.config);
    if (!existsSync(file)) throw Errors.unavailable(`unable to find '${file}' for model '${ctx.name}'`);
    return new JsModel(ctx, file, this.#logger, this.#clientStallMs);
  }
}
