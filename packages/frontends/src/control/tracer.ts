/**
 * @module Trace emission (trace_level TIMESTAMPS): which requests are traced (trace_rate: one in
 * N, trace_count: how many more, per model settings over the global ones), and writing the
 * records to trace_file as Triton does: a JSON array per file, `<file>.<k>` every log_frequency
 * traces, or one `<file>` with everything when log_frequency is 0 (written at flush / exit).
 * In the file a trace is Triton's entries (TraceManager::TraceActivity, CaptureTimestamp): one
 * `{"id","timestamps":[{"name","ns"}]}` per timestamp, in the order taken, and the trace's
 * `{"id","model_name","model_version"[,"request_id"]}` just before its REQUEST_START.
 * Triton: server/src/tracer.cc, docs/user_guide/trace.md (JSON Trace Output)
 */
import { writeFileSync } from 'node:fs';
import { TriodeError, monotonicNs, type RequestTrace } from '@triode/core';
import type { TraceScope, TraceSettings } from './trace-settings.js';

/** One trace as it is held: Triton's fields, all its timestamps together (see traceFileEntries). */
export interface TraceRecord {
  id: number;
  model_name: string;
  model_version: number;
  request_id: string;
  timestamps: { name: string; ns: number }[];
}

/** Sampling state of one settings scope (a model's own settings, or the global ones): Triton's sample_ and collected_. */
interface Sampling {
  generation: string;
  /** Requests that came while some trace_count was left. */
  seen: number;
  /** Traces finished. */
  collected: number;
}

/** A request being traced: the frontend and the core add timestamps to `trace`. */
export interface ActiveTrace {
  readonly id: number;
  readonly model: string;
  readonly file: string;
  readonly logFrequency: number;
  readonly trace: RequestTrace;
  /** The scope whose trace_count this trace took (when `counted`). */
  readonly scope: TraceScope;
  readonly counted: boolean;
  readonly sampling: Sampling;
}

/** An entry of a trace file, as Triton writes it: a trace's model, or one of its timestamps. */
export type TraceFileEntry =
  | { id: number; model_name: string; model_version: number; request_id?: string }
  | { id: number; timestamps: [{ name: string; ns: number }] };

/**
 * A trace as Triton writes it: one entry per timestamp, in the order taken, and the model entry
 * just before REQUEST_START (first, if the trace has none); `request_id` only when the request
 * had one (Triton writes it only when it is not empty). Before, one entry held all of it, which
 * Triton's trace_summary.py reads, but a script that counts entries or reads only the first
 * entry of an id did not.
 */
export function traceFileEntries(r: TraceRecord): TraceFileEntry[] {
  const model: TraceFileEntry = { id: r.id, model_name: r.model_name, model_version: r.model_version, ...(r.request_id ? { request_id: r.request_id } : {}) };
  const entries: TraceFileEntry[] = r.timestamps.map((t) => ({ id: r.id, timestamps: [{ name: t.name, ns: t.ns }] }));
  const at = r.timestamps.findIndex((t) => t.name === 'REQUEST_START');
  entries.splice(Math.max(at, 0), 0, model);
  return entries;
}

/**
 * The clock traces use: the core's (CLOCK_MONOTONIC in ns, as Triton's steady_clock), so the
 * timestamps a cluster worker's core takes compare with its gateway's on one host.
 */
export const traceNow = monotonicNs;

interface FileState {
  pending: TraceRecord[];
  /** All records so far (log_frequency 0: the file is rewritten whole). */
  all: TraceRecord[];
  next: number;
}

/**
 * The most trace records held for one file before they are written. With log_frequency 0 (Triton
 * writes the file at exit) or a log_frequency a client set very high, they were all held: 1,512
 * traced requests with 1 MB ids ran the heap out (review). Past it, the held records go to the
 * next `<file>.<n>` as with log_frequency.
 */
export const MAX_HELD_TRACES = 10_000;

/** The longest request id a trace record keeps (its first characters, then `...`). */
export const MAX_TRACE_ID_CHARS = 4096;

/**
 * A copy of `s` that refers to no other string. V8 makes a slice of a long string a view that
 * keeps the whole string alive: a cut request id held the id it was cut from (300 traced
 * requests with 1 MB ids held 327 MB in a server with log_frequency 0, and MAX_HELD_TRACES of
 * them would hold 10 GB). UTF-16 both ways keeps every code unit, lone surrogates too.
 */
function detached(s: string): string {
  return Buffer.from(s, 'utf16le').toString('utf16le');
}

/** Decides what to trace and writes the records. */
export class Tracer {
  readonly #settings: TraceSettings;
  readonly #files = new Map<string, FileState>();
  #nextId = 1;
  /**
   * Sampling per scope, as Triton keeps it per setting object: a model with its own settings
   * samples and counts apart from the global ones. Keys are models with settings of their own
   * (set only for models that were ready) and '' (global).
   */
  readonly #sampling = new Map<string, Sampling>();

