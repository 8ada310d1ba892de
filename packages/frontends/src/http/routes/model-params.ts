/** @module The `{model}` and `{version}` segments of `/v2/models/{m}[/versions/{v}]/...` paths. */
import type { Context } from 'hono';
import { Errors, parseModelVersion, type Backplane } from '@triode/core';

/** Model name and version (undefined: the version policy's choice) of a model route. */
export function modelParams(c: Context): { name: string; version?: number } {
  const name = c.req.param('model') ?? '';
  const version = parseModelVersion(c.req.param('version'));
  return version === undefined ? { name } : { name, version };
}

/** The two path forms of a model route: without and with a version segment. */
export function modelPaths(suffix: string): [string, string] {
  return [`/v2/models/:model${suffix}`, `/v2/models/:model/versions/:version{[0-9]+}${suffix}`];
}

const INT64_MAX = 2n ** 63n - 1n;

/**
 * The version of an infer route (`[0-9]+` by its path), as Triton's GetModelVersionFromString
 * reads it with std::stol: past int64 it is refused with Triton's words; past 2^53 (no model has
 * such a version in Triode, configs are JS numbers) it is a bigint, which `versionNotFound` answers.
 */
export function inferModelVersion(version: string | undefined): number | bigint | undefined {
  if (version === undefined || version.length < 16) return parseModelVersion(version);
  if (!/^\d+$/.test(version)) throw Errors.badVersion(version);
  const v = BigInt(version);
  if (v > INT64_MAX) throw Errors.badVersion(version, 'stol');
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v;
}

/** Triton's answer to a version no model can have: the model's own error, or its version is not found. */
export async function versionNotFound(name: string, version: bigint, backplane: Backplane): Promise<never> {
  await backplane.modelConfig(name);
  throw Errors.unknownModel(name, String(version));
}
