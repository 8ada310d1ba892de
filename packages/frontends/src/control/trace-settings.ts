/**
 * @module Trace settings, global and per model, as Triton keeps and reports them (string values;
 * `trace_level` a list). Emitting traces is not implemented: the settings are stored and
 * reported so tools that set them keep working. Shared by the HTTP and gRPC frontends.
 * Triton: docs/protocol/extension_trace.md, server/src/tracer.cc
 */
import { Errors, echo, type Backplane } from '@triode/core';

/** Trace settings as reported: every value a string except `trace_level`. */
export type TraceSettingValues = Record<string, string | string[]>;

/** A settings update: `null` resets a field (per model: to the global value). */
export type TraceSettingUpdate = Record<string, string | string[] | null>;

const DEFAULTS: TraceSettingValues = { trace_file: '', trace_level: ['OFF'], trace_rate: '1000', trace_count: '-1', log_frequency: '0' };
const LEVELS = ['OFF', 'TIMESTAMPS', 'TENSORS'];
/** The type range of each integer setting: Triton keeps trace_count as int32 (at least -1, no limit), the others as uint32. */
const RANGES: Record<string, [number, number]> = { trace_rate: [0, 2 ** 32 - 1], log_frequency: [0, 2 ** 32 - 1], trace_count: [-(2 ** 31), 2 ** 31 - 1] };

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

/**
 * The settings of an update Triton reads, checked; throws INVALID_ARG naming the first bad field,
 * with Triton's words (tracer.cc / grpc_server.cc: "Unable to parse ..."). Keys it does not read
 * are left out, as Triton ignores them (own keys only: 'constructor' or '__proto__' are in every
 * object, not settings).
 */
function check(update: Readonly<Record<string, unknown>>): TraceSettingUpdate {
  const known: TraceSettingUpdate = {};
  for (const [k, v] of Object.entries(update)) {
    if (!Object.hasOwn(DEFAULTS, k)) continue;
    if (v !== null) {
      if (k === 'trace_level') {
        if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && LEVELS.includes(x))) {
          throw Errors.invalidArg(`'trace_level' must be a list of ${LEVELS.join(', ')}`);
        }
        if (v.includes('OFF') && v.length > 1) throw Errors.invalidArg("Expect only one trace level 'OFF' is specified");
      } else if (k === 'trace_file') {
        if (typeof v !== 'string') throw Errors.invalidArg(`'trace_file' must be a string`);
      } else if (typeof v !== 'string' || !/^-?\d+$/.test(v)) {
        throw Errors.invalidArg(`Unable to parse '${k}', got: ${echo(String(v), 32)}`);
      } else if (k === 'trace_count' && Number(v) < -1) {
        throw Errors.invalidArg(`Unable to parse 'trace_count'. Expecting value >= -1, got: ${echo(v, 32)}`);
      } else if (Number(v) < RANGES[k]![0] || Number(v) > RANGES[k]![1]) {
        throw Errors.invalidArg(`Unable to parse '${k}', value is out of range [ ${RANGES[k]!.join(', ')} ], got: ${echo(v, 32)}`);
      }
    }
    known[k] = v as string | string[] | null;
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
 * object on each update, and its sampling and trace_count start over).
 */
export interface TraceScope {
  key: string;
  generation: string;
}

/** The global trace settings and each model's own. */
export class TraceSettings {
  readonly #global: TraceSettingValues = { ...DEFAULTS };
  readonly #perModel = new Map<string, TraceSettingValues>();
  #active = false;
  #globalGeneration = 0;
  readonly #modelGeneration = new Map<string, number>();

  /**
   * @param startup the start-up settings (`--trace-config`): the only place `trace_file` can be set.
   * @throws INVALID_ARG naming a bad field.
   */
  constructor(startup: Readonly<Record<string, unknown>> = {}) {
    for (const [k, v] of Object.entries(check(startup))) this.#setGlobal(k, v);
    this.#refresh();
  }

  /** True when some setting (global or a model's) has a trace level other than OFF: a cheap check per request. */
  get active(): boolean {
    return this.#active;
  }

  /** Sets a global field from a checked value (null: its default; an empty level list: no change). */
  #setGlobal(k: string, v: string | string[] | null): void {
    this.#global[k] = v === null ? DEFAULTS[k]! : normalized(k, v) ?? this.#global[k]!;
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

  /** The settings in effect (for a model: the global ones with its own on top), with `trace_mode` as Triton reports it. */
  get(model?: string): TraceSettingValues {
    return { ...this.#global, ...(model ? this.#perModel.get(model) : {}), trace_mode: 'triton' };
  }

  /**
   * Applies an update from a client (checked first, all or nothing) and returns the settings in
   * effect. `trace_file` is refused (UNSUPPORTED, as Triton), globally and per model.
   */
  update(request: Readonly<Record<string, unknown>>, model?: string): TraceSettingValues {
    if (Object.hasOwn(request, 'trace_file')) throw traceFileUnsupported();
    const update = check(request);
    if (!model) {
      const before = { ...this.#global };
      for (const [k, v] of Object.entries(update)) this.#setGlobal(k, v);
      try {
        checkValid(this.#global);
      } catch (err) {
        Object.assign(this.#global, before);
        throw err;
      }
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
    this.#perModel.set(model, own);
    this.#modelGeneration.set(model, (this.#modelGeneration.get(model) ?? 0) + 1);
    this.#refresh();
    return this.get(model);
  }
}
