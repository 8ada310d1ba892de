/**
 * @module Trace emission (trace_level TIMESTAMPS): which requests are traced (trace_rate: one in
 * N, trace_count: how many more, per model settings over the global ones), and writing the
 * records to trace_file as Triton does: a JSON array per file, `<file>.<k>` every log_frequency
 * traces, or one `<file>` with everything when log_frequency is 0 (written at flush / exit).
 * In the file a trace is Triton's entries (TraceManager::TraceActivity, CaptureTimestamp): one
 * `{"id","timestamps":[{"name","ns"}]}` per timestamp, in the order taken, and the trace's
 * `{"id","model_name","model_version"[,"request_id"]}` just before its REQUEST_START.
 * Files are written in the background, one after another in the order they were cut, a piece at
 * a time (see Tracer), so no request waits on the disk or on a whole file's JSON.
 * Triton: server/src/tracer.cc, docs/user_guide/trace.md (JSON Trace Output)
 */
import { open } from 'node:fs/promises';
import { RateLimitedWarning, TriodeError, monotonicNs, type Logger, type RequestTrace } from '@triode/core';
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

/** A file to write: its path and its records, in the order they came. */
interface Batch {
  path: string;
  records: TraceRecord[];
  /** How many of `records` it counts in `FileState.queued`: none for `<file>`, whose records are still held. */
  counted: number;
  /** Their bytes it counts in `FileState.queuedBytes` (traceRecordBytes). */
  countedBytes: number;
}

interface FileState {
  pending: TraceRecord[];
  /** All records so far (log_frequency 0: the file is rewritten whole). */
  all: TraceRecord[];
  /** What `pending` and `all` hold, in bytes (traceRecordBytes). */
  pendingBytes: number;
  allBytes: number;
  next: number;
  /** Files cut and waiting for the writer, in the order they were cut. */
  queue: Batch[];
  /** Records in `queue` that are no longer held (`<file>`'s are counted once, in `all`), and their bytes. */
  queued: number;
  queuedBytes: number;
  /** The writer of this trace file, while it runs: one at a time, so its files go out in order. */
  writing: Promise<void> | undefined;
}

/** An open trace file (see TraceFileSystem). */
export interface TraceFileHandle {
  /** Appends `text`, all of it. */
  write(text: string): Promise<void>;
  close(): Promise<void>;
}

/**
 * Where trace files go: node:fs, unless a test gives its own (to hold a write, or fail it as a
 * full disk would).
 */
export interface TraceFileSystem {
  /** Opens `path` for writing, emptied (created when it is not there). */
  open(path: string): Promise<TraceFileHandle>;
}

const nodeFileSystem: TraceFileSystem = {
  open: async (path) => {
    const h = await open(path, 'w');
    // writeFile on a handle writes at its position and loops until everything is written.
    return { write: (text) => h.writeFile(text), close: () => h.close() };
  },
};

/** Options of a Tracer. */
export interface TracerOptions {
  /** Where it warns of traces it could not write or had to drop. */
  logger?: Logger;
  /** @default node:fs */
  fileSystem?: TraceFileSystem;
}

/**
 * How much of a trace file's JSON is made before it is handed to the disk: the event loop turns
 * between pieces. A file of MAX_HELD_TRACES records with 4 KB ids is ~50 MB; made and written at
 * once (writeFileSync) it held the event loop 0.25 to 0.65 s each time, longer on a slow disk; in
 * pieces of this size the longest hold measured was 5 ms (1 MiB pieces: 11 ms).
 */
export const TRACE_WRITE_CHUNK_CHARS = 1 << 18;

/**
 * The most trace records held for one file before they are written. With log_frequency 0 (Triton
 * writes the file at exit) or a log_frequency a client set very high, they were all held: 1,512
 * traced requests with 1 MB ids ran the heap out (review). Past it, the held records go to the
 * next `<file>.<n>` as with log_frequency. It also bounds what waits while a file is being
 * written: besides the file under way, at most this many records wait (held and cut for the
 * next files); past it, while the disk does not keep up, new traces are dropped, counted, and
 * warned of (at most every 10 s).
 */
export const MAX_HELD_TRACES = 10_000;

/**
 * The same bound in bytes (traceRecordBytes), for records with long request ids: MAX_HELD_TRACES
 * of them with ids of MAX_TRACE_ID_CHARS held 90 MB of heap (48 MB when the ids were ASCII), and
 * as much again in the file being written. Records of a short id and the usual timestamps (under
 * 1 KB) reach MAX_HELD_TRACES first.
 */
