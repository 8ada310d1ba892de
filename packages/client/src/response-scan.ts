/**
 * @module A check of a ModelInferResponse's (and a ModelStreamInferResponse's) wire bytes before
 * protobufjs decodes them: the server is not trusted either. Two bytes of an empty repeated entry
 * decode to an object of a hundred bytes, so a hostile server's 200 MB answer, well under the
 * size limit, made the client allocate gigabytes and block for a minute before running out of
 * memory. The scan counts without making anything and refuses counts no model answers with.
 * Message layout: triton-reference.md (server: grpc_service.proto).
 */
import { ProtoWire, contentsElements, countVarints } from '@triode/core';
import { InferenceServerError } from './errors.js';

/** Most outputs, or raw_output_contents entries, of one response. */
export const MAX_RESPONSE_TENSORS = 4096;
/** Most dims of one output's shape. */
export const MAX_RESPONSE_SHAPE_DIMS = 64;
/** Most entries of one parameters map. */
export const MAX_RESPONSE_PARAMETERS = 1024;
/** Most `bytes_contents`, `int64_contents` and `uint64_contents` elements of one response, together. */
export const MAX_RESPONSE_OBJECTS = 1 << 22;
/** Most bool, int, uint, fp32 and fp64 contents elements of one response, together (servers answer in raw_output_contents). */
export const MAX_RESPONSE_SCALARS = 1 << 24;

const malformed = (): InferenceServerError => new InferenceServerError('malformed response: the message does not decode', { grpcCode: 13 });

/**
 * @throws InferenceServerError (INTERNAL) when decoding the ModelInferResponse in [start, end)
 * would make more objects than an answer has, or its bytes do not parse
 */
export function checkInferResponseWire(bytes: Uint8Array, start = 0, end = bytes.byteLength): void {
  let outputs = 0;
  let raw = 0;
  let params = 0;
  let objects = 0;
  let scalars = 0;
  const tooMany = (what: string, limit: number) => new InferenceServerError(`malformed response: more ${what} than the ${limit} a response may have`, { grpcCode: 13 });
  const wire = new ProtoWire(bytes, start, end, malformed);
  wire.fields((no, type, span) => {
    if (no === 4 && type === 2 && ++params > MAX_RESPONSE_PARAMETERS) throw tooMany('parameters', MAX_RESPONSE_PARAMETERS);
    if (no === 6 && type === 2 && ++raw > MAX_RESPONSE_TENSORS) throw tooMany('raw_output_contents', MAX_RESPONSE_TENSORS);
    if (no === 5 && type === 2) {
      if (++outputs > MAX_RESPONSE_TENSORS) throw tooMany('outputs', MAX_RESPONSE_TENSORS);
      let dims = 0;
      let outParams = 0;
      wire.within(span!).fields((f, t, s) => {
        if (f === 3 && (dims += t === 2 ? countVarints(bytes, s![0], s![1]) : 1) > MAX_RESPONSE_SHAPE_DIMS) throw tooMany('dims in the shape of an output', MAX_RESPONSE_SHAPE_DIMS);
        if (f === 4 && t === 2 && ++outParams > MAX_RESPONSE_PARAMETERS) throw tooMany('parameters on an output', MAX_RESPONSE_PARAMETERS);
        if (f === 5 && t === 2) {
          wire.within(s!).fields((c, ct, cs) => {
            const n = contentsElements(bytes, c, ct, cs);
            objects += n.objects;
            scalars += n.scalars;
            if (objects > MAX_RESPONSE_OBJECTS) throw tooMany('bytes, int64 and uint64 contents elements', MAX_RESPONSE_OBJECTS);
            if (scalars > MAX_RESPONSE_SCALARS) throw tooMany('bool, int, uint, fp32 and fp64 contents elements', MAX_RESPONSE_SCALARS);
          });
        }
      });
    }
  });
}

/** As checkInferResponseWire, for a ModelStreamInferResponse (its `infer_response`, field 2). */
export function checkStreamResponseWire(bytes: Uint8Array): void {
  const wire = new ProtoWire(bytes, 0, bytes.byteLength, malformed);
  wire.fields((no, type, span) => {
    if (no === 2 && type === 2) checkInferResponseWire(bytes, span![0], span![1]);
  });
}
