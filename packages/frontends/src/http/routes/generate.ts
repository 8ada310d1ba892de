/**
 * @module The generate extension: `POST .../generate` (one JSON answer) and `.../generate_stream`
 * (server-sent events, one event per response: what decoupled models need over HTTP). Request
 * fields are the model's inputs by name, or else parameters (generate-request.ts); outputs come
 * back as fields, single values unwrapped.
 * Triton: server/src/http_server.cc (HandleGenerate), docs/protocol/extension_generate.md
 */
import type { ServerResponse } from 'node:http';
import { Hono } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { streamSSE, type SSEStreamingApi } from 'hono/streaming';
import { Errors, elementCount, normalizeRequest, type InferenceResponse } from '@triode/core';
import { httpError } from '../../error-mapping.js';
import type { HttpDeps } from '../http-options.js';
import { tensorDataToJson } from '../json-tensor.js';
import { checkJsonOutputSize } from '../infer-codec.js';
import { modelPaths } from './model-params.js';
import { toGenerateRequest } from './generate-request.js';

/**
 * One response as the generate extension writes it (JSON text): `id`, `model_name`,
 * `model_version`, each response parameter and each output as a field (a single value
 * unwrapped). As Triton's: a name already taken keeps its first value (those fields, then the
 * parameters, then the outputs), and the fields are in name order (Triton's std::map). Values are
 * written as `/infer` writes them: 64-bit integers exact, FP16 as numbers.
 * @throws INVALID_ARG when the outputs as JSON could exceed `limit` bytes (nothing built).
 */
function toJson(r: InferenceResponse, limit: number): string {
  checkJsonOutputSize(r.outputs, () => false, limit);
  const fields = new Map<string, string>();
  if (r.id) fields.set('id', JSON.stringify(r.id));
  fields.set('model_name', JSON.stringify(r.modelName));
  fields.set('model_version', JSON.stringify(r.modelVersion));
  for (const [k, v] of Object.entries(r.parameters ?? {})) {
    if (!fields.has(k)) fields.set(k, typeof v === 'bigint' ? String(v) : JSON.stringify(v));
  }
  for (const o of r.outputs) {
    if (fields.has(o.name)) continue;
    const values = tensorDataToJson(o.data, o.datatype);
    fields.set(o.name, elementCount(o.shape) === 1 ? values.slice(1, -1) : values);
  }
  const names = [...fields.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  let json = '{';
  for (const k of names) json += `${json.length > 1 ? ',' : ''}${JSON.stringify(k)}:${fields.get(k)!}`;
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
      const { request } = await toGenerateRequest(c, backplane, maxInputSize);
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
        // Triton's words (its status is 500, or 200 after a first response; the request is the client's mistake).
        throw Errors.invalidArg('generate expects model to produce exactly 1 response, use generate stream for model that generates various number of responses');
      }
      return c.body(toJson(first!, maxJsonOutputSize), 200, { 'Content-Type': 'application/json' });
    });
  }
  for (const path of modelPaths('/generate_stream')) {
    app.post(path, async (c) => {
      const { request, config } = await toGenerateRequest(c, backplane, maxInputSize);
      // Triton checks a request inside ServerInferAsync, before any response: one it refuses is an
      // ordinary JSON error with its status. The same checks here, on a copy (the core checks the
      // request again), so that a failure of inferStream below is the model's.
      normalizeRequest({ ...request, inputs: request.inputs.map((t) => ({ ...t, shape: [...t.shape] })) }, config);
      // A client that goes away cancels the request: a decoupled model sees it (isCancelled) and stops.
      request.signal = c.req.raw.signal;
      const outgoing = (c.env as { outgoing?: ServerResponse } | undefined)?.outgoing;
      const signal = c.req.raw.signal;
      // Nothing is written until the first response (or the request's end): as Triton, its status
      // is the response's, the status of its error when it is one (500 for a model's INTERNAL).
      let sse: SSEStreamingApi | undefined;
      let opened!: () => void;
      const open = new Promise<void>((resolve) => { opened = resolve; });
      let start!: (status: number) => void;
      const started = new Promise<number>((resolve) => { start = resolve; });
      // Given up (the client left, or took nothing for sseStallMs): the response is destroyed,
      // and the responses still waiting are dropped unwritten, so what they held is freed.
      let gone = false;
      const giveUp = (): void => {
        if (gone) return;
        gone = true;
        if (outgoing && !outgoing.destroyed) outgoing.destroy();
        void sse?.abort();
      };
      let failed: unknown;
      const send = async (data: string): Promise<void> => {
        await open;
        if (gone || failed !== undefined) return;
        const watch = stallWatch(outgoing, sseStallMs, giveUp);
        try {
          await writeEvent(sse!, data, watch.progress, () => gone);
          await drained(outgoing);
        } catch (err) {
          failed ??= err;
        } finally {
          watch.stop();
        }
      };
      // One event at a time: a response is made JSON only when the one before has gone out
      // (the socket drained), and its promise settles then. The model's next response waits
      // on that (ResponseHandler), so a client that stops reading makes the server hold about
      // one event, not the backend's 64 untaken (3 MB of JSON each for a 1 MiB output; review).
      let last: Promise<void> = Promise.resolve();
      let count = 0;
      const done = backplane.inferStream(request, (r) => {
        if (count++ === 0) {
          // The first response sets the status: an output too large for JSON makes it 400, as
          // Triton's FinalizeResponse error does.
          let data: string;
          try {
            data = toJson(r, maxJsonOutputSize);
            start(200);
          } catch (err) {
            const e = httpError(err);
            data = e.body;
            start(e.status);
          }
          last = last.then(() => send(data));
          return last;
        }
        last = last.then(async () => {
          if (gone || failed !== undefined) return;
          let data: string;
          try {
            data = toJson(r, maxJsonOutputSize);
          } catch (err) {
            data = httpError(err).body;
          }
          await send(data);
        });
        return last;
      });
      // No response at all: 200 and no events (Triton's flag-only final response).
      done.then(() => start(200), (err: unknown) => start(httpError(err).status));
      c.status(await started as ContentfulStatusCode);
      const res = streamSSE(c, async (stream) => {
        sse = stream;
        opened();
        if (signal.aborted) giveUp();
        else signal.addEventListener('abort', giveUp, { once: true });
        try {
          let error: unknown;
          try {
            await done;
          } catch (err) {
            error = err;
          }
          // The events already made go out before the error's.
          await last;
          error ??= failed;
          if (error !== undefined && !gone) await stream.writeSSE({ data: httpError(error).body });
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
