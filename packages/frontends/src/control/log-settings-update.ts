/**
 * @module Changing the log settings at run time (`POST /v2/logging`, gRPC LogSettings): the
 * update is checked whole before anything changes. Triton: docs/protocol/extension_logging.md
 */
import { Errors, echo, type LogSettings } from '@triode/core';

/** The largest log_verbose_level: Triton keeps it as an int32. */
const MAX_VERBOSE_LEVEL = 2 ** 31 - 1;

/**
 * Applies an update of Triton's log setting fields; throws INVALID_ARG / UNSUPPORTED first.
 * `log_file` is a start-up option only (`--log-file`): a value for it (not null) is refused with
 * Triton's UNSUPPORTED (HTTP 501, gRPC UNIMPLEMENTED) and nothing changes. As in Triton, null
 * values and fields it does not know change nothing.
 */
export function updateLogSettings(settings: LogSettings, update: Readonly<Record<string, unknown>>): void {
  if (Object.hasOwn(update, 'log_file') && update['log_file'] !== null) {
    throw Errors.unsupported('log file location can not be updated through network protocol');
  }
  for (const [k, v] of Object.entries(update)) {
    // As Triton: a null value changes nothing, and a field it does not know is ignored.
    if (v === null) continue;
    switch (k) {
      case 'log_info':
      case 'log_warning':
      case 'log_error':
        if (typeof v !== 'boolean') throw Errors.invalidArg(`expect boolean for '${k}'`);
        break;
      case 'log_verbose_level':
        // Triton keeps the level as an int32 (a larger value wrapped there); Triode refuses it.
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > MAX_VERBOSE_LEVEL) {
          throw Errors.invalidArg(`expect an integer in [0, ${MAX_VERBOSE_LEVEL}] for '${k}'`);
        }
        break;
      case 'log_format':
        if (v !== 'default' && v !== 'ISO8601') throw Errors.invalidArg(`invalid log format '${echo(v)}': expect 'default' or 'ISO8601'`);
        break;
      default:
        break;
    }
  }
  for (const [k, v] of Object.entries(update)) {
    if (v === null) continue;
    if (k === 'log_info' || k === 'log_warning' || k === 'log_error') settings[k] = v as boolean;
    else if (k === 'log_verbose_level') settings.log_verbose_level = v as number;
    else if (k === 'log_format') settings.log_format = v as 'default' | 'ISO8601';
  }
}
