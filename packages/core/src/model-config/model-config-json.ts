/**
 * @module ModelConfig <-> JSON. The writer prints what Triton's `ModelConfigToJson` prints: proto
 * field names, every scalar, repeated and map field (defaults included), set messages only, enums
 * by name, 64-bit integers as numbers but the three it leaves as protobuf prints them, strings
 * (see STRING_INT64). The reader takes the JSON a client sends as a load override
 * as protobuf's JsonStringToMessage does with Triton's options: integers may be strings
 * (`{"max_batch_size": "16"}`), a field may be named by its proto name or its lowerCamelCase JSON
 * name (`maxBatchSize`), and enum names match whatever their case (`kind_gpu`).
 * Triton: core/src/model_config_utils.cc ModelConfigToJson / JsonToModelConfig
 */
import { Errors } from '../errors.js';
import { ENUMS, INT_RANGES, MESSAGES, defaultScalar, wideIntegerNote, type FieldSpec, type ValueType } from './model-config-schema.js';
import type { ModelConfig } from './model-config.js';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/**
 * The 64-bit fields Triton's ModelConfigToJson leaves as protobuf's JSON printer writes them,
 * strings (`"dims": ["2"]`): it turns the others into numbers one by one, and these it never
 * reaches. `InitialState.dims` it means to (its fixup looks for `initial_state` in
 * `sequence_batching` instead of in each `state`), so a sequence model's config shows them so.
 * Triton: core/src/model_config_utils.cc ModelConfigToJson, ValidateModelConfigInt64
 */
const STRING_INT64: ReadonlySet<string> = new Set([
  'ModelInstanceGroup.SecondaryDevice.device_id',
  'ModelOptimizationPolicy.Cuda.GraphSpec.Shape.dim',
  'ModelSequenceBatching.InitialState.dims',
]);

function writeValue(v: unknown, type: ValueType): Json {
  if (typeof type === 'object' && 'message' in type) return writeMessage(v as Record<string, unknown>, type.message);
  return v as Json;
}

function writeMessage(m: Record<string, unknown>, type: string): { [k: string]: Json } {
  const spec = MESSAGES[type]!;
  const out: { [k: string]: Json } = {};
  for (const [name, field] of Object.entries(spec)) {
    const v = m[name];
    const isMsg = typeof field.type === 'object' && 'message' in field.type;
    if (STRING_INT64.has(`${type}.${name}`)) {
      out[name] = field.repeated ? ((v ?? []) as unknown[]).map(String) : String(v ?? 0);
    } else if (field.mapKey !== undefined) {
      const entries = Object.entries((v ?? {}) as Record<string, unknown>);
      out[name] = Object.fromEntries(entries.map(([k, x]) => [k, writeValue(x, field.type)]));
    } else if (field.repeated) {
      out[name] = ((v ?? []) as unknown[]).map((x) => writeValue(x, field.type));
    } else if (isMsg || field.oneof) {
      if (v !== undefined) out[name] = writeValue(v, field.type);
    } else {
      out[name] = (v ?? defaultScalar(field.type)) as Json;
    }
  }
  return out;
}

/** The JSON object Triton returns for `GET /v2/models/{m}/config`. */
export function modelConfigToJson(config: ModelConfig): Record<string, unknown> {
  return writeMessage(config as Record<string, unknown>, 'ModelConfig');
}