export const MAX_HELD_TRACE_BYTES = 32 * 1024 * 1024;

/**
 * About what a trace record holds in memory, in bytes: its strings at two bytes a character, each
 * timestamp's object, and the record's own objects.
 */
export function traceRecordBytes(r: TraceRecord): number {
  return 256 + 2 * (r.request_id.length + r.model_name.length) + 64 * r.timestamps.length;
}

/**
 * How long a stopping server waits at least for its trace files to be written (past the exit
 * deadline if that is nearer): a hung disk must not hold the exit for good.
 */
export const TRACE_FLUSH_AT_EXIT_MS = 10_000;

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

/**
 * Decides what to trace and writes the records: each trace file has one writer, which writes
 * its files (`<file>.<k>`, `<file>`) one after another in the order they were cut; records that
 * come while it writes wait for the next. A write that fails (a full disk, a removed directory,
 * no permission) loses that file's traces, is warned of (at most every 10 s), and the writer
 * goes on with the next.
 */
export class Tracer {
  readonly #settings: TraceSettings;
  readonly #files = new Map<string, FileState>();
  readonly #fs: TraceFileSystem;
  readonly #dropWarning: RateLimitedWarning;
  readonly #writeWarning: RateLimitedWarning;
  #dropped = 0;
  #lost = 0;
  #nextId = 1;
  /**
   * Sampling per scope, as Triton keeps it per setting object: a model with its own settings
   * samples and counts apart from the global ones. Keys are models with settings of their own
   * (set only for models that were ready) and '' (global).
   */
  readonly #sampling = new Map<string, Sampling>();

  constructor(settings: TraceSettings, options: TracerOptions = {}) {
    this.#settings = settings;
    this.#fs = options.fileSystem ?? nodeFileSystem;
    this.#dropWarning = new RateLimitedWarning(options.logger);
    this.#writeWarning = new RateLimitedWarning(options.logger);
  }

  /** Traces dropped because MAX_HELD_TRACES were waiting while a file was being written. */
  get dropped(): number {
    return this.#dropped;
  }

  /** Traces lost because their file could not be written. */
  get lost(): number {
    return this.#lost;
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

  /**
   * Records a finished trace; a file is cut for the writer when log_frequency traces are waiting
   * (or MAX_HELD_TRACES, or the setting's trace_count is used up). Writes nothing itself.
   */
  finish(t: ActiveTrace, modelVersion: string, requestId: string): void {
    let f = this.#files.get(t.file);
    if (!f) this.#files.set(t.file, (f = { pending: [], all: [], pendingBytes: 0, allBytes: 0, next: 0, queue: [], queued: 0, queuedBytes: 0, writing: undefined }));
    const waiting = f.pending.length + f.all.length + f.queued >= MAX_HELD_TRACES;
    if (waiting || f.pendingBytes + f.allBytes + f.queuedBytes >= MAX_HELD_TRACE_BYTES) {
      // Only while a file is being written (what is held is cut below the bounds, and the
      // writer takes the first file cut at once): the disk does not keep up, and holding more
      // would grow without bound.
      this.#dropped++;
      const what = waiting ? `${MAX_HELD_TRACES} traces are` : `${MAX_HELD_TRACE_BYTES / (1024 * 1024)} MiB of traces is`;
      this.#dropWarning.warn(`trace file ${t.file}: ${what} waiting while a file is written, so traces are dropped (${this.#dropped} so far)`);
    } else {
      const id = requestId.length > MAX_TRACE_ID_CHARS ? `${detached(requestId.slice(0, MAX_TRACE_ID_CHARS))}...` : requestId;
      const record: TraceRecord = { id: t.id, model_name: t.model, model_version: Number(modelVersion) || -1, request_id: id, timestamps: t.trace.timestamps.map((x) => ({ name: x.name, ns: Math.round(x.ns) })) };
      if (t.logFrequency > 0) {
        f.pending.push(record);
        f.pendingBytes += traceRecordBytes(record);
      } else {
        f.all.push(record);
        f.allBytes += traceRecordBytes(record);
      }
    }
    // Triton's WriteTrace: once trace_count is used up and every request the setting saw was traced
    // and has finished, what is held goes to <file>.<k> whatever log_frequency says.
    const now = this.#settings.scope(t.model);
    const done = ++t.sampling.collected === t.sampling.seen && now.key === t.scope.key && now.generation === t.scope.generation && this.#settings.countLeft(t.scope.key) === 0;
    // Held for both kinds of file (log_frequency changed by an update), MAX_HELD_TRACES (or
    // MAX_HELD_TRACE_BYTES) in all cut both: what is held never reaches the bound that drops
    // traces (only what waits for the writer can), so a file held and never cut cannot leave
    // every later trace dropped.
    const full = f.pending.length + f.all.length >= MAX_HELD_TRACES || f.pendingBytes + f.allBytes >= MAX_HELD_TRACE_BYTES;
    if (f.pending.length && (done || full || f.pending.length >= t.logFrequency)) this.#cutPending(f, t.file);
    if (f.all.length && (done || full)) {
      this.#enqueue(f, `${t.file}.${f.next++}`, f.all.splice(0), f.allBytes);
      f.allBytes = 0;
    }
  }

  /** Hands the records held for `<file>.<k>` to the writer. */
  #cutPending(f: FileState, file: string): void {
    this.#enqueue(f, `${file}.${f.next++}`, f.pending.splice(0), f.pendingBytes);
    f.pendingBytes = 0;
  }

