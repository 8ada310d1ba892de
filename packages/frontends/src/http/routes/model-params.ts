/** @module The `{model}` and `{version}` segments of `/v2/models/{m}[/versions/{v}]/...` paths. */
import type { Context } from 'hono';
import type { Backplane } from '@triode/core';
import { requestedVersion } from '../../model-version.js';

/**
 * Model name and version (undefined: the version policy's choice) of a model route, the version
 * read as Triton reads it (one past 2^53 is not found).
 */
export async function modelParams(c: Context, backplane: Backplane): Promise<{ name: string; version?: number }> {
  const name = c.req.param('model') ?? '';
  const version = await requestedVersion(name, c.req.param('version'), backplane);
  return version === undefined ? { name } : { name, version };
}

/** The two path forms of a model route: without and with a version segment. */
export function modelPaths(suffix: string): [string, string] {
  return [`/v2/models/:model${suffix}`, `/v2/models/:model/versions/:version{[0-9]+}${suffix}`];
}
