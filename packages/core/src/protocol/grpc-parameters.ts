/**
 * @module Parameters in the gRPC protocol: `InferParameter` is a oneof (bool_param, int64_param,
 * string_param, double_param, uint64_param); Triode's ParameterValue is a plain JS value. Used by
 * the gRPC frontend and by the client, in both directions.
 * Triton: common/protobuf/grpc_service.proto (InferParameter)
 */
import type { ParameterValue } from '../infer-request.js';

/** A 64-bit protobuf integer as protobufjs may give it. */
export type ProtoLong = number | string | { toString(): string; toNumber(): number; unsigned?: boolean };

/** An InferParameter as protobufjs decodes or encodes it (only one field set). */
export interface InferParameterMessage {
  bool_param?: boolean | null;
  int64_param?: ProtoLong | null;
  string_param?: string | null;
  double_param?: number | null;
  uint64_param?: ProtoLong | null;
  /** The oneof's virtual field (protobufjs): the name of the field that is set. */
  parameter_choice?: string;
}

/** A 64-bit integer as a number when exact, else as a bigint. */
export function longValue(v: ProtoLong): number | bigint {
  if (typeof v === 'number') return v;
  const n = typeof v === 'string' ? Number(v) : v.toNumber();
  return Number.isSafeInteger(n) ? n : BigInt(v.toString());
}

/** Which field of a decoded InferParameter is set; undefined when none is. */
export function parameterKind(p: InferParameterMessage): 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param' | undefined {
  switch (p.parameter_choice) {
    case 'bool_param': case 'int64_param': case 'string_param': case 'double_param': case 'uint64_param': return p.parameter_choice;
    default:
      // Own fields only: a decoded message's prototype holds each field's default (a message
      // with no field set read as bool_param false, review).
      if (isSet(p, 'bool_param')) return 'bool_param';
      if (isSet(p, 'string_param')) return 'string_param';
      if (isSet(p, 'int64_param')) return 'int64_param';
      if (isSet(p, 'double_param')) return 'double_param';
      if (isSet(p, 'uint64_param')) return 'uint64_param';
      return undefined;
  }
}

/** Whether `p` itself holds field `f` (not its prototype's default), not null. */
function isSet(p: InferParameterMessage, f: keyof InferParameterMessage): boolean {
  return Object.hasOwn(p, f) && p[f] !== undefined && p[f] !== null;
}

/** The value of a decoded InferParameter; undefined when no field is set. */
export function parameterValue(p: InferParameterMessage): ParameterValue | undefined {
  switch (p.parameter_choice) {
    case 'bool_param': return p.bool_param === true;
    case 'int64_param': return longValue(p.int64_param ?? 0);
    case 'string_param': return p.string_param ?? '';
    case 'double_param': return p.double_param ?? 0;
    case 'uint64_param': return longValue(p.uint64_param ?? 0);
    default:
      if (isSet(p, 'bool_param')) return p.bool_param!;
      if (isSet(p, 'string_param')) return p.string_param!;
      if (isSet(p, 'int64_param')) return longValue(p.int64_param!);
      if (isSet(p, 'double_param')) return p.double_param!;
      if (isSet(p, 'uint64_param')) return longValue(p.uint64_param!);
      return undefined;
  }
}

const INT64_MAX = (1n << 63n) - 1n;

/** 2^63 as a double: the first whole number int64 cannot hold. */
const TWO_POW_63 = 2 ** 63;

/**
 * The InferParameter for a value: integers as int64 (a bigint beyond int64 as uint64), other numbers
 * as double. A whole number outside int64's range (1e308) is a double: as int64 it wrapped, to 0.
 */
export function inferParameter(v: ParameterValue): InferParameterMessage {
  if (typeof v === 'boolean') return { bool_param: v };
  if (typeof v === 'string') return { string_param: v };
  if (typeof v === 'bigint') return v > INT64_MAX ? { uint64_param: v.toString() } : { int64_param: v.toString() };
  return Number.isInteger(v) && v >= -TWO_POW_63 && v < TWO_POW_63 ? { int64_param: v } : { double_param: v };
}

/** A parameter map both ways. */
export function parametersFromMessage(map: Readonly<Record<string, InferParameterMessage>> | null | undefined): Record<string, ParameterValue> {
  const out: Record<string, ParameterValue> = {};
  if (!map) return out;
  for (const [k, p] of Object.entries(map)) {
    const v = parameterValue(p);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

/** Parameters to an InferParameter map. */
export function parametersToMessage(params: Readonly<Record<string, ParameterValue>> | undefined): Record<string, InferParameterMessage> {
  const out: Record<string, InferParameterMessage> = {};
  if (params) for (const [k, v] of Object.entries(params)) out[k] = inferParameter(v);
  return out;
}
