/** @module Serving the HTTP app on a socket with @hono/node-server. */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { serve } from '@hono/node-server';
import type { Hono } from 'hono';

/** A listening HTTP server. */
export interface HttpServerHandle {
  port: number;
  address: string;
  /** Stops accepting connections and closes idle keep-alive ones. */
  close(): Promise<void>;
}

/** Listens on `address:port` (port 0 picks a free one). */
export function startHttpServer(app: Hono, port: number, address = '0.0.0.0'): Promise<HttpServerHandle> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port, hostname: address }, (info: AddressInfo) => {
      resolve({
        port: info.port,
        address: info.address,
        close: () => new Promise<void>((res) => {
          const s = server as Server;
          s.close(() => res());
          s.closeIdleConnections?.();
        }),
      });
    });
    server.once('error', reject);
  });
}
