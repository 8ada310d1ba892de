/**
 * @module Changing the log settings at run time (`POST /v2/logging`, gRPC LogSettings): the
 * update is checked whole before anything changes. Triton: docs/protocol/extension_logging.md
 */
import { Errors, echo, type LogSettings } from '@triode/core';

/**
 * Applies an update of Triton's log setting fields; throws INVALID_ARG / UNSUPPORTED first.
 * `log_file` is a start-up option only (`--log-file`): its presence is refused with Triton's
 * UNSUPPORTED (HTTP 501, gRPC UNIMPLEMENTED) and nothing changes.
 */
export function updateLogSettings(settings: LogSettings, update: Readonly<Record<string, unknown>>): void {
  if (Object.hasOwn(update, 'log_file')) throw Errors.unsupported('log file location can not be updated through network protocol');
  for (const [k, v] of Object.entries(update)) {
    switch (k) {
      case 'log_info':
      case 'log_warning':
      case 'log_error':
        if (typeof v !== 'boolean') throw Errors.invalidArg(`expect boolean for '${k}'`);
        break;
      case 'log_verbose_level':
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw Errors.invalidArg(`expect a non-negative integer for '${k}'`);
        break;
      case 'log_format':
        if (v !== 'default' && v !== 'ISO8601') throw Errors.invalidArg(`invalid log format '${echo(v)}': expect 'default' or 'ISO8601'`);
        break;
      default:
        throw Errors.invalidArg(`unknown log setting '${echo(k)}'`);
    }
  }
  for (const [k, v] of Object.entries(update)) {
    if (k === 'log_info' || k === 'log_warning' || k === 'log_error') settings[k] = v as boolean;
    else if (k === 'log_verbose_level') settings.log_verbose_level = v as number;
    else if (k === 'log_format') settings.log_format = v as 'default' | 'ISO8601';
  }
}
