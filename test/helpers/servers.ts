/** Test helper: the net servers (HTTP, TLS and plain TCP alike) that start listening while it is on. */
import { Server } from 'node:net';
import { vi } from 'vitest';

/**
 * Records every server whose `listen` is called until `stop()`, so a test can reach a server the
 * code under test keeps to itself (to emit an error on it, say).
 */
export function captureListens(): { servers: Server[]; stop(): void } {
  const servers: Server[] = [];
  const listen = Server.prototype.listen;
  const spy = vi.spyOn(Server.prototype, 'listen').mockImplementation(function (this: Server, ...args: unknown[]) {
    servers.push(this);
    return (listen as (...a: unknown[]) => Server).apply(this, args);
  });
  return { servers, stop: () => spy.mockRestore() };
}
