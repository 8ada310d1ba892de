/**
 * @module Trace settings, global and per model, as Triton keeps and reports them (string values;
 * `trace_level` a list); tracer.ts samples and writes traces under them. Shared by the HTTP
 * and gRPC frontends.
 * Triton: docs/protocol/extension_trace.md, server/src/tracer.cc
 */
import { Errors, echo, type Backplane } from '@triode/core';

/** Trace settings as reported: every value a string except `trace_level`. */
export type TraceSettingValues = Record<string, string | string[]>;

/** A settings update: `null` resets a field (globally: to its start-up value; per model: to the global value). */
export type TraceSettingUpdate = Record<string, string | string[] | null>;

const DEFAULTS: TraceSettingValues = { trace_file: '', trace_level: ['OFF'], trace_rate: '1000', trace_count: '-1', log_frequency: '0' };
const LEVELS = ['OFF', 'TIMESTAMPS', 'TENSORS'];

/**
 * Triton's refusal of a trace file chosen over the network (PR 7092): the location is a start-up
 * option only, so no client can make the server write where it chooses.
 */
export const traceFileUnsupported = () => Errors.unsupported('trace file location can not be updated through network protocol');

/**
 * Per-model trace settings are for a model that is ready, as Triton checks (ModelIsReady, then
 * INVALID_ARG with its words); a name a client made up gets no settings kept for it.
 */
export async function checkTraceModel(backplane: Backplane, model: string): Promise<void> {
  if (!(await backplane.modelReady(model))) throw Errors.invalidArg(`Request for unknown model : ${echo(model)}`);
}

/** Which frontend an update came from: Triton reads and words it differently on each. */
export type TraceSettingsProtocol = 'http' | 'grpc';

/** The settings Triton reads from an update, in the order it reads them (its first error is the one reported). */
const FIELDS = ['trace_level', 'trace_rate', 'trace_count', 'log_frequency'] as const;

/** The smallest trace_count (Triton's TraceManager::MIN_TRACE_COUNT_VALUE). */
const MIN_TRACE_COUNT = -1;

/**
 * An integer setting as Triton reads it with `std::stoi`: leading white space and a sign are
 * taken, no digits is "Unable to parse", a value outside int32 is out of range (whatever type
 * the setting has, so a trace_rate past 2^31-1 is refused though the words say 4294967295).
 * Where Triton would take a value that is not what was sent, Triode refuses it with the same
 * words: trailing characters ("12abc" is 12 there) and a negative trace_rate or log_frequency
 * (it wraps to a uint32 there).
 */
function parseInteger(k: string, s: string, protocol: TraceSettingsProtocol): string {
  const m = /^[ \t\n\v\f\r]*([+-]?\d+)$/.exec(s);
  if (!m) throw Errors.invalidArg(`Unable to parse '${k}', got: ${echo(s, 32)}`);
  const n = Number(m[1]);
  const min = k === 'trace_count' ? MIN_TRACE_COUNT : 0;
  const max = k === 'trace_count' ? 2 ** 31 - 1 : 2 ** 32 - 1;
  const range = () => Errors.invalidArg(`Unable to parse '${k}', value is out of range [ ${min}, ${max} ], got: ${echo(s, 32)}`);
  if (n < -(2 ** 31) || n > 2 ** 31 - 1) throw range();
  if (k === 'trace_count' && n < MIN_TRACE_COUNT) {
    // HTTP writes no space after "got:" (http_server.cc HandleTrace); gRPC does.
    throw Errors.invalidArg(`Unable to parse 'trace_count'. Expecting value >= ${MIN_TRACE_COUNT}, got:${protocol === 'http' ? '' : ' '}${echo(s, 32)}`);
  }
  if (n < min) throw range();
  return String(n);
}

/**
 * The settings of an update Triton reads, checked in its order (trace_level, trace_rate,
 * trace_count, log_frequency); throws INVALID_ARG with Triton's words for the protocol
 * (http_server.cc HandleTrace, grpc_server.cc RegisterTrace). HTTP values are JSON (null clears a
 * field, a wrong type gets TritonJson's words); gRPC values are lists of strings (an empty one
 * clears a field, more than one for a single-valued setting is refused). Keys Triton does not
 * read are left out, as it ignores them (own keys only: 'constructor' or '__proto__' are in every
 * object, not settings). Unlike Triton, a level name it does not know is refused, not ignored.
 */
