/**
 * @module `triode perf`: a perf_analyzer-like load generator. For each concurrency (closed loop:
 * N requests always outstanding) or request rate (open loop: requests sent on a fixed schedule),
 * it warms up, then measures in windows until three in a row agree within the stability
 * percentage (throughput and p95 latency), and reports throughput, latency percentiles, the
 * server-side breakdown from the statistics API, and the client's own CPU use.
 * Triton: perf_analyzer docs (measurements_metrics.md, cli.md)
 */
import { systemClock, type Clock, type ModelStatistics } from '@triode/core';
import type { InferenceClient, InferInput, PreparedInfer, RequestedOutput } from '../types.js';
import { perfInputs, type InputDataSource } from './perf-inputs.js';
import { DEFAULT_OUTPUT_SHARED_MEMORY_SIZE, PerfSharedMemory } from './perf-shared-memory.js';

/** What `triode perf` is asked to do. */
export interface PerfOptions {
  model: string;
  version?: string;
  /** Concurrency levels to measure (closed loop); ignored when `requestRates` is given. */
  concurrency: number[];
  /** Request rates (requests/s) to measure (open loop). */
  requestRates?: number[];
  /** Batch size of each request (first dim) for batching models. @default 1 */
  batchSize?: number;
  inputData?: InputDataSource;
  /** Shapes of variable inputs, without the batch dim. */
  shapes?: Record<string, number[]>;
  /** Length of one measurement window. @default 5000 */
  measurementIntervalMs?: number;
  /** Windows agree when within this percentage. @default 10 */
  stabilityPercentage?: number;
  /** Windows measured at most per level. @default 10 */
  maxTrials?: number;
  /** Requests sent before measuring, per level. @default 100 (x concurrency) */
  warmupRequests?: number;
  /** Sequence models: requests per sequence. @default 20 */
  sequenceLength?: number;
  /** Open loop: most requests outstanding at once. @default 1000 */
  maxOutstanding?: number;
  /**
   * perf_analyzer's `--shared-memory`: `system` puts every input set in a system shared memory
   * region (registered before measuring, unregistered and removed after, also when the run fails
   * or is aborted) and has the server write the outputs to regions; requests carry no tensor data.
   * The server must allow client shared memory and share this host. @default 'none'
   */
  sharedMemory?: 'none' | 'system';
  /** perf_analyzer's `--output-shared-memory-size`: room per output whose size is not known from the model (BYTES, variable dims), times the batch size. @default 102400 */
  outputSharedMemorySize?: number;
  /** Where shm_open's objects live (the server's directory for them). @default '/dev/shm' */
  sharedMemoryDirectory?: string;
  /** Ends the run early: it rejects with the signal's reason once its regions are released. */
  signal?: AbortSignal;
}

/** The result of one concurrency level or request rate. */
export interface PerfResult {
  concurrency?: number;
  requestRate?: number;
  /** Inferences per second (requests x batch size). */
  throughput: number;
  requestsPerSec: number;
  /** Client-side latency in microseconds. */
  latencyUs: { p50: number; p90: number; p95: number; p99: number; avg: number };
  requests: number;
  errors: number;
  /** The windows agreed within the stability percentage. */
  stable: boolean;
  /** Server-side averages per request over the measured windows (µs), from the statistics API. */
  /**
   * Per request, from the statistics extension over the window: request time (success), queue and
   * compute, and the server's overhead (request - queue - compute: what the server spends outside
   * the scheduler's queue and the model, as perf_analyzer's "overhead").
   */
  server?: { requests: number; executions: number; requestUs: number; queueUs: number; computeInputUs: number; computeInferUs: number; computeOutputUs: number; overheadUs: number };
  /** This process's CPU time over wall time while measuring (1.0 = one core). */
  clientCpu: number;
  /** The first error message seen, if any. */
  firstError?: string;
}

