/**
 * @module The generate extension: `POST .../generate` (one JSON answer) and `.../generate_stream`
 * (server-sent events, one event per response: what decoupled models need over HTTP). Request
 * fields other than `id` and `parameters` are the model's inputs by name; outputs come back as
 * fields, single values unwrapped.
 * Triton: server/src/http_server.cc (HandleGenerate), docs/protocol/extension_generate.md
 */
import { Hono, type Context } from 'hono';
import { streamSSE } from 'hono/streaming';
import {
  Errors, configTypeToDataType, deserializeBytesTensor, echo,
  type Backplane, type InferenceRequest, type InferenceResponse, type ModelConfig, type ParameterValue, type Tensor,
} from '@triode/core';
import { readBody } from '../body.js';
import { httpError } from '../../error-mapping.js';
import type { HttpDeps } from '../http-options.js';
import { jsonToTensorData } from '../json-tensor.js';
import { checkJsonOutputSize } from '../infer-codec.js';
import { modelParams, modelPaths } from './model-params.js';

const utf8 = new TextDecoder();

async function toRequest(c: Context, backplane: Backplane, maxInputSize: number): Promise<InferenceRequest> {
  const model = modelParams(c);
  const body = await readBody(c, maxInputSize);
  let doc: unknown;
  try {
    doc = JSON.parse(utf8.decode(body));
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${echo((err as Error).message)}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw Errors.invalidArg('the generate request must be a JSON object');
  const fields = doc as Record<string, unknown>;
  const config = (await backplane.modelConfig(model.name, model.version)) as ModelConfig;
  const batching = (config.max_batch_size ?? 0) > 0;
  const inputs: Tensor[] = [];
  for (const inp of config.input ?? []) {
    const value = fields[inp.name];
    if (value === undefined) continue;
    const datatype = configTypeToDataType(inp.data_type ?? '') ?? 'BYTES';
    const flat = Array.isArray(value) ? value.flat(Infinity) : [value];
    const shape = batching ? [1, flat.length] : [flat.length];
    inputs.push({ name: inp.name, datatype, shape, data: jsonToTensorData(flat, datatype, flat.length, inp.name) });
  }
  for (const k of Object.keys(fields)) {
    if (k !== 'id' && k !== 'parameters' && !(config.input ?? []).some((i) => i.name === k)) {
      throw Errors.invalidArg(`unexpected field '${echo(k)}' in the generate request: model '${echo(model.name)}' has no input of that name`);
    }
  }
  const params = fields['parameters'];
  const request: InferenceRequest = { modelName: model.name, inputs, parameters: (params && typeof params === 'object' ? params : {}) as Record<string, ParameterValue> };
  if (model.version !== undefined) request.modelVersion = model.version;
  if (typeof fields['id'] === 'string') request.id = fields['id'];
  return request;
}

/**
 * One response as the generate extension writes it: outputs as fields, single values unwrapped.
 * @throws INVALID_ARG when the outputs as JSON could exceed `limit` bytes (nothing built).
 */
function toJson(r: InferenceResponse, limit: number): Record<string, unknown> {
  checkJsonOutputSize(r.outputs, () => false, limit);
  const out: Record<string, unknown> = {};
  if (r.id) out['id'] = r.id;
  out['model_name'] = r.modelName;
  out['model_version'] = r.modelVersion;
  for (const o of r.outputs) {
    let values: unknown[];
    if (o.datatype === 'BYTES') values = deserializeBytesTensor(o.data as Uint8Array).map((b) => utf8.decode(b));
    else if (o.datatype === 'BOOL') values = Array.from(o.data as Uint8Array, (x) => x !== 0);
    else values = Array.from(o.data as ArrayLike<number | bigint>, (x) => (typeof x === 'bigint' ? Number(x) : x));
    out[o.name] = values.length === 1 ? values[0] : values;
  }
  return out;
}

/** The generate routes. */
export function generateRoutes({ backplane, maxInputSize, maxJsonOutputSize }: HttpDeps): Hono {
  const app = new Hono();
  for (const path of modelPaths('/generate')) {
    app.post(path, async (c) => {
      const request = await toRequest(c, backplane, maxInputSize);
      const responses: InferenceResponse[] = [];
      await backplane.inferStream(request, (r) => responses.push(r));
      if (responses.length !== 1) {
        throw Errors.invalidArg(`generate expects exactly one response from model '${request.modelName}', got ${responses.length}: use generate_stream`);
      }
      return c.json(toJson(responses[0]!, maxJsonOutputSize));
    });
  }
  for (const path of modelPaths('/generate_stream')) {
    app.post(path, async (c) => {
      // Errors before the first response are ordinary JSON errors with Triton's status.
      const request = await toRequest(c, backplane, maxInputSize);
      return streamSSE(c, async (stream) => {
        try {
          const writes: Promise<void>[] = [];
          await backplane.inferStream(request, (r) => {
            let data: string;
            try {
              data = JSON.stringify(toJson(r, maxJsonOutputSize));
            } catch (err) {
              data = httpError(err).body;
            }
            writes.push(stream.writeSSE({ data }));
          });
          await Promise.all(writes);
        } catch (err) {
          await stream.writeSSE({ data: httpError(err).body });
        }
      });
    });
  }
  return app;
}
