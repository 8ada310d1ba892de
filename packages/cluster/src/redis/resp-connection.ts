/**
 * @module A lean Redis connection for the cluster's hot paths: the worker's blocking XREADGROUP
 * reads, and the gateway's XADDs. Replies are read by `RespReader` (each tensor copied once, into
 * a buffer that can move to an instance thread); a command's Buffer arguments go to the socket as
 * they are, corked with the rest of the event loop's turn so they leave in one writev. ioredis
 * stays for everything else; its general reply decoder and command machinery were ~20% of the
 * worker's main thread at ppocr_cls c=16, with a second copy of every tensor, and its command
 * object, promise and timer a request were ~7% of a gateway's CPU at `simple` c=64.
 * Reconnects by itself; a command sent while disconnected fails at once and is never sent again.
 */
import { isIP, connect as netConnect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { RespError, RespReader, respPieces, type RespValue, type StreamEntries } from './resp.js';
import { parseRedisUrl, type RedisEndpoint } from './redis-connection.js';
import { corkForTurn } from '../cork-for-turn.js';

type Status = 'idle' | 'connecting' | 'ready' | 'closed';

/** A command waiting for its answer. */
interface Pending {
  resolve: (v: RespValue) => void;
  reject: (e: Error) => void;
  /** When it was sent (Date.now()), for the command timeout; 0 when it has none. */
  sentAt: number;
  /** Whether the command timeout applies (commands sent with `send`). */
  timed: boolean;
  /** Answered, or failed by its timeout: a late answer only takes its place in the queue. */
  done?: boolean;
}

/** How much later than its block time a blocking read's reply may come before the connection is given up. */
const STALL_MS_DEFAULT = 5000;


export class RespConnection {
  status: Status = 'idle';
  /** This connection's CLIENT ID (for CLIENT UNBLOCK from another connection); new after a reconnect. */
  clientId: number | undefined;
  readonly #endpoint: RedisEndpoint;
  readonly #reconnectMs: number;
  readonly #stallMs: number;
  readonly #onError: (e: Error) => void;
  #socket: Socket | undefined;
  readonly #reader = new RespReader();
  /** Commands sent and not yet answered, oldest first (Redis answers in order). */
  #pending: Pending[] = [];
  #retry: ReturnType<typeof setTimeout> | undefined;
  #firstReady: { resolve: () => void; reject: (e: Error) => void } | undefined;
  readonly #commandTimeoutMs: number | undefined;
  /** Fails the commands that waited past commandTimeoutMs; armed while any is waiting. */
  #timeoutTimer: ReturnType<typeof setTimeout> | undefined;

  /**
   * @param options.commandTimeoutMs how long a command sent with `send` may wait for its answer
   *   before it fails ("Command timed out"), as ioredis's commandTimeout: the connection stays, and
   *   the late answer is matched to it and dropped. None by default (blocking reads have their own).
   */
  constructor(url: string, options: { reconnectMs?: number; stallMs?: number; commandTimeoutMs?: number; onError?: (e: Error) => void } = {}) {
    this.#endpoint = parseRedisUrl(url);
    this.#reconnectMs = options.reconnectMs ?? 200;
    this.#stallMs = options.stallMs ?? STALL_MS_DEFAULT;
    this.#commandTimeoutMs = options.commandTimeoutMs;
    this.#onError = options.onError ?? (() => undefined);
  }

  /** Connects (and reconnects by itself from then on); resolves once the first connection is ready. */
  connect(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#firstReady = { resolve, reject };
      this.#open();
    });
  }

  /** Sends a command; fails at once while disconnected. */
  command(args: readonly (string | number)[]): Promise<RespValue> {
    if (this.status !== 'ready') return Promise.reject(new Error('Connection is closed.'));
    return this.#send(args);
  }

  /**
   * Sends a command already encoded (`respPieces`: one Buffer, or a few around large arguments), corked
   * until the end of this turn so that the commands of a turn leave in one writev. An error reply
   * rejects with a RespError; fails at once while disconnected, after commandTimeoutMs without an
   * answer, or when the connection drops before the answer (the command is not sent again: it may
   * have run).
   */
  send(pieces: readonly Buffer[]): Promise<RespValue> {
    const socket = this.#socket;
    if (this.status !== 'ready' || !socket) return Promise.reject(new Error('Connection is closed.'));
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject, sentAt: this.#commandTimeoutMs === undefined ? 0 : Date.now(), timed: this.#commandTimeoutMs !== undefined });
      corkForTurn(socket);
      for (const p of pieces) socket.write(p);
      this.#armTimeout();
    });
  }

  /** Arms the command timeout for the oldest command still waiting (one timer a connection, not one a command). */
  #armTimeout(): void {
    const limit = this.#commandTimeoutMs;
    if (limit === undefined || this.#timeoutTimer !== undefined) return;
    const oldest = this.#pending.find((p) => p.timed && !p.done);
    if (!oldest) return;
    this.#timeoutTimer = setTimeout(() => {
      this.#timeoutTimer = undefined;
      const now = Date.now();
      for (const p of this.#pending) {
        if (!p.timed || p.done) continue;
        if (now - p.sentAt < limit) break;
        p.done = true;
        p.reject(new Error('Command timed out'));
      }
      this.#armTimeout();
    }, Math.max(0, oldest.sentAt + limit - Date.now()));
  }

  /** The running read's stall timer: pushed back by every chunk that arrives. */
  #stall: ReturnType<typeof setTimeout> | undefined;

  /**
   * XREADGROUP ... BLOCK: the streams' entries as [stream, [[id, fields]]], or null on timeout.
   * No byte of the reply `stallMs` (default 5 s) later than the block time, or no next byte for as
   * long while a reply is arriving, means a connection that died without closing (a lost node, a partition): it
   * is dropped and opened again. A large reply still arriving is not cut off.
   * @param ids per stream, '>' (new entries; the default) or an id (this consumer's pending entries after it)
   */
  async xreadgroup(group: string, consumer: string, count: number, blockMs: number, streams: readonly string[], ids?: readonly string[]): Promise<StreamEntries> {
    const socket = this.#socket;
    const stall = setTimeout(() => {
      this.#onError(new Error(`no reply from Redis ${this.#stallMs} ms after a ${blockMs} ms blocking read: reconnecting`));
      if (this.#socket === socket) socket?.destroy();
    }, blockMs + this.#stallMs);
    this.#stall = stall;
    try {
      const reply = await this.command(['XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'BLOCK', blockMs, 'STREAMS', ...streams, ...(ids ?? streams.map(() => '>'))]);
      return reply as StreamEntries;
    } finally {
      clearTimeout(stall);
      if (this.#stall === stall) this.#stall = undefined;
    }
  }

  /** Closes for good: what is waiting fails. */
  disconnect(): void {
    this.status = 'closed';
    clearTimeout(this.#retry);
    this.#socket?.destroy();
    this.#failPending(new Error('Connection is closed.'));
  }

  #send(args: readonly (string | number)[]): Promise<RespValue> {
    return new Promise((resolve, reject) => {
      this.#pending.push({ resolve, reject, sentAt: 0, timed: false });
      // All-string arguments: one piece.
      for (const piece of respPieces(String(args[0]), args.slice(1).map(String))) this.#socket!.write(piece);
    });
  }

  #open(): void {
    if (this.status === 'closed') return;
    this.status = 'connecting';
    const { host, port, tls } = this.#endpoint;
    // SNI takes a host name only.
    const socket = tls ? tlsConnect({ host, port, ...(isIP(host) ? {} : { servername: host }) }) : netConnect({ host, port });
    this.#socket = socket;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 10_000);
    socket.once(tls ? 'secureConnect' : 'connect', () => { void this.#handshake(socket); });
    socket.on('data', (chunk: Buffer) => this.#onData(socket, chunk));
    socket.on('error', (e: Error) => this.#onError(e));
    socket.on('close', () => this.#onClose(socket));
  }

  async #handshake(socket: Socket): Promise<void> {
    const { username, password, db } = this.#endpoint;
    try {
      const check = (v: RespValue) => { if (v instanceof RespError) throw v; return v; };
      if (password !== undefined) check(await this.#send(username !== undefined ? ['AUTH', username, password] : ['AUTH', password]));
      if (db !== undefined) check(await this.#send(['SELECT', db]));
      this.clientId = Number(check(await this.#send(['CLIENT', 'ID'])));
    } catch (err) {
      this.#onError(err as Error);
      // Refused credentials or database: the first connect() fails instead of retrying forever.
      if (err instanceof RespError && this.#firstReady) {
        this.#firstReady.reject(err);
        this.#firstReady = undefined;
        this.disconnect();
        return;
      }
      socket.destroy();
      return;
    }
    if (this.#socket !== socket || this.status === 'closed') return;
    this.status = 'ready';
    this.#firstReady?.resolve();
    this.#firstReady = undefined;
  }

  #onData(socket: Socket, chunk: Buffer): void {
    if (socket !== this.#socket) return;
    // A reply arriving: the connection lives, whatever its size (a 1 GB read takes a while).
    if (this.#stall) this.#stall = this.#stall.refresh();
    let replies: RespValue[];
    try {
      replies = this.#reader.push(chunk);
    } catch (err) {
      this.#onError(err as Error);
      socket.destroy();
      return;
    }
    for (const r of replies) {
      const p = this.#pending.shift();
      if (!p || p.done) continue; // timed out already: its late answer is dropped
      p.done = true;
      if (r instanceof RespError) p.reject(r);
      else p.resolve(r);
    }
    if (this.#pending.length === 0 && this.#timeoutTimer !== undefined) {
      clearTimeout(this.#timeoutTimer);
      this.#timeoutTimer = undefined;
    }
  }

  #onClose(socket: Socket): void {
    if (socket !== this.#socket) return;
    this.#reader.reset();
    this.#failPending(new Error('Connection is closed.'));
    if (this.status === 'closed') return;
    this.status = 'connecting';
    // The first connect() waits through retries too (as ioredis's does with no retry limit).
    this.#retry = setTimeout(() => this.#open(), this.#reconnectMs);
  }

  #failPending(err: Error): void {
    const pending = this.#pending;
    this.#pending = [];
    clearTimeout(this.#timeoutTimer);
    this.#timeoutTimer = undefined;
    for (const p of pending) {
      if (p.done) continue;
      p.done = true;
      p.reject(err);
    }
  }
}
