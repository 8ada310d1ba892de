/**
 * @module The parameters of a repository load request (`config`, `file:<version>/<name>`), as
 * both frontends hand them over: HTTP gives file contents as base64 strings, gRPC as bytes.
 * Triton: server docs/protocol/extension_model_repository.md
 */
import { Errors, FILE_OVERRIDE_PREFIX, MAX_CONFIG_BYTES, MAX_OVERRIDE_FILES, checkModelName, echo, modelConfigFromJson, type LoadOptions } from '@triode/core';

/** The most parameters a load may carry: a `config` and MAX_OVERRIDE_FILES `file:` overrides. */
export const MAX_LOAD_PARAMETERS = MAX_OVERRIDE_FILES + 1;

/** The answer to a load request that carries more than MAX_LOAD_PARAMETERS parameters (`what`: the request). */
export function tooManyLoadParameters(what: string): string {
  return `${what} with more than ${MAX_LOAD_PARAMETERS} parameters is over the limit of a 'config' and ${MAX_LOAD_PARAMETERS - 1} 'file:' overrides a load may carry`;
}

/** One load parameter value (HTTP JSON values; gRPC `ModelRepositoryParameter`). */
export type LoadParameter = string | number | boolean | Uint8Array;

/**
 * Turns load parameters into load options. `config` must be a JSON string (int fields may be
 * strings, as in Triton); `file:` values are the file's bytes (HTTP: base64 text).
 * @throws TriodeError INVALID_ARG for a name that is not a model name (`checkModelName`), and
 *   "failed to load '<name>': ..." on a bad value.
 */
export function loadOptionsFrom(model: string, params: Readonly<Record<string, LoadParameter>>): LoadOptions {
  // Checked first: a hostile name is refused before any parameter is decoded.
  checkModelName(model);
  const name = echo(model);
  const options: LoadOptions = {};
  for (const [k, v] of Object.entries(params)) {
    if (k === 'config') {
      if (typeof v !== 'string') throw Errors.invalidArg(`failed to load '${name}': the 'config' parameter must be a string of JSON`);
      // Before parsing: 63 MB of `[{},{},...]` held the server at 5-7 GB for minutes.
      if (v.length > MAX_CONFIG_BYTES || Buffer.byteLength(v) > MAX_CONFIG_BYTES) {
        throw Errors.invalidArg(`failed to load '${name}': the 'config' parameter is over the limit of ${MAX_CONFIG_BYTES} bytes`);
      }
      try {
        options.config = modelConfigFromJson(JSON.parse(v));
      } catch (err) {
        throw Errors.invalidArg(`failed to load '${name}': failed to parse the config override: ${echo((err as Error).message)}`);
      }
    } else if (k.startsWith(FILE_OVERRIDE_PREFIX)) {
      let bytes: Uint8Array;
      if (v instanceof Uint8Array) bytes = v;
      else if (typeof v === 'string' && /^[A-Za-z0-9+/]*={0,2}$/.test(v)) bytes = new Uint8Array(Buffer.from(v, 'base64'));
      else throw Errors.invalidArg(`failed to load '${name}': the '${echo(k)}' parameter must hold the file's contents (base64 over HTTP, bytes over gRPC)`);
      // No prototype: 'file:__proto__' is a file named __proto__ (on a plain object it set the
      // object's prototype and the file was dropped; review).
      (options.files ??= Object.create(null) as Record<string, Uint8Array>)[k.slice(FILE_OVERRIDE_PREFIX.length)] = bytes;
    }
  }
  return options;
}