  constructor(settings: TraceSettings) {
    this.#settings = settings;
  }

  /** True when some trace level is on: a request may be traced. */
  get active(): boolean {
    return this.#settings.active;
  }

  /** A trace for this request of `model`, or undefined when it is not sampled. */
  start(model: string): ActiveTrace | undefined {
    if (!this.#settings.active) return undefined;
    const s = this.#settings.get(model);
    const levels = Array.isArray(s['trace_level']) ? s['trace_level'] : [String(s['trace_level'])];
    if (!levels.includes('TIMESTAMPS') && !levels.includes('TENSORS')) return undefined;
    const file = String(s['trace_file'] ?? '');
    if (!file) return undefined;
    // A rate of 0 samples nothing (Triton: an invalid setting; an update to one is refused).
    const rate = Number(s['trace_rate'] ?? 1000);
    if (rate === 0) return undefined;
    // A new setting (any update of the scope) starts sampling over.
    const scope = this.#settings.scope(model);
    let sampling = this.#sampling.get(scope.key);
    if (!sampling || sampling.generation !== scope.generation) this.#sampling.set(scope.key, (sampling = { generation: scope.generation, seen: 0, collected: 0 }));
    // No trace_count left: not sampled, not counted (Triton: the setting is no longer Valid()).
    const left = this.#settings.countLeft(scope.key);
    if (left === 0) return undefined;
    // The rate-th request of the scope, then every rate-th (Triton: ++sample_ % rate_ == 0).
    if (++sampling.seen % rate !== 0) return undefined;
    this.#settings.takeCount(scope.key);
    return { id: this.#nextId++, model, file, logFrequency: Math.max(0, Number(s['log_frequency'] ?? 0)), trace: { timestamps: [] }, scope, counted: left > 0, sampling };
  }

  /**
   * Called with why a traced request failed. When it never reached a model (NOT_FOUND: an unknown
   * name) the trace_count it took is given back and the request no longer counts as seen, so a
   * client sending made-up names does not use up what real requests are traced with. Any other
   * failure is recorded with the timestamps it got (Triton releases a failed request's trace and
   * writes it), so it counts as collected and the write when the count is used up still happens.
   */
  failed(t: ActiveTrace, err: unknown, requestId = '', modelVersion = ''): void {
    if (err instanceof TriodeError && err.code === 'NOT_FOUND' && t.counted) {
      const now = this.#settings.scope(t.model);
      if (now.key === t.scope.key && now.generation === t.scope.generation) {
        this.#settings.giveBackCount(t.model, t.scope);
        t.sampling.seen--;
        return;
      }
    }
    this.finish(t, modelVersion, requestId);
  }

  /** Records a finished trace; writes a file when log_frequency traces are waiting. */
  finish(t: ActiveTrace, modelVersion: string, requestId: string): void {
    const id = requestId.length > MAX_TRACE_ID_CHARS ? `${detached(requestId.slice(0, MAX_TRACE_ID_CHARS))}...` : requestId;
    const record: TraceRecord = { id: t.id, model_name: t.model, model_version: Number(modelVersion) || -1, request_id: id, timestamps: t.trace.timestamps.map((x) => ({ name: x.name, ns: Math.round(x.ns) })) };
    let f = this.#files.get(t.file);
    if (!f) this.#files.set(t.file, (f = { pending: [], all: [], next: 0 }));
    if (t.logFrequency > 0) f.pending.push(record);
    else f.all.push(record);
    // Triton's WriteTrace: once trace_count is used up and every request the setting saw was traced
    // and has finished, what is held goes to <file>.<k> whatever log_frequency says.
    const now = this.#settings.scope(t.model);
    const done = ++t.sampling.collected === t.sampling.seen && now.key === t.scope.key && now.generation === t.scope.generation && this.#settings.countLeft(t.scope.key) === 0;
    if (f.pending.length && (done || f.pending.length >= Math.min(t.logFrequency, MAX_HELD_TRACES))) this.#write(`${t.file}.${f.next++}`, f.pending.splice(0));
    if (f.all.length && (done || f.all.length >= MAX_HELD_TRACES)) this.#write(`${t.file}.${f.next++}`, f.all.splice(0));
  }

  /** Writes what is waiting (at exit, or when asked). */
  flush(): void {
    for (const [file, f] of this.#files) {
      if (f.pending.length) this.#write(`${file}.${f.next++}`, f.pending.splice(0));
      if (f.all.length) this.#write(file, f.all);
    }
  }

  #write(path: string, records: TraceRecord[]): void {
    try {
      writeFileSync(path, JSON.stringify(records.flatMap(traceFileEntries)));
    } catch {
      // A trace file that cannot be written must not fail requests.
    }
  }
}
