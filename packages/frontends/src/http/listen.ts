/**
 * @module Serving the HTTP app on a socket with @hono/node-server, with the socket limits that
 * keep slow or idle clients (slowloris) from holding connections: header and request timeouts,
 * a keep-alive timeout and a header size limit; requests of one connection served one at a time
 * (pipelined ones wait, at most MAX_PIPELINED), a connection whose client stops taking its
 * answer closed after a while, and a request body in a transfer coding other than chunked refused
 * (501, RFC 9112 section 6.1).
 */
import type { AddressInfo, Socket } from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';
import { echo } from '@triode/core';
import { inferFastPathOf } from './infer-fast-path.js';
import { keepServingOnError } from '../server-errors.js';

/** A listening HTTP server. */
export interface HttpServerHandle {
  port: number;
  address: string;
  /**
   * Stops accepting connections and closes idle keep-alive ones; connections still open after
   * `graceMs` (a client still reading a stream, or sending a request) are closed.
   * @param graceMs @default 5000
   */
  close(graceMs?: number): Promise<void>;
}

/** Socket limits of the HTTP server (Node's `http.createServer` options of the same names). */
export interface HttpServerOptions {
  /** Time a client has to send the whole request head; then 408 and the socket is closed. @default 20000 */
  headersTimeoutMs?: number;
  /**
   * Time a client has to send the whole request, body included (the time a model takes to answer
   * is not counted); then 408 and the socket is closed. @default 120000
   */
  requestTimeoutMs?: number;
  /** An idle keep-alive connection is closed after this long without a new request. @default 5000 */
  keepAliveTimeoutMs?: number;
  /** Largest request head (request line and headers), in bytes; over it: 431. @default 16384 */
  maxHeaderSize?: number;
  /**
   * Serve `POST /v2/models/{m}[/versions/{v}]/infer` of an app from `createHttpApp` without Hono
   * (the same answers, less CPU; infer-fast-path.ts). @default true
   */
  inferFastPath?: boolean;
  /** How often the timeouts above are checked. @default 1000 */
  connectionsCheckingIntervalMs?: number;
  /**
   * A connection whose client takes none of its answer's unsent bytes for this long is closed: a
   * client that stops reading held its answer, and its connection, for good. @default 60000
   */
  responseStallTimeoutMs?: number;
}

/** The defaults of `HttpServerOptions`. */
export const DEFAULT_HTTP_SERVER_OPTIONS: Required<HttpServerOptions> = {
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 120_000,
  keepAliveTimeoutMs: 5_000,
  maxHeaderSize: 16 * 1024,
  connectionsCheckingIntervalMs: 1_000,
  responseStallTimeoutMs: 60_000,
  inferFastPath: true,
};

/** A Node HTTP request listener. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** What a connection guard gives a server: its request listener's wrapper and its 'clientError' listener. */
export interface ConnectionGuard {
  /** Wraps a server's request listener. */
  wrap(handle: Handler): Handler;
  /**
   * The server's 'clientError' listener: Node's own answer (408, 413, 431 or 400, then the socket
   * closed), except for a timeout of a request the guard itself holds back (see oneAtATime).
   */
  clientError(err: Error & { code?: string }, socket: Socket): void;
  /** Stops the guard's timer (the server closed). */
  close(): void;
}

/**
 * The connection limits every HTTP port of Triode takes: requests served one at a time a
 * connection (oneAtATime), connections whose answer stops going out closed after `stallMs`, and
 * bodies in a transfer coding Triode cannot decode refused (onlyChunked). `wrap` a server's
 * listener and listen to its 'clientError' with `clientError`; `close` when the server closes.
 */
export function connectionGuard(stallMs: number): ConnectionGuard {
  // Connections being answered: the unsent bytes of each, and since when they have not fallen.
  const active = new Map<Socket, { length: number; since: number }>();
  const connections = new WeakMap<Socket, Connection>();
  const stallCheck = setInterval(() => {
    const now = Date.now();
    for (const [socket, s] of active) {
      const length = socket.writableLength;
      if (length === 0 || length < s.length) {
        s.length = length;
        s.since = now;
      } else if (now - s.since >= stallMs) {
        active.delete(socket);
        socket.destroy();
      }
    }
  }, Math.max(10, Math.min(1000, Math.floor(stallMs / 4))));
  stallCheck.unref();
  return {
    wrap: (handle) => oneAtATime(onlyChunked(handle), connections, active),
    clientError: (err, socket) => {
      const c = connections.get(socket);
      // Node times out a request whose body (or head) it has not had whole in time. When the
      // request being served is whole, the late one is a pipelined request the guard holds back
      // (the socket is not read while it waits, so its body or head cannot come): the answer
      // being made must not be cut off by it (review: a 408 went out in its place and the
      // connection closed). It is answered after that answer, in its turn, and the connection
      // then closed. Node has stopped timing it, so nothing is left waiting on the client.
      if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' && c?.current?.complete) {
        c.timedOut = true;
        return;
      }
      answerClientError(err, socket, c?.currentResponse?.headersSent ?? false);
    },
    close: () => clearInterval(stallCheck),
  };
}

