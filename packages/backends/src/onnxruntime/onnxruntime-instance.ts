/**
 * @module An onnxruntime model instance: a thread (a one-thread piscina pool) with its session,
 * and, for a model that runs in less time than a hand-off to the thread costs, a lease on the
 * model's one session on the main thread (sharedPath; execution-thread-policy.ts picks the path of
 * each batch). Owned input
 * tensors move (transfer) to the thread, lent ones are copied; on the main thread inputs are read
 * where they are. Outputs are owned by their response unless a batch's responses share one buffer.
 * Triton: onnxruntime_backend/src/onnxruntime.cc (ModelInstanceState)
 */
import { isUtf8 } from 'node:buffer';
import type { Piscina } from 'piscina';
import {
  Errors, TriodeError, claimOwnership, deserializeBytesTensor, fromWireError, transferList as tensorTransferList,
  type BackendModelInstance, type ExecuteRequest, type ExecuteResult, type Logger, type WireError,
} from '@triode/core';
import type { ExecuteTask, LoadTask, WireTensor } from './messages.js';
import { OnnxSession, inputBytes, mib, type SessionRemake, type SessionRunResult } from './onnxruntime-session.js';
import { ExecutionThreadPolicy, type ExecutionPath, type PathChange } from './execution-thread-policy.js';
import { loopTurned, nextLoopTurn } from '../common/loop-turn.js';

/**
 * Buffers to move to the thread, each once: those of the inputs the requests own (`isOwned`). The
 * others (lent tensors, views of shared buffers) are copied by postMessage.
 */
export function transferList(requests: readonly ExecuteRequest[]): ArrayBuffer[] {
  return tensorTransferList(requests.flatMap((r) => r.inputs));
}

/** What a path answers for a batch: its result (with the session's remake, if one followed), or the error that failed it. */
export type PathReply = SessionRunResult | { error: WireError };

/** Where an instance runs batches: its thread, or a session on the main thread. */
export interface ExecutionPathRunner {
  /** Runs a batch; a failure of the run comes back as `{ error }`. @throws when the path itself failed (a dead thread) */
  run(task: ExecuteTask, transfer: ArrayBuffer[]): Promise<PathReply>;
  close(): Promise<void>;
}

/**
 * The instance thread. A thread that ends (an uncaught throw, out of memory in its heap, a
 * `process.exit` in native code's callback) fails the batches it held; piscina starts a fresh
 * one, which has no session: the session is loaded there again (`load`) before its next batch,
 * as Triton restarts a backend's stub. If that load fails, the instance is lost (the version goes
 * not ready). `onEnded` hears of each thread that ended, with the error the pool emits for one that
 * failed while idle (an unheard 'error' event would end the server).
 */
export function threadPath(pool: Piscina, load: LoadTask, onEnded: (err?: Error) => void = () => undefined): ExecutionPathRunner {
  let closing = false;
  /** The thread was replaced since its session was loaded. */
  let stale = false;
  let reloading: Promise<void> | undefined;
  pool.on('workerDestroy', () => {
    if (closing) return;
    stale = true;
    onEnded();
  });
  pool.on('error', (err: Error) => {
    stale = true;
    onEnded(err);
  });
  const reload = (): Promise<void> => (reloading ??= (async () => {
    stale = false;
    try {
      await pool.run(load);
    } catch (err) {
      stale = true;
      throw Errors.instanceLost(`the instance thread ended and its session could not be loaded again: ${errorText(err)}`);
    } finally {
      reloading = undefined;
    }
  })());
  return {
    run: async (task, transfer) => {
      if (stale || reloading) await reload();
      return (await pool.run(task, { transferList: transfer })) as PathReply;
    },
    async close() {
      closing = true;
      await pool.run({ op: 'unload' }).catch(() => undefined);
      await pool.close({ force: true });
    },
  };
}

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** A session on the main thread, made from the instance's load task. */
export async function mainThreadPath(task: LoadTask): Promise<ExecutionPathRunner> {
  const session = new OnnxSession();
  try {
    await session.load(task);
  } catch (err) {
    await session.unload().catch(() => undefined);
    throw err;
  }
  const fail = (err: unknown): Promise<PathReply> => session.failure(err);
  // A run answers at once and blocks the thread: back-to-back runs let the event loop turn between them (loop-turn.ts).
  return {
    run: (t) => (loopTurned() ? session.run(t) : nextLoopTurn().then(() => session.run(t))).catch(fail),
    close: () => session.unload(),
  };
}

