/** @module The `{model}` and `{version}` segments of `/v2/models/{m}[/versions/{v}]/...` paths. */
import type { Context } from 'hono';
import { parseModelVersion } from '@triode/core';

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
