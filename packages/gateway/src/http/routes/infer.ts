/**
 * @module `POST /v2/models/{m}[/versions/{v}]/infer`: JSON and binary tensors, compression.
 * Triton: server/src/http_server.cc HandleInfer
 */
import { Hono } from 'hono';
import { Errors, configTypeToDataType, type ModelConfig } from '@triode/core';
import { compress, header, readBody, responseCompression } from '../body.js';
import type { HttpDeps } from '../http-options.js';
import { encodeInferResponse, parseInferRequest } from '../infer-codec.js';
import { modelParams, modelPaths } from './model-params.js';

/** The infer routes. */
export function inferRoutes({ backplane, maxInputSize }: HttpDeps): Hono {
  const app = new Hono();
  for (const path of modelPaths('/infer')) {
    app.post(path, async (c) => {
      const model = modelParams(c);
      const h = header(c, 'inference-header-content-length');
      let headerLength: number | undefined;
      if (h !== undefined) {
        if (!/^\d+$/.test(h.trim())) throw Errors.invalidArg(`Inference-Header-Content-Length must be a non-negative integer, got '${h}'`);
        headerLength = Number(h);
      }
      const body = await readBody(c, maxInputSize, headerLength);
      let raw: { name: string; datatype: string; shape: number[] } | undefined;
      if (headerLength === 0) {
        const config = (await backplane.modelConfig(model.name, model.version)) as ModelConfig;
        const inputs = config.input ?? [];
        if (inputs.length !== 1) throw Errors.invalidArg(`raw binary request requires model '${model.name}' to have exactly one input, it has ${inputs.length}`);
        const inp = inputs[0]!;
        const dims = inp.dims ?? [];
        raw = {
          name: inp.name,
          datatype: configTypeToDataType(inp.data_type ?? '') ?? '',
          shape: (config.max_batch_size ?? 0) > 0 ? [1, ...dims] : dims,
        };
      }
      const { request, encoding } = parseInferRequest(body, headerLength, model, raw);
      const response = await backplane.infer(request);
      const encoded = encodeInferResponse(response, encoding);
      const headers: Record<string, string> = {
        'Content-Type': encoded.headerLength === undefined ? 'application/json' : 'application/octet-stream',
      };
      if (encoded.headerLength !== undefined) headers['Inference-Header-Content-Length'] = String(encoded.headerLength);
      const how = responseCompression(c);
      if (how) {
        headers['Content-Encoding'] = how;
        return c.body(await compress(encoded.body, how) as Uint8Array<ArrayBuffer>, 200, headers);
      }
      return c.body(encoded.body as Uint8Array<ArrayBuffer> | string, 200, headers);
    });
  }
  return app;
}
