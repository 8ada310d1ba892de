/**
 * @module RepositoryModelLoad messages checked on the wire before they are decoded: how many
 * `parameters` entries they carry. Such a message may be as large as --grpc-max-message-size (it
 * carries model files), and decoding makes objects for each entry: 5M empty entries (a 51 MB
 * message) held the event loop 29 s and grew the server by 2.2 GB, before the restricted-protocol
 * check or the model control mode could refuse the call (review).
 */
import { MAX_OVERRIDE_FILES } from '@triode/core';

/** The most `parameters` entries a load may carry: a `config` and MAX_OVERRIDE_FILES `file:` overrides. */
export const MAX_LOAD_PARAMETERS = MAX_OVERRIDE_FILES + 1;

/** The `parameters` map of RepositoryModelLoadRequest (grpc_service.proto). */
const PARAMETERS_FIELD = 3;

/**
 * How many `parameters` entries the RepositoryModelLoadRequest `b` holds at its top level,
 * counting no further than `stopAfter + 1`; undefined when the top level is not well-formed wire
 * format (the decoder then says what is wrong). Nothing is decoded or copied.
 */
export function countLoadParameters(b: Uint8Array, stopAfter: number): number | undefined {
  let at = 0;
  let count = 0;
  const varint = (): number | undefined => {
    let v = 0;
    for (let i = 0, mul = 1; i < 10; i++, mul *= 128) {
      if (at >= b.length) return undefined;
      const byte = b[at++]!;
      v += (byte & 0x7f) * mul;
      if (byte < 0x80) return v;
    }
    return undefined;
  };
  while (at < b.length) {
    const tag = varint();
    if (tag === undefined) return undefined;
    const wire = tag % 8;
    if (wire === 0) {
      if (varint() === undefined) return undefined;
    } else if (wire === 1) {
      at += 8;
    } else if (wire === 5) {
      at += 4;
    } else if (wire === 2) {
      const len = varint();
      if (len === undefined) return undefined;
      at += len;
      if (Math.floor(tag / 8) === PARAMETERS_FIELD && ++count > stopAfter) return count;
    } else {
      return undefined;
    }
    if (at > b.length) return undefined;
  }
  return count;
}