interface Window {
  latencies: number[];
  errors: number;
  /** The first error of this window: the one reported is from a window the result counts. */
  firstError?: string;
  startMs: number;
  endMs: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

/**
 * Sums the statistics of a model's versions (the version asked for only, when given). A server's
 * answer is not trusted: an entry without the expected fields counts as nothing.
 */
function sumStats(stats: readonly ModelStatistics[], version?: string): { success: number; execs: number; request: number; queue: number; input: number; infer: number; output: number } {
  const out = { success: 0, execs: 0, request: 0, queue: 0, input: 0, infer: 0, output: 0 };
  const num = (v: unknown) => (Number.isFinite(Number(v)) ? Number(v) : 0);
  if (!Array.isArray(stats)) return out;
  for (const s of stats) {
    if (version && s?.version !== version) continue;
    const i = s?.inference_stats;
    out.success += num(i?.success?.count);
    out.request += num(i?.success?.ns);
    out.execs += num(s?.execution_count);
    out.queue += num(i?.queue?.ns);
    out.input += num(i?.compute_input?.ns);
    out.infer += num(i?.compute_infer?.ns);
    out.output += num(i?.compute_output?.ns);
  }
  return out;
}

/**
 * Runs the measurements. `log` gets progress lines. `clock` times the windows, the latencies and
 * the open loop's schedule (a test passes a manual one to make the counts exact).
 */
export async function runPerf(client: InferenceClient, options: PerfOptions, log: (line: string) => void = () => undefined, clock: Clock = systemClock): Promise<PerfResult[]> {
  const kind = options.sharedMemory ?? 'none';
  if (kind !== 'none' && kind !== 'system') throw new Error(`shared memory '${String(kind)}' is not supported: use none or system`);
  const shm = kind === 'system' ? new PerfSharedMemory(client, options.sharedMemoryDirectory) : undefined;
  try {
    return await measure(client, options, log, clock, shm);
  } finally {
    // Whatever happened (a refused registration, a failed window, an abort), nothing of this run
    // stays registered or in /dev/shm.
    for (const problem of (await shm?.release()) ?? []) log(`warning: ${problem}`);
  }
}

/** The reason an aborted signal gives, as an Error. */
function abortReason(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('the run was aborted');
}

async function measure(client: InferenceClient, options: PerfOptions, log: (line: string) => void, clock: Clock, shm: PerfSharedMemory | undefined): Promise<PerfResult[]> {
  const nowMs = (): number => clock.nowNs() / 1e6;
  const signal = options.signal;
  const checkAborted = (): void => {
    if (signal?.aborted) throw abortReason(signal);
  };
  /** Waits `ms` (the workers' pauses: they end when the run stops). */
  const pause = (ms: number): Promise<void> => new Promise((r) => { clock.setTimeout(r, ms); });
  /** `p`, or a rejection as soon as the run is aborted. */
  const orAbort = <T>(p: Promise<T>): Promise<T> => {
    if (!signal) return p;
    return new Promise<T>((resolve, reject) => {
      if (signal.aborted) {
        reject(abortReason(signal));
        return;
      }
      const onAbort = () => reject(abortReason(signal));
      signal.addEventListener('abort', onAbort, { once: true });
      p.then((v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      }, (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(err instanceof Error ? err : new Error(String(err)));
      });
    });
  };
  /** Waits `ms`; rejects at once (the timer cleared) when the run is aborted. */
  const sleep = (ms: number): Promise<void> => new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    const onAbort = () => {
      clock.clearTimeout(timer);
      reject(abortReason(signal!));
    };
    const timer = clock.setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  checkAborted();
  const meta = await client.modelMetadata(options.model, options.version);
  const config = await client.modelConfig(options.model, options.version);
  const maxBatch = Number(config['max_batch_size'] ?? 0);
  const batch = options.batchSize ?? 1;
  if (maxBatch === 0 && batch !== 1) throw new Error(`model '${options.model}' does not batch (max_batch_size 0): use -b 1`);
  if (maxBatch > 0 && batch > maxBatch) throw new Error(`batch size ${batch} is above the model's max_batch_size ${maxBatch}`);
  if ((config['model_transaction_policy'] as { decoupled?: boolean } | undefined)?.decoupled) {
    throw new Error(`model '${options.model}' is decoupled: triode perf measures request/response models only`);
  }
  const dataSets = perfInputs(meta, maxBatch, batch, options.inputData ?? 'random', options.shapes ?? {});
  const sequences = config['sequence_batching'] !== undefined;
  const version = options.version;
  checkAborted();
  // With shared memory the data goes into regions once, here; the requests name windows of them.
  const layout = shm ? await shm.setUp(dataSets, meta, maxBatch, batch, options.outputSharedMemorySize ?? DEFAULT_OUTPUT_SHARED_MEMORY_SIZE) : undefined;
  if (shm) log(`  system shared memory: ${shm.registered.length} regions registered (${shm.prefix}_*)`);
  const sets = layout?.sets ?? dataSets;
  const outputs: { outputs?: RequestedOutput[] } = layout?.outputs.length ? { outputs: layout.outputs } : {};
  checkAborted();
  // Encoding every input set once up front turns bad data (or a datatype the client cannot
  // encode) into one error here, before any load is sent.
  const prepared: PreparedInfer[] = sets.map((inputs) => client.prepare(options.model, { inputs, ...outputs, ...(version ? { version } : {}), ...(sequences ? { sequence: { id: 1, start: true } } : {}) }));
  const seqLength = options.sequenceLength ?? 20;
  let nextSequence = 1;

  // One request: prepared bytes for stateless models; sequence models get their parameters.
  const perWorker = (worker: number) => {
    let k = worker;
    let seqId = 0;
    let pos = seqLength;
    return (): Promise<unknown> => {
      k++;
      if (!sequences) return client.inferPrepared(prepared[k % prepared.length]!);
      if (pos >= seqLength) {
        seqId = nextSequence++;
        pos = 0;
      }
      const inputs: InferInput[] = sets[k % sets.length]!;
      const start = pos === 0;
      const end = ++pos === seqLength;
      return client.infer(options.model, { inputs, ...outputs, sequence: { id: seqId, start, end }, ...(version ? { version } : {}) });
    };
  };

  const interval = options.measurementIntervalMs ?? 5000;
  const stability = (options.stabilityPercentage ?? 10) / 100;
  const maxTrials = Math.max(3, options.maxTrials ?? 10);
  const levels: { concurrency?: number; requestRate?: number }[] = options.requestRates?.length
    ? options.requestRates.map((r) => ({ requestRate: r }))
    : options.concurrency.map((c) => ({ concurrency: c }));
  const results: PerfResult[] = [];

  for (const level of levels) {
    checkAborted();
    let current: Window = { latencies: [], errors: 0, startMs: nowMs(), endMs: 0 };
    let stopping = false;
    let warm = 0;
    const warmupTotal = (options.warmupRequests ?? 100) * (level.concurrency ?? 1);
    let warmed: () => void = () => undefined;
    const warmedUp = new Promise<void>((r) => { warmed = r; });
    const record = (t0: number, ok: boolean, err?: unknown) => {
      if (warm < warmupTotal) {
        // A failing warm-up ends the warm-up: the windows then count the failures and the run
        // ends (review: a server that never answers held the warm-up for its whole count times
        // the request timeout, ~100 minutes with the defaults).
        if (!ok) {
          warm = warmupTotal;
          warmed();
          return;
        }
        if (++warm === warmupTotal) warmed();
        return;
      }
      if (ok) current.latencies.push((nowMs() - t0) * 1000);
      else {
        current.errors++;
        current.firstError ??= (err as Error)?.message ?? String(err);
      }
    };
    const tasks: Promise<void>[] = [];
    try {
      if (level.concurrency !== undefined) {
        for (let w = 0; w < level.concurrency; w++) {
          const next = perWorker(w);
          tasks.push((async () => {
            while (!stopping) {
              const t0 = nowMs();
              try {
                await next();
                record(t0, true);
              } catch (err) {
                record(t0, false, err);
                // A request that fails before any I/O settles in a microtask: without a turn of the
                // event loop here the loop would never let a timer (the end of the window) run.
                await new Promise((r) => setImmediate(r));
              }
            }
          })());
        }
      } else {
        const rate = level.requestRate!;
        const next = perWorker(0);
        const maxOut = options.maxOutstanding ?? 1000;
        let outstanding = 0;
        /** Resolves when a request in flight settles (the sender waits on it when --max-threads are out). */
        let freed: (() => void) | undefined;
        tasks.push((async () => {
          const t00 = nowMs();
          let sent = 0;
          while (!stopping) {
            const due = t00 + (sent * 1000) / rate;
            const wait = due - nowMs();
            if (wait > 1) await pause(Math.floor(wait));
            if (outstanding >= maxOut) {
              // Waits for a request to settle (it spun on setImmediate: 91% of a core on the
              // load generator, taken from the server being measured on a small machine).
              await new Promise<void>((r) => { freed = r; });
              continue;
            }
            sent++;
            outstanding++;
            const t0 = nowMs();
            next().then(() => record(t0, true), (err: unknown) => record(t0, false, err)).finally(() => {
              outstanding--;
              const f = freed;
              freed = undefined;
              f?.();
            });
          }
          while (outstanding > 0) await pause(5);
        })());
      }
      if (warmupTotal > 0) {
        await orAbort(warmedUp);
      }
      const windows: Window[] = [];
      const statsBefore = sumStats(await client.modelStatistics(options.model).catch(() => []), version);
      const statsAt: ReturnType<typeof sumStats>[] = [statsBefore];
      const cpu0 = process.cpuUsage();
      const wall0 = nowMs();
      let stable = false;
      current = { latencies: [], errors: 0, startMs: nowMs(), endMs: 0 };
      for (let trial = 0; trial < maxTrials; trial++) {
        await sleep(interval);
        current.endMs = nowMs();
        windows.push(current);
        current = { latencies: [], errors: 0, startMs: nowMs(), endMs: 0 };
        statsAt.push(sumStats(await client.modelStatistics(options.model).catch(() => []), version));
        const w = windows[windows.length - 1]!;
        const tput = (w.latencies.length * 1000) / (w.endMs - w.startMs);
        const sorted = [...w.latencies].sort((a, b) => a - b);
        log(`  ${level.concurrency !== undefined ? `concurrency ${level.concurrency}` : `rate ${level.requestRate}/s`} window ${trial + 1}: ${(tput * batch).toFixed(1)} infer/s, p95 ${(percentile(sorted, 95) / 1000).toFixed(3)} ms`);
        if (windows.length >= 3) {
          const last = windows.slice(-3);
          const t = last.map((x) => x.latencies.length / (x.endMs - x.startMs));
          const p = last.map((x) => percentile([...x.latencies].sort((a, b) => a - b), 95));
          const agree = (xs: number[]) => {
            const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
            return mean > 0 && xs.every((x) => Math.abs(x - mean) <= stability * mean);
          };
          if (agree(t) && agree(p)) {
            stable = true;
            break;
          }
        }
      }
      const wall = nowMs() - wall0;
      const cpu = process.cpuUsage(cpu0);
      stopping = true;
      await Promise.all(tasks);

      const used = windows.slice(-3);
      const all = used.flatMap((w) => w.latencies).sort((a, b) => a - b);
      const spanMs = used.reduce((a, w) => a + (w.endMs - w.startMs), 0);
      const requestsPerSec = (all.length * 1000) / spanMs;
      const firstError = used.find((w) => w.firstError !== undefined)?.firstError;
      const sA = statsAt[statsAt.length - 1 - used.length]!;
      const sB = statsAt[statsAt.length - 1]!;
      const n = sB.success - sA.success;
      const result: PerfResult = {
        ...level,
        throughput: requestsPerSec * batch,
        requestsPerSec,
        latencyUs: {
          p50: percentile(all, 50), p90: percentile(all, 90), p95: percentile(all, 95), p99: percentile(all, 99),
          avg: all.length ? all.reduce((a, b) => a + b, 0) / all.length : 0,
        },
        requests: all.length,
        errors: used.reduce((a, w) => a + w.errors, 0),
        stable,
        clientCpu: (cpu.user + cpu.system) / 1000 / wall,
        ...(firstError !== undefined ? { firstError } : {}),
      };
      if (n > 0) {
        const us = (a: number, b: number) => (b - a) / n / 1000;
        const server = {
          requests: n, executions: sB.execs - sA.execs, requestUs: us(sA.request, sB.request),
          queueUs: us(sA.queue, sB.queue), computeInputUs: us(sA.input, sB.input),
          computeInferUs: us(sA.infer, sB.infer), computeOutputUs: us(sA.output, sB.output),
        };
        result.server = { ...server, overheadUs: Math.max(0, server.requestUs - server.queueUs - server.computeInputUs - server.computeInferUs - server.computeOutputUs) };
      }
      results.push(result);
    } finally {
      // On an error too (the statistics call, a window, an abort): the workers must not go on
      // sending, and the run ends when their last requests have (its regions are released after).
      stopping = true;
      warmed();
      await Promise.allSettled(tasks);
    }
  }
  return results;
}
