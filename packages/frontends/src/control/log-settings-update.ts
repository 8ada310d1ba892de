/**
 * @module Changing the log settings at run time (`POST /v2/logging`, gRPC LogSettings): the
 * update is checked whole before anything changes. Triton: docs/protocol/extension_logging.md,
 * server/src/http_server.cc HandleLogging, server/src/grpc/grpc_server.cc RegisterLogging
 */
import { Errors, echo, type LogSettings } from '@triode/core';

/** The largest log_verbose_level: Triton keeps it as an int32. */
const MAX_VERBOSE_LEVEL = 2 ** 31 - 1;

/** Which frontend an update came from: Triton words its refusals differently on each. */
export type LogSettingsProtocol = 'http' | 'grpc';

/** The fields Triton reads, in the order it reads them (its first error is the one reported). */
const FIELDS = ['log_info', 'log_warning', 'log_error', 'log_verbose_level', 'log_format'] as const;
type Field = (typeof FIELDS)[number];

/**
 * Triton's refusal of a value of the wrong type. HTTP: TritonJson's words (AsBool, AsUInt,
 * AsString); gRPC: its own "expect <type> for '<field>'" for a SettingValue whose oneof is not
 * the field's (an unset one included).
 */
function wrongType(field: Field, protocol: LogSettingsProtocol): Error {
  if (field === 'log_verbose_level') {
    return Errors.invalidArg(protocol === 'http' ? 'attempt to access JSON non-unsigned-integer as unsigned-integer' : "expect int32 for 'log_verbose_level'");
  }
  if (field === 'log_format') {
    return Errors.invalidArg(protocol === 'http' ? 'attempt to access JSON non-string as string' : "expect string for 'log_format'");
  }
  return Errors.invalidArg(protocol === 'http' ? 'attempt to access JSON non-boolean as boolean' : `expect boolean for '${field}'`);
}

/**
 * Applies an update of Triton's log setting fields; throws INVALID_ARG / UNSUPPORTED first.
 * `log_file` is a start-up option only (`--log-file`): a value for it (not null) is refused with
 * Triton's UNSUPPORTED (HTTP 501, gRPC UNIMPLEMENTED) and nothing changes. As in Triton, null
 * values (HTTP) and fields it does not know change nothing, and the fields are checked in its
 * order (log_file, log_info, log_warning, log_error, log_verbose_level, log_format) with its
 * words for each protocol. Unlike Triton, a refused update changes nothing (Triton has applied
 * the fields before the bad one), and a verbose level past int32 is refused, not wrapped.
 */
export function updateLogSettings(settings: LogSettings, update: Readonly<Record<string, unknown>>, protocol: LogSettingsProtocol = 'http'): void {
  if (Object.hasOwn(update, 'log_file') && update['log_file'] !== null) {
    throw Errors.unsupported('log file location can not be updated through network protocol');
  }
  const changes: Partial<Record<Field, unknown>> = {};
  for (const k of FIELDS) {
    if (!Object.hasOwn(update, k)) continue;
    const v = update[k];
    // As Triton: a null value changes nothing (gRPC has no null: an unset oneof is the wrong type).
    if (v === null) continue;
    switch (k) {
      case 'log_info':
      case 'log_warning':
      case 'log_error':
        if (typeof v !== 'boolean') throw wrongType(k, protocol);
        break;
      case 'log_verbose_level':
        // rapidjson reads a number past uint64 as a double: not an unsigned integer either; nor is
        // one the body wrote as 1.0 or 1e0 (the HTTP body reader makes it a JsonDouble, not a number).
        if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v >= 2 ** 64) throw wrongType(k, protocol);
        // Triton keeps the level as an int32 (a larger value wraps there); Triode refuses it.
        if (v > MAX_VERBOSE_LEVEL) throw Errors.invalidArg(`expect an integer in [0, ${MAX_VERBOSE_LEVEL}] for '${k}'`);
        break;
      case 'log_format':
        if (typeof v !== 'string') throw wrongType(k, protocol);
        if (v !== 'default' && v !== 'ISO8601') {
          // Triton's words: HTTP names the command-line option (and answers UNAVAILABLE, 503; Triode 400).
          throw Errors.invalidArg(`invalid argument for ${protocol === 'http' ? '--' : ''}log_format, got: ${echo(v)}`);
        }
        break;
    }
    changes[k] = v;
  }
  for (const [k, v] of Object.entries(changes) as [Field, unknown][]) {
    if (k === 'log_verbose_level') settings.log_verbose_level = v as number;
    else if (k === 'log_format') settings.log_format = v as 'default' | 'ISO8601';
    else settings[k] = v as boolean;
  }
}
