/**
 * @module A generate request's JSON as an InferenceRequest. Each top-level key, and each key of
 * `parameters`, is the model's input of that name or else a request parameter; an input's shape
 * is fitted to the model's.
 * Triton: server/src/http_server.cc (HandleGenerate, GenerateRequestClass::ConvertGenerateRequest,
 * ExactMappingInput, SetTritonParameterFromJsonParameter), server/src/http_server.h
 * (ConfigureGenerateMappingSchema)
 */
import type { Context } from 'hono';
import {
  Errors, configTypeToDataType, echo, setOwn,
  type Backplane, type DataType, type InferenceRequest, type ModelConfig, type ParameterValue, type Tensor,
} from '@triode/core';
import { readBody } from '../body.js';
import { readJson, type JsonValue } from '../json-reader.js';
import { countLeaves, jsonToTensorData } from '../json-tensor.js';
import { MAX_PARAMETERS } from '../infer-codec.js';
import { checkReservedParameters } from '../../protocol-checks.js';
import { modelParams } from './model-params.js';

/** A model input as the generate route maps one: its type, and its shape as model metadata gives it. */
interface InputSpec {
  datatype: DataType;
  /** The config's dims, after a -1 batch dim when `max_batch_size` > 0. */
  dims: readonly number[];
}

/**
 * The shape a generate input of `count` elements gets, as Triton fits it: from the innermost dim
 * out, `count` is divided by each fixed dim; the innermost -1 takes what is left and any other -1
 * is 1. Dims [1,1] and one value give [1,1]; [-1,-1,2] and 4 values give [1,2,2].
 * @throws INVALID_ARG (Triton's words) when the count cannot fill the dims.
 */
export function fitShape(dims: readonly number[], count: number, name: string): number[] {
  const cannot = () => Errors.invalidArg(`The schema can not convert input '${echo(name)}' to tensor with proper shape`);
  // A 0 dim holds no elements (Triton divides by it); the -1 dims are then 1.
  if (dims.includes(0)) {
    if (count !== 0) throw cannot();
    return dims.map((d) => (d < 0 ? 1 : d));
  }
  const shape = [...dims];
  let left = count;
  for (let i = shape.length - 1; i >= 0; i--) {
    const d = shape[i]!;
    if (d < 0) continue;
    if (left % d !== 0) throw cannot();
    left /= d;
  }
  for (let i = shape.length - 1; i >= 0; i--) {
    if (shape[i]! < 0) {
      shape[i] = left;
      left = 1;
    }
  }
  if (left !== 1) throw cannot();
  return shape;
}

/** A JSON object as the reader gives one (not an array, nor a number array). */
const isObject = (v: unknown): v is Record<string, JsonValue> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !ArrayBuffer.isView(v);

/** Whether every value of nested `v` passes `ok` (a number array's values are numbers). */
function allLeaves(v: unknown, ok: (x: unknown) => boolean): boolean {
  if (v instanceof Float64Array) return v.length === 0 || ok(0);
  if (Array.isArray(v)) return v.every((x) => allLeaves(x, ok));
  return ok(v);
}

/** Members of objects in document order, duplicates included (ReadJsonOptions.onMember). */
type Members = Map<object, [string, JsonValue][]>;

/**
 * Maps one request key to an input or a parameter, as Triton's ExactMappingInput: a key that
 * names an input is that input (a second time: Triton's "already exists"); any other key is a
 * parameter, a string, an integer, a boolean or (as Triton since 25.x) another number.
 */
function mapKey(
  name: string, value: JsonValue, specs: Map<string, InputSpec>,
  inputs: Tensor[], params: Record<string, ParameterValue>,
): void {
  const spec = specs.get(name);
  if (spec) {
    if (inputs.some((t) => t.name === name)) throw Errors.invalidArg(`input '${echo(name)}' already exists in request`);
    // Nested arrays are flattened (row-major): the shape is fitted to all their values.
    const count = countLeaves(value);
    const shape = fitShape(spec.dims, count, name);
    // Triton's words for a wrong JSON type where its tests match them (a string or boolean input);
    // other wrong values get the infer route's message naming the element.
    const want = spec.datatype === 'BYTES' ? 'string' : spec.datatype === 'BOOL' ? 'boolean' : undefined;
    if (want && !allLeaves(value, (x) => typeof x === want)) {
      throw Errors.invalidArg(`Unable to parse 'data': attempt to access JSON non-${want} as ${want}`);
    }
    inputs.push({ name, datatype: spec.datatype, shape, data: jsonToTensorData(value, spec.datatype, count, name), owned: true });
    return;
  }
  if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean' && typeof value !== 'bigint') {
    throw Errors.invalidArg(`parameter '${echo(name)}' has invalid type. It should be either 'int', 'bool', or 'string'.`);
  }
  // "__proto__" is a parameter like any other (an own property, as the JSON reader makes it).
  if (name === '__proto__') setOwn(params, name, value);
  else params[name] = value;
}

