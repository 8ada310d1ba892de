/**
 * @module RepositoryModelLoad messages checked on the wire before they are decoded: how many
 * `parameters` entries, and other fields, they carry. Such a message may be as large as
 * --grpc-max-message-size (it carries model files), and decoding makes objects for each entry
 * and field: 5M empty entries (a 51 MB
 * message) held the event loop 29 s and grew the server by 2.2 GB, before the restricted-protocol
 * check or the model control mode could refuse the call (review).
 */
import { MAX_LOAD_PARAMETERS, tooManyLoadParameters } from '../control/load-parameters.js';

export { MAX_LOAD_PARAMETERS };

/** The `parameters` map of RepositoryModelLoadRequest (grpc_service.proto). */
const PARAMETERS_FIELD = 3;

/**
 * Most fields of a load request besides its parameters: a well-formed one has `repository_name`
 * and `model_name`, once each.
 */
export const MAX_LOAD_OTHER_FIELDS = 8;
/** Most fields of one parameters entry, and of its value: a well-formed one has 2 (key, value) and 1 (the oneof). */
export const MAX_LOAD_PARAMETER_FIELDS = 8;

/**
 * Calls `field(number, start, end)` for each field of the message `b[from, to)` (a length-delimited
 * field's bytes are `b[start, end)`; others have start === end), until it returns false. Returns
 * false when stopped so, or when the bytes are not well-formed wire format (the decoder then says
 * what is wrong); nothing is decoded or copied.
 */
function walk(b: Uint8Array, from: number, to: number, field: (n: number, start: number, end: number) => boolean): boolean {
  let at = from;
  const varint = (): number | undefined => {
    let v = 0;
    for (let i = 0, mul = 1; i < 10; i++, mul *= 128) {
      if (at >= to) return undefined;
      const byte = b[at++]!;
      v += (byte & 0x7f) * mul;
      if (byte < 0x80) return v;
    }
    return undefined;
  };
  while (at < to) {
    const tag = varint();
    if (tag === undefined) return false;
    const wire = tag % 8;
    let start = at;
    if (wire === 0) {
      if (varint() === undefined) return false;
      start = at;
    } else if (wire === 1 || wire === 5) {
      at += wire === 1 ? 8 : 4;
      start = at;
    } else if (wire === 2) {
      const len = varint();
      if (len === undefined) return false;
      start = at;
      at += len;
    } else {
      return false;
    }
    if (at > to) return false;
    if (!field(Math.floor(tag / 8), start, at)) return false;
  }
  return true;
}

/**
 * Why the RepositoryModelLoadRequest `b` cannot be a load request, found on the wire before it is
 * decoded, or undefined. Decoding makes an object or a string for each field, repeated ones too:
 * 30 million `model_name` fields (90 MB), or as many keys in one parameters entry, held the event
 * loop 380 ms (8 s at the 2 GiB message limit) in any model control mode (review). So it holds at
 * most MAX_LOAD_PARAMETERS parameters, MAX_LOAD_OTHER_FIELDS other fields, and
 * MAX_LOAD_PARAMETER_FIELDS fields in each parameters entry and in its value. Work is bounded by
 * those counts, not by the message's size. Bytes that are not wire format are left to the decoder.
 */
export function loadRequestProblem(b: Uint8Array): string | undefined {
  let params = 0;
  let others = 0;
  let problem: string | undefined;
  const fail = (what: string): boolean => {
    problem = what;
    return false;
  };
  const fieldsAtMost = (from: number, to: number, inner?: (n: number, start: number, end: number) => boolean): boolean => {
    let n = 0;
    return walk(b, from, to, (f, start, end) => (++n > MAX_LOAD_PARAMETER_FIELDS ? fail(`a RepositoryModelLoad parameter with more than ${MAX_LOAD_PARAMETER_FIELDS} fields is not a load parameter`) : inner ? inner(f, start, end) : true));
  };
  walk(b, 0, b.length, (f, start, end) => {
    if (f !== PARAMETERS_FIELD) {
      return ++others > MAX_LOAD_OTHER_FIELDS ? fail(`a RepositoryModelLoad message with more than ${MAX_LOAD_OTHER_FIELDS} fields besides its parameters is not a load request`) : true;
    }
    if (++params > MAX_LOAD_PARAMETERS) return fail(tooManyLoadParameters('a RepositoryModelLoad message'));
    // The entry (key = 1, value = 2), then its value's fields. Malformed ones are the decoder's.
    fieldsAtMost(start, end, (g, s, e) => (g === 2 && e > s ? fieldsAtMost(s, e) || problem === undefined : true));
    return problem === undefined;
  });
  return problem;
}
