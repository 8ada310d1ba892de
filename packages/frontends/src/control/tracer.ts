/**
 * @module Trace emission (trace_level TIMESTAMPS): which requests are traced (trace_rate: one in
 * N, trace_count: how many more, per model settings over the global ones), and writing the
 * records to trace_file as Triton does: a JSON array per file, `<file>.<k>` every log_frequency
 * traces, or one `<file>` with everything when log_frequency is 0 (written at flush / exit).
 * Triton: server/src/tracer.cc, docs/user_guide/trace.md
 */
import { writeFileSync } from 'node:fs';
import type { RequestTrace } from '@triode/core';
import type { TraceSettings } from './trace-settings.js';

/** One trace record, in Triton's JSON shape. */
export interface TraceRecord {
  id: number;
  model_name: string;
  model_version: number;
  request_id: string;
  timestamps: { name: string; ns: number }[];
}

/** A request being traced: the frontend and the core add timestamps to `trace`. */
export interface ActiveTrace {
  readonly id: number;
  readonly model: string;
  readonly file: string;
  readonly logFrequency: number;
  readonly trace: RequestTrace;
}

/** The clock traces use: the core's (`performance.now()` in ns). */
export const traceNow = (): number => performance.now() * 1e6;

interface FileState {
  pending: TraceRecord[];
  /** All records so far (log_frequency 0: the file is rewritten whole). */
  all: TraceRecord[];
  next: number;
}

/** Decides what to trace and writes the records. */
export class Tracer {
  readonly #settings: TraceSettings;
  readonly #files = new Map<string, FileState>();
  #seen = 0;
  #nextId = 1;
  #used = 0;
  #countSetting = Number.NaN;

  constructor(settings: TraceSettings) {
    this.#settings = settings;
  }

  /** A trace for this request of `model`, or undefined when it is not sampled. */
  start(model: string): ActiveTrace | undefined {
    if (!this.#settings.active) return undefined;
    const s = this.#settings.get(model);
    const levels = Array.isArray(s['trace_level']) ? s['trace_level'] : [String(s['trace_level'])];
    if (!levels.includes('TIMESTAMPS') && !levels.includes('TENSORS')) return undefined;
    const file = String(s['trace_file'] ?? '');
    if (!file) return undefined;
    const rate = Math.max(1, Number(s['trace_rate'] ?? 1000));
    const count = Number(s['trace_count'] ?? -1);
    // trace_count counts from when it was set: a new value starts a new allowance.
    if (count !== this.#countSetting) {
      this.#countSetting = count;
      this.#used = 0;
    }
    if (this.#seen++ % rate !== 0) return undefined;
    if (count >= 0 && this.#used >= count) return undefined;
    this.#used++;
    return { id: this.#nextId++, model, file, logFrequency: Math.max(0, Number(s['log_frequency'] ?? 0)), trace: { timestamps: [] } };
  }

  /** Records a finished trace; writes a file when log_frequency traces are waiting. */
  finish(t: ActiveTrace, modelVersion: string, requestId: string): void {
    const record: TraceRecord = { id: t.id, model_name: t.model, model_version: Number(modelVersion) || -1, request_id: requestId, timestamps: t.trace.timestamps.map((x) => ({ name: x.name, ns: Math.round(x.ns) })) };
    let f = this.#files.get(t.file);
    if (!f) this.#files.set(t.file, (f = { pending: [], all: [], next: 0 }));
    if (t.logFrequency > 0) {
      f.pending.push(record);
      if (f.pending.length >= t.logFrequency) this.#write(`${t.file}.${f.next++}`, f.pending.splice(0));
    } else {
      f.all.push(record);
    }
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
      writeFileSync(path, JSON.stringify(records, null, 1));
    } catch {
      // A trace file that cannot be written must not fail requests.
    }
  }
}
