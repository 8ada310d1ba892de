/**
 * @module Holding a socket's writes until the end of the event loop's turn, so the messages of
 * every request handled in one turn leave in one writev instead of one system call each.
 */
import type { Socket } from 'node:net';

/** Sockets corked until the end of this turn. */
const corked = new WeakSet<object>();

/**
 * Corks the socket (once a turn) and uncorks it in the event loop's check phase, after the poll
 * phase has handled every socket that was readable. At c=1 the write leaves in the same turn.
 */
export function corkForTurn(socket: Pick<Socket, 'cork' | 'uncork'>): void {
  if (corked.has(socket)) return;
  corked.add(socket);
  socket.cork();
  setImmediate(() => {
    corked.delete(socket);
    socket.uncork();
  });
}
