/**
 * @module A direct path for `POST /v2/models/{m}[/versions/{v}]/infer` on Node's HTTP server.
 * Hono and @hono/node-server serve every other request, and every infer request this path does
 * not take; this path reads the plain ones straight off `IncomingMessage` and answers on
 * `ServerResponse`, skipping the per-request Fetch objects (Request, Context, Headers, Response),
 * the middleware chain and the router, which cost a tiny request (`simple`) ~10-15 µs of main-thread
 * CPU (bench/RESULTS.md, issue #18). Its answers are byte for byte Hono's (infer-fast-path.test.ts).
 * It leaves to Hono anything Hono would read differently: a percent-encoded, dot-segment or query
 * path, a Host header @hono/node-server would normalize or refuse, a shutting-down server (Hono
 * answers 503), an ambiguous restricted-API header (several of them), `--http-header-forward-pattern`
 * (Hono's Headers give the forwarded names and values).
 * Triton: server/src/http_server.cc HandleInfer
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '@triode/core';
import { CancelToken, parseModelVersion } from '@triode/core';
import { versionNotFound } from '../model-version.js';
import { httpError } from '../error-mapping.js';
import { traceNow } from '../control/tracer.js';
import type { Restrictions } from '../control/restricted.js';
import { UnsupportedEncodingError, incomingHeader, readIncomingBody } from './body.js';
import { inferResponseBody, readInferBody, tracedInfer, type InferAnswer } from './infer-http.js';
import type { HttpDeps } from './http-options.js';
import type { HttpLifecycle } from './lifecycle.js';

/** What the fast path needs from the app it stands in for. */
export interface HttpInferFastPathOptions {
  lifecycle: HttpLifecycle;
  restrictions?: Restrictions;
  logger: Logger;
}

/** Takes (true) or leaves to Hono (false) one request. */
export type HttpInferFastPath = (req: IncomingMessage, res: ServerResponse) => boolean;

/**
 * The infer routes' paths whose model segment Hono takes as sent: no `%` (decoded by Hono), no
 * `?` (a query), only characters the URL parser leaves alone in a path.
 */
