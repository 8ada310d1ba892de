/**
 * @module Logging: one line per event; JSON lines when the stream is not a terminal, readable
 * lines when it is. Triton: core/src/logging.h
 */

/** Log levels, most severe first. `verbose` carries Triton's `--log-verbose` level. */
export type LogLevel = 'error' | 'warning' | 'info' | 'verbose';

/** Where Triode components write their log lines. */
export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warning(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  /** Written only when `--log-verbose` is at least `level`. */
  verbose(level: number, msg: string, fields?: Record<string, unknown>): void;
}

/** Options of `createLogger`. */
export interface LoggerOptions {
  /** @default 0 */
  verboseLevel?: number;
  /** @default true */
  info?: boolean;
  /** @default true */
  warning?: boolean;
  /** @default true */
  error?: boolean;
  /** JSON lines (true) or readable lines (false). @default !stream.isTTY */
  json?: boolean;
  /** @default process.stderr */
  stream?: NodeJS.WritableStream & { isTTY?: boolean };
}

/** A logger that writes to a stream (stderr by default). */
export function createLogger(options: LoggerOptions = {}): Logger {
  const stream = options.stream ?? process.stderr;
  const json = options.json ?? !stream.isTTY;
  const write = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    const time = new Date().toISOString();
    if (json) {
      stream.write(JSON.stringify({ time, level, msg, ...fields }) + '\n');
    } else {
      const extra = fields && Object.keys(fields).length ? ' ' + JSON.stringify(fields) : '';
      stream.write(`${level[0]!.toUpperCase()} ${time} ${msg}${extra}\n`);
    }
  };
  return {
    error: (m, f) => { if (options.error !== false) write('error', m, f); },
    warning: (m, f) => { if (options.warning !== false) write('warning', m, f); },
    info: (m, f) => { if (options.info !== false) write('info', m, f); },
    verbose: (lvl, m, f) => { if ((options.verboseLevel ?? 0) >= lvl) write('verbose', m, f); },
  };
}

/** A logger that drops everything (tests, embedding). */
export const silentLogger: Logger = { error() {}, warning() {}, info() {}, verbose() {} };