/** Node's answers to a request it could not read (node:_http_server socketOnError), by error code. */
const CLIENT_ERROR_ANSWERS: Readonly<Record<string, string>> = {
  HPE_HEADER_OVERFLOW: '431 Request Header Fields Too Large',
  HPE_CHUNK_EXTENSIONS_OVERFLOW: '413 Payload Too Large',
  ERR_HTTP_REQUEST_TIMEOUT: '408 Request Timeout',
};

/** What Node does with a client error when no 'clientError' listener takes it: an answer (unless one has begun), then the socket closed. */
function answerClientError(err: { code?: string }, socket: Socket, answering: boolean): void {
  if (socket.writable && !answering) {
    socket.write(`HTTP/1.1 ${CLIENT_ERROR_ANSWERS[err.code ?? ''] ?? '400 Bad Request'}\r\nConnection: close\r\n\r\n`);
  }
  socket.destroy();
}

/**
 * Refuses a request whose Transfer-Encoding names a coding besides chunked (`gzip, chunked`): 501
 * (RFC 9112 section 6.1), and the connection closed, its body unread. Node framed such a body by
 * its final chunked coding and handed it on still compressed: the gzip was ignored, and a model got
 * compressed bytes as tensor data, or the client a JSON error about bytes it never sent (review).
 * One whose last coding is not chunked has a body of no knowable length: 400, closed (section
 * 6.3), as Node answers it when its parser gets there first. Triton (libevhtp) frames only a
 * Transfer-Encoding of exactly `chunked`: any other is read as no body, its chunks as the next
 * request. A compressed body is sent with Content-Encoding, which Triode decodes (body.ts).
 */
function onlyChunked(handle: Handler): Handler {
  return (req, res) => {
    const te = req.headers['transfer-encoding'];
    if (te === undefined) {
      handle(req, res);
      return;
    }
    // Codings are case-insensitive; empty list elements are allowed (RFC 9110 section 5.6.1).
    const codings = te.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '');
    if (codings.every((c) => c === 'chunked')) {
      handle(req, res);
      return;
    }
    const [status, why] = codings.at(-1) === 'chunked'
      ? [501, 'is not supported: only chunked is (send a compressed body with Content-Encoding)']
      : [400, 'does not end in chunked: the length of the body cannot be known'];
    const body = JSON.stringify({ error: `Transfer-Encoding '${echo(te)}' ${why}` });
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), Connection: 'close' }).end(body);
  };
}

/** The most pipelined requests that may wait on one connection; past them it is closed. */
export const MAX_PIPELINED = 256;

/** A connection's requests: the one being served, and those parsed meanwhile, in order. */
interface Connection {
  busy: boolean;
  waiting: [IncomingMessage, ServerResponse][];
  /** The request being served and its response. */
  current: IncomingMessage | undefined;
  currentResponse: ServerResponse | undefined;
  /** Node timed out a request held back behind the current one: answered 408 once the current one is. */
  timedOut: boolean;
}

/**
 * Serves each connection's requests one at a time, in order. Pipelined requests parsed while one
 * is served wait, at most MAX_PIPELINED of them, and start when its answer has gone out; those
 * still waiting when the connection closes never run. Before, every pipelined request ran at
 * once: 16 requests of 60 MB (gzipped to 59 KB each) on one connection held 1.85 GB, 20,000 small
 * ones ran with nothing read, and thousands ran after their client had gone (review).
 * `active` gets each connection being answered, for the stall check.
 */
