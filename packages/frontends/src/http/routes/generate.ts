/**
 * @module The generate extension: `POST .../generate` (one JSON answer) and `.../generate_stream`
 * (server-sent events, one event per response: what decoupled models need over HTTP). Request
 * fields other than `id` and `parameters` are the model's inputs by name; outputs come back as
 * fields, single values unwrapped.
 * Triton: server/src/http_server.cc (HandleGenerate), docs/protocol/extension_generate.md
 */
import type { ServerResponse } from 'node:http';
import { Hono, type Context } from 'hono';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import {
  Errors, configTypeToDataType, echo, elementCount,
  type Backplane, type InferenceRequest, type InferenceResponse, type ModelConfig, type Tensor,
} from '@triode/core';
import { readBody } from '../body.js';
import { httpError } from '../../error-mapping.js';
import type { HttpDeps } from '../http-options.js';
import { readJson } from '../json-reader.js';
import { countLeaves, jsonToTensorData, tensorDataToJson } from '../json-tensor.js';
import { checkJsonOutputSize, parameters } from '../infer-codec.js';
import { checkReservedParameters } from '../../protocol-checks.js';
import { modelParams, modelPaths } from './model-params.js';

async function toRequest(c: Context, backplane: Backplane, maxInputSize: number): Promise<InferenceRequest> {
  const model = modelParams(c);
  const body = await readBody(c, maxInputSize);
  // The infer route's reader: nesting is capped (no stack overflow), integers past 2^53 stay exact.
  let doc: unknown;
  try {
    doc = readJson(body);
  } catch (err) {
    throw Errors.invalidArg(`failed to parse the request JSON buffer: ${echo((err as Error).message)}`);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc) || doc instanceof Float64Array) throw Errors.invalidArg('the generate request must be a JSON object');
  const fields = doc as Record<string, unknown>;
  // The same checks as an infer request's parameters and id.
  const params = parameters(fields['parameters'], () => 'the request');
  checkReservedParameters(Object.keys(params));
  const id = fields['id'];
  if (id !== undefined && typeof id !== 'string') throw Errors.invalidArg(`request 'id' must be a string`);
  const config = (await backplane.modelConfig(model.name, model.version)) as ModelConfig;
  const batching = (config.max_batch_size ?? 0) > 0;
  const inputs: Tensor[] = [];
  for (const inp of config.input ?? []) {
    const value = fields[inp.name];
    if (value === undefined) continue;
    const datatype = configTypeToDataType(inp.data_type ?? '') ?? 'BYTES';
    // Nested arrays are flattened (row-major): the input is a 1-D tensor of all their values.
    const count = countLeaves(value);
    const shape = batching ? [1, count] : [count];
    inputs.push({ name: inp.name, datatype, shape, data: jsonToTensorData(value, datatype, count, inp.name), owned: true });
  }
  for (const k of Object.keys(fields)) {
    if (k !== 'id' && k !== 'parameters' && !(config.input ?? []).some((i) => i.name === k)) {
      throw Errors.invalidArg(`unexpected field '${echo(k)}' in the generate request: model '${echo(model.name)}' has no input of that name`);
    }
  }
  const request: InferenceRequest = { modelName: model.name, inputs, parameters: params };
  if (model.version !== undefined) request.modelVersion = model.version;
  if (id !== undefined) request.id = id;
  return request;
}

/**
 * One response as the generate extension writes it (JSON text): outputs as fields, a single value
 * unwrapped. Values are written as `/infer` writes them: 64-bit integers exact, FP16 as numbers.
 * @throws INVALID_ARG when the outputs as JSON could exceed `limit` bytes (nothing built).
 */
function toJson(r: InferenceResponse, limit: number): string {
  checkJsonOutputSize(r.outputs, () => false, limit);
  let json = '{';
  if (r.id) json += `"id":${JSON.stringify(r.id)},`;
  json += `"model_name":${JSON.stringify(r.modelName)},"model_version":${JSON.stringify(r.modelVersion)}`;
  for (const o of r.outputs) {
    const values = tensorDataToJson(o.data, o.datatype);
    json += `,${JSON.stringify(o.name)}:${elementCount(o.shape) === 1 ? values.slice(1, -1) : values}`;
  }
  return json + '}';
}

/** How long an SSE client may take no bytes at all before its response is given up (HttpOptions.sseStallMs). */
const SSE_STALL_MS = 10_000;

/** The most bytes of an event written at once: Node counts a write as sent only once all of it is. */
const SSE_PIECE_BYTES = 64 * 1024;

/**
 * Watches a response's socket while an event goes out: progress is a piece taken (written on) or
 * the socket's unsent bytes going down; with none for `stallMs`, `onStall` (which closes `out`).
 * A slow client that reads steadily keeps it going however large the event (review: one 3 MB
 * event written whole showed no progress until all of it had gone, and a client reading at
 * 2 Mbit/s was given up mid-event). Without Node's response (a fetch-style caller), it does nothing.
 */
