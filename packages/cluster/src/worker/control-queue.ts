/**
 * @module A cluster worker's load and unload commands: each waits only for the commands taken
 * before it that may change a model it may change, so a load that never ends holds up only its
 * own models. Triton: core/src/model_repository_manager/model_repository_manager.cc
 * (LoadUnloadModels locks the models a load or unload affects in its dependency graph; loads and
 * unloads of other models go on beside it).
 */
import { Errors, TriodeError, cancelledByUnload, echo } from '@triode/core';

/** The most commands a worker holds, running or waiting (those that joined another included). */
export const MAX_CONTROL_COMMANDS = 1024;

/** A load or unload as the queue orders it. */
export interface ControlJob {
  /** The model the command names. */
  model: string;
  action: 'load' | 'unload';
  /**
   * The models it may change, its own among them (`InferenceServer.modelsAffectedBy`): it runs
   * after every command taken before it whose scope shares one, and beside the others. Asked
   * once, only of a command the queue has room for (it may read files).
   */
  scope(): readonly string[];
  /**
   * What it asks beyond its model and action (a load's config and files, an unload's
   * unload_dependents): a command that asks the same as the last one waiting for the same models
   * joins it, and gets its answer.
   */
  same: string;
  /** Applies the command. */
  apply(): Promise<void>;
  /** Answers it: `error` when it failed or was given up. Must not throw. */
  answer(error?: TriodeError): void;
}

interface Entry {
  readonly job: ControlJob;
  /** `job.scope()`, its model included, without repeats. */
  readonly scope: readonly string[];
  /** Its answer and those of the commands that joined it. */
  readonly answers: ((error?: TriodeError) => void)[];
  running: boolean;
}

/**
 * Runs control commands: in the order taken among those that share a model, at once otherwise.
 * Commands that ask again what the last one waiting for the same models asks join it; past
 * `max` commands held, a command is answered UNAVAILABLE at once (a flood cannot grow it).
 * @example
 * const q = new ControlQueue();
 * q.add({ model: 'a', action: 'load', scope: () => ['a'], same: '{}', apply: () => server.loadModel('a'), answer: (e) => reply(e) });
 */
export class ControlQueue {
  /** Per model: the entries whose scope holds it, in the order taken. An entry first in each of its lanes runs. */
  readonly #lanes = new Map<string, Entry[]>();
  /** Commands taken and not yet answered. */
  #held = 0;
  readonly #max: number;

  constructor(max = MAX_CONTROL_COMMANDS) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`max must be a positive integer, got ${max}`);
    this.#max = max;
  }

  /** Commands held: running, waiting, or joined to one of those. */
  get size(): number {
    return this.#held;
  }

  /** Takes a command: it runs once those it must follow have ended, joins one, or is refused. */
  add(job: ControlJob): void {
    if (this.#held >= this.#max) {
      answer(job.answer, Errors.unavailable(`failed to ${job.action} '${echo(job.model)}': ${this.#max} load and unload commands are under way on this worker, try again when they end`));
      return;
    }
    const scope = [...new Set([job.model, ...job.scope()])];
    this.#held++;
    const joined = this.#lastWaitingLike(job, scope);
    if (joined) {
      joined.answers.push(job.answer);
      return;
    }
    const entry: Entry = { job, scope, answers: [job.answer], running: false };
    for (const m of entry.scope) {
      let lane = this.#lanes.get(m);
      if (!lane) this.#lanes.set(m, (lane = []));
      lane.push(entry);
    }
    this.#startIfFirst(entry);
  }

  /**
   * Gives up the loads of `model` still waiting, answered at once as an unload's cancellation
   * gives up a running one (UNAVAILABLE "...the load was cancelled by an unload of the model").
   */
  cancelLoads(model: string): void {
    for (const e of [...(this.#lanes.get(model) ?? [])]) {
      if (!e.running && e.job.model === model && e.job.action === 'load') this.#end(e, cancelledByUnload(model));
    }
  }

  /** The entry `job` can join: the last one of each lane of its scope, waiting, asking the same, with that same scope. */
  #lastWaitingLike(job: ControlJob, scope: readonly string[]): Entry | undefined {
    const lane = this.#lanes.get(job.model);
    const last = lane?.[lane.length - 1];
    if (!last || last.running || last.job.model !== job.model || last.job.action !== job.action || last.job.same !== job.same) return undefined;
    if (scope.length !== last.scope.length) return undefined;
    for (const m of scope) {
      const l = this.#lanes.get(m);
      if (l?.[l.length - 1] !== last) return undefined;
    }
    return last;
  }

  #startIfFirst(entry: Entry): void {
    if (entry.running || entry.scope.some((m) => this.#lanes.get(m)?.[0] !== entry)) return;
    entry.running = true;
    void this.#run(entry);
  }

  async #run(entry: Entry): Promise<void> {
    let error: TriodeError | undefined;
    try {
      await entry.job.apply();
    } catch (err) {
      error = TriodeError.from(err);
    }
    this.#end(entry, error);
  }

  /** Answers an entry, takes it out of its lanes, and starts those it held up. */
  #end(entry: Entry, error: TriodeError | undefined): void {
    for (const m of entry.scope) {
      const lane = this.#lanes.get(m);
      if (!lane) continue;
      const i = lane.indexOf(entry);
      if (i >= 0) lane.splice(i, 1);
      if (lane.length === 0) this.#lanes.delete(m);
    }
    this.#held -= entry.answers.length;
    for (const a of entry.answers) answer(a, error);
    for (const m of entry.scope) {
      const next = this.#lanes.get(m)?.[0];
      if (next) this.#startIfFirst(next);
    }
  }
}

function answer(a: (error?: TriodeError) => void, error: TriodeError | undefined): void {
  try {
    a(error);
  } catch {
    // An answer must not throw (ControlJob.answer); one that does fails alone.
  }
}
