/**
 * @module Trace settings, global and per model, as Triton keeps and reports them (string values;
 * `trace_level` a list). Emitting traces is not implemented: the settings are stored and
 * reported so tools that set them keep working. Shared by the HTTP and gRPC frontends.
 * Triton: docs/protocol/extension_trace.md, server/src/tracer.cc
 */
import { Errors, echo } from '@triode/core';

/** Trace settings as reported: every value a string except `trace_level`. */
export type TraceSettingValues = Record<string, string | string[]>;

/** A settings update: `null` resets a field (per model: to the global value). */
export type TraceSettingUpdate = Record<string, string | string[] | null>;

const DEFAULTS: TraceSettingValues = { trace_file: '', trace_level: ['OFF'], trace_rate: '1000', trace_count: '-1', log_frequency: '0' };
const LEVELS = ['OFF', 'TIMESTAMPS', 'TENSORS'];
/** Range of each integer setting (Triton keeps trace_count as int32, -1: no limit; the others as uint32). */
const RANGES: Record<string, [number, number]> = { trace_rate: [0, 2 ** 32 - 1], log_frequency: [0, 2 ** 32 - 1], trace_count: [-1, 2 ** 31 - 1] };

/**
 * Triton's refusal of a trace file chosen over the network (PR 7092): the location is a start-up
 * option only, so no client can make the server write where it chooses.
 */
export const traceFileUnsupported = () => Errors.unsupported('trace file location can not be updated through network protocol');

/** Checks an update; throws INVALID_ARG naming the first bad field. */
function check(update: Readonly<Record<string, unknown>>): asserts update is TraceSettingUpdate {
  for (const [k, v] of Object.entries(update)) {
    // Own keys only: 'constructor' or 'toString' are in every object, not settings.
    if (!Object.hasOwn(DEFAULTS, k)) throw Errors.invalidArg(`unknown trace setting '${echo(k)}'`);
    if (v === null) continue;
    if (k === 'trace_level') {
      if (!Array.isArray(v) || !v.every((x) => typeof x === 'string' && LEVELS.includes(x))) {
        throw Errors.invalidArg(`'trace_level' must be a list of ${LEVELS.join(', ')}`);
      }
    } else if (k === 'trace_file') {
      if (typeof v !== 'string') throw Errors.invalidArg(`'trace_file' must be a string`);
    } else if (typeof v !== 'string' || !/^-?\d+$/.test(v)) {
      throw Errors.invalidArg(`'${k}' must be an integer given as a string`);
    } else if (Number(v) < RANGES[k]![0] || Number(v) > RANGES[k]![1]) {
      throw Errors.invalidArg(`'${k}' must be in [${RANGES[k]!.join(', ')}], got ${echo(v, 32)}`);
    }
  }
}

/** The global trace settings and each model's own. */
export class TraceSettings {
  readonly #global: TraceSettingValues = { ...DEFAULTS };
  readonly #perModel = new Map<string, TraceSettingValues>();
  #active = false;

  /**
   * @param startup the start-up settings (`--trace-config`): the only place `trace_file` can be set.
   * @throws INVALID_ARG naming a bad field.
   */
  constructor(startup: Readonly<Record<string, unknown>> = {}) {
    check(startup);
    for (const [k, v] of Object.entries(startup)) this.#global[k] = v ?? DEFAULTS[k]!;
    this.#refresh();
  }

  /** True when some setting (global or a model's) has a trace level other than OFF: a cheap check per request. */
  get active(): boolean {
    return this.#active;
  }

  #refresh(): void {
    const on = (v: string | string[] | undefined) => (Array.isArray(v) ? v : [v ?? 'OFF']).some((l) => l !== 'OFF');
    this.#active = on(this.#global['trace_level']) || [...this.#perModel.values()].some((m) => on(m['trace_level']));
  }

  /** The settings in effect (for a model: the global ones with its own on top). */
  get(model?: string): TraceSettingValues {
    return model ? { ...this.#global, ...this.#perModel.get(model) } : { ...this.#global };
  }

  /**
   * Applies an update from a client (checked first, all or nothing) and returns the settings in
   * effect. `trace_file` is refused (UNSUPPORTED, as Triton), globally and per model.
   */
  update(update: Readonly<Record<string, unknown>>, model?: string): TraceSettingValues {
    if (Object.hasOwn(update, 'trace_file')) throw traceFileUnsupported();
    check(update);
    if (!model) {
      for (const [k, v] of Object.entries(update)) this.#global[k] = v ?? DEFAULTS[k]!;
      this.#refresh();
      return this.get();
    }
    const own = this.#perModel.get(model) ?? {};
    for (const [k, v] of Object.entries(update)) {
      if (v === null) delete own[k];
      else own[k] = v;
    }
    this.#perModel.set(model, own);
    this.#refresh();
    return this.get(model);
  }
}
