/**
 * @module The worker's side of cluster mode: reads requests from the models' Redis streams in a
 * consumer group (Redis balances them over the workers), runs them on the local InferenceServer,
 * replies to the sending gateway's stream, and acks. Reads only as many entries as it has room
 * for, so a busy worker leaves work to the others.
 */
import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import {
  DeadlineHeap, CancelToken, MAX_MODEL_NAME_BYTES, TriodeError, checkModelName, echo, toWireError, settleWithin, overrideFilesFromJson, type InferenceServer, type LoadOptions, type Logger, type ModelConfig,
} from '@triode/core';
import { ClusterAuth } from '../cluster-auth.js';
import { ClusterKeys } from '../keys.js';
import { fieldsOf, type StreamEntries } from '../redis/resp.js';
import { decodeRequest, decodeRequestParts, encodeReply, fetchedRequestHead, requestEnvelope, type WireReply } from '../envelope/envelope-codec.js';
import { fetchRequest } from '../reply-frames.js';
import { type WorkerRecord } from '../registry.js';
import { ControlQueue, MAX_CONTROL_COMMANDS } from './control-queue.js';
import { DirectReplies } from './direct-replies.js';
import { RateLimitedWarning } from '../rate-limited-warning.js';
import { RespConnection } from '../redis/resp-connection.js';
import { openRedis } from '../redis/redis-connection.js';

/** Options of a StreamConsumer. */
export interface StreamConsumerOptions {
  /** Redis URL. */
  redis: string;
  /** This worker's id (its consumer name). @default a random id */
  workerId?: string;
  /** Key prefix of the cluster. @default "triode" */
  prefix?: string;
  /** Requests this worker runs at once, over all models. @default 256 */
  maxInflight?: number;
  /** Heartbeat period (ms); the registry entry expires after 3 missed beats. @default 1000 */
  heartbeatMs?: number;
  /**
   * Requests read by a worker that died (its heartbeat expired: SIGKILL, a lost node) and not
   * acknowledged for this long (ms) are taken over and run here. A live worker's requests are
   * never taken, however long they run. @default 5000
   */
  claimIdleMs?: number;
  /**
   * The cluster secret: requests, control messages and the loaded set not signed with it are
   * dropped; replies, control answers and the registry entry are signed. @default none
   */
  clusterSecret?: string;
  /** Direct reply channels over TLS: the CA (PEM) their certificates must chain to. @default the system CAs */
  replyTlsCa?: string | Buffer;
  /**
   * Connect to gateways' direct channels (to reply, and to fetch a request's tensors). `false`:
   * every reply takes Redis, and no request's envelope makes this worker connect anywhere (without
   * a cluster secret, anyone who writes to Redis chooses that address); a request whose tensors its
   * gateway kept is answered so that the gateway sends it again with them, through Redis. @default true
   */
  directReplies?: boolean;
  /**
   * Expiry (ms) of this worker's own request streams (`<prefix>:req:<model>:w:<workerId>`, for
   * sequence models), renewed with each heartbeat: a dead worker's streams go by themselves
   * (nobody else reads them). Longer than the gateways' request timeout, so that a request a
   * gateway still waits for stays until it has given it up. @default 3 heartbeats + 30 s
   */
  ownStreamTtlMs?: number;
  /** What runs this worker's instances, as the registry shows it. @default "cpu" */
  device?: string;
  /**
   * With a cluster secret: the most signed requests remembered against replays; past it the one
   * whose deadline comes first is forgotten. @default MAX_REQUESTS_SEEN
   */
  maxReplayGuard?: number;
  /**
   * The most load/unload commands this worker holds, running or waiting their turn; past it one is
   * answered UNAVAILABLE at once. @default MAX_CONTROL_COMMANDS
   */
  maxControlCommands?: number;
  /** When the loaded set is read again after joining (ms after the start). @default REJOIN_AFTER_MS */
  rejoinAfterMs?: readonly number[];
  logger?: Logger;
}

/** A control message older than this (ms) is dropped: a captured one cannot be replayed later. */
const CONTROL_MAX_AGE_MS = 5 * 60_000;

/** When a joined worker reads the loaded set again (ms after it joined): past the gateway's 120 s wait for a load. */
const REJOIN_AFTER_MS = [5_000, 30_000, 130_000];

/** The most loads a later read of the loaded set has queued at once (each waits for the one it frees). */
const REJOIN_IN_FLIGHT = 8;

/** The most model names kept as named by control commands (junk on the channel ends the later reads). */
const MAX_TOUCHED = 10_000;

/**
 * The most signed requests a worker remembers against replays (~150 bytes each). Each is kept to
 * its deadline, and an async job's deadline is the result TTL (an hour by default): a steady flow
 * of async jobs would otherwise grow the guard by rate x TTL (review: about 1 GB a worker at
 * 2,000 jobs/s). Past it the entry due first is forgotten; a replay of a forgotten entry can run
 * once more (compute only: its gateway drops a second reply).
 */
export const MAX_REQUESTS_SEEN = 1_000_000;

/**
 * Answered entries are acknowledged and deleted at most this long after their reply (ms): one
 * XACK + XDEL per stream for all of them. Acks are off the reply path, and an entry waits far
 * longer than this (claimIdleMs) before another worker would take it over.
 */
const ACK_FLUSH_MS = 5;

/** How long shutdown waits for each last word to Redis (acks, leaving the registry). */
const FAREWELL_MS = 1000;

/**
 * The most times an entry is delivered: once, and once more after its worker died. A third
 * delivery is answered with an error instead (DESIGN: delivery).
 */
export const MAX_DELIVERIES = 2;

/** Pause before a reply that Redis refused is tried again (ms). */
const REPLY_RETRY_MS = 200;

/**
 * The longest a reply is retried, whatever deadline its envelope states (ms): a deadline written
 * far in the future must not keep a reply (and its entry) alive for good.
 */
export const MAX_REPLY_RETRY_MS = 10 * 60_000;

/**
 * Redis errors worth retrying (the server is starting, busy, out of memory, failing over); any
 * other error reply (WRONGTYPE: the reply key is not a stream, ERR ...) fails the same way again.
 */
const TRANSIENT_REDIS_ERROR = /^(LOADING|BUSY|OOM|TRYAGAIN|MASTERDOWN|READONLY|CLUSTERDOWN|NOREPLICAS)\b/;

/** True when an XADD that failed with `err` may succeed later. */
export function worthRetrying(err: unknown): boolean {
  if (!(err instanceof Error) || err.name !== 'ReplyError') return true; // the connection, not Redis's answer
  return TRANSIENT_REDIS_ERROR.test(err.message);
}

/**
 * What a worker's own streams outlive its last heartbeat by, at least (ms): the gateways' default
 * request timeout (`--request-timeout-secs` 30), so that they expire only once no gateway waits
 * for what they hold.
 */
const OWN_STREAM_GRACE_MS = 30_000;

/** How often a stream's consumer group is pruned of dead workers' names (ms). */
const CONSUMER_PRUNE_MS = 60_000;

/** An entry of a stream, as `#taken` keys it. */
function entryKey(stream: string, id: string): string {
  return `${stream}\u0000${id}`;
}

