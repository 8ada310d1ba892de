/**
 * @module Logging: one line per event; JSON lines when the stream is not a terminal, readable
 * lines when it is. Triton: core/src/logging.h
 */
import { echo } from './errors.js';

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

/**
 * Log settings that can change while the server runs (`/v2/logging`), with Triton's field names.
 */
export class LogSettings {
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
  log_format: 'default' | 'ISO8601';
  readonly log_file: string;

  constructor(options: LoggerOptions & { format?: 'default' | 'ISO8601'; file?: string } = {}) {
    this.log_info = options.info ?? true;
    this.log_warning = options.warning ?? true;
    this.log_error = options.error ?? true;
    this.log_verbose_level = options.verboseLevel ?? 0;
    this.log_format = options.format ?? 'default';
    this.log_file = options.file ?? '';
  }

  /** The settings as `GET /v2/logging` reports them. */
  toJson(): Record<string, string | number | boolean> {
    return {
      log_file: this.log_file, log_info: this.log_info, log_warning: this.log_warning, log_error: this.log_error,
      log_verbose_level: this.log_verbose_level, log_format: this.log_format,
    };
  }
}

/** A logger that writes to a stream (stderr by default), following `settings` as they change. */
export function createLogger(options: LoggerOptions = {}, settings: LogSettings = new LogSettings(options)): Logger {
  const stream = options.stream ?? process.stderr;
  const json = options.json ?? !stream.isTTY;
  const write = (level: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    const now = new Date();
    // default: ISO time in UTC; ISO8601: the same with the local offset, as Triton's option names it.
    const time = settings.log_format === 'ISO8601' ? isoLocal(now) : now.toISOString();
    if (json) {
      stream.write(JSON.stringify({ time, level, msg, ...fields }) + '\n');
    } else {
      const extra = fields && Object.keys(fields).length ? ' ' + JSON.stringify(fields) : '';
      stream.write(`${level[0]!.toUpperCase()} ${time} ${terminalText(msg)}${terminalText(extra)}\n`);
    }
  };
  return {
    error: (m, f) => { if (settings.log_error) write('error', m, f); },
    warning: (m, f) => { if (settings.log_warning) write('warning', m, f); },
    info: (m, f) => { if (settings.log_info) write('info', m, f); },
    verbose: (lvl, m, f) => { if (settings.log_verbose_level >= lvl) write('verbose', m, f); },
  };
}

/**
 * A message as a terminal line: control characters a client could have put in it (through a
 * model name, an id) are escaped, so it cannot forge a log line or send escape sequences to the
 * terminal; a newline stays (stack traces read as they are) but its next line is indented, so
 * it never looks like a line of its own.
 */
export function terminalText(s: string): string {
  // eslint-disable-next-line no-control-regex
  return /[\u0000-\u001f\u007f]/.test(s) ? s.split('\n').map((line) => echo(line, Infinity)).join('\n    ') : s;
}

function isoLocal(d: Date): string {
  const off = -d.getTimezoneOffset();
  const pad = (n: number) => String(Math.floor(Math.abs(n))).padStart(2, '0');
  const local = new Date(d.getTime() + off * 60_000).toISOString().slice(0, -1);
  return `${local}${off >= 0 ? '+' : '-'}${pad(off / 60)}:${pad(off % 60)}`;
}

/** A logger that drops everything (tests, embedding). */
export const silentLogger: Logger = { error() {}, warning() {}, info() {}, verbose() {} };
