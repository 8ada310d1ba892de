/**
 * @module `triode worker --gpus all|0,2`: one worker process per GPU, each seeing only its GPU
 * (`CUDA_VISIBLE_DEVICES` set to its UUID) and registering `gpu:<index>` as its device. A child
 * that exits is started again after a backoff (doubling, reset once it has run a while); stop()
 * sends SIGTERM to all and waits (SIGKILL after a grace period).
 */
import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import type { GpuDevice, Logger } from '@triode/core';

/** One supervised process: what to run and with which environment additions. */
export interface SupervisedChild {
  /** Its name in log lines (`gpu:0`). */
  id: string;
  args: string[];
  env: Record<string, string>;
}

/** Options of `perGpuChildren`. */
export interface PerGpuOptions {
  /** `--worker-id` given to the supervisor: each child gets `<id>-gpu<index>`. @default none (random ids) */
  workerId?: string;
  /** `--metrics-port` given: child i listens on port + i (0: each picks a free one). @default 8002 */
  metricsPort?: number;
}

/**
 * The worker processes for `gpus`: the worker's own arguments (without `--gpus`), plus the device
 * it registers, and per-child worker id and metrics port (the last flag given wins). Each child's
 * `CUDA_VISIBLE_DEVICES` is its GPU's UUID, which names one GPU whatever CUDA's device order.
 */
export function perGpuChildren(gpus: readonly GpuDevice[], workerArgs: readonly string[], options: PerGpuOptions = {}): SupervisedChild[] {
  const base = withoutGpusFlag(workerArgs);
  return gpus.map((g, i) => {
    const port = options.metricsPort ?? 8002;
    const args = ['worker', ...base, '--worker-device', `gpu:${g.index}`];
    if (options.workerId) args.push('--worker-id', `${options.workerId}-gpu${g.index}`);
    if (port !== 0) args.push('--metrics-port', String(port + i));
    return { id: `gpu:${g.index}`, args, env: { CUDA_VISIBLE_DEVICES: g.uuid } };
  });
}

/** `args` without `--gpus <v>` / `--gpus=<v>`. */
export function withoutGpusFlag(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--gpus') i++;
    else if (!args[i]!.startsWith('--gpus=')) out.push(args[i]!);
  }
  return out;
}

/** Options of a GpuSupervisor. */
export interface GpuSupervisorOptions {
  /** The program each child runs with its args (the `triode` bin is the first arg). @default process.execPath */
  command?: string;
  /** Arguments before each child's own (the `triode` bin). @default [] */
  prefixArgs?: string[];
  /** First restart delay; it doubles for each exit in a row. @default 1000 */
  backoffMs?: number;
  /** Longest restart delay. @default 30000 */
  maxBackoffMs?: number;
  /** A child that ran this long before it exited is restarted after `backoffMs` again. @default 60000 */
  stableMs?: number;
  /** How long stop() waits after SIGTERM before SIGKILL. @default 35000 */
  stopGraceMs?: number;
  /** The children's stdio (their log lines go to the supervisor's by default). @default 'inherit' */
  stdio?: StdioOptions;
  /** The environment children start from. @default process.env */
  env?: NodeJS.ProcessEnv;
  logger: Logger;
}

interface Slot {
  spec: SupervisedChild;
  proc?: ChildProcess;
  startedMs: number;
  failures: number;
  restarts: number;
  timer?: NodeJS.Timeout;
  exited?: Promise<void>;
}

/** Runs and watches one process per GPU. */
export class GpuSupervisor {
  readonly #slots: Slot[];
  readonly #opts: Required<Omit<GpuSupervisorOptions, 'logger'>> & { logger: Logger };
  #stopping = false;

  constructor(children: readonly SupervisedChild[], options: GpuSupervisorOptions) {
    this.#slots = children.map((spec) => ({ spec, startedMs: 0, failures: 0, restarts: 0 }));
    this.#opts = {
      command: process.execPath, prefixArgs: [], backoffMs: 1000, maxBackoffMs: 30_000, stableMs: 60_000, stopGraceMs: 35_000,
      stdio: 'inherit', env: process.env, ...options,
    };
  }

  /** Starts every child. */
  start(): void {
    for (const s of this.#slots) this.#run(s);
  }

  /** The live children's PIDs, by child id. */
  pids(): Map<string, number> {
    return new Map(this.#slots.filter((s) => s.proc?.pid !== undefined && s.proc.exitCode === null && s.proc.signalCode === null).map((s) => [s.spec.id, s.proc!.pid!]));
  }

  /** How many times each child was started again. */
  restarts(): Map<string, number> {
    return new Map(this.#slots.map((s) => [s.spec.id, s.restarts]));
  }

  /** SIGTERM to every child, SIGKILL to those still running after the grace period; resolves when all have exited. */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const s of this.#slots) clearTimeout(s.timer);
    await Promise.all(this.#slots.map(async (s) => {
      const p = s.proc;
      if (!p || p.exitCode !== null || p.signalCode !== null) return;
      p.kill('SIGTERM');
      const kill = setTimeout(() => { if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL'); }, this.#opts.stopGraceMs);
      await s.exited;
      clearTimeout(kill);
    }));
  }

  #run(s: Slot): void {
    const { logger } = this.#opts;
    s.startedMs = Date.now();
    const proc = spawn(this.#opts.command, [...this.#opts.prefixArgs, ...s.spec.args], { stdio: this.#opts.stdio, env: { ...this.#opts.env, ...s.spec.env } });
    s.proc = proc;
    let done = false;
    s.exited = new Promise<void>((resolve) => {
      const onEnd = (why: string) => {
        if (done) return;
        done = true;
        resolve();
        this.#exited(s, why);
      };
      proc.once('exit', (code, signal) => onEnd(signal ? `signal ${signal}` : `code ${code ?? ''}`));
      // A spawn failure gives 'error' and no 'exit'.
      proc.once('error', (err) => onEnd(`error: ${err.message}`));
    });
    logger.info(`started worker ${s.spec.id} (pid ${proc.pid ?? '?'}, CUDA_VISIBLE_DEVICES=${s.spec.env['CUDA_VISIBLE_DEVICES'] ?? ''})`);
  }

  #exited(s: Slot, why: string): void {
    if (this.#stopping) return;
    const ranMs = Date.now() - s.startedMs;
    s.failures = ranMs >= this.#opts.stableMs ? 1 : s.failures + 1;
    const delay = Math.min(this.#opts.maxBackoffMs, this.#opts.backoffMs * 2 ** (s.failures - 1));
    this.#opts.logger.error(`worker ${s.spec.id} exited (${why}) after ${ranMs} ms: starting it again in ${delay} ms`);
    s.timer = setTimeout(() => {
      if (this.#stopping) return;
      s.restarts++;
      this.#run(s);
    }, delay);
  }
}
