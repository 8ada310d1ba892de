/**
 * @module A check of a ModelInferRequest's wire bytes before protobufjs decodes them. Decoding
 * makes a JS object of every repeated entry: two bytes of an empty `raw_input_contents` or
 * `inputs` entry become a Buffer or an object of a hundred bytes, and one byte of a packed
 * `shape` a Long. A message far under the size limit (20 MB; 100 KB gzipped) could so take
 * gigabytes and block the event loop for a minute. The scan walks the fields without making
 * anything and refuses counts no model has, with a clear INVALID_ARG.
 * Message layout: triton-reference.md, "InferInputTensor" (server: grpc_service.proto).
 */
import { Errors, ProtoWire, TriodeError, contentsElements, countVarints } from '@triode/core';

/** Most inputs, requested outputs or raw_input_contents entries of one request. */
export const MAX_REQUEST_TENSORS = 1024;
/** Most dims of one input's shape. */
export const MAX_SHAPE_DIMS = 64;
/** Most entries of one parameters map. */
export const MAX_PARAMETERS = 256;
/**
 * Most `bytes_contents`, `int64_contents` and `uint64_contents` elements of one request, together
 * (each becomes an object: a Buffer, a Long): use raw_input_contents for more.
 */
export const MAX_BYTES_CONTENTS = 1 << 20;
/**
 * Most bool, int, uint, fp32 and fp64 `contents` elements of one request, together: each is a
 * slot of a JS array once decoded (a packed bool one byte on the wire): use raw_input_contents for more.
 */
export const MAX_SCALAR_CONTENTS = 1 << 24;

/** Bytes that do not parse as protobuf: refused (INTERNAL, as the decoder's own refusal is answered). */
const malformed = (): TriodeError => new TriodeError('INTERNAL', 'malformed ModelInferRequest (the message does not decode)');

/**
 * Refuses (INVALID_ARG) a ModelInferRequest whose decoding would make more objects than a real
 * request has: more than MAX_REQUEST_TENSORS inputs, outputs or raw contents, a shape of more
 * than MAX_SHAPE_DIMS dims, a parameters map of more than MAX_PARAMETERS entries, or more than
 * MAX_BYTES_CONTENTS object elements (`bytes_contents`, `int64_contents`, `uint64_contents`).
 * Bytes that do not parse are refused INTERNAL, as the decoder's refusal is.
 * @returns the elements of its typed `contents` (each a slot of an array or an object once decoded)
 */
export function checkInferRequestWire(bytes: Uint8Array): number {
  let inputs = 0;
  let outputs = 0;
  let raw = 0;
  let params = 0;
  let objects = 0;
  let scalars = 0;
  const tooMany = (what: string, limit: number) => Errors.invalidArg(`the request has more ${what} than the ${limit} a request may have`);
  const wire = new ProtoWire(bytes, 0, bytes.byteLength, malformed);
  wire.fields((no, type, span) => {
    if (no === 4 && type === 2 && ++params > MAX_PARAMETERS) throw tooMany('parameters', MAX_PARAMETERS);
    if (no === 7 && type === 2 && ++raw > MAX_REQUEST_TENSORS) throw tooMany('raw_input_contents', MAX_REQUEST_TENSORS);
    if (no === 6 && type === 2) {
      if (++outputs > MAX_REQUEST_TENSORS) throw tooMany('outputs', MAX_REQUEST_TENSORS);
      let outParams = 0;
      wire.within(span!).fields((f, t) => {
        if (f === 2 && t === 2 && ++outParams > MAX_PARAMETERS) throw tooMany('parameters on an output', MAX_PARAMETERS);
      });
    }
    if (no === 5 && type === 2) {
      if (++inputs > MAX_REQUEST_TENSORS) throw tooMany('inputs', MAX_REQUEST_TENSORS);
      let dims = 0;
      let inParams = 0;
      wire.within(span!).fields((f, t, s) => {
        if (f === 3 && (dims += t === 2 ? countVarints(bytes, s![0], s![1]) : 1) > MAX_SHAPE_DIMS) throw tooMany('dims in the shape of an input', MAX_SHAPE_DIMS);
        if (f === 4 && t === 2 && ++inParams > MAX_PARAMETERS) throw tooMany('parameters on an input', MAX_PARAMETERS);
        if (f === 5 && t === 2) {
          wire.within(s!).fields((c, ct, cs) => {
            const n = contentsElements(bytes, c, ct, cs);
            objects += n.objects;
            scalars += n.scalars;
            if (objects > MAX_BYTES_CONTENTS) throw tooMany('bytes_contents, int64_contents and uint64_contents elements', MAX_BYTES_CONTENTS);
            if (scalars > MAX_SCALAR_CONTENTS) throw tooMany('bool, int, uint, fp32 and fp64 contents elements (use raw_input_contents)', MAX_SCALAR_CONTENTS);
          });
        }
      });
    }
  });
  return objects + scalars;
}

/** Where a refused message's error is kept, in place of the decoded message (see `decodeInferRequest`). */
export const REFUSED = Symbol('refused ModelInferRequest');

/**
 * Where a decoded message keeps the size of its wire bytes (decompressed): what a stream holds for
 * it, its id and string parameters included (they counted for nothing, and a stream of 1 MB ids,
 * gzipped to 1 KB each, ran the server out of heap; review).
 */
export const WIRE_BYTES = Symbol('ModelInferRequest wire bytes');

/** The longest request id a refused message's answer repeats (Triton repeats it whole; Triode's ids in errors are bounded). */
const MAX_REFUSED_ID_CHARS = 4096;

/** The `id` (field 3) of a message that was refused, read from its bytes; '' when it has none or they do not parse. */
function refusedId(bytes: Uint8Array): string {
  let id = '';
  try {
    const wire = new ProtoWire(bytes, 0, bytes.byteLength, malformed);
    wire.fields((no, type, span) => {
      if (no === 3 && type === 2) id = Buffer.from(bytes.buffer, bytes.byteOffset + span![0], Math.min(span![1] - span![0], MAX_REFUSED_ID_CHARS * 4)).toString('utf8').slice(0, MAX_REFUSED_ID_CHARS);
    });
  } catch {
    // What parsed before the bad field is kept.
  }
  return id;
}

/**
 * Decodes a ModelInferRequest after `checkInferRequestWire`. A refused one, or one the decoder
 * refuses (the scan does not look inside every field), comes back as an object holding the error
 * under REFUSED, so that the handler answers it in band (and a stream goes on, the requests before
 * it answered) instead of grpc-js ending the call with a bare "Error deserializing request".
 */
export function decodeInferRequest<B extends Uint8Array, T extends object>(bytes: B, decode: (b: B) => T): T | { [REFUSED]: TriodeError; id: string } {
  try {
    checkInferRequestWire(bytes);
    const m = decode(bytes);
    Object.defineProperty(m, WIRE_BYTES, { value: bytes.byteLength });
    return m;
  } catch (err) {
    // Its id is answered with the error, as Triton does, so a client knows which request failed.
    return { [REFUSED]: err instanceof TriodeError ? err : malformed(), id: refusedId(bytes) };
  }
}