/**
 * One path shared by a model's instances: opened at the first lease, closed with the last. For the
 * main-thread session: runs there never overlap (each blocks the thread), so a session per instance
 * only doubles the memory and the caches its runs go through (two ppocr_cls sessions taking turns
 * on one thread run 1-14% fewer runs a second than one, `bench/session-turns.mjs`). A failed open
 * fails every lease waiting for it; the next lease tries again. `onClosed` hears of each close of
 * the path itself (the last lease's).
 */
export function sharedPath(open: () => Promise<ExecutionPathRunner>, onClosed: () => void = () => undefined): () => Promise<ExecutionPathRunner> {
  /** The path opened last, with its leases (those waiting for the open included). */
  let current: { made: Promise<ExecutionPathRunner>; leases: number } | undefined;
  return async () => {
    const entry = (current ??= { made: open(), leases: 0 });
    entry.leases++;
    let runner: ExecutionPathRunner;
    try {
      runner = await entry.made;
    } catch (err) {
      entry.leases--;
      if (current === entry) current = undefined;
      throw err;
    }
    let closed = false;
    return {
      run: (task, transfer) => runner.run(task, transfer),
      close: async () => {
        if (closed) return;
        closed = true;
        if (--entry.leases > 0) return;
        if (current === entry) current = undefined;
        await runner.close();
        onClosed();
      },
    };
  };
}

/** Options of an OnnxInstance. */
export interface OnnxInstanceOptions {
  /** The instance thread; absent for `execution_thread: "main"`. */
  thread?: ExecutionPathRunner;
  /** A lease on the model's main-thread session, for `main` (taken at load). */
  main?: ExecutionPathRunner;
  /** Takes a lease on the model's main-thread session, for `auto` (once, when the policy first picks the main thread). */
  openMain?: () => Promise<ExecutionPathRunner>;
  policy: ExecutionThreadPolicy;
  /** True when the model batches (first dim is the batch dim). */
  batching: boolean;
  /** For the log lines of path changes. */
  logger: Logger;
  /** `model "<name>" instance <i>`, for the log. */
  label: string;
  model: string;
}

const us = (ns: number) => `${Math.round(ns / 1000)} µs`;