function oneAtATime(handle: Handler, connections: WeakMap<Socket, Connection>, active: Map<Socket, { length: number; since: number }>): Handler {
  const start = (c: Connection, req: IncomingMessage, res: ServerResponse): void => {
    const socket = req.socket;
    c.busy = true;
    c.current = req;
    c.currentResponse = res;
    active.set(socket, { length: 0, since: Date.now() });
    let done = false;
    const next = (): void => {
      if (done) return;
      done = true;
      c.busy = false;
      c.current = undefined;
      c.currentResponse = undefined;
      active.delete(socket);
      // Its client has gone: what waits behind never runs (the response's 'close' comes before
      // the socket's, so the queue may not be emptied yet; review: one ran for nobody).
      if (socket.destroyed || !socket.writable) {
        c.waiting.length = 0;
        return;
      }
      // A request held back timed out meanwhile (clientError): its answer, then the connection closed.
      if (c.timedOut) {
        c.waiting.length = 0;
        answerClientError({ code: 'ERR_HTTP_REQUEST_TIMEOUT' }, socket, false);
        return;
      }
      let n = c.waiting.shift();
      // Node aborts the requests it parsed when their client half-closes: those are skipped too.
      while (n && n[0].destroyed) n = c.waiting.shift();
      if (n) start(c, n[0], n[1]);
    };
    // 'close' comes once the answer has gone out ('finish', then close), or the connection went.
    res.once('close', next);
    handle(req, res);
  };
  return (req, res) => {
    const socket = req.socket;
    let c = connections.get(socket);
    if (!c) {
      const conn: Connection = { busy: false, waiting: [], current: undefined, currentResponse: undefined, timedOut: false };
      c = conn;
      connections.set(socket, conn);
      socket.once('close', () => { conn.waiting.length = 0; });
    }
    if (c.busy) {
      // The socket is still read, so that a client who leaves is seen at once (a paused socket
      // hid its close, and the next request ran for nobody; review), and a waiting request's
      // body beyond Node's buffer stops the reading by itself. Past MAX_PIPELINED waiting, the
      // client is abusing the connection, which is closed (review: 100,000 were queued).
      if (c.waiting.length >= MAX_PIPELINED) {
        c.waiting.length = 0;
        socket.destroy();
        return;
      }
      c.waiting.push([req, res]);
      return;
    }
    start(c, req, res);
  };
}

/** The options with their defaults, each checked. */
export function checkedServerOptions(options: HttpServerOptions): Required<HttpServerOptions> {
  const o = { ...DEFAULT_HTTP_SERVER_OPTIONS, ...options };
  for (const [k, v] of Object.entries(o)) {
    if (typeof v === 'boolean') continue;
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`options.${k} must be a positive integer`);
  }
  // Node requires a request timeout of at least the headers timeout.
  if (o.requestTimeoutMs < o.headersTimeoutMs) throw new RangeError('options.requestTimeoutMs must be at least options.headersTimeoutMs');
  return o;
}

/** Listens on `address:port` (port 0 picks a free one). */
export function startHttpServer(app: Hono, port: number, address = '0.0.0.0', options: HttpServerOptions = {}): Promise<HttpServerHandle> {
  const o = checkedServerOptions(options);
  const fast = o.inferFastPath ? inferFastPathOf(app) : undefined;
  const guard = connectionGuard(o.responseStallTimeoutMs);
  return new Promise((resolve, reject) => {
    const server = serve({
      fetch: app.fetch, port, hostname: address,
      // One request at a time a connection; the infer fast path first, what it leaves goes to Hono.
      createServer: ((opts: ServerOptions, listener: Handler) =>
        createServer(opts, guard.wrap(fast ? (req, res) => { if (!fast(req, res)) listener(req, res); } : listener)).on('clientError', guard.clientError)) as typeof createServer,
      serverOptions: {
        headersTimeout: o.headersTimeoutMs,
        requestTimeout: o.requestTimeoutMs,
        keepAliveTimeout: o.keepAliveTimeoutMs,
        maxHeaderSize: o.maxHeaderSize,
        connectionsCheckingInterval: o.connectionsCheckingIntervalMs,
      },
    }, (info: AddressInfo) => {
      keepServingOnError(server, 'HTTP server');
      resolve({
        port: info.port,
        address: info.address,
        close: (graceMs = 5_000) => new Promise<void>((res) => {
          const s = server as Server;
          // Without this, a client that keeps its connection busy holds the process past its exit timeout.
          const force = setTimeout(() => s.closeAllConnections(), Math.max(0, graceMs));
          force.unref();
          s.close(() => { clearTimeout(force); guard.close(); res(); });
          s.closeIdleConnections();
        }),
      });
    });
    server.once('error', (err) => {
      guard.close();
      reject(err);
    });
  });
}