  /**
   * Writes what is waiting (at exit, or when asked); resolves once every file cut so far is
   * written (or has failed), so a process that exits after it loses no trace it held: true then.
   * With `timeoutMs`, resolves false once that has passed with a write still under way (a hung
   * disk, an NFS mount gone: exit must not wait on it for good).
   */
  async flush(timeoutMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    for (const [file, f] of this.#files) {
      if (f.pending.length) this.#cutPending(f, file);
      // <file> is rewritten whole each time: what it is written with is what is held now, and
      // stays held, so it is counted there, not again while it waits for the writer.
      if (f.all.length) this.#enqueue(f, file, f.all.slice(), 0, false);
    }
    if (!Number.isFinite(timeoutMs)) {
      await this.idle();
      return true;
    }
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), Math.max(0, timeoutMs)); });
    try {
      return await Promise.race([this.idle().then(() => true as const), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Resolves once no trace file is being written (those cut while it waits too). */
  async idle(): Promise<void> {
    for (;;) {
      const writing = [...this.#files.values()].flatMap((f) => (f.writing ? [f.writing] : []));
      if (writing.length === 0) return;
      await Promise.all(writing);
    }
  }

  /**
   * Hands a file to the trace file's writer, starting it when it is not running; `cut`: its records
   * (of `bytes`) are no longer held, and count as waiting until the writer takes them.
   */
  #enqueue(f: FileState, path: string, records: TraceRecord[], bytes: number, cut = true): void {
    const counted = cut ? records.length : 0;
    const countedBytes = cut ? bytes : 0;
    f.queue.push({ path, records, counted, countedBytes });
    f.queued += counted;
    f.queuedBytes += countedBytes;
    if (!f.writing) f.writing = this.#drain(f);
  }

  /**
   * The writer: the files waiting, one after another in order. It takes the first at once (so
   * what it writes no longer counts as waiting) and stops, clearing `writing`, in the same turn
   * as it finds the queue empty, so no file cut is left waiting. The queue is not empty when it
   * starts, so it awaits before it can clear `writing`, after #enqueue has set it.
   */
  async #drain(f: FileState): Promise<void> {
    for (let batch = f.queue.shift(); batch; batch = f.queue.shift()) {
      f.queued -= batch.counted;
      f.queuedBytes -= batch.countedBytes;
      await this.#write(batch);
    }
    f.writing = undefined;
  }

  /** Writes one file as a JSON array of Triton's entries, a piece at a time; never throws. */
  async #write({ path, records }: Batch): Promise<void> {
    let handle: TraceFileHandle | undefined;
    try {
      handle = await this.#fs.open(path);
      let text = '[';
      for (let i = 0; i < records.length; i++) {
        if (i > 0) text += ',';
        text += traceFileEntries(records[i]!).map((e) => JSON.stringify(e)).join(',');
        if (text.length >= TRACE_WRITE_CHUNK_CHARS) {
          await handle.write(text);
          text = '';
        }
      }
      await handle.write(`${text}]`);
      const closing = handle;
      handle = undefined;
      await closing.close();
    } catch (err) {
      // A trace file that cannot be written must not fail requests, nor stop the next files.
      this.#lost += records.length;
      const reason = err instanceof Error ? err.message : String(err);
      this.#writeWarning.warn(`trace file ${path} could not be written, ${records.length} traces lost (${this.#lost} so far): ${reason}`);
    } finally {
      await handle?.close().catch(() => undefined);
    }
  }
}