function check(update: Readonly<Record<string, unknown>>, protocol: TraceSettingsProtocol): TraceSettingUpdate {
  const known: TraceSettingUpdate = {};
  for (const k of FIELDS) {
    if (!Object.hasOwn(update, k)) continue;
    let v = update[k];
    if (protocol === 'grpc') {
      const values = Array.isArray(v) ? (v as unknown[]) : [];
      if (values.length === 0) v = null;
      else if (k === 'trace_level') v = values;
      else if (values.length > 1) throw Errors.invalidArg(`expect only 1 value for '${k}'`);
      else v = values[0];
    }
    if (v === null) {
      known[k] = null;
    } else if (k === 'trace_level') {
      if (!Array.isArray(v)) throw Errors.invalidArg('attempt to access JSON non-array as array');
      for (const level of v as unknown[]) {
        if (typeof level !== 'string') throw Errors.invalidArg('attempt to access JSON non-string as string');
        if (level === 'OFF' && v.length > 1) throw Errors.invalidArg("Expect only one trace level 'OFF' is specified");
        if (!LEVELS.includes(level)) throw Errors.invalidArg(`'trace_level' must be a list of ${LEVELS.join(', ')}, got: ${echo(level, 32)}`);
      }
      known[k] = v as string[];
    } else {
      if (typeof v !== 'string') throw Errors.invalidArg('attempt to access JSON non-string as string');
      known[k] = parseInteger(k, v, protocol);
    }
  }
  return known;
}

/** The start-up settings (`--trace-config`), checked; `trace_file` is taken only here. */
function checkStartup(startup: Readonly<Record<string, unknown>>): TraceSettingUpdate {
  const known = check(startup, 'http');
  const file = startup['trace_file'];
  if (file !== undefined && file !== null) {
    if (typeof file !== 'string') throw Errors.invalidArg("'trace_file' must be a string");
    known['trace_file'] = file;
  }
  return known;
}

/**
 * A checked value as Triton keeps and reports it: levels once each in a fixed order, integers
 * as `std::to_string` writes them ("0001" is "1", "-0" is "0"); undefined for an empty level
 * list, which changes nothing.
 */
function normalized(k: string, v: string | string[]): string | string[] | undefined {
  if (k === 'trace_level') {
    const levels = v as string[];
    if (levels.length === 0) return undefined;
    return levels.includes('OFF') ? ['OFF'] : LEVELS.filter((l) => levels.includes(l));
  }
  return k === 'trace_file' ? v : String(Number(v));
}

/**
 * Refuses settings that trace but could not (Triton's TraceSetting validity: a rate of 0 samples
 * nothing, and without a file there is nowhere to write), with Triton's words. Settings that do
 * not trace are always allowed. Before, both were taken: rate 0 traced every request, and a level
 * set with no file traced none (review).
 */
function checkValid(s: TraceSettingValues): void {
  const levels = s['trace_level'] as string[];
  if (levels.length === 0 || levels.includes('OFF')) return;
  const reason = s['trace_rate'] === '0' ? 'sample rate must be non-zero' : s['trace_file'] === '' ? 'trace file name is not given' : undefined;
  if (reason) throw Errors.invalidArg(`Attempting to set invalid trace setting :${reason}`);
}

/**
 * Which settings a request of a model is sampled under: its own when it has any, else the
 * global ones; `generation` changes with every update of them (Triton makes a new setting
 * object on each update, and its sampling starts over; its trace_count goes on from what is left
 * when a client set it, see TraceSettings).
 */
export interface TraceScope {
  key: string;
  generation: string;
}

/** The global trace settings and each model's own. */
export class TraceSettings {
  /** The start-up settings: what clearing a global field (null) goes back to (Triton's global_default_). */
  readonly #startup: TraceSettingValues = { ...DEFAULTS };
  readonly #global: TraceSettingValues = { ...DEFAULTS };
  readonly #perModel = new Map<string, TraceSettingValues>();
  #active = false;
  #globalGeneration = 0;
  readonly #modelGeneration = new Map<string, number>();
  /**
   * Each scope's trace_count left ('' the global one, else a model with settings of its own):
   * Triton's count_, which each sampled trace takes one of and which GET reports ("the number
   * of remaining traces to be sampled", extension_trace.md). -1: no limit.
   */
  readonly #remaining = new Map<string, number>();
  /** Whether a client set the global trace_count (Triton's count_specified_; see #nextGlobalCount). */
  #globalCountSet = false;