/**
 * Reads a generate request: the body's members in document order, as Triton reads them (a key
 * given twice is met twice; Triton then reads its first value again).
 * @returns the request and the model's config (read once, for the route's own checks)
 * @throws INVALID_ARG with Triton's words where it has them
 */
export async function toGenerateRequest(c: Context, backplane: Backplane, maxInputSize: number): Promise<{ request: InferenceRequest; config: ModelConfig }> {
  const model = await modelParams(c, backplane);
  // Triton reads the model's metadata first: an unknown model is 404 whatever the body.
  const config = (await backplane.modelConfig(model.name, model.version)) as ModelConfig;
  // Compared as sent (Triton's GetRequestCompressionType): `IDENTITY` is not identity.
  const encoding = c.req.header('content-encoding');
  if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
    throw Errors.invalidArg(`Unsupported content-encoding, only 'identity' is supported.`);
  }
  const body = await readBody(c, maxInputSize);
  const members: Members = new Map();
  let doc: JsonValue;
  try {
    // The infer route's reader: nesting is capped (no stack overflow), integers past 2^53 stay exact.
    doc = readJson(body, {
      onMember: (object, key, value) => {
        let list = members.get(object);
        if (!list) members.set(object, (list = []));
        list.push([key, value]);
      },
    });
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${echo((err as Error).message)}`);
  }
  if (!isObject(doc)) throw Errors.invalidArg('the generate request must be a JSON object');
  const id = doc['id'];
  if (id !== undefined && typeof id !== 'string') throw Errors.invalidArg(`request 'id' must be a string`);

  const batching = (config.max_batch_size ?? 0) > 0;
  const specs = new Map<string, InputSpec>();
  for (const inp of config.input ?? []) {
    const dims = (inp.dims ?? []).map(Number);
    specs.set(inp.name, { datatype: configTypeToDataType(inp.data_type ?? '') ?? 'BYTES', dims: batching ? [-1, ...dims] : dims });
  }
  const inputs: Tensor[] = [];
  const params: Record<string, ParameterValue> = {};
  /** Triton looks a key up by name: the first of a duplicated key's values. */
  const firstValues = (object: Record<string, JsonValue>): [string, JsonValue][] => {
    const seen = new Map<string, JsonValue>();
    return (members.get(object) ?? []).map(([k, v]) => {
      if (!seen.has(k)) seen.set(k, v);
      return [k, seen.get(k)!];
    });
  };
  for (const [key, value] of firstValues(doc)) {
    if (key !== 'parameters') {
      // `id` too: Triton sets it as the request's id and maps it like any other key.
      mapKey(key, value, specs, inputs, params);
      continue;
    }
    if (specs.has(key)) throw Errors.invalidArg(`Keyword 'parameters' for nested schema also given as input tensor name`);
    // Triton answers these 500 (its JSON reader's INTERNAL); the client's mistake: 400.
    if (!isObject(value)) throw Errors.invalidArg(`Expected JSON object for keyword: 'parameters': attempt to access JSON non-object as object`);
    for (const [k, v] of firstValues(value)) {
      try {
        mapKey(k, v, specs, inputs, params);
      } catch (err) {
        throw Errors.invalidArg(`Converting keyword: 'parameters': ${(err as Error).message}`);
      }
    }
  }
  const keys = Object.keys(params);
  if (keys.length > MAX_PARAMETERS) throw Errors.invalidArg(`the generate request has more than ${MAX_PARAMETERS} parameters`);
  checkReservedParameters(keys);
  const request: InferenceRequest = { modelName: model.name, inputs, parameters: params };
  if (model.version !== undefined) request.modelVersion = model.version;
  if (id !== undefined) request.id = id;
  return { request, config };
}
