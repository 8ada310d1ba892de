/** Types of runner.mjs (the fuzz engine is plain ESM so bench/fuzz.mjs runs it without a build). */

export type FuzzProtocol = 'http' | 'grpc' | 'all';

export interface FuzzOptions {
  seed?: number;
  protocol?: FuzzProtocol;
  /** A fixed number of cases (deterministic). */
  cases?: number;
  /** A time budget instead of a count. */
  minutes?: number;
  /** Only these case indexes (replay). */
  only?: number[];
  /** Cases sent at once before each liveness check. @default 16 */
  batch?: number;
  /** How long a case may wait for an answer or a close. @default 10000 */
  hangMs?: number;
  /** Crashes plus hangs after which the run stops. @default 5 */
  maxCrashes?: number;
  /** A running server's ports (no restarts; RSS only with `pid`). */
  httpPort?: number;
  grpcPort?: number;
  pid?: number;
  log?: (line: string) => void;
  /** Log each case and what it got (replays). */
  traceCases?: boolean;
}

export interface FuzzFinding {
  index: number;
  protocol: 'http' | 'grpc';
  family: string;
  desc: string;
  detail: string;
  replay: string;
}

export interface FuzzSummary {
  seed: number;
  protocol: FuzzProtocol;
  cases: number;
  byStatus: Record<string, number>;
  byFamily: Record<string, number>;
  byFamilyStatus: Record<string, Record<string, number>>;
  crashes: FuzzFinding[];
  hangs: FuzzFinding[];
  unexplained: FuzzFinding[];
  explained: FuzzFinding[];
  leaks: FuzzFinding[];
  drops: FuzzFinding[];
  escapes: FuzzFinding[];
  /** crashes + hangs + unexplained + leaks + escapes. */
  failures: FuzzFinding[];
  slowLiveness: number;
  restarts: number;
  rss: { startKb: number; maxKb: number; endKb: number };
  durationMs: number;
}

export const ROOT: string;
export function runFuzz(options: FuzzOptions): Promise<FuzzSummary>;
/** A fresh copy of the examples the fuzz cases name (and a 'victim' copy of simple), in a temporary directory. */
export function makeRepository(): string;
export function formatSummary(summary: FuzzSummary, verbose?: boolean): string;
export function replayLine(seed: number, protocol: FuzzProtocol, index: number): string;