export class OnnxInstance implements BackendModelInstance {
  /** The thread runs its tasks one at a time, in order; one more may wait in its inbox. */
  readonly pipelineDepth = 2;
  readonly #o: OnnxInstanceOptions;
  #main: ExecutionPathRunner | undefined;
  #opening: Promise<void> | undefined;
  #threadBusy = 0;
  #mainBusy = 0;
  /** The last batch given to the main thread (it may reject: whoever waits takes either outcome): finalize waits for it. */
  #lastMain: Promise<unknown> = Promise.resolve();
  /** The last batch given to the thread (the same): a main-thread batch waits for it. */
  #lastThread: Promise<unknown> = Promise.resolve();
  readonly #mainSettled = (reply: PathReply): PathReply => {
    this.#mainBusy--;
    return reply;
  };
  readonly #mainFailed = (err: unknown): never => {
    this.#mainBusy--;
    throw err;
  };
  #closed = false;
  /** Whether the main-thread session has run once (see `cold` in execute). */
  #mainWarm = false;
  /** Batches the instance ran on each path so far (for tests). */
  readonly ran: Record<ExecutionPath, number> = { main: 0, thread: 0 };

  constructor(options: OnnxInstanceOptions) {
    if (!options.thread && !options.main) throw new TypeError('options.thread or options.main is required');
    this.#o = options;
    this.#main = options.main;
  }

  async execute(requests: ExecuteRequest[]): Promise<ExecuteResult> {
    // A request whose BYTES input onnxruntime-node cannot take as it is fails alone; the others
    // of its batch run without it.
    let refused: (TriodeError | undefined)[] | undefined;
    for (let i = 0; i < requests.length; i++) {
      const e = notUtf8(requests[i]!);
      if (e) (refused ??= new Array<TriodeError | undefined>(requests.length))[i] = e;
    }
    if (refused) {
      const rest = requests.filter((_, i) => refused[i] === undefined);
      const ran = rest.length ? await this.execute(rest) : { responses: [] };
      let j = 0;
      return { ...ran, responses: requests.map((_, i) => (refused[i] ? { error: refused[i] } : ran.responses[j++]!)) };
    }
    const lone = requests.length === 1;
    const task: ExecuteTask = {
      op: 'execute',
      requests: requests.map((r) => ({ inputs: r.inputs as WireTensor[], batchSize: r.batchSize })),
      outputNames: lone ? requests[0]!.outputNames : requests[0]!.outputNames.length ? unionOutputs(requests) : [],
      batching: this.#o.batching,
    };
    const bytes = inputBytes(task);
    let path = this.#o.policy.choose({ threadBusy: this.#threadBusy, mainBusy: this.#mainBusy, requests: requests.length, inputBytes: bytes });
    if (path === 'main' && !this.#main) {
      this.#openMain();
      path = 'thread';
    }
    // A session's first run is slow (1-2 ms for `simple`: onnxruntime allocates as it goes); it
    // says nothing of the next ones. (The session is the model's: another instance may have run
    // it already, and then one fair sample goes uncounted.)
    const cold = path === 'main' && !this.#mainWarm;
    if (cold) this.#mainWarm = true;
    const reply = path === 'main' ? await this.#runMain(task) : await this.#runThread(task, requests);
    this.ran[path]++;
    if ('error' in reply) throw fromWireError(reply.error);
    if (reply.remade) this.#logRemake(reply.remade);
    const change = cold ? undefined : this.#o.policy.record(path, reply.computeInputNs + reply.computeInferNs + reply.computeOutputNs, requests.length, bytes);
    if (change) this.#logChange(change);
    // Each request gets the outputs it asked for; a lone request asked for all the task's.
    const outputs = reply.responses.map((r, i) => {
      if ('error' in r) return [];
      if (lone) return r.outputs;
      const want = new Set(requests[i]!.outputNames);
      return r.outputs.filter((o) => want.has(o.name));
    });
    // A batch's responses may view one output buffer: then each is lent it, not given it.
    claimOwnership(outputs);
    return {
      responses: reply.responses.map((r, i) => ('error' in r ? { error: fromWireError(r.error) } : { outputs: outputs[i]! })),
      timings: { computeInputNs: reply.computeInputNs, computeInferNs: reply.computeInferNs, computeOutputNs: reply.computeOutputNs },
    };
  }

  #runMain(task: ExecuteTask): Promise<PathReply> {
    this.#mainBusy++;
    // Inputs stay where they are: nothing moves, nothing is copied (a lent buffer is only read).
    // The instance's batch on its thread finishes first: its batches never overlap. (Not an async
    // function: a lone request's path takes no more promises than it needs, issue #18.)
    const main = this.#main!;
    const go = (): Promise<PathReply> => main.run(task, []);
    const run = this.#threadBusy > 0 ? this.#lastThread.then(go, go) : go();
    this.#lastMain = run;
    return run.then(this.#mainSettled, this.#mainFailed);
  }

  async #runThread(task: ExecuteTask, requests: ExecuteRequest[]): Promise<PathReply> {
    this.#threadBusy++;
    try {
      // The instance's batch on the main thread finishes first: its batches never overlap. Moving
      // the owned buffers detaches them here: their requests own them and no one reads them after.
      const thread = this.#o.thread!;
      const go = (): Promise<PathReply> => thread.run(task, transferList(requests));
      const run = this.#mainBusy > 0 ? this.#lastMain.then(go, go) : go();
      this.#lastThread = run;
      return await run;
    } catch (err) {
      if (err instanceof TriodeError) throw err; // its session could not be loaded again
      // The thread itself failed (it died, or could not take the task): its errors come as data.
      throw new TriodeError('INTERNAL', `onnx runtime error: ${errorText(err)}`, { cause: err });
    } finally {
      this.#threadBusy--;
    }
  }

  /** Makes the main-thread session in the background; batches stay on the thread until it is there. */
  #openMain(): void {
    if (this.#opening || !this.#o.openMain) return;
    this.#opening = this.#o.openMain().then((main) => {
      if (this.#closed) return main.close();
      this.#main = main;
    }, (err: unknown) => {
      this.#o.policy.disableMain();
      this.#o.logger.warning(`${this.#o.label} stays on its thread: its main-thread session failed to load: ${(err as Error).message}`, { model: this.#o.model });
    });
  }

  /** A session made anew after a run (arena_reset_bytes): an operator sees each one, and why one failed. */
  #logRemake(r: SessionRemake): void {
    const why = `a run grew the process's memory by ${mib(r.grewBytes)}, over arena_reset_bytes (${mib(r.limitBytes)})`;
    if (r.error === undefined) {
      this.#o.logger.info(`${this.#o.label}: its session was made anew (${Math.round(r.ms)} ms) to give back its memory arena: ${why}`, { model: this.#o.model });
    } else {
      this.#o.logger.warning(`${this.#o.label}: its session could not be made anew after ${why}: ${r.error}; it is loaded again before the next batch`, { model: this.#o.model });
    }
  }

  #logChange(c: PathChange): void {
    if (c.to === 'main') {
      this.#o.logger.info(`${this.#o.label} runs on the main thread: a request takes ${us(c.estimateNs)} to compute, at most ${us(c.boundNs)} (execution_thread_threshold_us)`, { model: this.#o.model });
    } else {
      this.#o.logger.info(`${this.#o.label} runs on its thread again: a request takes ${us(c.estimateNs)} to compute (the last ${us(c.lastNs)}), over ${us(c.boundNs)}`, { model: this.#o.model });
    }
  }

  async finalize(): Promise<void> {
    this.#closed = true;
    await this.#opening;
    await this.#lastMain.catch(() => undefined);
    const main = this.#main;
    this.#main = undefined;
    // Gives up its lease: the last instance's releases the model's session (logged there).
    if (main) await main.close().catch(() => undefined);
    await this.#o.thread?.close();
  }
}

/** The outputs any request of the batch asked for, in the first request's order. */
function unionOutputs(requests: readonly ExecuteRequest[]): string[] {
  const names = new Set<string>();
  for (const r of requests) for (const n of r.outputNames) names.add(n);
  return [...names];
}

/**
 * onnxruntime-node takes string tensors as JS strings, so a BYTES element that is not UTF-8
 * would reach the model with U+FFFD in place of its bytes (Triton's backend passes the bytes):
 * such a request is refused instead of being answered from altered data.
 */
function notUtf8(r: ExecuteRequest): TriodeError | undefined {
  for (const t of r.inputs) {
    if (t.datatype !== 'BYTES') continue;
    const elements = deserializeBytesTensor(t.data as Uint8Array, undefined, `input '${t.name}'`);
    const i = elements.findIndex((e) => !isUtf8(e));
    if (i >= 0) return Errors.invalidArg(`input '${t.name}': element ${i} is not valid UTF-8; the onnxruntime backend takes BYTES elements as UTF-8 text`);
  }
  return undefined;
}
