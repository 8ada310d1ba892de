/**
 * The private fields of @grpc/grpc-js's Server that Triode uses (the package is pinned exactly for
 * them): `commonServerOptions` (raising HTTP/2 windows before binding) and `http2Servers` (the
 * transport guard that handles every session's and stream's errors, rapid resets and the
 * ModelInfer fast path). If a grpc-js upgrade moves them, this fails, instead of the guard
 * silently disappearing.
 */
import type { EventEmitter } from 'node:events';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';

describe('@grpc/grpc-js private API used by the gRPC frontend', () => {
  it('Server has commonServerOptions before bind and an http2Servers map of http2 servers after it', async () => {
    const server = new Server();
    const common = (server as unknown as { commonServerOptions?: { settings?: unknown } }).commonServerOptions;
    expect(common).toBeTypeOf('object');
    await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))));
    try {
      const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
      expect(servers).toBeInstanceOf(Map);
      expect(servers!.size).toBe(1);
      const h2 = [...servers!.keys()][0]!;
      expect(typeof h2.on).toBe('function');
      expect(typeof (h2 as unknown as { listening?: boolean }).listening).toBe('boolean');
    } finally {
      server.forceShutdown();
    }
  });
});