function readScalar(v: unknown, field: FieldSpec, path: string): unknown {
  const type = field.type;
  const bad = (what: string) => Errors.invalidArg(`failed to parse model configuration: ${path}: ${what}`);
  if (typeof type === 'object' && 'message' in type) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw bad('expected an object');
    return readMessage(v as Record<string, unknown>, type.message, path);
  }
  if (typeof type === 'object') {
    const names = ENUMS[type.enum] ?? [];
    // Triton parses with case_insensitive_enum_parsing = true (JsonToModelConfig).
    const byCase = typeof v === 'string' ? names.find((n) => n === v) ?? names.find((n) => n.toLowerCase() === v.toLowerCase()) : undefined;
    if (byCase !== undefined) return byCase;
    if (typeof v === 'number' && names[v] !== undefined) return names[v];
    throw bad(`invalid value ${JSON.stringify(v)} for enum ${type.enum}`);
  }
  switch (type) {
    case 'string':
    case 'bytes':
      if (typeof v !== 'string') throw bad('expected a string');
      return v;
    case 'bool':
      if (typeof v === 'boolean') return v;
      if (v === 'true' || v === 'false') return v === 'true';
      throw bad('expected a boolean');
    case 'float':
    case 'double': {
      const n = typeof v === 'string' ? Number(v) : v;
      if (typeof n !== 'number' || Number.isNaN(n) && v !== 'NaN') throw bad('expected a number');
      return n;
    }
    default: {
      const n = typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : v;
      const [lo, hi] = INT_RANGES[type]!;
      if (typeof n !== 'number' || !Number.isInteger(n) || n < lo || n > hi) {
        const note = (typeof v === 'string' || typeof v === 'number') && Number.isInteger(Number(v)) ? wideIntegerNote(type, String(v)) : undefined;
        throw bad(`expected an integer of type ${type}${note ? ` (${note})` : ''}`);
      }
      return n;
    }
  }
}

/** protobuf's ToJsonName: `max_batch_size` -> `maxBatchSize`. */
function jsonName(protoName: string): string {
  return protoName.replace(/_+(.?)/g, (_, c: string) => c.toUpperCase());
}

/** Per message type: each field's proto name by the names JSON may give it (proto and JSON names). */
const FIELD_NAMES = new Map<string, ReadonlyMap<string, string>>();

function fieldNames(type: string): ReadonlyMap<string, string> {
  let names = FIELD_NAMES.get(type);
  if (!names) {
    const m = new Map<string, string>();
    for (const name of Object.keys(MESSAGES[type]!)) m.set(jsonName(name), name);
    // A proto name wins over another field's JSON name.
    for (const name of Object.keys(MESSAGES[type]!)) m.set(name, name);
    FIELD_NAMES.set(type, (names = m));
  }
  return names;
}

function readMessage(m: Record<string, unknown>, type: string, path: string): Record<string, unknown> {
  const spec = MESSAGES[type]!;
  const names = fieldNames(type);
  const out: Record<string, unknown> = {};
  const oneofs = new Map<string, string>();
  for (const [given, v] of Object.entries(m)) {
    // protobuf's JSON parser takes a field's proto name or its JSON (lowerCamelCase) name.
    const name = names.get(given);
    const field = name === undefined ? undefined : spec[name];
    if (name === undefined || !field) throw Errors.invalidArg(`failed to parse model configuration: unknown field "${path ? `${path}.${given}` : given}"`);
    const p = path ? `${path}.${name}` : name;
    if (given !== name && Object.hasOwn(m, name)) {
      throw Errors.invalidArg(`failed to parse model configuration: "${p}" is given twice (as "${name}" and "${given}")`);
    }
    // null is JSON's absent field; undefined is the same in an object a backend filled in.
    if (v === null || v === undefined) continue;
    if (field.oneof) {
      const prev = oneofs.get(field.oneof);
      if (prev) throw Errors.invalidArg(`failed to parse model configuration: "${p}" and "${prev}" are both set (oneof ${field.oneof})`);
      oneofs.set(field.oneof, name);
    }
    if (field.mapKey !== undefined) {
      if (typeof v !== 'object' || Array.isArray(v)) throw Errors.invalidArg(`failed to parse model configuration: ${p}: expected an object`);
      const entry: FieldSpec = { type: field.type };
      out[name] = Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, readScalar(x, entry, `${p}.${k}`)]));
    } else if (field.repeated) {
      if (!Array.isArray(v)) throw Errors.invalidArg(`failed to parse model configuration: ${p}: expected an array`);
      out[name] = v.map((x, i) => readScalar(x, field, `${p}[${i}]`));
    } else {
      out[name] = readScalar(v, field, p);
    }
  }
  return out;
}

/**
 * Reads a ModelConfig from its JSON form (a load request's `config` override).
 * @throws TriodeError INVALID_ARG naming the field that is wrong.
 */
export function modelConfigFromJson(json: unknown): ModelConfig {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    throw Errors.invalidArg('failed to parse model configuration: expected a JSON object');
  }
  return readMessage(json as Record<string, unknown>, 'ModelConfig', '') as ModelConfig;
}