  /**
   * @param startup the start-up settings (`--trace-config`): the only place `trace_file` can be set.
   * @throws INVALID_ARG naming a bad field.
   */
  constructor(startup: Readonly<Record<string, unknown>> = {}) {
    for (const [k, v] of Object.entries(checkStartup(startup))) this.#setGlobal(k, v);
    Object.assign(this.#startup, this.#global);
    this.#remaining.set('', Number(this.#global['trace_count']));
    this.#refresh();
  }

  /**
   * The global trace_count left after an update, as Triton's UpdateTraceSettingInternal makes
   * it: the value sent; the start-up value when cleared (null); else what is left when a client
   * set it before, or the start-up value when none did.
   */
  #nextGlobalCount(update: TraceSettingUpdate): { left: number; set: boolean } {
    const v = update['trace_count'];
    if (typeof v === 'string') return { left: Number(v), set: true };
    if (v === null || !this.#globalCountSet) return { left: Number(this.#startup['trace_count']), set: false };
    return { left: this.#remaining.get('')!, set: true };
  }

  /** The trace_count left in a scope (see scope()). */
  countLeft(key: string): number {
    return this.#remaining.get(key) ?? this.#remaining.get('')!;
  }

  /** Takes one trace of a scope's trace_count for a sampled request; false when none is left. */
  takeCount(key: string): boolean {
    const left = this.countLeft(key);
    if (left === 0) return false;
    if (left > 0) this.#remaining.set(this.#remaining.has(key) ? key : '', left - 1);
    return true;
  }

  /** Gives back a trace taken by takeCount, while the scope's settings are still those it was taken under. */
  giveBackCount(model: string, scope: TraceScope): void {
    const now = this.scope(model);
    if (now.key !== scope.key || now.generation !== scope.generation) return;
    const left = this.countLeft(scope.key);
    if (left >= 0) this.#remaining.set(this.#remaining.has(scope.key) ? scope.key : '', left + 1);
  }

  /** True when some setting (global or a model's) has a trace level other than OFF: a cheap check per request. */
  get active(): boolean {
    return this.#active;
  }

  /** Sets a global field from a checked value (null: its start-up value; an empty level list: no change). */
  #setGlobal(k: string, v: string | string[] | null): void {
    this.#global[k] = v === null ? this.#startup[k]! : normalized(k, v) ?? this.#global[k]!;
  }

  #refresh(): void {
    const on = (v: string | string[] | undefined) => (Array.isArray(v) ? v : [v ?? 'OFF']).some((l) => l !== 'OFF');
    this.#active = on(this.#global['trace_level']) || [...this.#perModel.values()].some((m) => on(m['trace_level']));
  }

  /** The scope a request of `model` is sampled under (see TraceScope). */
  scope(model: string): TraceScope {
    if (!this.#perModel.has(model)) return { key: '', generation: String(this.#globalGeneration) };
    return { key: model, generation: `${this.#globalGeneration}.${this.#modelGeneration.get(model) ?? 0}` };
  }

  /** The settings in effect (for a model: the global ones with its own on top), with `trace_mode`, as Triton reports them (its field order too). */
  get(model?: string): TraceSettingValues {
    const v: TraceSettingValues = { ...this.#global, ...(model ? this.#perModel.get(model) : {}) };
    // In the order HandleTrace writes them.
    return {
      trace_level: v['trace_level']!, trace_rate: v['trace_rate']!, trace_count: String(this.countLeft(this.scope(model ?? '').key)),
      log_frequency: v['log_frequency']!, trace_file: v['trace_file']!, trace_mode: 'triton',
    };
  }

  /**
   * Applies an update from a client (checked first, all or nothing) and returns the settings in
   * effect. `trace_file` is refused (UNSUPPORTED, as Triton), globally and per model. A model
   * left with no setting of its own follows the global settings again, sampled with them (Triton
   * drops its setting). `protocol` chooses Triton's reading and words (see check).
   */
  update(request: Readonly<Record<string, unknown>>, model?: string, protocol: TraceSettingsProtocol = 'http'): TraceSettingValues {
    if (Object.hasOwn(request, 'trace_file')) throw traceFileUnsupported();
    const update = check(request, protocol);
    if (!model) {
      const before = { ...this.#global };
      for (const [k, v] of Object.entries(update)) this.#setGlobal(k, v);
      try {
        checkValid(this.#global);
      } catch (err) {
        Object.assign(this.#global, before);
        throw err;
      }
      const count = this.#nextGlobalCount(update);
      this.#globalCountSet = count.set;
      this.#remaining.set('', count.left);
      // Models with settings of their own are made again with it (Triton's fallback_used_models_):
      // one with no trace_count of its own starts from what the global scope has left.
      for (const [m, own] of this.#perModel) if (!Object.hasOwn(own, 'trace_count')) this.#remaining.set(m, count.left);
      this.#globalGeneration++;
      this.#refresh();
      return this.get();
    }
    const own = { ...this.#perModel.get(model) };
    for (const [k, v] of Object.entries(update)) {
      const value = v === null ? undefined : normalized(k, v);
      if (v === null) delete own[k];
      else if (value !== undefined) own[k] = value;
    }
    checkValid({ ...this.#global, ...own });
    if (Object.keys(own).length === 0) {
      this.#perModel.delete(model);
      this.#remaining.delete(model);
      this.#refresh();
      return this.get(model);
    }
    // Its trace_count: the value sent; else what it has left when it has its own; else what the
    // global scope has left (Triton's fallback setting's count_).
    const count = update['trace_count'];
    if (typeof count === 'string') this.#remaining.set(model, Number(own['trace_count']));
    else if (count === null || !Object.hasOwn(own, 'trace_count') || !this.#remaining.has(model)) this.#remaining.set(model, this.#remaining.get('')!);
    this.#perModel.set(model, own);
    this.#modelGeneration.set(model, (this.#modelGeneration.get(model) ?? 0) + 1);
    this.#refresh();
    return this.get(model);
  }
}