/** What StreamConsumer's rate-limited warnings about junk are kept apart by. */
type JunkWarning = 'malformed request' | 'answered malformed request' | 'not for a gateway' | 'unhandled request' | 'redelivered request' | 'taken over' | 'malformed control' | 'loaded set entry' | 'not loaded';

/** Consumes the cluster's request streams for one worker. */
export class StreamConsumer {
  readonly workerId: string;
  readonly #server: InferenceServer;
  readonly #keys: ClusterKeys;
  readonly #cmd: Redis;
  readonly #directReplies: DirectReplies;
  /** StreamConsumerOptions.directReplies. */
  readonly #direct: boolean;
  /** Fetches that failed: each is logged, at most one line every 10 s (a flood of them cannot fill the log). */
  readonly #fetchWarning: RateLimitedWarning;
  /**
   * The same for junk anyone who writes to Redis can add at will without a secret (request
   * entries, control messages, entries of the loaded set, pending entries of made-up consumers):
   * a line per message let a flood fill the log (review). One each, so one kind does not hide another.
   */
  readonly #junkWarnings = new Map<JunkWarning, RateLimitedWarning>();

  /** The rate-limited warning of one kind of junk. */
  #junk(kind: JunkWarning): RateLimitedWarning {
    let warning = this.#junkWarnings.get(kind);
    if (!warning) this.#junkWarnings.set(kind, (warning = new RateLimitedWarning(this.#logger)));
    return warning;
  }
  /** Signs and checks what crosses Redis (`--cluster-secret`); its `rejected` counts feed a metric. */
  readonly auth: ClusterAuth;
  /** Ids of the control messages applied in the last CONTROL_MAX_AGE_MS (a replay is dropped). */
  readonly #controlSeen = new Map<string, number>();
  /**
   * With a cluster secret: the signed requests this worker took, by `<reply stream>\0<request key>`,
   * with their deadlines. One added again (a replay: its MAC still holds) before its deadline is
   * dropped instead of run again; after it, the deadline check drops it. Forgotten once past their
   * deadline (earliest deadline first: #seenDeadlines).
   */
  readonly #requestsSeen = new Map<string, number>();
  readonly #seenDeadlines = new DeadlineHeap<string>();
  /** The blocking reads: a lean connection of its own (resp-connection.ts). */
  readonly #block: RespConnection;
  readonly #sub: Redis;
  readonly #maxInflight: number;
  readonly #heartbeatMs: number;
  readonly #claimIdleMs: number;
  readonly #ownStreamTtlMs: number;
  readonly #maxRequestsSeen: number;
  /** This worker's own streams (sequence models'): renewed with each heartbeat, deleted at stop. */
  #ownStreams: string[] = [];
  readonly #logger: Logger | undefined;
  readonly #device: string;
  readonly #startedMs = Date.now();
  #claimer: ReturnType<typeof setInterval> | undefined;
  #claiming = false;
  #inflight = 0;
  #running = false;
  #loop: Promise<void> | undefined;
  #heartbeat: ReturnType<typeof setInterval> | undefined;
  #wake: (() => void) | undefined;
  #streams: string[] = [];
  /** Per stream: how many requests the model's instances can hold, and how many it holds now. */
  #slots = new Map<string, number>();
  #held = new Map<string, number>();
  /** Requests this worker runs, by `<reply stream>\0<request key>`: what a gateway's cancel reaches. */
  readonly #cancels = new Map<string, CancelToken>();
  /** The streams the current blocking read waits on. */
  #reading = new Set<string>();
  /**
   * Entries this worker took, by `<stream>\0<id>`, until Redis has their XACK: running, or
   * answered (acknowledgement queued or in flight). What #recover must not run again.
   */
  readonly #taken = new Map<string, 'running' | 'answered'>();
  /**
   * Set when a read may have been delivered by Redis and lost on the way (the connection failed
   * mid-reply), and at start (a worker restarted under the same --worker-id): the next turn of the
   * read loop first reads this worker's own pending entries. Other workers never take a live
   * worker's entries, so without this they would stay pending, unanswered, for as long as it lives.
   */
  #recoverPending = true;
  /** Numbers the blocking reads: #readSeq is the one under way (while #reading is not empty). */
  #readSeq = 0;
  /**
   * The read a CLIENT UNBLOCK was last sent for: one per read is enough. (A flag cleared when the
   * UNBLOCK's answer came kept the next read from being cut short when room freed while that
   * answer was still on its way: that read then waited out its block time.)
   */
  #unblockedRead = -1;
  /** See readsTimedOutWithRoom. */
  #readsTimedOutWithRoom = 0;
  /** Set by stop(): nothing makes this worker's streams again. */
  #stopped = false;

  constructor(server: InferenceServer, options: StreamConsumerOptions) {
    this.#server = server;
    this.workerId = options.workerId ?? `w-${Math.random().toString(36).slice(2, 10)}`;
    this.#keys = new ClusterKeys(options.prefix);
    this.#maxInflight = options.maxInflight ?? 256;
    this.#heartbeatMs = options.heartbeatMs ?? 1000;
    this.#rejoinAfterMs = options.rejoinAfterMs ?? REJOIN_AFTER_MS;
    this.#claimIdleMs = options.claimIdleMs ?? 5000;
    this.#ownStreamTtlMs = options.ownStreamTtlMs ?? this.#heartbeatMs * 3 + OWN_STREAM_GRACE_MS;
    this.#maxRequestsSeen = options.maxReplayGuard ?? MAX_REQUESTS_SEEN;
    this.#controls = new ControlQueue(options.maxControlCommands ?? MAX_CONTROL_COMMANDS);
    this.#rejoinInFlight = Math.min(REJOIN_IN_FLIGHT, options.maxControlCommands ?? MAX_CONTROL_COMMANDS);
    this.#logger = options.logger;
    this.#device = options.device ?? 'cpu';
    this.auth = new ClusterAuth(options.clusterSecret || undefined, options.logger);
    this.#directReplies = new DirectReplies({ auth: this.auth, ...(options.replyTlsCa ? { tlsCa: options.replyTlsCa } : {}) });
    this.#direct = options.directReplies !== false;
    this.#fetchWarning = new RateLimitedWarning(this.#logger);
    this.#cmd = openRedis(options.redis, 'worker', this.#logger);
    this.#block = new RespConnection(options.redis, { onError: (e) => this.#logger?.verbose(1, `redis (stream reads): ${e.message}`) });
    this.#sub = openRedis(options.redis, 'subscriber', this.#logger);
  }

  /** Connects, joins the consumer group of every ready model, and starts consuming. */
  async start(): Promise<void> {
    await Promise.all([this.#cmd.connect(), this.#block.connect(), this.#sub.connect()]);
    // Load/unload commands sent to any gateway reach every worker.
    await this.#sub.subscribe(this.#keys.control, this.#keys.cancel);
    this.#sub.on('message', (channel: string, message: string) => {
      if (channel === this.#keys.cancel) this.#cancel(message);
      else this.#receiveControl(message);
    });
    await this.#joinCluster();
    // A load under way when this worker joined was published before it listened and is recorded
    // in the loaded set only once every other worker has answered: read the set again a few times
    // while such a load may still end (the gateway waits up to 120 s; review: the worker never got
    // the model).
    for (const ms of this.#rejoinAfterMs) {
      const t = setTimeout(() => { void this.#rejoin(); }, ms);
      t.unref();
      this.#rejoinTimers.push(t);
    }
    await this.#refreshStreams();
    await this.#beat();
    this.#heartbeat = setInterval(() => { this.#beat().catch((e: unknown) => this.#logger?.warning(`heartbeat failed: ${String(e)}`)); }, this.#heartbeatMs);
    this.#running = true;
    this.#loop = this.#consume();
    this.#claimer = setInterval(() => { void this.#claim(); }, Math.max(100, Math.min(1000, this.#claimIdleMs / 2)));
  }

  readonly #rejoinAfterMs: readonly number[];
  /** The most loads a later read of the loaded set queues at once (REJOIN_IN_FLIGHT, or fewer with a smaller queue). */
  readonly #rejoinInFlight: number;
  /** Timers of the loaded set's later reads (cleared at stop). */
  readonly #rejoinTimers: ReturnType<typeof setTimeout>[] = [];

  /**
   * Models a control command has named since this worker joined: those commands govern them, not
   * a later read of the loaded set (which an unload under way has not yet updated). Undefined
   * once it would pass MAX_TOUCHED (junk on the channel): the later reads then stop.
   */
  #touched: Set<string> | undefined = new Set();

  /**
   * Catches up on the loaded set again, leaving out what a control command has named since the
   * start: each model's load is queued as a command is (after the commands taken before it that
   * share a model with it).
   */
  async #rejoin(): Promise<void> {
    if (!this.#running || this.#touched === undefined) return;
    // A few at a time, and only those not ready: queued all at once, a loaded set of more models
    // than the queue holds had the rest refused, never loaded (review).
    const inFlight = new Set<Promise<void>>();
    for (const [model, options] of await this.#loadedSet()) {
      if (!this.#running || this.#touched === undefined || this.#touched.has(model) || this.#server.modelReady(model)) continue;
      const done = new Promise<void>((settled) => {
        this.#controls.add({
          model, action: 'load', scope: () => this.#scopeOf(model, true, options.config), same: 'rejoin',
          apply: async () => {
            if (this.#server.modelReady(model)) return;
            await this.#server.loadModel(model, options);
            await this.#refreshStreams();
            await this.#beat();
          },
          answer: (error) => {
            settled();
            if (error) this.#junk('not loaded').warn(`could not load '${model}' that the cluster has loaded: ${error.message}`);
          },
        });
      });
      inFlight.add(done);
      void done.then(() => inFlight.delete(done));
      if (inFlight.size >= this.#rejoinInFlight) await Promise.race(inFlight);
    }
  }

  /** Loads what the cluster has loaded (a worker that joins later catches up). */
  async #joinCluster(): Promise<void> {
    for (const [model, options] of await this.#loadedSet()) {
      try {
        if (this.#server.modelReady(model)) continue;
        await this.#server.loadModel(model, options);
      } catch (err) {
        this.#junk('not loaded').warn(`could not load '${model}' that the cluster has loaded: ${(err as Error).message}`);
      }
    }
  }

  /** The loaded set: the load options of each model the cluster has loaded (entries that do not read are dropped). */
  async #loadedSet(): Promise<Map<string, LoadOptions>> {
    const desired = new Map<string, Buffer>();
    try {
      // Scanned as flat lists of buffers, names included: one field too long for a JS string (a
      // junk entry, its value or its name: names are not signed) fails alone, not the read.
      // (HGETALL, even as buffers, comes back from ioredis as an object keyed by the names, so one
      // name over V8's longest string failed the whole read and the worker loaded nothing, silently: review.)
      let cursor = '0';
      do {
        const [next, flat] = (await this.#cmd.hscanBuffer(this.#keys.desired, cursor, 'COUNT', 64)) as unknown as [Buffer, Buffer[]];
        cursor = next.toString();
        for (let i = 0; i + 1 < flat.length; i += 2) {
          const name = flat[i]!;
          if (name.byteLength > MAX_MODEL_NAME_BYTES) {
            this.#junk('loaded set entry').warn(`dropped an entry of the loaded set whose model name is ${name.byteLength} bytes long (a model name has at most ${MAX_MODEL_NAME_BYTES})`);
            continue;
          }
          desired.set(name.toString('utf8'), flat[i + 1]!);
        }
      } while (cursor !== '0');
    } catch (err) {
      this.#logger?.warning(`could not read the models the cluster has loaded; loading none of them: ${(err as Error).message}`);
      return new Map();
    }
    const loaded = new Map<string, LoadOptions>();
    for (const [model, bytes] of desired) {
      let raw: string;
      try {
        raw = bytes.toString('utf8');
      } catch {
        this.#junk('loaded set entry').warn(`dropped an entry of the loaded set (model '${echoName(model)}'): ${bytes.length} bytes, too long to read`);
        continue;
      }
      const text = this.auth.openText('desired', raw, `entry of the loaded set (model '${echoName(model)}')`);
      if (text === undefined) continue;
      try {
        const want = JSON.parse(text) as { model?: string; action: 'load'; config?: ModelConfig; files?: Record<string, string> };
        // Signed for this model's entry, not copied from another one.
        if (this.auth.enabled && want.model !== model) {
          this.auth.reject('desired', `an entry of the loaded set signed for another model ('${echoName(model)}')`);
          continue;
        }
        checkModelName(model);
        loaded.set(model, loadOptions(want));
      } catch (err) {
        this.#junk('not loaded').warn(`could not load '${model}' that the cluster has loaded: ${(err as Error).message}`);
      }
    }
    return loaded;
  }

  /** A gateway's client went away: its request, if this worker holds it, is cancelled. */
  #cancel(message: string): void {
    if (this.#cancels.size === 0) return;
    const text = this.auth.openText('cancel', message, 'cancellation');
    if (text === undefined) return;
    try {
      const m = JSON.parse(text) as { replyTo?: unknown; requestKey?: unknown };
      if (typeof m.replyTo === 'string' && typeof m.requestKey === 'string') this.#cancels.get(`${m.replyTo}\u0000${m.requestKey}`)?.cancel();
    } catch {
      // junk on the channel: nothing to cancel
    }
  }

  /**
   * Takes a load/unload command as it arrives: checked, then applied after the commands taken
   * before it that may change a model it may change (ControlQueue: the same order on every
   * worker, so racing commands end alike), beside the others. With a secret, one that is not
   * signed, is older than CONTROL_MAX_AGE_MS or was seen before is dropped unanswered (checked on
   * arrival: one that waited behind a long load was dropped as stale). An unload gives up at once,
   * as `triode serve`'s does, the model's load this worker is running and its loads still waiting
   * here (review: it waited behind them, so loads that never ended kept out the unload that would
   * give them up, on every worker).
   */
  #receiveControl(message: string): void {
    const text = this.auth.openText('control', message, 'control message');
    if (text === undefined) return;
    let cmd: ControlCommand;
    try {
      cmd = JSON.parse(text) as ControlCommand;
      if (typeof cmd.id !== 'string' || typeof cmd.model !== 'string' || (cmd.action !== 'load' && cmd.action !== 'unload')) throw new Error('not a control message');
    } catch {
      this.#junk('malformed control').warn('cluster: dropped a malformed control message');
      return;
    }
    if (this.auth.enabled) {
      const now = Date.now();
      for (const [id, at] of this.#controlSeen) if (now - at > CONTROL_MAX_AGE_MS) this.#controlSeen.delete(id);
      if (typeof cmd.ts !== 'number' || Math.abs(now - cmd.ts) > CONTROL_MAX_AGE_MS || this.#controlSeen.has(cmd.id)) {
        this.auth.reject('control', 'a control message that is stale or replayed');
        return;
      }
      this.#controlSeen.set(cmd.id, now);
    }
    if (this.#touched) {
      this.#touched.add(cmd.model);
      if (this.#touched.size > MAX_TOUCHED) this.#touched = undefined;
    }
    if (cmd.action === 'unload' && this.#server.cancelLoads(cmd.model)) this.#controls.cancelLoads(cmd.model);
    const { id, model, action } = cmd;
    const unloadDependents = cmd.unloadDependents === true;
    this.#controls.add({
      model, action,
      scope: () => this.#scopeOf(model, action === 'load' || unloadDependents, cmd.config),
      same: action === 'load' ? sameLoad(cmd) : String(unloadDependents),
      apply: () => this.#apply(cmd),
      answer: (error) => { void this.#answer(id, error); },
    });
  }

  /** The load and unload commands taken and not yet answered. */
  readonly #controls: ControlQueue;

  /** The models a command may change (just its own when they cannot be told). */
  #scopeOf(model: string, steps: boolean, config: ModelConfig | undefined): string[] {
    try {
      return this.#server.modelsAffectedBy(model, { steps, ...(config !== undefined ? { config } : {}) });
    } catch {
      return [model];
    }
  }

  /** Applies a load/unload command; a model name that is not one (a path) is refused before it reaches the repository. */
  async #apply(cmd: ControlCommand): Promise<void> {
    try {
      checkModelName(cmd.model);
      if (cmd.action === 'load') await this.#server.loadModel(cmd.model, loadOptions(cmd));
      else await this.#server.unloadModel(cmd.model, { unloadDependents: cmd.unloadDependents === true });
      await this.#refreshStreams();
      await this.#beat();
    } catch (err) {
      // A failed load changes the index too (the model UNAVAILABLE with the reason): published
      // before the answer, so the gateway answers a request to it as triode serve does.
      await this.#beat().catch(() => undefined);
      throw err;
    }
  }

  /** Answers the gateway that sent command `id`. */
  async #answer(id: string, err: TriodeError | undefined): Promise<void> {
    const key = this.#keys.controlReplies(id);
    const error = err ? { code: err.code, message: err.message } : undefined;
    const answer = this.auth.signText('control-reply', JSON.stringify({ id, workerId: this.workerId, ...(error !== undefined ? { error } : {}) }));
    await this.#cmd.rpush(key, answer).catch(() => undefined);
    await this.#cmd.pexpire(key, 60_000).catch(() => undefined);
  }

  /** The streams to read: one per ready model, plus this worker's own for sequence models. */
  /** What the streams were last built from: the ready models and their instance counts. */
  #servingSignature(): string {
    return this.#server.repositoryIndex(true).map((r) => {
      const c = this.#server.getModel(r.name).config;
      return `${r.name}:${r.version ?? ''}:${(c.instance_group ?? []).map((g) => g.count ?? 1).join('+')}`;
    }).join(',');
  }

  #streamsBuiltFor = '';

  async #refreshStreams(): Promise<void> {
    this.#streamsBuiltFor = this.#servingSignature();
    const models = [...new Set(this.#server.repositoryIndex(true).map((r) => r.name))];
    const streams: string[] = [];
    const ownStreams: string[] = [];
    for (const m of models) {
      // A full batch per instance, twice: one running and one ready to go. Reading more would
      // take work other workers could start at once.
      const c = this.#server.getModel(m).config;
      const instances = (c.instance_group ?? []).reduce((a, g) => a + (g.count ?? 1), 0) || 1;
      // Sequence models also get a stream of this worker's own: gateways send every request of
      // a sequence that started here to it.
      const own = [this.#keys.requests(m)];
      if (c.sequence_batching) {
        const mine = this.#keys.workerRequests(m, this.workerId);
        own.push(mine);
        ownStreams.push(mine);
      }
      for (const s of own) {
        streams.push(s);
        this.#slots.set(s, instances * Math.max(1, c.max_batch_size ?? 0) * 2);
        if (!this.#held.has(s)) this.#held.set(s, 0);
      }
    }
    this.#streams = streams;
    // An own stream no longer read (its model unloaded) is no longer renewed, and expires.
    this.#ownStreams = ownStreams;
    // A read loop waiting for room (or for any stream at all: a worker that started with no model
    // ready) reads the new set now.
    this.#wake?.();
    this.#wake = undefined;
    await this.#ensureGroups();
    // A read blocked on the old set of streams would not see a newly loaded model's.
    if (this.#running && this.#block.clientId !== undefined) {
      this.#unblockedRead = this.#readSeq;
      await this.#cmd.client('UNBLOCK', this.#block.clientId).catch(() => undefined);
    }
  }

  /**
   * Takes over the requests of workers that died: entries read by a consumer whose registry entry
   * has expired (no heartbeat for 3 periods) and idle for claimIdleMs. A live worker's entries are
   * never taken, however long they run (DESIGN: delivery), so a request runs once while its worker
   * lives. An entry already delivered MAX_DELIVERIES times (it was on a worker that died, then on
   * another that died too) is answered with an error instead of running again: a request that
   * kills workers must not take the whole cluster down one worker at a time.
   */
  async #claim(): Promise<void> {
    if (this.#claiming || !this.#running) return;
    this.#claiming = true;
    try {
      for (const stream of this.#streams) {
        const summary = (await this.#cmd.xpending(stream, this.#keys.group)) as [number, string | null, string | null, [string, string][] | null];
        for (const [consumer] of summary[3] ?? []) {
          const room = this.#room(stream);
          if (room <= 0) break;
          if (consumer === this.workerId || (await this.#cmd.exists(this.#keys.worker(consumer))) === 1) continue;
          const pending = (await this.#cmd.xpending(stream, this.#keys.group, 'IDLE', this.#claimIdleMs, '-', '+', room, consumer)) as [string, string, number, number][];
          if (pending.length === 0) continue;
          const deliveries = new Map(pending.map(([id, , , n]) => [id, n]));
          // XCLAIM with the same idle floor: when two workers race for an entry, one gets it.
          const claimed = (await this.#cmd.callBuffer('XCLAIM', stream, this.#keys.group, this.workerId, this.#claimIdleMs, ...pending.map(([id]) => id))) as [Buffer, Buffer[] | null][];
          if (claimed.length) this.#junk('taken over').warn(`took over ${claimed.length} requests of worker '${echoName(consumer)}' (no heartbeat) from ${stream}`);
          for (const [id, fields] of claimed) {
            const key = id.toString();
            if (fields) this.#handleSafely(stream, key, fields, (deliveries.get(key) ?? 1) + 1);
            else this.#ack(stream, key); // deleted meanwhile
          }
        }
        await this.#forgetDeadConsumers(stream);
      }
    } catch (err) {
      this.#logger?.verbose(1, `claiming pending requests failed: ${(err as Error).message}`);
    } finally {
      this.#claiming = false;
    }
  }

  /** When each stream's consumers were last pruned (ms). */
  readonly #prunedAt = new Map<string, number>();

  /**
   * Removes from a stream's consumer group the consumers that hold nothing and whose worker is
   * gone, every CONSUMER_PRUNE_MS: workers come and go (restarts get new ids), and the group
   * must not keep every name it ever saw.
   */
  async #forgetDeadConsumers(stream: string): Promise<void> {
    const now = Date.now();
    if (now - (this.#prunedAt.get(stream) ?? 0) < CONSUMER_PRUNE_MS) return;
    this.#prunedAt.set(stream, now);
    const info = (await this.#cmd.xinfo('CONSUMERS', stream, this.#keys.group)) as unknown[][];
    for (const row of info) {
      const c = fieldsOf(row);
      const name = String(c['name']);
      if (name === this.workerId || Number(c['pending']) !== 0 || Number(c['idle']) < CONSUMER_PRUNE_MS) continue;
      if ((await this.#cmd.exists(this.#keys.worker(name))) === 1) continue;
      await this.#cmd.xgroup('DELCONSUMER', stream, this.#keys.group, name);
    }
  }

  /**
   * Creates the consumer group of every stream (again after Redis lost them, e.g. a restart, or
   * this worker's own stream expired: Redis was paused past its expiry). This worker's own streams
   * are given their expiry at once: one made here must not stay for good if the worker dies now.
   */
  async #ensureGroups(): Promise<void> {
    // Stopping (a control command or a heartbeat still under way): its own streams are deleted, not made again.
    if (this.#stopped) return;
    for (const s of this.#streams) {
      try {
        // From '0': requests queued before any worker joined are not lost.
        await this.#cmd.xgroup('CREATE', s, this.#keys.group, '0', 'MKSTREAM');
      } catch (err) {
        if (!String((err as Error).message).includes('BUSYGROUP')) throw err;
      }
    }
    await this.#renewOwnStreams(false);
  }

  /**
   * Renews the expiry of this worker's own streams (with each heartbeat). One that is gone
   * (expired while Redis was paused, or deleted) is made again with its group, when `remake`.
   */
  async #renewOwnStreams(remake = true): Promise<void> {
    const own = this.#ownStreams;
    if (own.length === 0) return;
    const p = this.#cmd.pipeline();
    for (const s of own) p.pexpire(s, this.#ownStreamTtlMs);
    const answers = (await p.exec()) ?? [];
    if (remake && answers.some(([err, n]) => !err && Number(n) === 0)) await this.#ensureGroups();
  }

  /** Publishes what this worker serves, with an expiry of three heartbeats. */
  async #beat(): Promise<void> {
    const s = this.#server;
    // Models that changed without a control message (poll mode, instance counts): read their streams.
    if (this.#running && this.#servingSignature() !== this.#streamsBuiltFor) await this.#refreshStreams();
    const models = s.repositoryIndex().map((row) => {
      const v = row.version !== undefined ? Number(row.version) : undefined;
      const ready = row.state === 'READY';
      return {
        ...row,
        ...(ready ? { metadata: s.modelMetadata(row.name, v), config: s.modelConfig(row.name, v), stats: s.modelStatistics(row.name, v)[0] } : {}),
      };
    });
    const record: WorkerRecord = {
      workerId: this.workerId, heartbeatMs: Date.now(), models,
      host: hostname(), pid: process.pid, device: this.#device, inflight: this.#inflight, startedMs: this.#startedMs, ttlMs: this.#heartbeatMs * 3,
    };
    await this.#cmd.set(this.#keys.worker(this.workerId), this.auth.signText('registry', JSON.stringify(record)), 'PX', record.ttlMs!);
    await this.#renewOwnStreams();
  }

  /** Room for more requests of a stream: its model's free slots, within the worker's limit. */
  #room(stream: string): number {
    return Math.min(this.#maxInflight - this.#inflight, (this.#slots.get(stream) ?? 1) - (this.#held.get(stream) ?? 0));
  }

  async #consume(): Promise<void> {
    while (this.#running) {
      const open = this.#streams.filter((s) => this.#room(s) > 0);
      if (open.length === 0) {
        await new Promise<void>((r) => { this.#wake = r; });
        continue;
      }
      if (this.#recoverPending) {
        try {
          await this.#recover();
          this.#recoverPending = false;
        } catch (err) {
          this.#logger?.verbose(1, `reading this worker's pending requests: ${(err as Error).message}`);
          await new Promise((r) => setTimeout(r, 200));
          continue;
        }
      }
      // COUNT applies to each stream: the smallest room keeps every model within its slots.
      const count = Math.min(...open.map((s) => this.#room(s)));
      let reply: StreamEntries;
      const read = ++this.#readSeq;
      const reading = new Set(open);
      this.#reading = reading;
      try {
        reply = await this.#block.xreadgroup(this.#keys.group, this.workerId, count, 200, open);
        this.#reading = new Set();
        // Nothing came and nothing cut the read short, though a stream it left out (full when it
        // began) has room now: that room waited for the read's timeout.
        if (reply === null && this.#unblockedRead !== read && this.#streams.some((s) => !reading.has(s) && this.#room(s) > 0)) this.#readsTimedOutWithRoom++;
      } catch (err) {
        if (!this.#running) break;
        // Redis may have delivered entries to this worker in the reply that was lost.
        this.#recoverPending = true;
        const msg = (err as Error).message;
        // While Redis is away the connection retries by itself: no warning every 200 ms.
        if (this.#block.status === 'ready') this.#logger?.warning(`reading requests failed: ${msg}`);
        else this.#logger?.verbose(1, `reading requests: waiting for Redis (${msg})`);
        await new Promise((r) => setTimeout(r, 200));
        if (msg.includes('NOGROUP')) await this.#ensureGroups().catch(() => undefined);
        continue;
      }
      for (const [key, entries] of reply ?? []) {
        for (const [id, fields] of entries) this.#handleSafely(key.toString(), id.toString(), fields);
      }
    }
  }

  /**
   * Runs the entries Redis delivered to this worker that it never started (their read's reply was
   * lost), and acknowledges again those it answered whose XACK did not get through.
   */
  async #recover(): Promise<void> {
    const atStart = !this.#recoveredOnce;
    for (const stream of this.#streams) {
      let from = '-';
      for (;;) {
        // XPENDING reads delivery counts without changing them (a read from id 0 would add one to
        // each entry, those still running included).
        let rows: [string, string, number, number][];
        try {
          rows = (await this.#cmd.xpending(stream, this.#keys.group, 'IDLE', 0, from, '+', 256, this.workerId)) as typeof rows;
        } catch (err) {
          // No group (Redis lost its data, or the stream was removed): nothing is pending there. The read loop makes it again.
          if (String((err as Error).message).includes('NOGROUP')) break;
          throw err;
        }
        if (rows.length === 0) break;
        from = `(${rows[rows.length - 1]![0]}`;
        const todo: [string, number][] = [];
        for (const [id, , , count] of rows) {
          const state = this.#taken.get(entryKey(stream, id));
          if (state === 'running') continue;
          if (state === 'answered') this.#ack(stream, id);
          else todo.push([id, count]);
        }
        if (todo.length === 0) continue;
        const counts = new Map(todo);
        // At start these may have been running when this worker (same --worker-id) stopped: taken
        // again as a takeover is (XCLAIM counts a delivery; MAX_DELIVERIES stops a request that kills
        // its worker each time). After a lost read they never ran: read as they are.
        const entries: [Buffer, Buffer[] | null][] = atStart
          ? (await this.#cmd.callBuffer('XCLAIM', stream, this.#keys.group, this.workerId, 0, ...todo.map(([id]) => id))) as [Buffer, Buffer[] | null][]
          : await Promise.all(todo.map(async ([id]) => {
            const found = (await this.#cmd.xrangeBuffer(stream, id, id)) as [Buffer, Buffer[]][];
            return [Buffer.from(id), found[0]?.[1] ?? null] as [Buffer, Buffer[] | null];
          }));
        for (const [idBuf, fields] of entries) {
          const id = idBuf.toString();
          if (!fields) this.#ack(stream, id); // deleted meanwhile
          else this.#handleSafely(stream, id, fields, (counts.get(id) ?? 1) + (atStart ? 1 : 0));
        }
        this.#logger?.warning(`${stream}: ${todo.length} requests delivered to this worker were not running (${atStart ? 'it restarted' : 'a read\'s reply was lost'}): handled now`);
      }
    }
    this.#recoveredOnce = true;
  }

  #recoveredOnce = false;

  /** Entries answered since the last flush, per stream: acknowledged and deleted together. */
  readonly #acks = new Map<string, string[]>();
  #ackFlush: ReturnType<typeof setTimeout> | undefined;

  /** Queues an entry's XACK + XDEL; one of each per stream goes out every ACK_FLUSH_MS. */
  #ack(stream: string, id: string): void {
    this.#taken.set(entryKey(stream, id), 'answered');
    const ids = this.#acks.get(stream);
    if (ids) ids.push(id);
    else this.#acks.set(stream, [id]);
    this.#ackFlush ??= setTimeout(() => this.#flushAcks(), ACK_FLUSH_MS);
  }

  #flushAcks(): void {
    this.#ackFlush = undefined;
    for (const [stream, ids] of this.#acks) {
      // Forgotten once Redis has the XACK; one that failed stays 'answered' for #recover to send again.
      void this.#cmd.xack(stream, this.#keys.group, ...ids).then(
        () => { for (const id of ids) this.#taken.delete(entryKey(stream, id)); },
        () => { this.#recoverPending = true; },
      );
      void this.#cmd.xdel(stream, ...ids).catch(() => undefined);
    }
    this.#acks.clear();
  }

  /**
   * `#handle`, and an entry it throws on is logged and acknowledged: one bad entry must not end
   * the read loop (and with it the worker) or the takeover of a dead worker's entries.
   */
  #handleSafely(stream: string, id: string, fields: Buffer[], deliveries?: number): void {
    this.#taken.set(entryKey(stream, id), 'running');
    try {
      this.#handle(stream, id, fields, deliveries);
    } catch (err) {
      this.#junk('unhandled request').warn(`dropping a request from ${stream} that could not be handled: ${(err as Error).message}`);
      this.#ack(stream, id);
    }
  }

  /**
   * Runs one entry and replies. The entry is acknowledged only once its reply was confirmed: by
   * the gateway on the direct channel, or by Redis for the reply stream (DESIGN: delivery).
   * @param deliveries how many times Redis has delivered it (2 after a takeover)
   */
  #handle(stream: string, id: string, fields: Buffer[], deliveries = 1): void {
    // [r, header, t, tensor, t, tensor, ..., s, MAC] from gateways ([r, message] from older ones);
    // [r, header, b, 1, s, MAC] when the gateway kept the tensors, for this worker to fetch.
    const parts: Buffer[] = [];
    let mac: Buffer | undefined;
    let headMac: Buffer | undefined;
    let fetch = false;
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const f = fields[i]!;
      if (f.byteLength === 1 && f[0] === 0x73) mac = fields[i + 1]; // 's'
      else if (f.byteLength === 1 && f[0] === 0x68) headMac = fields[i + 1]; // 'h'
      else if (f.byteLength === 1 && f[0] === 0x62) fetch = true; // 'b'
      else parts.push(fields[i + 1]!);
    }
    if (!fetch || parts.length !== 1) {
      this.#handleParts(stream, id, parts, mac, deliveries);
      return;
    }
    // The header alone is signed too: nothing is fetched for one a gateway of this cluster did not write.
    if (!this.auth.verify('request-head', [parts[0]!], headMac, `request on ${stream}`)) {
      this.#ack(stream, id);
      return;
    }
    this.#fetchThenHandle(stream, id, parts[0]!, mac, deliveries);
  }

  /**
   * Fetches the tensors of a request whose gateway kept them (RedisBackplaneOptions.tensorFetchMinBytes)
   * over the direct channel, then runs it. The fetch holds a place of the stream, as the request
   * will. A request gone from its gateway (answered, given up), or being fetched here already, is
   * acknowledged and not run. One whose tensors could not be fetched (the gateway not reached, the
   * connection failed, no answer in time, too large, or no direct channel on this worker) is
   * answered `unfetched` through Redis: its gateway sends it again with its tensors (before, the
   * client got 503, and a flood of connections on the gateway's direct port caused it: review).
   */
  #fetchThenHandle(stream: string, id: string, head: Buffer, mac: Buffer | undefined, deliveries: number): void {
    const ack = () => this.#ack(stream, id);
    const fetched = fetchedRequestHead(head);
    const env = fetched?.env;
    // Without a gateway to fetch from, it runs as it is: the missing tensors fail it, answered.
    if (!env?.direct || !env.replyTo.startsWith(this.#replyPrefix)) {
      this.#handleParts(stream, id, [head], mac, deliveries);
      return;
    }
    // Its gateway stopped waiting (as #handle decides): nothing is fetched for it. Fetched first,
    // its tensors crossed the network (up to MAX_FETCH_BYTES) only to be dropped.
    if (env.deadlineMs < Date.now()) {
      ack();
      return;
    }
    const bytes = fetched!.bytes;
    const direct = env.direct;
    // The gateway's address goes to this log only: the client's answer must not show it.
    const unfetched = (why: string) => {
      this.#fetchWarning.warn(`could not fetch a request's tensors from gateway ${echo(direct.address, 256)}: ${why}; its gateway is told to send them through Redis`);
      const body = encodeReply({ requestKey: env.requestKey, error: { code: 'UNAVAILABLE', message: 'the worker could not fetch the request\'s tensors from its gateway', unfetched: true } });
      void this.#replyOnStream(env.replyTo, body, this.auth.mac('reply', [env.replyTo, body]), env.deadlineMs, ack);
    };
    if (!this.#direct) {
      unfetched('this worker does not connect to gateways (--direct-replies false)');
      return;
    }
    this.#takeSlot(stream);
    const release = () => this.#freeSlot(stream);
    const fetchMac = this.auth.mac('fetch', [env.replyTo, fetchRequest(env.requestKey)]);
    this.#directReplies.fetch(direct, env.requestKey, fetchMac, bytes).then((tensors) => {
      release();
      if (!tensors) {
        ack();
        return;
      }
      try {
        this.#handleParts(stream, id, [head, ...tensors], mac, deliveries);
      } catch (err) {
        this.#junk('unhandled request').warn(`dropping a request from ${stream} that could not be handled: ${(err as Error).message}`);
        ack();
      }
    }, (err: unknown) => {
      release();
      unfetched((err as Error).message);
    });
  }

  /** Counts a request (or its fetch) against the worker's and its stream's room. */
  #takeSlot(stream: string): void {
    this.#inflight++;
    this.#held.set(stream, (this.#held.get(stream) ?? 0) + 1);
  }

  /** Gives a request's room back, and wakes a read loop waiting for room. */
  #freeSlot(stream: string): void {
    this.#inflight--;
    this.#held.set(stream, (this.#held.get(stream) ?? 1) - 1);
    this.#wake?.();
    this.#wake = undefined;
  }

  /** Runs a request from its parts (the header, then each tensor; or one message) and replies. */
  #handleParts(stream: string, id: string, parts: Buffer[], mac: Buffer | undefined, deliveries: number): void {
    const ack = () => this.#ack(stream, id);
    if (parts.length === 0 || !this.auth.verify('request', parts, mac, `request on ${stream}`)) {
      ack();
      return;
    }
    let decoded: ReturnType<typeof decodeRequest>;
    try {
      decoded = parts.length > 1 ? decodeRequestParts(parts) : decodeRequest(parts[0]!);
    } catch (err) {
      const message = (err as Error).message;
      // A signed request (or any, without a secret) whose envelope still reads: its gateway is told
      // at once, rather than waiting out its timeout for a reply that would never come.
      const env = requestEnvelope(parts[0]!);
      if (env && env.replyTo.startsWith(this.#replyPrefix) && env.deadlineMs >= Date.now()) {
        this.#junk('answered malformed request').warn(`answering an error to a malformed request from ${stream}: ${message}`);
        const body = encodeReply({ requestKey: env.requestKey, error: { code: 'INTERNAL', message: `the worker could not read the request: ${message}` } });
        void this.#replyOnStream(env.replyTo, body, this.auth.mac('reply', [env.replyTo, body]), env.deadlineMs, ack);
        return;
      }
      this.#junk('malformed request').warn(`dropping a malformed request from ${stream}: ${message}`);
      ack();
      return;
    }
    const { request, env } = decoded;
    // Replies go only to a gateway's reply stream of this cluster, never to any other key.
    if (typeof env.replyTo !== 'string' || !env.replyTo.startsWith(this.#replyPrefix)) {
      this.#junk('not for a gateway').warn(`dropping a request from ${stream} whose reply stream is not a gateway's`);
      ack();
      return;
    }
    // The batchers' max_queue_delay counts from when the gateway queued it (DESIGN: cluster batching).
    request.queuedSinceMs = env.enqueuedMs;
    // Traced by its gateway: the core adds its timestamps here, and the reply takes them back.
    if (env.trace) request.trace = { timestamps: [] };
    const now = Date.now();
    if (env.deadlineMs < now) {
      // Its gateway stopped waiting: running it would only waste an instance.
      ack();
      return;
    }
    if (this.auth.enabled && deliveries === 1) {
      const seenKey = `${env.replyTo}\u0000${env.requestKey}`;
      // By deadline, not arrival: one request with a later deadline (a gateway with a longer
      // timeout, or a clock ahead) held every entry after it in an arrival-ordered prune.
      for (let top = this.#seenDeadlines.peek(); top && top.at < now; top = this.#seenDeadlines.peek()) {
        this.#seenDeadlines.pop();
        if (this.#requestsSeen.get(top.value) === top.at) this.#requestsSeen.delete(top.value);
      }
      if (this.#requestsSeen.has(seenKey)) {
        this.auth.reject('request', `a signed request replayed on ${stream}`);
        ack();
        return;
      }
      this.#requestsSeen.set(seenKey, env.deadlineMs);
      this.#seenDeadlines.push(env.deadlineMs, seenKey);
      // Bounded: the entry due first goes (MAX_REQUESTS_SEEN).
      while (this.#requestsSeen.size > this.#maxRequestsSeen) {
        const top = this.#seenDeadlines.pop();
        if (!top) break;
        if (this.#requestsSeen.get(top.value) === top.at) this.#requestsSeen.delete(top.value);
      }
    }
    if (deliveries > MAX_DELIVERIES) {
      // Ran on workers that died each time: answer instead of risking a third one.
      this.#junk('redelivered request').warn(`request on ${stream} was delivered ${deliveries} times (its workers died): answering an error instead of running it again`);
      const body = encodeReply({ requestKey: env.requestKey, error: { code: 'UNAVAILABLE', message: `the request for model '${echoName(request.modelName)}' was not answered: the workers that took it stopped (${deliveries - 1} times)` } });
      void this.#replyOnStream(env.replyTo, body, this.auth.mac('reply', [env.replyTo, body]), env.deadlineMs, ack);
      return;
    }
    this.#takeSlot(stream);
    // The gateway may cancel it (its client went away): a queued request leaves its queue.
    const cancelKey = `${env.replyTo}\u0000${env.requestKey}`;
    const cancel = new CancelToken();
    request.signal = cancel;
    this.#cancels.set(cancelKey, cancel);
    const decoupled = this.#decoupled(request.modelName);
    const send = (r: WireReply) => {
      const body = encodeReply(r);
      const mac = this.auth.mac('reply', [env.replyTo, body]);
      // A reply Redis refuses for good (over proto-max-bulk-len): the client gets an error at
      // once, not a timeout, and the log says why.
      const refused = (err: Error) => {
        this.#logger?.warning(`Redis refused the reply (${body.length} bytes) to a request for model '${echoName(request.modelName)}': ${err.message}`);
        if ('error' in r) return;
        const error = encodeReply({ requestKey: env.requestKey, error: { code: 'INTERNAL', message: `the response of model '${echoName(request.modelName)}' (${body.length} bytes) could not be passed through Redis` } });
        void this.#replyOnStream(env.replyTo, error, this.auth.mac('reply', [env.replyTo, error]), env.deadlineMs);
      };
      const onStream = () => this.#replyOnStream(env.replyTo, body, mac, env.deadlineMs, ack, refused);
      // A decoupled request's replies all take the stream, so they cannot overtake one another.
      // A direct reply is acknowledged when the gateway confirms it; if the connection fails
      // first, it goes through the reply stream (the gateway drops a duplicate).
      if (decoupled || !env.direct || !this.#direct || !this.#directReplies.send(env.direct, body, mac, { confirmed: ack, lost: () => void onStream() })) void onStream();
    };
    let seq = 0;
    const start = (): Promise<WireReply> => decoupled
      ? this.#server.inferStream(request, (response) => {
        const body = encodeReply({ requestKey: env.requestKey, response, more: true, seq: seq++ });
        // Settles once Redis has it: a model's sender waits for that before its next response, so
        // a model sending in a loop does not queue its every response in this process. A reply
        // stream that is gone (its gateway died) cancels the request: nobody reads it any more.
        return this.#replyOnStream(env.replyTo, body, this.auth.mac('reply', [env.replyTo, body]), env.deadlineMs, undefined, (err) => {
          // A streamed response Redis refuses for good: the stream ends with an error (it went on
          // without that response, a gap no one saw), and the model is told to stop.
          this.#logger?.warning(`Redis refused a streamed response (${body.length} bytes) of model '${echoName(request.modelName)}': ${err.message}`);
          const error = encodeReply({ requestKey: env.requestKey, error: { code: 'INTERNAL', message: `a response of model '${echoName(request.modelName)}' (${body.length} bytes) could not be passed through Redis` } });
          void this.#replyOnStream(env.replyTo, error, this.auth.mac('reply', [env.replyTo, error]), env.deadlineMs);
          cancel.cancel();
        }, () => cancel.cancel());
      }).then(() => ({ requestKey: env.requestKey, end: true as const }))
      : this.#server.infer(request).then((response): WireReply => (request.trace ? { requestKey: env.requestKey, response, trace: request.trace.timestamps } : { requestKey: env.requestKey, response }));
    // A request the server refuses by throwing (not by rejecting) is answered the same way.
    let run: Promise<WireReply>;
    try {
      run = start();
    } catch (err) {
      run = Promise.reject(err);
    }
    run.then(
      (reply) => send(reply),
      (err: unknown) => send({ requestKey: env.requestKey, error: toWireError(err) }),
    ).catch((err: unknown) => {
      // The reply could not even be sent (nothing to retry): the entry is done with.
      this.#logger?.warning(`could not reply to a request from ${stream}: ${(err as Error).message}`);
      ack();
    }).finally(() => {
      if (this.#cancels.get(cancelKey) === cancel) this.#cancels.delete(cancelKey);
      this.#freeSlot(stream);
      // The read under way does not wait on this stream (it was full): cut it short so the
      // freed room is used now, not when the read times out.
      if (this.#running && !this.#reading.has(stream) && this.#reading.size > 0 && this.#unblockedRead !== this.#readSeq && this.#block.clientId !== undefined) {
        this.#unblockedRead = this.#readSeq;
        this.#cmd.client('UNBLOCK', this.#block.clientId).catch(() => undefined);
      }
    });
  }

  /**
   * Blocking reads that ran to their timeout (200 ms) while a stream they did not wait on (its
   * model was full when the read began) had room: room freed during a read is meant to cut it
   * short, so that the room is used at once. Counts what tests (and a debugger) check; 0 when
   * all is well.
   */
  get readsTimedOutWithRoom(): number {
    return this.#readsTimedOutWithRoom;
  }

  /** Signed requests remembered against replays (their deadlines have not passed). */
  get replayGuardSize(): number {
    return this.#requestsSeen.size;
  }

  /** The prefix of every gateway's reply stream. */
  get #replyPrefix(): string {
    return this.#keys.replies('');
  }

  /**
   * Adds a reply to its gateway's reply stream, only if the stream exists (NOMKSTREAM): a gateway
   * keeps its stream alive, and a dead one's is not brought back. `done` (the entry's ack) runs
   * once Redis took the reply (or the stream is gone: nobody waits for it); while Redis refuses,
   * the reply is tried again until the request's deadline (at most MAX_REPLY_RETRY_MS), then
   * dropped and acknowledged. An error Redis would give again (WRONGTYPE) is not retried.
   */
  #replyOnStream(replyTo: string, body: Buffer, mac: Buffer | undefined, deadlineMs: number, done?: () => void, refused?: (err: Error) => void, gone?: () => void): Promise<void> {
    const args: (string | Buffer)[] = [replyTo, 'NOMKSTREAM', 'MAXLEN', '~', '100000', '*', 'r', body];
    if (mac) args.push('s', mac);
    const until = Math.min(deadlineMs, Date.now() + MAX_REPLY_RETRY_MS);
    return new Promise<void>((settled) => {
      const attempt = () => {
        (this.#cmd.xadd as (...a: (string | Buffer)[]) => Promise<unknown>)(...args).then(
          (id) => {
            // NOMKSTREAM: no id when the stream does not exist.
            if (id === null) gone?.();
            done?.();
            settled();
          },
          (err: unknown) => {
            if (Date.now() >= until || !this.#running || !worthRetrying(err)) {
              done?.();
              settled();
              if (this.#running && !worthRetrying(err)) refused?.(err as Error);
            } else setTimeout(attempt, REPLY_RETRY_MS).unref();
          },
        );
      };
      attempt();
    });
  }

  /** True for a decoupled model (0..N responses per request, sent as they come). */
  #decoupled(model: string): boolean {
    try {
      return this.#server.getModel(model).config.model_transaction_policy?.decoupled === true;
    } catch {
      return false;
    }
  }

  /** Stops reading, finishes what it holds (up to `timeoutMs`), and leaves the registry. */
  async stop(timeoutMs = 30_000): Promise<void> {
    this.#running = false;
    this.#stopped = true;
    this.#wake?.();
    clearInterval(this.#heartbeat);
    for (const t of this.#rejoinTimers) clearTimeout(t);
    clearInterval(this.#claimer);
    // Its blocked read returns within 200 ms, unless Redis is gone.
    await settleWithin(this.#loop ?? Promise.resolve(), this.#block.status === 'ready' ? FAREWELL_MS : 0);
    const until = Date.now() + timeoutMs;
    while (this.#inflight > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    // Replies sent directly are acknowledged when their gateway confirms them (milliseconds).
    const confirmBy = Math.min(until, Date.now() + FAREWELL_MS);
    while (this.#directReplies.unconfirmed > 0 && Date.now() < confirmBy) await new Promise((r) => setTimeout(r, 10));
    if (this.#ackFlush) {
      clearTimeout(this.#ackFlush);
      this.#flushAcks();
    }
    // Leaving the registry is a courtesy (the entry expires anyway): a Redis that is gone must
    // not hold the exit up. This worker's own streams go with it, drained (nobody else reads them;
    // they would expire anyway): in the same DEL, so no gateway finds the worker live and its
    // streams gone. A gateway that routed a sequence's request here just before adds nothing
    // (NOMKSTREAM) and answers 503, as for any gone worker.
    const up = this.#cmd.status === 'ready';
    if (up) await settleWithin(this.#cmd.del(this.#keys.worker(this.workerId), ...this.#ownStreams), FAREWELL_MS);
    this.#sub.disconnect();
    this.#block.disconnect();
    this.#directReplies.close();
    if (!up || !(await settleWithin(this.#cmd.quit(), FAREWELL_MS))) this.#cmd.disconnect();
  }
}

/** A model name as a log line repeats it. */
const echoName = (name: string): string => echo(name, 64);

/** The load options a control command or the desired set carries (files as base64). */
/** A load/unload command as a gateway publishes it. */
interface ControlCommand {
  id: string;
  ts?: number;
  action: 'load' | 'unload';
  model: string;
  config?: ModelConfig;
  files?: Record<string, string>;
  unloadDependents?: boolean;
}

/**
 * What makes two loads of a model the same load: a digest of their config and files (which may be
 * large). One that cannot be written back (junk nested too deep) is like no other.
 */
function sameLoad(cmd: { id: string; config?: unknown; files?: unknown }): string {
  try {
    return createHash('sha256').update(JSON.stringify([cmd.config ?? null, cmd.files ?? null])).digest('base64');
  } catch {
    return `unique ${cmd.id}`;
  }
}

function loadOptions(cmd: { config?: ModelConfig; files?: Record<string, string> }): LoadOptions {
  return {
    ...(cmd.config ? { config: cmd.config } : {}),
    ...(cmd.files ? { files: overrideFilesFromJson(cmd.files) } : {}),
  };
}
