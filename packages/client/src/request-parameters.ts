/** @module The request parameters an InferOptions stands for (KServe v2 / Triton names). */
import type { ParameterValue } from '@triode/core';
import type { InferOptions } from './types.js';

/** `sequence_*`, `priority`, `timeout` and the caller's own parameters, as one map. */
export function requestParameters(o: InferOptions): Record<string, ParameterValue> {
  const p: Record<string, ParameterValue> = { ...o.parameters };
  if (o.sequence) {
    p['sequence_id'] = o.sequence.id;
    p['sequence_start'] = o.sequence.start === true;
    p['sequence_end'] = o.sequence.end === true;
  }
  if (o.priority !== undefined) p['priority'] = o.priority;
  if (o.timeoutUs !== undefined) p['timeout'] = o.timeoutUs;
  return p;
}

/** A version argument as the path/field string ('' = the server's policy). */
export function versionString(version: number | string | undefined): string {
  return version === undefined ? '' : String(version);
}
