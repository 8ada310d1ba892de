/**
 * @module RepositoryModelLoad messages checked on the wire before they are decoded: how many
 * `parameters` entries, and other fields, they carry. Such a message may be as large as
 * --grpc-max-message-size (it carries model files), and decoding makes objects for each entry
 * and field: 5M empty entries (a 51 MB
 * message) held the event loop 29 s and grew the server by 2.2 GB, before the restricted-protocol
 * check or the model control mode could refuse the call (review).
 */
import { ProtoWire } from '@triode/core';
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

/** What `loadRequestProblem` throws for bytes that are not wire format, as the decoder would throw. */
const malformed = (): Error => new Error('malformed RepositoryModelLoadRequest (the message does not decode)');

/** A limit passed: why the message is not a load request. */
class NotALoad extends Error {}

/**
 * Why the RepositoryModelLoadRequest `b` cannot be a load request, found on the wire before it is
 * decoded, or undefined. Decoding makes an object or a string for each field, repeated ones too:
 * 30 million `model_name` fields (90 MB), or as many keys in one parameters entry, held the event
 * loop 380 ms (8 s at the 2 GiB message limit) in any model control mode (review). So it holds at
 * most MAX_LOAD_PARAMETERS parameters, MAX_LOAD_OTHER_FIELDS other fields (a group, which the
 * decoder skips, counts as one), and MAX_LOAD_PARAMETER_FIELDS fields in each parameters entry and
 * in its value. Work is bounded by those counts, not by the message's size, but for the bytes of
 * groups, which are skipped as the decoder skips them (to their end, 64 deep at most).
 * @throws Error for bytes that are not wire format (a cut field, a group whose end names another
 *   field): refused as a message that does not decode. Left to the decoder, they let what follows
 *   them through unchecked (review: an empty group in front of 30M fields), and protobufjs takes
 *   some of them (a group's end is not checked).
 */
export function loadRequestProblem(b: Uint8Array): string | undefined {
  let params = 0;
  let others = 0;
  const fieldsAtMost = (wire: ProtoWire, inner?: (n: number, type: number, span: [number, number] | undefined) => void): void => {
    let n = 0;
    wire.fields((f, type, span) => {
      if (++n > MAX_LOAD_PARAMETER_FIELDS) throw new NotALoad(`a RepositoryModelLoad parameter with more than ${MAX_LOAD_PARAMETER_FIELDS} fields is not a load parameter`);
      inner?.(f, type, span);
    });
  };
  const wire = new ProtoWire(b, 0, b.length, malformed);
  try {
    wire.fields((f, type, span) => {
      if (f !== PARAMETERS_FIELD || type !== 2) {
        if (++others > MAX_LOAD_OTHER_FIELDS) throw new NotALoad(`a RepositoryModelLoad message with more than ${MAX_LOAD_OTHER_FIELDS} fields besides its parameters is not a load request`);
        return;
      }
      if (++params > MAX_LOAD_PARAMETERS) throw new NotALoad(tooManyLoadParameters('a RepositoryModelLoad message'));
      // The entry (key = 1, value = 2), then its value's fields.
      fieldsAtMost(wire.within(span!), (g, t, s) => {
        if (g === 2 && t === 2) fieldsAtMost(wire.within(s!));
      });
    });
  } catch (err) {
    if (err instanceof NotALoad) return err.message;
    throw err;
  }
  return undefined;
}
