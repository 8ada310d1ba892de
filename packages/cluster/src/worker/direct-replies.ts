/**
 * @module The worker's side of the direct reply channel: one TCP (or TLS, for a `tls://` address)
 * connection per gateway, opened on first use; its first frame authenticates (the gateway's token,
 * or with a cluster secret the token's MAC, which only holders of the secret can make), then
 * replies as length-prefixed frames (`[MAC][reply]` with a secret). The gateway confirms the
 * replies it has taken with a running count (a u32, see reply-frames.ts); a reply counts as
 * delivered only then, and the replies a connection still held unconfirmed when it failed are
 * handed back (`lost`) for the Redis reply stream. While a connection is opening, or when it
 * failed (retried after a pause), replies go through Redis. The same connection fetches the
 * tensors of requests whose gateway kept them out of Redis (`fetch`).
 */
import { connect, isIP, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { ClusterAuth } from '../cluster-auth.js';
import { corkForTurn } from '../cork-for-turn.js';
import { FrameBudget, FrameReader, fetchRequest, frame, frameHead, readGatewayMessage } from '../reply-frames.js';

/** What a sender is told of a reply it handed to the channel: exactly one of the two is called. */
export interface ReplyOutcome {
  /** The gateway confirmed it. */
  confirmed: () => void;
  /** The connection failed before the gateway confirmed it: send it another way. */
  lost: () => void;
}

interface Peer {
  socket?: Socket;
  open: boolean;
  /** After a failure: no new attempt before this time (ms since the epoch). */
  retryAt: number;
  /** Replies written and not yet confirmed, oldest first: when (ms) and their number on this connection. */
  unconfirmed: { outcome: ReplyOutcome; at: number; seq: number }[];
  /** Replies written so far on this connection (mod 2^32, as the gateway counts what it took). */
  sent: number;
  /** What the gateway sends: confirmations and fetched tensors. */
  reader: FrameReader;
  /** When (ms) the gateway's last bytes came. */
  receivedAt: number;
  /** Fetches waiting for their tensors, by request key. */
  fetches: Map<string, Fetch>;
  /** Fetch frames written once the connection is open (after its auth frame). */
  queued: Buffer[];
}

/** A fetch waiting for its tensors. */
interface Fetch {
  resolve: (parts: Buffer[] | undefined) => void;
  reject: (err: Error) => void;
  timer: ReturnType<typeof setTimeout>;
  /** The most bytes its tensors frame may hold (the request header's sizes, and room for the frame's own fields). */
  maxBytes: number;
}

/**
 * How long a fetch of a request's tensors may wait for the gateway. A gateway that takes longer is
 * broken or hostile: its connection is closed, with whatever frame it had half sent.
 */
const FETCH_TIMEOUT_MS = 10_000;
/**
 * The most bytes of tensors one fetch may ask for (the gateway's largest request body is 64 MiB by
 * default): a request's header names its size, and without a cluster secret anyone who reaches
 * Redis writes headers (review: one of 4e9 bytes had the worker read and keep 900 MB from a peer
 * of the attacker's). A larger request's fetch is refused, and its gateway sends it through Redis.
 */
export const MAX_FETCH_BYTES = 64 * 1024 * 1024;
/**
 * Bytes of unfinished frames all gateways' connections may hold at once: each connection holds at
 * most one frame (a fetch's tensors) at a time, but a worker knows up to MAX_PEERS of them.
 */
export const MAX_FETCH_BUFFERED_BYTES = 512 * 1024 * 1024;
/** Room in a tensors frame besides the tensors: the kind, the key, the count, and a length a part. */
const FETCH_FRAME_SLACK = 64 * 1024;

const RETRY_MS = 5000;
/**
 * A reply the gateway has not confirmed this long after it was written counts as lost (and goes
 * through the Redis reply stream; the gateway drops a duplicate): a gateway that does not confirm
 * (a connection gone silent without closing, an older gateway) must not leave entries unacknowledged.
 */
const CONFIRM_TIMEOUT_MS = 5000;
const CONNECT_TIMEOUT_MS = 1000;
/**
 * A connection with nothing sent or received this long is closed and its address forgotten (it is
 * opened again when a reply needs it). Gateways close theirs after 300 s; without this a peer that
 * never closed (a hostile address in an envelope, without a cluster secret) kept its place in the
 * table for good, and MAX_PEERS of them shut real gateways out of the direct channel (review).
 */
const IDLE_TIMEOUT_MS = 300_000;
/** The most gateway addresses known at once; replies for others go through Redis. */
export const MAX_PEERS = 1024;
/**
 * Bytes a connection may hold unsent before replies go through Redis instead: a gateway that
 * stopped reading must not make the worker buffer every reply it sends.
 */
export const MAX_UNSENT_BYTES = 8 * 1024 * 1024;

/** `[tls://]host:port` of a gateway's direct channel, or undefined when it is not one. */
export function parseDirectAddress(address: string): { tls: boolean; host: string; port: number } | undefined {
  const tls = address.startsWith('tls://');
  const rest = tls ? address.slice(6) : address;
  const i = rest.lastIndexOf(':');
  const host = rest.slice(0, i).replace(/^\[(.*)\]$/, '$1');
  const portText = rest.slice(i + 1);
  const port = Number(portText);
  if (i <= 0 || !host || !/^\d{1,5}$/.test(portText) || port <= 0 || port > 65535) return undefined;
  return { tls, host, port };
}

/**
 * Direct connections to gateways, keyed by their advertised `host:port` and token: a gateway that
 * restarts on the same port has a new token, and a late reply to its former self must not go over a
 * connection made for the new one (without a cluster secret, request keys could match).
 */
export class DirectReplies {
  readonly #peers = new Map<string, Peer>();
  readonly #auth: ClusterAuth;
  readonly #tlsCa: string | Buffer | undefined;

  readonly #confirmTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #fetchTimeoutMs: number;
  readonly #maxFetchBytes: number;
  /** Unfinished frames of every connection together (MAX_FETCH_BUFFERED_BYTES). */
  readonly #budget: FrameBudget;

  /**
   * @param options.auth the cluster secret's signer; options.tlsCa the CA of gateways' TLS
   *   certificates (default: the system's); options.confirmTimeoutMs see CONFIRM_TIMEOUT_MS;
   *   options.idleTimeoutMs see IDLE_TIMEOUT_MS; options.fetchTimeoutMs see FETCH_TIMEOUT_MS;
   *   options.maxFetchBytes see MAX_FETCH_BYTES; options.maxBufferedBytes see MAX_FETCH_BUFFERED_BYTES
   */
  constructor(options: { auth?: ClusterAuth; tlsCa?: string | Buffer; confirmTimeoutMs?: number; idleTimeoutMs?: number; fetchTimeoutMs?: number; maxFetchBytes?: number; maxBufferedBytes?: number } = {}) {
    this.#auth = options.auth ?? new ClusterAuth();
    this.#tlsCa = options.tlsCa;
    this.#confirmTimeoutMs = options.confirmTimeoutMs ?? CONFIRM_TIMEOUT_MS;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    this.#fetchTimeoutMs = options.fetchTimeoutMs ?? FETCH_TIMEOUT_MS;
    this.#maxFetchBytes = options.maxFetchBytes ?? MAX_FETCH_BYTES;
    this.#budget = new FrameBudget(options.maxBufferedBytes ?? MAX_FETCH_BUFFERED_BYTES);
  }

  /**
   * Sends a reply directly; false when the channel is not open (the caller uses Redis, and
   * `outcome` is not called). When it returns true, exactly one of `outcome`'s callbacks runs later.
   * @param direct the envelope's `direct` field
   * @param mac the reply's MAC, with a cluster secret
   */
  send(direct: { address: string; token: string }, body: Uint8Array, mac: Uint8Array | undefined, outcome: ReplyOutcome): boolean {
    const peer = this.#peers.get(peerKey(direct));
    if (peer?.open && peer.socket && !peer.socket.destroyed) {
      // A gateway that does not read what it is sent: this reply goes through Redis.
      if (peer.socket.writableLength >= MAX_UNSENT_BYTES) return false;
      peer.sent = (peer.sent + 1) >>> 0;
      peer.unconfirmed.push({ outcome, at: Date.now(), seq: peer.sent });
      this.#sweepSoon();
      // The length prefix (and MAC) and the reply go out in one writev with the turn's other
      // replies to this gateway: the reply is not copied.
      const socket = peer.socket;
      corkForTurn(socket);
      socket.write(frameHead(body.byteLength, mac));
      socket.write(body);
      return true;
    }
    if (peer ? !peer.socket && Date.now() >= peer.retryAt : this.#peers.size < MAX_PEERS) this.#open(direct);
    return false;
  }

  /**
   * Fetches the tensors of request `requestKey` from its gateway, on the connection replies use
   * (opened now if needed): the parts as the gateway holds them, or undefined when the request is
   * gone there (answered, given up), and for a second fetch of a key this connection is fetching
   * already (a replayed or re-delivered entry: the first goes on). Rejects when `maxBytes` is over
   * the limit for a fetch, or the gateway cannot be reached or does not answer within the fetch
   * timeout (its connection is then closed).
   * @param mac the fetch's MAC, with a cluster secret (over the gateway's reply stream and `fetchRequest(requestKey)`)
   * @param maxBytes the most bytes the tensors may hold (what the request's header says)
   */
  fetch(direct: { address: string; token: string }, requestKey: string, mac: Uint8Array | undefined, maxBytes: number): Promise<Buffer[] | undefined> {
    if (maxBytes > this.#maxFetchBytes) return Promise.reject(new Error(`the request's tensors (${maxBytes} bytes) are over the limit of ${this.#maxFetchBytes} bytes for a fetch`));
    const key = peerKey(direct);
    let peer = this.#peers.get(key);
    if (!peer && this.#peers.size < MAX_PEERS) {
      this.#open(direct);
      peer = this.#peers.get(key);
    }
    const p = peer;
    if (!p?.socket || p.socket.destroyed) return Promise.reject(new Error('the gateway\'s direct channel cannot be reached'));
    // The same entry added again (a replay of a signed entry, which its MAC still covers): the
    // request is on its way here already. Rejected, it failed the original too (review).
    if (p.fetches.has(requestKey)) return Promise.resolve(undefined);
    const socket = p.socket;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        p.fetches.delete(requestKey);
        reject(new Error(`the gateway did not send the request's tensors within ${this.#fetchTimeoutMs / 1000} s`));
        // Closed, and with it whatever frame the gateway had half sent: kept open, a peer that
        // announced a large frame and stopped held that memory for good (review).
        socket.destroy(new Error('the gateway did not answer a fetch in time'));
      }, this.#fetchTimeoutMs);
      timer.unref();
      p.fetches.set(requestKey, { resolve, reject, timer, maxBytes: maxBytes + FETCH_FRAME_SLACK });
      const body = fetchRequest(requestKey);
      const head = frameHead(body.byteLength, mac);
      if (!p.open) {
        p.queued.push(head, body);
        return;
      }
      corkForTurn(socket);
      socket.write(head);
      socket.write(body);
    });
  }

  #sweep: ReturnType<typeof setTimeout> | undefined;

  /** Checks for replies left unconfirmed too long while any are outstanding. */
  #sweepSoon(): void {
    this.#sweep ??= setTimeout(() => {
      this.#sweep = undefined;
      const old = Date.now() - this.#confirmTimeoutMs;
      // The longest a reply waits behind a frame the gateway is sending (see below).
      const oldest = old - this.#fetchTimeoutMs;
      for (const p of this.#peers.values()) {
        // Confirmations come in order: only a prefix can be overdue.
        let n = 0;
        while (n < p.unconfirmed.length && p.unconfirmed[n]!.at <= old) n++;
        if (n === 0) continue;
        // The gateway is still sending a fetch's tensors (a large one, or several queued, on a slow
        // link): its confirmation comes after them, as frames do not interleave. Cut here, the
        // connection took the fetches with it. A reply waits so at most a fetch timeout longer: a
        // gateway that goes on sending frames must not hold the worker's replies for good.
        if (p.fetches.size > 0 && p.reader.heldBytes > 0 && p.receivedAt > old && p.unconfirmed[0]!.at > oldest) continue;
        for (const u of p.unconfirmed.splice(0, n)) u.outcome.lost();
        // A connection whose gateway stopped confirming is not used again: later replies would
        // only pile up in it. Closed as failed, so the address rests before a new attempt.
        p.socket?.destroy(new Error('the gateway stopped confirming replies'));
      }
      if (this.unconfirmed > 0) this.#sweepSoon();
    }, Math.max(10, Math.floor(this.#confirmTimeoutMs / 2)));
    this.#sweep.unref();
  }

  /** Addresses known now (open, opening or in their pause after a failure). */
  get size(): number {
    return this.#peers.size;
  }

  /** Replies sent and not yet confirmed, over all connections. */
  get unconfirmed(): number {
    let n = 0;
    for (const p of this.#peers.values()) n += p.unconfirmed.length;
    return n;
  }

  #open(direct: { address: string; token: string }): void {
    // Not an address (a broken or hostile envelope): not remembered, so junk cannot fill the table.
    const parsed = parseDirectAddress(direct.address);
    if (!parsed) return;
    const { tls, host, port } = parsed;
    const key = peerKey(direct);
    // A frame from the gateway is a confirmation (9 bytes) or the tensors of a fetch under way:
    // one larger than every fetch waiting asked for is a broken or hostile peer's.
    const maxFrame = () => {
      let m = 64;
      for (const f of peer.fetches.values()) m = Math.max(m, f.maxBytes);
      return m;
    };
    const peer: Peer = { open: false, retryAt: 0, unconfirmed: [], sent: 0, reader: new FrameReader(maxFrame, this.#budget), receivedAt: 0, fetches: new Map(), queued: [] };
    this.#peers.set(key, peer);
    const socket = tls
      ? tlsConnect({ host, port, ...(this.#tlsCa ? { ca: this.#tlsCa } : {}), ...(isIP(host) ? {} : { servername: host }) })
      : connect({ host, port });
    socket.setNoDelay(true);
    peer.socket = socket;
    const fail = () => {
      socket.destroy();
      handBack(peer);
      failFetches(peer);
      if (!peer.socket) return;
      peer.open = false;
      peer.socket = undefined;
      peer.retryAt = Date.now() + RETRY_MS;
      // Forget the address after the pause: gateways that restart come back on new addresses,
      // and the table should not keep every one it ever saw.
      setTimeout(() => {
        if (this.#peers.get(key) === peer && !peer.socket) this.#peers.delete(key);
      }, RETRY_MS).unref();
    };
    socket.setTimeout(CONNECT_TIMEOUT_MS, fail);
    socket.once(tls ? 'secureConnect' : 'connect', () => {
      // Idle (nothing sent or received) with no reply waiting for its confirmation: closed, and
      // the address forgotten by the 'close' handler below (not as a failed connect).
      socket.removeListener('timeout', fail);
      socket.setTimeout(this.#idleTimeoutMs, () => {
        if (peer.unconfirmed.length === 0 && peer.fetches.size === 0) socket.destroy();
      });
      socket.write(frame(this.#auth.mac('direct-auth', [direct.token]) ?? Buffer.from(direct.token)));
      peer.open = true;
      for (const q of peer.queued.splice(0)) socket.write(q);
    });
    socket.on('data', (chunk: Buffer) => {
      peer.receivedAt = Date.now();
      let frames: Buffer[];
      let latest: number | undefined;
      try {
        frames = peer.reader.push(chunk);
        for (const f of frames) {
          const m = readGatewayMessage(f);
          // Confirmations: running counts of the replies the gateway has taken.
          if (m.kind === 'confirm') {
            latest = m.count;
            continue;
          }
          const waiting = peer.fetches.get(m.requestKey);
          if (!waiting) continue; // timed out meanwhile
          peer.fetches.delete(m.requestKey);
          clearTimeout(waiting.timer);
          waiting.resolve(m.parts);
        }
      } catch (err) {
        socket.destroy(err as Error);
        return;
      }
      if (latest === undefined) return;
      // The gateway has taken every reply numbered up to `latest` (mod 2^32); ones already handed
      // back after the timeout are simply no longer here.
      let n = 0;
      while (n < peer.unconfirmed.length && ((latest - peer.unconfirmed[n]!.seq) >>> 0) < 0x80000000) n++;
      for (const u of peer.unconfirmed.splice(0, n)) u.outcome.confirmed();
    });
    socket.on('error', fail);
    socket.on('close', () => {
      if (peer.socket !== socket) return;
      handBack(peer);
      failFetches(peer);
      // The gateway closed a connection it had accepted (idle): open a new one when next needed.
      if (peer.open && !socket.errored) {
        this.#peers.delete(key);
        return;
      }
      fail();
    });
    socket.unref();
  }

  /** Closes every connection; replies not yet confirmed are handed back (`lost`). */
  close(): void {
    clearTimeout(this.#sweep);
    this.#sweep = undefined;
    for (const p of this.#peers.values()) {
      p.socket?.destroy();
      handBack(p);
      failFetches(p);
    }
    this.#peers.clear();
  }
}

function peerKey(direct: { address: string; token: string }): string {
  return `${direct.address}\u0000${direct.token}`;
}

/** Hands a connection's unconfirmed replies back to their senders, oldest first. */
function handBack(peer: Peer): void {
  for (const u of peer.unconfirmed.splice(0)) u.outcome.lost();
}

/** Fails a connection's fetches under way (it closed or failed); what it had queued is dropped. */
function failFetches(peer: Peer): void {
  peer.queued = [];
  peer.reader.release();
  for (const f of peer.fetches.values()) {
    clearTimeout(f.timer);
    f.reject(new Error('the connection to the gateway closed before it sent the request\'s tensors'));
  }
  peer.fetches.clear();
}
