/**
 * @module Restricted protocols / APIs: groups of endpoints that answer only requests carrying a
 * given header (gRPC: metadata `triton-grpc-protocol-<key>`) with a given value.
 * `--grpc-restricted-protocol=<group>[,<group>...]:<key>=<value>`, repeatable.
 * Triton: server/src/restricted_features.h, docs/customization_guide/inference_protocols.md
 */
import { Errors } from '@triode/core';

/** The endpoint groups Triton defines. */
export const RESTRICTED_GROUPS = ['health', 'metadata', 'inference', 'shared-memory', 'model-config', 'model-repository', 'statistics', 'trace', 'logging'] as const;

/** One endpoint group. */
export type RestrictedGroup = (typeof RESTRICTED_GROUPS)[number];

/** Group -> the header and value it requires. */
export type Restrictions = Map<RestrictedGroup, { key: string; value: string }>;

/**
 * Parses restriction flags (each `<groups>:<key>=<value>`). A group may be restricted once.
 * @throws TriodeError INVALID_ARG on a malformed flag or an unknown group.
 */
export function parseRestrictions(flags: readonly string[]): Restrictions {
  const out: Restrictions = new Map();
  for (const flag of flags) {
    const m = /^([^:]+):([^=]+)=(.*)$/.exec(flag);
    if (!m) throw Errors.invalidArg(`restricted protocol '${flag}' must be '<protocols>:<key>=<value>'`);
    for (const g of m[1]!.split(',').map((s) => s.trim())) {
      if (!(RESTRICTED_GROUPS as readonly string[]).includes(g)) {
        throw Errors.invalidArg(`unknown restricted protocol '${g}' (expected ${RESTRICTED_GROUPS.join(', ')})`);
      }
      if (out.has(g as RestrictedGroup)) throw Errors.invalidArg(`restricted protocol '${g}' is given more than once`);
      out.set(g as RestrictedGroup, { key: m[2]!.trim(), value: m[3]! });
    }
  }
  return out;
}
