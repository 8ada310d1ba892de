/**
 * @module The worker's side of the direct reply channel: one TCP connection per gateway (opened
 * on first use, the gateway's token as its first frame), replies as length-prefixed frames. While
 * a connection is opening, or when it failed (retried after a pause), replies go through Redis.
 */
import { connect, type Socket } from 'node:net';
import { frame } from '@triode/core';

interface Peer {
  socket?: Socket;
  open: boolean;
  /** After a failure: no new attempt before this time (ms since the epoch). */
  retryAt: number;
}

const RETRY_MS = 5000;
const CONNECT_TIMEOUT_MS = 1000;

/** Direct connections to gateways, keyed by their advertised `host:port`. */
export class DirectReplies {
  readonly #peers = new Map<string, Peer>();

  /**
   * Sends a reply directly; false when the channel is not open (the caller uses Redis).
   * @param direct the envelope's `direct` field
   */
  send(direct: { address: string; token: string }, body: Uint8Array): boolean {
    const peer = this.#peers.get(direct.address);
    if (peer?.open && peer.socket && !peer.socket.destroyed) {
      peer.socket.write(frame(body));
      return true;
    }
    if (!peer || (!peer.socket && Date.now() >= peer.retryAt)) this.#open(direct);
    return false;
  }

  /** Addresses known now (open, opening or in their pause after a failure). */
  get size(): number {
    return this.#peers.size;
  }

  #open(direct: { address: string; token: string }): void {
    const i = direct.address.lastIndexOf(':');
    const host = direct.address.slice(0, i);
    const port = Number(direct.address.slice(i + 1));
    const peer: Peer = { open: false, retryAt: 0 };
    this.#peers.set(direct.address, peer);
    if (!host || !Number.isInteger(port) || port <= 0) {
      peer.retryAt = Number.POSITIVE_INFINITY;
      return;
    }
    const socket = connect({ host, port, noDelay: true });
    peer.socket = socket;
    const fail = () => {
      socket.destroy();
      if (!peer.socket) return;
      peer.open = false;
      peer.socket = undefined;
      peer.retryAt = Date.now() + RETRY_MS;
      // Forget the address after the pause: gateways that restart come back on new addresses,
      // and the table should not keep every one it ever saw.
      setTimeout(() => {
        if (this.#peers.get(direct.address) === peer && !peer.socket) this.#peers.delete(direct.address);
      }, RETRY_MS).unref();
    };
    socket.setTimeout(CONNECT_TIMEOUT_MS, fail);
    socket.once('connect', () => {
      socket.setTimeout(0);
      socket.write(frame(Buffer.from(direct.token)));
      peer.open = true;
    });
    socket.on('error', fail);
    socket.on('close', () => {
      if (peer.socket === socket) fail();
    });
    socket.unref();
  }

  /** Closes every connection. */
  close(): void {
    for (const p of this.#peers.values()) p.socket?.destroy();
    this.#peers.clear();
  }
}