function stallWatch(out: ServerResponse | undefined, stallMs: number, onStall: () => void): { progress: () => void; stop: () => void } {
  const socket = out?.socket;
  if (!socket) return { progress: () => undefined, stop: () => undefined };
  let length = socket.writableLength;
  let since = Date.now();
  const timer = setInterval(() => {
    const now = Date.now();
    const l = socket.writableLength;
    if (l < length) since = now;
    length = l;
    if (now - since >= stallMs) {
      clearInterval(timer);
      onStall();
    }
  }, Math.max(10, Math.min(1000, Math.floor(stallMs / 4))));
  return {
    progress: () => {
      since = Date.now();
      length = socket.writableLength;
    },
    stop: () => clearInterval(timer),
  };
}

/**
 * Writes one SSE event (`data: <json>\n\n`, as Hono's writeSSE writes a one-line data), in pieces
 * of SSE_PIECE_BYTES, each when the one before has been taken; stops early once `gone()`.
 */
async function writeEvent(stream: SSEStreamingApi, data: string, progress: () => void, gone: () => boolean): Promise<void> {
  const text = `data: ${data}\n\n`;
  if (text.length <= SSE_PIECE_BYTES / 3) {
    await stream.write(text);
    return;
  }
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.byteLength && !gone(); at += SSE_PIECE_BYTES) {
    await stream.write(bytes.subarray(at, at + SSE_PIECE_BYTES));
    progress();
  }
}

/** Resolves when what `out` was given has gone to the socket (or `out` closed); at once without Node's response. */
async function drained(out: ServerResponse | undefined): Promise<void> {
  if (!out) return;
  // The event reaches `out` a few turns after the stream took it (@hono/node-server's reader).
  await new Promise((r) => setImmediate(r));
  if (out.destroyed || !out.writableNeedDrain) return;
  await new Promise<void>((resolve) => {
    const done = (): void => {
      out.off('drain', done);
      out.off('close', done);
      resolve();
    };
    out.on('drain', done);
    out.on('close', done);
  });
}

/** The generate routes. */
export function generateRoutes({ backplane, maxInputSize, maxJsonOutputSize, sseStallMs = SSE_STALL_MS }: HttpDeps): Hono {
  const app = new Hono();
  for (const path of modelPaths('/generate')) {
    app.post(path, async (c) => {
      const request = await toRequest(c, backplane, maxInputSize);
      // A client that goes away cancels the request, as on /infer: it holds no queue place or instance.
      request.signal = c.req.raw.signal;
      // The first response is kept, the rest only counted: a model streaming a million responses
      // to this route gets its error, not a million responses held in memory.
      let first: InferenceResponse | undefined;
      let count = 0;
      await backplane.inferStream(request, (r) => {
        first ??= r;
        count++;
      });
      if (count !== 1) {
        throw Errors.invalidArg(`generate expects exactly one response from model '${request.modelName}', got ${count}: use generate_stream`);
      }
      return c.body(toJson(first!, maxJsonOutputSize), 200, { 'Content-Type': 'application/json' });
    });
  }
  for (const path of modelPaths('/generate_stream')) {
    app.post(path, async (c) => {
      // Errors before the first response are ordinary JSON errors with Triton's status.
      const request = await toRequest(c, backplane, maxInputSize);
      // A client that goes away cancels the request: a decoupled model sees it (isCancelled) and stops.
      request.signal = c.req.raw.signal;
      const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
      const res = streamSSE(c, async (stream) => {
        // Given up (the client left, or took nothing for sseStallMs): the response is destroyed,
        // and the responses still waiting are dropped unwritten, so what they held is freed.
        let gone = false;
        const giveUp = (): void => {
          if (gone) return;
          gone = true;
          if (outgoing && !outgoing.destroyed) outgoing.destroy();
          void stream.abort();
        };
        const signal = c.req.raw.signal;
        if (signal.aborted) giveUp();
        else signal.addEventListener('abort', giveUp, { once: true });
        try {
          let failed: unknown;
          // One event at a time: a response is made JSON only when the one before has gone out
          // (the socket drained), and its promise settles then. The model's next response waits
          // on that (ResponseHandler), so a client that stops reading makes the server hold about
          // one event, not the backend's 64 untaken (3 MB of JSON each for a 1 MiB output; review).
          let last: Promise<void> = Promise.resolve();
          await backplane.inferStream(request, (r) => {
            last = last.then(async () => {
              if (gone || failed !== undefined) return;
              let data: string;
              try {
                data = toJson(r, maxJsonOutputSize);
              } catch (err) {
                data = httpError(err).body;
              }
              const watch = stallWatch(outgoing, sseStallMs, giveUp);
              try {
                await writeEvent(stream, data, watch.progress, () => gone);
                await drained(outgoing);
              } catch (err) {
                failed ??= err;
              } finally {
                watch.stop();
              }
            });
            return last;
          });
          await last;
          if (failed !== undefined) throw failed;
        } catch (err) {
          if (!gone) await stream.writeSSE({ data: httpError(err).body });
        } finally {
          signal.removeEventListener('abort', giveUp);
        }
      });
      // Triton's content type (streamSSE writes text/event-stream alone).
      res.headers.set('Content-Type', 'text/event-stream; charset=utf-8');
      return res;
    });
  }
  return app;
}
