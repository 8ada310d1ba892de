/**
 * @module `--http-restricted-api`: endpoint groups that answer 403 unless the request carries a
 * header with a value. Triton: server/src/restricted_features.h, http_server.cc
 */
import type { MiddlewareHandler } from 'hono';
import type { RestrictedGroup, Restrictions } from '../control/restricted.js';

const MODEL = '/v2/models/[^/]+(?:/versions/[0-9]+)?';

/** Path patterns of each group (the first match wins). */
const GROUPS: [RegExp, RestrictedGroup][] = [
  [/^\/v2\/health\//, 'health'],
  [new RegExp(`^${MODEL}/ready$`), 'health'],
  [new RegExp(`^${MODEL}/(infer|infer_async|generate|generate_stream)$`), 'inference'],
  [/^\/v2\/jobs\//, 'inference'],
  [new RegExp(`^${MODEL}/config$`), 'model-config'],
  [/^\/v2\/models(?:\/[^/]+(?:\/versions\/[0-9]+)?)?\/stats$/, 'statistics'],
  [/^\/v2\/repository\//, 'model-repository'],
  // Triode's cluster view (workers, hosts, what they loaded) is an operator's, as the repository.
  [/^\/v2\/cluster\//, 'model-repository'],
  [/^\/v2\/(?:models\/[^/]+\/)?trace\/setting$/, 'trace'],
  [/^\/v2\/logging$/, 'logging'],
  // Triton's systemsharedmemory_regex_ / cudasharedmemory_regex_: other paths are 404 Not Found whatever the headers.
  [/^\/v2\/(?:system|cuda)sharedmemory(?:\/region\/[^/]+)?\/(?:status|register|unregister)$/, 'shared-memory'],
  [new RegExp(`^(?:/v2|${MODEL})$`), 'metadata'],
];

/** The group a path belongs to, if any. */
export function restrictedGroupOf(path: string): RestrictedGroup | undefined {
  return GROUPS.find(([re]) => re.test(path))?.[1];
}

/** Answers 403 with Triton's message when a restricted group's header is missing or wrong. */
export function restrictedApi(restrictions: Restrictions): MiddlewareHandler {
  return async (c, next) => {
    const group = restrictedGroupOf(c.req.path);
    const need = group ? restrictions.get(group) : undefined;
    if (need && c.req.header(need.key) !== need.value) {
      return c.json({ error: `This API is restricted, expecting header '${need.key}'` }, 403);
    }
    await next();
    return undefined;
  };
}
