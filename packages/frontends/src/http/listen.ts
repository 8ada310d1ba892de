/**
 * @module Serving the HTTP app on a socket with @hono/node-server, with the socket limits that
 * keep slow or idle clients (slowloris) from holding connections: header and request timeouts,
 * a keep-alive timeout and a header size limit.
 */
import type { AddressInfo } from 'node:net';
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';
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
}

/** The defaults of `HttpServerOptions`. */
export const DEFAULT_HTTP_SERVER_OPTIONS: Required<HttpServerOptions> = {
  headersTimeoutMs: 20_000,
  requestTimeoutMs: 120_000,
  keepAliveTimeoutMs: 5_000,
  maxHeaderSize: 16 * 1024,
  connectionsCheckingIntervalMs: 1_000,
  inferFastPath: true,
};

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
  return new Promise((resolve, reject) => {
    const server = serve({
      fetch: app.fetch, port, hostname: address,
      // The infer fast path first; what it leaves goes to Hono.
      ...(fast ? {
        createServer: ((opts: ServerOptions, listener: (req: IncomingMessage, res: ServerResponse) => void) =>
          createServer(opts, (req, res) => { if (!fast(req, res)) listener(req, res); })) as typeof createServer,
      } : {}),
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
          s.close(() => { clearTimeout(force); res(); });
          s.closeIdleConnections();
        }),
      });
    });
    server.once('error', reject);
  });
}