const INFER_PATH = /^\/v2\/models\/([A-Za-z0-9_~!$&'()*+,;=:@.-]+)(?:\/versions\/([0-9]+))?\/infer$/;
/** Hosts @hono/node-server takes as sent (src/url.ts reValidHost); others it parses or refuses. */
const PLAIN_HOST = /^[a-z0-9._-]+(?::(?:[1-5]\d{3,4}|[6-9]\d{3}))?$/;

/** True when `name` appears once in the raw headers, with exactly `value`. */
function headerIsOnce(raw: string[], name: string, value: string): boolean {
  let found = false;
  for (let i = 0; i < raw.length; i += 2) {
    const k = raw[i]!;
    if (k.length !== name.length || k.toLowerCase() !== name) continue;
    if (found || raw[i + 1] !== value) return false;
    found = true;
  }
  return found;
}

/**
 * Writes an answer as Hono's `c.body(body, status, headers)` and @hono/node-server's
 * `responseViaCache` do: one header object as given, Content-Length placed by Node after Date and
 * Connection; several headers go through a Fetch `Headers` (names lower-cased and sorted) with
 * `Content-Length` written after them.
 */
function send(res: ServerResponse, status: number, headers: Record<string, string>, body: Uint8Array | string): void {
  const names = Object.keys(headers);
  if (names.length === 1) {
    res.statusCode = status;
    res.setHeader(names[0]!, headers[names[0]!]!);
    res.end(body);
    return;
  }
  const out: Record<string, string | number> = {};
  const lower = names.map((n): [string, string] => [n.toLowerCase(), headers[n]!]).sort((a, b) => (a[0] < b[0] ? -1 : 1));
  for (const [k, v] of lower) out[k] = v;
  out['Content-Length'] = typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
  res.writeHead(status, out);
  res.end(body);
}

/** @hono/node-server's cleanup of a body left unread by an answer (src/listener.ts drainIncoming). */
const DRAIN_TIMEOUT_MS = 500;
const MAX_DRAIN_BYTES = 64 * 1024 * 1024;

function drainIncoming(incoming: IncomingMessage): void {
  if (incoming.destroyed) return;
  let bytesRead = 0;
  const cleanup = (): void => {
    clearTimeout(timer);
    incoming.off('data', onData);
    incoming.off('end', cleanup);
    incoming.off('error', cleanup);
  };
  const forceClose = (): void => {
    cleanup();
    const socket = incoming.socket;
    if (socket && !socket.destroyed) socket.destroySoon();
  };
  const timer = setTimeout(forceClose, DRAIN_TIMEOUT_MS);
  timer.unref();
  const onData = (chunk: Buffer): void => {
    bytesRead += chunk.length;
    if (bytesRead > MAX_DRAIN_BYTES) forceClose();
  };
  incoming.on('data', onData);
  incoming.on('end', cleanup);
  incoming.on('error', cleanup);
  incoming.resume();
}

async function serve(req: IncomingMessage, res: ServerResponse, name: string, version: string | undefined, deps: HttpDeps): Promise<InferAnswer> {
  const { backplane, maxInputSize, maxJsonOutputSize, tracer, decompressionBudget } = deps;
  const recvStart = tracer?.active ? traceNow() : 0;
  const v = parseModelVersion(version);
  if (typeof v === 'bigint') return versionNotFound(name, v, backplane);
  const model = v === undefined ? { name } : { name, version: v };
  const h = incomingHeader(req, 'inference-header-content-length');
  const { request, encoding, sharedMemory: shm } = await readInferBody(model, h, (headerLength) => readIncomingBody(req, maxInputSize, headerLength, decompressionBudget, res), backplane, deps.sharedMemory);
  try {
    // Large inputs in shared memory are read now, off the event loop.
    if (shm) await shm.load();
    const t = tracer?.start(name);
    t?.trace.timestamps.push({ name: 'HTTP_RECV_START', ns: recvStart });
    // A client that goes away before its answer cancels the request: a queued one leaves the queue
    // (it held its memory until it ran), a decoupled model can stop.
    const cancel = new CancelToken();
    request.signal = cancel;
    res.once('close', () => { if (!res.writableFinished) cancel.cancel(); });
    // The shared memory outputs are written before the answer is made (compressed or not).
    if (!t) return inferResponseBody(await backplane.infer(request), encoding, maxJsonOutputSize, incomingHeader(req, 'accept-encoding'), shm);
    return await tracedInfer(backplane, request, tracer!, t, (r) => inferResponseBody(r, encoding, maxJsonOutputSize, incomingHeader(req, 'accept-encoding'), shm));
  } finally {
    // The regions the request names are held until it is answered or failed.
    shm?.release();
  }
}

/** Fast paths of the apps `createHttpApp` built, for `startHttpServer`. */
const FAST_PATHS = new WeakMap<object, HttpInferFastPath>();

/** Registers the fast path of an app. */
export function setInferFastPath(app: object, fast: HttpInferFastPath): void {
  FAST_PATHS.set(app, fast);
}

/** The fast path of an app built by `createHttpApp`, if any (none for other Hono apps). */
export function inferFastPathOf(app: object): HttpInferFastPath | undefined {
  return FAST_PATHS.get(app);
}

/** The fast path of an app built by `createHttpApp` with these deps and options. */
export function httpInferFastPath(deps: HttpDeps, options: HttpInferFastPathOptions): HttpInferFastPath {
  const { lifecycle, logger } = options;
  const need = options.restrictions?.get('inference');
  const needKey = need?.key.toLowerCase();
  return (req, res) => {
    if (req.method !== 'POST' || lifecycle.stopping || deps.headerForwardPattern) return false;
    const m = INFER_PATH.exec(req.url ?? '');
    if (!m || m[1] === '.' || m[1] === '..') return false;
    const host = req.headers.host;
    if (host === undefined || !PLAIN_HOST.test(host)) return false;
    if (need && !headerIsOnce(req.rawHeaders, needKey!, need.value)) return false;
    lifecycle.begin();
    serve(req, res, m[1]!, m[2], deps).then(
      ({ body, headers }) => {
        lifecycle.end();
        send(res, 200, headers, body);
      },
      (err: unknown) => {
        lifecycle.end();
        const { status, body } = httpError(err, logger);
        const headers: Record<string, string> = { 'Content-Type': 'application/json' };
        if (err instanceof UnsupportedEncodingError) headers['Accept-Encoding'] = 'gzip, deflate';
        send(res, status, headers, body);
        // As @hono/node-server: what the client still sends of a refused request is read and dropped.
        if (!req.readableEnded) res.once('close', () => setTimeout(() => { if (!req.readableEnded) setTimeout(() => drainIncoming(req)); }));
      },
    );
    return true;
  };
}
