/**
 * @module Cluster mode's backplane: a stateless gateway puts each request on its model's Redis
 * stream and waits for the reply on its own reply stream; what is loaded where comes from the
 * workers' registry entries. Every frontend works unchanged on top of it.
 */
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { TLSSocket, createSecureContext } from 'node:tls';
import { networkInterfaces } from 'node:os';
import type { Redis } from 'ioredis';
import { GATEWAY_COMMAND_TIMEOUT_MS, openRedis } from '../redis/redis-connection.js';
import {
  CancelToken, Errors, compareModelNames, echo, fromWireError, isErrorCode, TriodeError, checkModelName, settleWithin, overrideFilesToJson, sequenceParams, type Backplane, type InferenceRequest, type InferenceResponse, type RequestTrace, type InferStreamOptions, type ResponseHandler, type LoadOptions, type Logger, type ModelIndexEntry, type ModelMetadata, type ModelStatistics, type ServerMetadata, type ClusterWorkerInfo, type StreamBacklog, type UnloadOptions,
} from '@triode/core';
import { ClusterAuth, MAC_BYTES } from '../cluster-auth.js';
import { ClusterKeys } from '../keys.js';
import { FrameBudget, FrameReader, MAX_AUTH_FRAME_BYTES, confirmFrame, fetchKeyOf, tensorsFrameHead } from '../reply-frames.js';
import { corkForTurn } from '../cork-for-turn.js';
import { RateLimitedWarning } from '../rate-limited-warning.js';
import { decodeReply, encodeReply, encodeRequestParts, type WireEnvelope } from '../envelope/envelope-codec.js';
import { type RegistryModel, type WorkerRecord, STAT_STAGES, checkWorkerRecord, clusterWorkerInfo, registryEntryProblem } from '../registry.js';
import { type StreamEntries, fieldsOf, respPieces } from '../redis/resp.js';
import { RespConnection } from '../redis/resp-connection.js';

/** A request's sequence parameters once read (undefined: none, or unreadable), or not read yet. */
const NOT_PARSED = Symbol('not parsed');

/** The longest delay a Node timer holds (ms): past it, setTimeout fires after 1 ms. */
const MAX_TIMER_MS = 2 ** 31 - 1;
type Parsed = ReturnType<typeof sequenceParams> | typeof NOT_PARSED;

/** Options of a RedisBackplane. */
export interface RedisBackplaneOptions {
  redis: string;
  /** Key prefix of the cluster. @default "triode" */
  prefix?: string;
  /** How long a request may wait for a worker's answer (ms). @default 30000 */
  requestTimeoutMs?: number;
  /** Server metadata. */
  id?: string;
  version?: string;
  extensions?: string[];
  /** Ready only when every model is ready on at least one live worker. @default true */
  strictReadiness?: boolean;
  /** How often the registry is re-read (ms). @default 500 */
  registryRefreshMs?: number;
  /**
   * Direct reply channel: workers send replies straight to this gateway over TCP (one Redis leg
   * fewer per request) and fall back to its Redis reply stream when they cannot reach it.
   * `false` turns it off. @default { host: the advertise address, port: 0, advertise: first non-loopback IPv4 }
   */
  directReplies?: DirectReplyOptions | false;
  /**
   * The cluster secret: requests, control messages and the loaded set are signed with it, and
   * replies, control answers and registry entries not signed with it are dropped. @default none
   */
  clusterSecret?: string;
  /**
   * This gateway's reply stream expires this long (ms) after its last refresh (every third of it),
   * so a dead gateway's stream does not stay in Redis. @default 60000
   */
  replyStreamTtlMs?: number;
  /**
   * How much of a client call's streamed responses may wait for it when it does not read them, in
   * bytes (each response counts its tensors and 2 KiB more: about what it holds in memory). The
   * requests of one gRPC stream (they share its cancel signal) share this. A gateway cannot hold
   * back a worker's model as `triode serve` holds back its own (the model runs ahead through
   * Redis), so past this the request is cancelled on its worker and ends with UNAVAILABLE.
   * @default 16 MiB
   */
  maxStreamBacklogBytes?: number;
  /**
   * The same for all of this gateway's calls together, a last bound against running out of memory
   * (many connections whose clients read nothing): past it, the request whose response crosses it
   * is cancelled, whoever holds the rest. @default 1 GiB
   */
  maxGatewayBacklogBytes?: number;
  /** How long a command may wait for Redis's answer before its request gets 503 (ms). @default GATEWAY_COMMAND_TIMEOUT_MS (10 s) */
  commandTimeoutMs?: number;
  /**
   * A request whose tensors hold at least this many bytes leaves them out of its Redis entry: the
   * worker that takes it fetches them from this gateway over the direct channel, so they cross
   * Redis not at all (Redis copied each request's tensors four times, and at ~110 KB a request
   * it was the first thing to saturate as workers were added). Only once a worker has reached the
   * direct channel (so workers can), and never for a sequence model's requests (their order on a
   * worker must be their order here). `Infinity` keeps every tensor in Redis. @default 65536
   */
  tensorFetchMinBytes?: number;
  logger?: Logger;
}

/**
 * Load calls a gateway runs at once, past which a load is refused UNAVAILABLE, as `triode serve`'s
 * MAX_LOAD_CALLS; and unload calls it runs at once, past which an unload waits for one to end
 * (never refused: it is how a stuck load is given up). Each holds a Redis connection while workers answer.
 */
export const MAX_CONTROL_CALLS = 16;

/** Bytes a worker's direct connection may hold unsent (tensors it fetched and did not read) before it is closed. */
const MAX_FETCH_UNSENT_BYTES = 256 * 1024 * 1024;
/**
 * Fetch answers a worker's direct connection may hold unsent before it is closed: each small
 * answer (a "gone") costs far more bookkeeping than its bytes, and 7.5 million of them from one
 * peer that read nothing grew a gateway by 1 GB under the byte bound (review). A worker has at
 * most its requests in flight to fetch.
 */
export const MAX_PENDING_FETCHES = 4096;

/** What a response counts against RedisBackplaneOptions.maxStreamBacklogBytes besides its tensors. */
const RESPONSE_OVERHEAD_BYTES = 2048;

/** The direct reply channel's listener. */
export interface DirectReplyOptions {
  /** Address it listens on. @default the advertise address */
  host?: string;
  /** @default 0 (any free port) */
  port?: number;
  /** Host workers connect to. @default the first non-loopback IPv4 */
  advertise?: string;
  /**
   * Connections held at once. At the limit, a new connection takes the place of the oldest one that
   * has not authenticated yet, or is closed at once when every one has (all workers'). @default 256
   */
  maxConnections?: number;
  /** A connection that has not authenticated this long (ms) after it opened is closed. @default 5000 */
  authTimeoutMs?: number;
  /** An authenticated connection idle this long (ms) is closed (the worker reopens it when needed). @default 300000 */
  idleTimeoutMs?: number;
  /** Bytes of unfinished reply frames all connections may hold at once; a connection that would pass it is closed. @default 1 GiB */
  maxBufferedBytes?: number;
  /** TLS: PEM certificate (chain) and key; workers then connect with TLS. */
  tls?: { cert: string | Buffer; key: string | Buffer };
}

interface Waiting {
  resolve: (r: InferenceResponse) => void;
  reject: (e: TriodeError) => void;
  timer: ReturnType<typeof setTimeout>;
  /** Decoupled models: a streamed response came, the wait for the next one starts again. */
  rearm?: () => void;
  /** Decoupled models: each streamed response. */
  onResponse?: (r: InferenceResponse) => void;
  /** Decoupled models: the number the next streamed response must have at least (older ones are replays). */
  nextSeq?: number;
  /**
   * Requests whose worker fetches their tensors: a worker answered that it could not fetch them.
   * True when the request goes on waiting (sent again with its tensors, or a worker has them);
   * false when that answer is the request's.
   */
  unfetched?: () => boolean;
  /** A traced request's trace: the core's timestamps its worker sends back are added to it. */
  trace?: RequestTrace;
}

/** The first non-loopback IPv4 address of this host (what workers on other nodes can reach), else 127.0.0.1. */
function advertisedHost(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}

/**
 * A Redis failure as clients see it: without the client library's text ("Stream isn't writeable
 * and enableOfflineQueue options is false", its option names: review), which the Redis
 * connections log where they fail.
 */
const unavailable = (err: unknown) => new TriodeError('UNAVAILABLE', 'Redis is unavailable', { cause: err });

/** The largest registry entry a gateway reads (a worker's entry is a few KB per model). */
export const MAX_REGISTRY_ENTRY_BYTES = 16 * 1024 * 1024;

/**
 * MGET that leaves out (nil) a key that is not a string or is longer than ARGV[1] bytes: the
 * check and the read are one atomic step, so a value cannot grow in between.
 */
const BOUNDED_MGET = `local out = {}
for i, k in ipairs(KEYS) do
  local v = false
  if redis.call('TYPE', k).ok == 'string' and redis.call('STRLEN', k) <= tonumber(ARGV[1]) then v = redis.call('GET', k) end
  out[i] = v
end
return out`;

/**
 * The start of the withdraw scripts: returns 0 unless entry ARGV[2] of stream KEYS[1] is there and
 * past the last id consumer group ARGV[1] has delivered (XREADGROUP delivers in id order; the group
 * is made at id 0, so a stream without the group has no reader yet). Ids are compared as 20-digit
 * strings: Lua's numbers are doubles, and past 2^53 two ids read as one (review: a read entry was
 * taken for unread and withdrawn).
 */
const UNREAD_OR_RETURN = `local function parts(id)
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  if not ms or #ms > 20 or #seq > 20 then return nil end
  return string.rep('0', 20 - #ms) .. ms, string.rep('0', 20 - #seq) .. seq
end
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local ms, seq = parts(ARGV[2])
if not ms then return 0 end
for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[1])) do
  local name, last
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] elseif g[i] == 'last-delivered-id' then last = g[i + 1] end
  end
  if name == ARGV[1] then
    local lms, lseq = parts(last or '')
    if not lms or ms < lms or (ms == lms and seq <= lseq) then return 0 end
  end
end`;

/**
 * Removes a request's entry from its stream if no consumer of the group has read it yet, in one
 * step (so no worker can read it meanwhile). An entry is unread when its id is past the group's
 * last delivered id (XREADGROUP delivers in id order; the group is made at id 0, so a stream
 * without the group has no reader yet).
 * Input: KEYS[1] the request stream; ARGV[1] the consumer group, ARGV[2] the entry id.
 * Output: 1 when the entry was removed, else 0 (read by a worker, or gone).
 */
const WITHDRAW_UNREAD = `${UNREAD_OR_RETURN}
return redis.call('XDEL', KEYS[1], ARGV[2])`;

/**
 * WITHDRAW_UNREAD for a request another gateway holds (an async job's DELETE on any gateway), and in
 * the same step its gateway is told: a CANCELLED reply on its reply stream, as a worker would
 * answer, so nothing can answer the request between the two. Every check comes before the first
 * write, and the XADD (the write that can fail: a reply stream at its last possible id) before the
 * XDEL: Redis does not undo a script that fails midway (review: the entry was gone, its gateway
 * never told, and the job stayed active up to its TTL). With KEYS[3] (the job's hash), that hash
 * must still record this entry (ARGV[5] equal to ARGV[6]; a job taken again has its record
 * cleared), and the job is marked cancelled (ARGV[7] set to ARGV[8]) in the same step, so no
 * gateway that takes the job meanwhile runs it.
 * Input: KEYS[1] the request stream, KEYS[2] the holding gateway's reply stream, KEYS[3] (if any)
 * the job hash; ARGV[1] the consumer group, ARGV[2] the entry id, ARGV[3] the reply, ARGV[4] its
 * MAC ('' without a secret), ARGV[5..8] as above.
 * Output: 1 withdrawn; 0 read by a worker; 2 the entry is gone; 3 the hash records another entry
 * (or none); 4 the reply stream is not there (nothing done: its gateway is gone, or its stream
 * expired).
 */
const WITHDRAW_AND_TELL = `if KEYS[3] and redis.call('HGET', KEYS[3], ARGV[5]) ~= ARGV[6] then return 3 end
if #redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2]) == 0 then return 2 end
${UNREAD_OR_RETURN}
if redis.call('TYPE', KEYS[2]).ok ~= 'stream' then return 4 end
if ARGV[4] == '' then redis.call('XADD', KEYS[2], 'MAXLEN', '~', '100000', '*', 'r', ARGV[3])
else redis.call('XADD', KEYS[2], 'MAXLEN', '~', '100000', '*', 'r', ARGV[3], 's', ARGV[4]) end
redis.call('XDEL', KEYS[1], ARGV[2])
if KEYS[3] then redis.call('HSET', KEYS[3], ARGV[7], ARGV[8]) end
return 1`;

const MAX_UINT64 = 2n ** 64n - 1n;

/**
 * A stream entry id Redis takes (`<ms>-<seq>`, each a uint64). One past 2^64-1 made XRANGE fail
 * "Invalid stream ID", so a forged record failed every DELETE of its job 503 (review).
 */
function isStreamId(id: string): boolean {
  const m = /^(\d{1,20})-(\d{1,20})$/.exec(id);
  return m !== null && BigInt(m[1]!) <= MAX_UINT64 && BigInt(m[2]!) <= MAX_UINT64;
}

/** What `withdrawEntry` made of an entry, by WITHDRAW_AND_TELL's answer. */
const WITHDRAW_OUTCOMES = { 0: 'read', 1: 'withdrawn', 2: 'gone', 3: 'moved', 4: 'no-holder' } as const;

/**
 * How `withdrawEntry` ended: 'withdrawn' (taken back, its gateway told); 'read' (a worker has it);
 * 'gone' (no longer in its stream: taken back already, or done); 'moved' (the guard's hash no longer
 * records it); 'no-holder' (its gateway's reply stream is not there: nothing was done).
 */
export type EntryWithdrawOutcome = (typeof WITHDRAW_OUTCOMES)[keyof typeof WITHDRAW_OUTCOMES];

/**
 * What `withdrawEntry` checks and writes in the same step as the withdraw: hash `key` (an async
 * job's, named by the caller) must hold `text` in `field`, and gets `mark` in `markField`.
 */
export interface EntryGuard {
  key: string;
  field: string;
  text: string;
  markField: string;
  mark: string;
}

/**
 * Where a request waits for a worker, as `RedisBackplane.watchEntry` reports it: what any gateway of
 * the cluster needs to take it back and tell the gateway that holds it (`withdrawEntry`).
 */
export interface WaitingEntry {
  /** The request stream. */
  stream: string;
  /** The request's entry in it. */
  entryId: string;
  /** The reply stream of the gateway that holds the request. */
  replyTo: string;
  /** The request's key on that gateway. */
  requestKey: string;
}

/**
 * What lets a gateway's async jobs cancel a job whose request another gateway holds while it waits
 * for a worker (RedisBackplane has it; an async job's DELETE may reach any gateway).
 */
export interface EntryWithdrawal {
  watchEntry(request: InferenceRequest, record: (entry: WaitingEntry) => void): void;
  withdrawEntry(entry: WaitingEntry, guard?: EntryGuard): Promise<EntryWithdrawOutcome>;
}

/** What a decoupled request's end resolves to: no response, told apart from one without outputs. */
const STREAM_ENDS = new WeakSet<InferenceResponse>();

function streamEnd(): InferenceResponse {
  const end: InferenceResponse = { modelName: '', modelVersion: '', outputs: [] };
  STREAM_ENDS.add(end);
  return end;
}

/** A model's sequence_batching block, if its config has one. */
const sequenceBatching = (model: RegistryModel) => (model.config as { sequence_batching?: { max_sequence_idle_microseconds?: number } } | undefined)?.sequence_batching;

/** Whether requests to the model may be routed to the worker that holds their sequence. */
const hasSequences = (model: RegistryModel): boolean => sequenceBatching(model) !== undefined;

/**
 * Requests of a stream no worker has read: the group's `lag` (Redis 7; a number, or null when
 * Redis cannot tell), capped by the entries in the stream less those read and not acknowledged
 * (`held`), which an unread entry's XDEL lowers and lag does not.
 */
export function waitingRequests(lag: unknown, entries: number, held: number): number {
  const unreadAtMost = Math.max(0, entries - held);
  return typeof lag === 'number' ? Math.min(lag, unreadAtMost) : unreadAtMost;
}

/** The gateway's backplane over Redis Streams. */
export class RedisBackplane implements Backplane, EntryWithdrawal {
  readonly gatewayId = `g-${randomUUID().slice(0, 8)}`;
  readonly #opts: Required<Omit<RedisBackplaneOptions, 'logger'>> & { logger?: Logger };
  readonly #keys: ClusterKeys;
  readonly #cmd: Redis;
  readonly #block: Redis;
  /** The requests' XADDs: a lean connection (resp-connection.ts), without ioredis's command object, promise and timer each. */
  readonly #xadd: RespConnection;
  readonly #waiting = new Map<string, Waiting>();
  /** Requests that set `waitMs` (async jobs'), while they wait: how `withdraw` takes each back. */
  readonly #withdrawable = new Map<InferenceRequest, () => Promise<boolean>>();
  /** Who is told where a request waits (`watchEntry`), by request. */
  readonly #entryWatchers = new WeakMap<InferenceRequest, (entry: WaitingEntry) => void>();
  #next = 0;
  #running = false;
  #loop: Promise<void> | undefined;
  #workers: WorkerRecord[] = [];
  #registryAt = 0;
  #registryLoad: Promise<void> | undefined;
  #direct: { address: string; token: string } | undefined;
  #directServer: Server | undefined;
  /** The MAC a worker presents as its first frame when a secret is set (else the token). */
  #directAuth: Buffer | undefined;
  readonly #directSockets = new Set<Socket>();
  /** Whether a worker has authenticated on the direct channel: workers can reach it, so they can fetch tensors. */
  #directReached = false;
  /**
   * The tensors of requests whose workers fetch them (tensorFetchMinBytes), by request key, until
   * each is answered or sent again with its tensors; `served`: the fetches answered with them whose
   * answer has not failed to leave (a connection closed with it still unsent: its worker has not got them).
   */
  readonly #tensors = new Map<string, { parts: Buffer[]; served: number }>();
  /** Signs and checks what crosses Redis (`--cluster-secret`); its `rejected` counts feed a metric. */
  readonly auth: ClusterAuth;
  #replyTtl: ReturnType<typeof setInterval> | undefined;
  /** Load calls under way (at most MAX_CONTROL_CALLS). */
  #loadCalls = 0;
  /** Unload calls under way (at most MAX_CONTROL_CALLS), and those waiting for one of them to end. */
  #unloadCalls = 0;
  readonly #unloadWaiters: { go: () => void; fail: (err: TriodeError) => void }[] = [];
  /** The unload under way or waiting, per model and unload_dependents: a second one joins it. */
  readonly #unloads = new Map<string, SharedUnload>();
  /** Bytes of streamed responses waiting for their clients, all requests together (see maxGatewayBacklogBytes). */
  #backlogBytes = 0;
  /** The same per client call, by the cancel signal its requests share (see maxStreamBacklogBytes). */
  readonly #backlogs = new WeakMap<object, { bytes: number }>();
  /**
   * Warnings about junk a peer sends at will (anyone who writes to Redis without a secret, or holds
   * a worker's direct-channel token, which every request entry carries): each at most once every
   * 10 s, the next counting those left out. Logged per message, 20 s of empty frames on the direct
   * channel wrote 139 MB of log (review).
   */
  readonly #unreadableEntryWarning: RateLimitedWarning;
  readonly #malformedReplyWarning: RateLimitedWarning;
  readonly #malformedRegistryWarning: RateLimitedWarning;
  /** The direct channel's server errors: a failed accept (out of file descriptors) comes once per connection of a flood. */
  readonly #directServerWarning: RateLimitedWarning;

  constructor(options: RedisBackplaneOptions) {
    this.#opts = {
      prefix: 'triode', requestTimeoutMs: 30_000, id: 'triton', version: '0.1.0', extensions: [],
      strictReadiness: true, registryRefreshMs: 500, directReplies: {}, clusterSecret: '', replyStreamTtlMs: 60_000, maxStreamBacklogBytes: 16 << 20, maxGatewayBacklogBytes: 1 << 30, commandTimeoutMs: GATEWAY_COMMAND_TIMEOUT_MS, tensorFetchMinBytes: 65536, ...options,
    };
    this.auth = new ClusterAuth(this.#opts.clusterSecret || undefined, this.#opts.logger);
    this.#unreadableEntryWarning = new RateLimitedWarning(this.#opts.logger);
    this.#malformedReplyWarning = new RateLimitedWarning(this.#opts.logger);
    this.#malformedRegistryWarning = new RateLimitedWarning(this.#opts.logger);
    this.#directServerWarning = new RateLimitedWarning(this.#opts.logger);
    this.#keys = new ClusterKeys(this.#opts.prefix);
    // No offline queue: while Redis is away, calls fail at once (503) instead of piling up.
    this.#cmd = openRedis(this.#opts.redis, 'gateway', this.#opts.logger, { commandTimeout: this.#opts.commandTimeoutMs });
    this.#block = openRedis(this.#opts.redis, 'gateway-blocking', this.#opts.logger);
    this.#xadd = new RespConnection(this.#opts.redis, { commandTimeoutMs: this.#opts.commandTimeoutMs, onError: (e) => this.#opts.logger?.verbose(1, `redis (requests): ${e.message}`) });
    // A Redis that restarted lost the reply stream: make it again at once, not at the next refresh.
    this.#cmd.on('ready', () => { if (this.#running) this.#keepReplyStream().catch(() => undefined); });
  }

  get #replyKey(): string {
    return this.#keys.replies(this.gatewayId);
  }

  /** Connects and starts reading replies. */
  async start(): Promise<void> {
    await this.#listenDirect();
    await Promise.all([this.#cmd.connect(), this.#block.connect(), this.#xadd.connect()]);
    await this.#keepReplyStream();
    this.#replyTtl = setInterval(() => { this.#keepReplyStream().catch(() => undefined); }, Math.max(100, Math.floor(this.#opts.replyStreamTtlMs / 3)));
    this.#replyTtl.unref();
    this.#running = true;
    this.#loop = this.#readReplies();
  }

  /**
   * Creates this gateway's reply stream (empty) if it is missing and renews its expiry: workers
   * add replies only to a stream that exists (NOMKSTREAM), so a dead gateway's stream expires
   * and nothing brings it back.
   */
  async #keepReplyStream(): Promise<void> {
    const ttl = this.#opts.replyStreamTtlMs;
    if ((await this.#cmd.pexpire(this.#replyKey, ttl)) === 1) return;
    await this.#cmd.multi().xadd(this.#replyKey, '*', 'open', '1').xtrim(this.#replyKey, 'MAXLEN', 0).pexpire(this.#replyKey, ttl).exec();
    // A new stream's ids start from now: the reader starts again from its beginning.
    this.#replyStreamMade++;
  }

  /**
   * How many times this gateway has made its reply stream anew (it was lost: deleted, expired, a
   * Redis restarted without persistence). The reader's cursor belongs to the stream it read: kept
   * across a new one, a cursor ahead of the new ids (an entry with an id far in the future that
   * anyone who reaches Redis can add) read nothing again, and every reply timed out (review).
   */
  #replyStreamMade = 0;

  async #readReplies(): Promise<void> {
    // From the start of the stream (it is this gateway's own, new at start), never '$': '$' means
    // "added after this read begins", so a reply added between two reads, before the first reply
    // came, was skipped and its request timed out.
    let last = '0-0';
    let stream = this.#replyStreamMade;
    while (this.#running) {
      if (stream !== this.#replyStreamMade) {
        stream = this.#replyStreamMade;
        last = '0-0';
      }
      let reply: StreamEntries;
      try {
        reply = (await this.#block.xreadBuffer('COUNT', 512, 'BLOCK', 500, 'STREAMS', this.#replyKey, last)) as StreamEntries;
      } catch {
        if (!this.#running) break;
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      const ids: string[] = [];
      for (const [, entries] of reply ?? []) {
        for (const [id, fields] of entries) {
          last = id.toString();
          ids.push(last);
          let body: Buffer | undefined;
          let mac: Buffer | undefined;
          // Field names compared as bytes: anyone who reaches Redis can add an entry, and a name
          // longer than V8's longest string threw on toString() and ended the loop (and the gateway).
          for (let i = 0; i + 1 < fields.length; i += 2) {
            const f = fields[i]!;
            if (f.byteLength !== 1) continue;
            if (f[0] === 0x72) body = fields[i + 1]; // 'r'
            else if (f[0] === 0x73) mac = fields[i + 1]; // 's'
          }
          try {
            if (body && this.auth.verify('reply', [this.#replyKey, body], mac, 'reply on the reply stream')) this.#onReply(body);
          } catch (err) {
            this.#unreadableEntryWarning.warn(`dropping a reply stream entry that could not be read: ${(err as Error).message}`);
          }
        }
      }
      if (ids.length) void this.#cmd.xdel(this.#replyKey, ...ids).catch(() => undefined);
    }
  }

  /** One reply, from the reply stream or the direct channel. */
  #onReply(body: Uint8Array): void {
    try {
      const r = decodeReply(body);
      const w = this.#waiting.get(r.requestKey);
      // Unknown keys are duplicates or answers that came after the deadline: dropped.
      if (!w) return;
      // A streamed reply (more, end) answers only a decoupled request: for any other it is junk, a
      // broken or forged worker's, dropped as malformed ones are (review: an `end` answered a plain
      // request 200 with no outputs).
      if (!w.onResponse && ('end' in r || ('response' in r && r.more))) throw new Error('a streamed reply to a request that is not decoupled');
      if ('response' in r && r.more) {
        if (r.seq !== undefined) {
          // Taken already: a replayed entry (signed as it was, so its MAC holds) is not streamed twice.
          if (r.seq < (w.nextSeq ?? 0)) return;
          w.nextSeq = r.seq + 1;
        }
        w.rearm?.();
        w.onResponse?.(r.response);
        return;
      }
      // A worker that could not fetch the request's tensors: sent again with them, or a worker has them.
      if ('error' in r && r.error.unfetched === true && w.unfetched?.()) return;
      // The outcome is made before the request stops waiting: whatever fails here, the request is
      // still answered (by its timeout), never left pending for good.
      const error = 'error' in r ? fromWireError(r.error) : undefined;
      this.#waiting.delete(r.requestKey);
      clearTimeout(w.timer);
      if (error) w.reject(error);
      else if ('end' in r) w.resolve(streamEnd());
      else {
        // The core's timestamps (checked by decodeReply), after the frontend's so far: the order
        // embedded mode records them in (HTTP_RECV_END, REQUEST_START ... REQUEST_END, HTTP_SEND_START).
        if (w.trace && 'trace' in r && r.trace) w.trace.timestamps.push(...r.trace);
        w.resolve((r as { response: InferenceResponse }).response);
      }
    } catch (err) {
      // Dropped, and the request waits on: junk a peer adds to the reply stream (request keys are
      // easy to guess) must not take the place of the worker's answer.
      this.#malformedReplyWarning.warn(`dropping a malformed reply: ${(err as Error).message}`);
    }
  }

  /**
   * Opens the direct reply channel: a TCP (or TLS) server whose clients must authenticate first.
   * The first frame must be the auth frame (the token, or with a secret its MAC), at most
   * MAX_AUTH_FRAME_BYTES long: a longer length, anything else, or no auth within authTimeoutMs
   * closes the connection before anything more is buffered. A connection over maxConnections
   * closes the oldest unauthenticated one, or is closed itself when all are authenticated;
   * authenticated ones idle for idleTimeoutMs are closed.
   */
  async #listenDirect(): Promise<void> {
    const cfg = this.#opts.directReplies;
    if (cfg === false) return;
    const token = randomUUID();
    const advertise = cfg.advertise ?? advertisedHost();
    this.#directAuth = this.auth.mac('direct-auth', [token]) ?? Buffer.from(token);
    const authTimeoutMs = cfg.authTimeoutMs ?? 5000;
    const idleTimeoutMs = cfg.idleTimeoutMs ?? 300_000;
    // Unfinished frames of all connections together; a connection that would pass it is closed
    // (its worker sends what it still held through the reply stream).
    const budget = new FrameBudget(cfg.maxBufferedBytes ?? 1 << 30);
    /** A connection (TLS over `socket` with TLS) and what to call once it has authenticated. */
    const onConnection = (socket: Socket, authenticated: () => void) => {
      socket.on('error', () => undefined);
      socket.setNoDelay(true);
      let reader: FrameReader | undefined;
      let hello: Buffer = Buffer.alloc(0);
      // Replies taken on this connection (mod 2^32): confirmed to the worker once per event-loop
      // turn, so it acknowledges their entries only now (DESIGN: delivery).
      let taken = 0;
      let confirming = false;
      const confirm = () => {
        confirming = false;
        if (socket.destroyed || !socket.writable) return;
        socket.write(confirmFrame(taken));
      };
      socket.on('data', (chunk: Buffer) => {
        if (socket.destroyed) return;
        if (!reader) {
          hello = hello.byteLength ? Buffer.concat([hello, chunk]) : chunk;
          if (hello.byteLength < 4) return;
          const n = hello.readUInt32BE(0);
          if (n > MAX_AUTH_FRAME_BYTES) {
            socket.destroy();
            return;
          }
          if (hello.byteLength < 4 + n) return;
          const presented = hello.subarray(4, 4 + n);
          if (presented.byteLength !== this.#directAuth!.byteLength || !timingSafeEqual(presented, this.#directAuth!)) {
            if (this.auth.enabled) this.auth.reject('direct-auth', 'a direct reply connection with a wrong auth frame');
            socket.destroy();
            return;
          }
          reader = new FrameReader(undefined, budget);
          socket.once('close', () => reader?.release());
          authenticated();
          this.#directReached = true;
          socket.setTimeout(idleTimeoutMs, () => socket.destroy());
          chunk = hello.subarray(4 + n);
          hello = Buffer.alloc(0);
          if (chunk.byteLength === 0) return;
        }
        let frames: Buffer[];
        try {
          frames = reader.push(chunk);
        } catch {
          socket.destroy();
          return;
        }
        let replies = 0;
        for (const f of frames) {
          const body = this.auth.enabled ? f.subarray(Math.min(MAC_BYTES, f.byteLength)) : f;
          // A fetch of a request's tensors, or a reply (only replies are counted and confirmed).
          const fetchKey = fetchKeyOf(body);
          const kind = fetchKey === undefined ? 'reply' : 'fetch';
          if (kind === 'reply') replies++;
          if (this.auth.enabled && (f.byteLength < MAC_BYTES || !this.auth.verify(kind, [this.#replyKey, body], f.subarray(0, MAC_BYTES), `${kind} on the direct channel`))) continue;
          if (fetchKey === undefined) this.#onReply(body);
          else this.#sendTensors(socket, fetchKey);
        }
        if (replies > 0) {
          taken = (taken + replies) >>> 0;
          if (!confirming) {
            confirming = true;
            setImmediate(confirm);
          }
        }
      });
    };
    const maxConnections = cfg.maxConnections ?? 256;
    const secureContext = cfg.tls ? createSecureContext({ cert: cfg.tls.cert, key: cfg.tls.key }) : undefined;
    // Connections that have not authenticated yet, oldest first: at the limit, the oldest goes for
    // a new one. Node's own server.maxConnections refused every new connection once full, so
    // peers that never authenticate (anyone who reaches the port) shut workers out of the channel,
    // and every request a worker took whose tensors it had to fetch failed (review).
    const unauthenticated = new Set<Socket>();
    const forget = (raw: Socket): void => {
      this.#directSockets.delete(raw);
      unauthenticated.delete(raw);
    };
    const evicted = new RateLimitedWarning(this.#opts.logger);
    const refused = new RateLimitedWarning(this.#opts.logger);
    // Counted and timed by their TCP connections, TLS handshakes included.
    const server = createServer((raw: Socket) => {
      raw.on('error', () => undefined);
      if (this.#directSockets.size >= maxConnections) {
        const oldest = unauthenticated.values().next();
        if (oldest.done) {
          // Every place is held by an authenticated connection (a worker's).
          refused.warn(`direct reply channel: refused a connection from ${raw.remoteAddress ?? '?'}: its ${maxConnections} connections (--reply-max-connections) are all workers'`);
          raw.destroy();
          return;
        }
        evicted.warn(`direct reply channel: at its limit of ${maxConnections} connections (--reply-max-connections), closed the oldest one that had not authenticated (from ${oldest.value.remoteAddress ?? '?'}) for a new one`);
        forget(oldest.value);
        oldest.value.destroy();
      }
      this.#directSockets.add(raw);
      unauthenticated.add(raw);
      raw.once('close', () => forget(raw));
      // Authenticated within authTimeoutMs of connecting (a TLS handshake included), however it
      // sends its bytes: an idle timeout alone let a client dripping a byte a second hold a
      // connection for minutes.
      const authDeadline = setTimeout(() => raw.destroy(), authTimeoutMs);
      authDeadline.unref();
      raw.once('close', () => clearTimeout(authDeadline));
      const socket = secureContext ? new TLSSocket(raw, { isServer: true, secureContext }) : raw;
      // A failed handshake closes the TLS socket (its error is ignored there); its TCP connection goes with it.
      if (socket !== raw) socket.once('close', () => raw.destroy());
      onConnection(socket, () => {
        unauthenticated.delete(raw);
        clearTimeout(authDeadline);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(cfg.port ?? 0, cfg.host ?? advertise, () => {
        server.off('error', reject);
        resolve();
      });
    });
    // Once it listens, an error (a failed accept: out of file descriptors) is logged (rate-limited:
    // a flood of connections fails one accept each) and the channel goes on; with no listener it
    // ended the process (review).
    server.on('error', (e: Error) => this.#directServerWarning.warn(`direct reply channel: ${e.message}`));
    server.unref();
    this.#directServer = server;
    const port = (server.address() as AddressInfo).port;
    this.#direct = { address: `${cfg.tls ? 'tls://' : ''}${advertise}:${port}`, token };
  }

  /**
   * Answers a worker's fetch of a request's tensors on its direct connection: the tensors as they
   * are (no copy, in the turn's writev), or word that the request is gone (answered, given up).
   * A worker that does not read what it fetched is cut off past MAX_FETCH_UNSENT_BYTES.
   */
  #sendTensors(socket: Socket, requestKey: string): void {
    if (socket.destroyed) return;
    const pending = this.#pendingFetches.get(socket) ?? 0;
    if (socket.writableLength > MAX_FETCH_UNSENT_BYTES || pending >= MAX_PENDING_FETCHES) {
      socket.destroy();
      return;
    }
    this.#pendingFetches.set(socket, pending + 1);
    const sent = (): void => { this.#pendingFetches.set(socket, (this.#pendingFetches.get(socket) ?? 1) - 1); };
    const held = requestKey ? this.#tensors.get(requestKey) : undefined;
    const parts = held?.parts;
    // From now on a worker may be running it: it is not sent again (at most once). Unless the answer
    // never wholly left for the socket (closed under it: the worker gave up on it, or this gateway
    // cut it off), so that worker cannot have the tensors: before, its "could not fetch" was taken
    // for another worker's, and the request waited for its timeout (503).
    if (held) held.served++;
    corkForTurn(socket);
    if (!parts?.length) {
      socket.write(tensorsFrameHead(requestKey, parts), sent);
      return;
    }
    // Node calls back a write that its socket's destroy cut short without an error: a socket
    // destroyed by then counts as the answer not having left.
    const done = (err?: Error | null): void => {
      sent();
      if (err || socket.destroyed) held!.served--;
    };
    socket.write(tensorsFrameHead(requestKey, parts));
    for (let i = 0; i < parts.length; i++) socket.write(parts[i]!, i === parts.length - 1 ? done : undefined);
  }

  /** Fetch answers each direct connection holds unsent (MAX_PENDING_FETCHES). */
  readonly #pendingFetches = new WeakMap<Socket, number>();

  /** Where workers reach this gateway's direct reply channel (undefined: none). */
  get directAddress(): string | undefined {
    return this.#direct?.address;
  }

  /** Re-reads the workers' registry entries when they are older than the refresh period. */
  async #registry(): Promise<WorkerRecord[]> {
    if (Date.now() - this.#registryAt < this.#opts.registryRefreshMs) return this.#workers;
    this.#registryLoad ??= (async () => {
      try {
        const keys: string[] = [];
        let cursor = '0';
        do {
          const [next, found] = await this.#cmd.scan(cursor, 'MATCH', this.#keys.workerPattern, 'COUNT', 200);
          cursor = next;
          keys.push(...found);
        } while (cursor !== '0');
        // Each value read only if it is a string of at most MAX_REGISTRY_ENTRY_BYTES, in one
        // atomic script: one outsized junk value (Redis takes 512 MiB) made MGET's reply longer
        // than a JS string can be, and every request then failed "Redis is unavailable".
        const values = keys.length ? (await this.#cmd.eval(BOUNDED_MGET, keys.length, ...keys, MAX_REGISTRY_ENTRY_BYTES)) as (string | null)[] : [];
        const workers: WorkerRecord[] = [];
        const keyPrefix = this.#keys.worker('');
        const now = Date.now();
        for (const [i, v] of values.entries()) {
          const text = typeof v === 'string' ? this.auth.openText('registry', v, 'registry entry') : undefined;
          if (text === undefined) continue;
          let record: WorkerRecord | undefined;
          try {
            record = checkWorkerRecord(JSON.parse(text));
          } catch {
            record = undefined;
          }
          const problem = record && registryEntryProblem(record, keys[i]!.slice(keyPrefix.length), now);
          // Counted and logged (rate-limited) like a wrongly signed entry.
          if (problem) this.auth.reject('registry', problem);
          else if (record) workers.push(record);
          else this.#malformedRegistryWarning.warn('cluster: dropped a malformed registry entry');
        }
        this.#workers = workers;
        this.#entriesCache.clear();
        this.#byName = undefined;
        this.#registryAt = Date.now();
      } finally {
        this.#registryLoad = undefined;
      }
    })();
    try {
      await this.#registryLoad;
    } catch (err) {
      throw unavailable(err);
    }
    return this.#workers;
  }

  /** Every live worker's entries for a model (version), ready ones first. Not to be changed: it may be cached. */
  async #entries(name: string, version?: number): Promise<readonly RegistryModel[]> {
    await this.#registry();
    return this.#entriesNow(name, version);
  }

  /**
   * #entries of the registry read last, by model and version: found once per registry read, not
   * once per request. Only names the registry holds are kept (a client's unknown names are not),
   * so the cache is as large as the registry at most.
   */
  readonly #entriesCache = new Map<string, readonly RegistryModel[]>();
  #byName: Map<string, RegistryModel[]> | undefined;

  #entriesNow(name: string, version?: number): readonly RegistryModel[] {
    // The version after the last NUL (a version has none; a name may: `m\u00001` is not m's version 1).
    const key = `${name}\u0000${version ?? ''}`;
    const cached = this.#entriesCache.get(key);
    if (cached) return cached;
    // Every worker's entries by name, made once per registry read: a name the registry lacks (a
    // client's typo, or an attack) costs a lookup, not a walk of every entry of every worker.
    if (!this.#byName) {
      this.#byName = new Map();
      for (const w of this.#workers) {
        for (const m of w.models) {
          const l = this.#byName.get(m.name);
          if (l) l.push(m);
          else this.#byName.set(m.name, [m]);
        }
      }
    }
    const out: RegistryModel[] = [];
    for (const m of this.#byName.get(name) ?? []) if (version === undefined || m.version === String(version)) out.push(m);
    out.sort((a, b) => Number(b.state === 'READY') - Number(a.state === 'READY') || Number(b.version ?? 0) - Number(a.version ?? 0));
    if (out.length > 0) this.#entriesCache.set(key, out);
    return out;
  }

  /**
   * The ready entry for a request while the registry read last is fresh, with no promise; undefined
   * otherwise (#ready then reads the registry, and gives the error when there is no ready one).
   */
  #readyNow(name: string, version?: number): RegistryModel | undefined {
    if (Date.now() - this.#registryAt >= this.#opts.registryRefreshMs) return undefined;
    const first = this.#entriesNow(name, version)[0];
    return first?.state === 'READY' && first.name === name ? first : undefined;
  }

  async #ready(name: string, version?: number): Promise<RegistryModel> {
    const entries = await this.#entries(name, version);
    if (entries.length === 0) {
      // With no live worker at all (starting up, or Redis just came back), nothing is known yet.
      if (this.#workers.length === 0) throw Errors.unavailable(`no live worker is registered in the cluster, so model '${name}' cannot be served now`);
      // As triode serve (Triton's ModelLifeCycle::GetModel): a name no worker knows is "'m' is not
      // found" whatever the version named; only a known model's missing version names the version.
      throw Errors.unknownModel(name, version === undefined || this.#entriesNow(name).length === 0 ? undefined : version);
    }
    const r = entries[0]!;
    // As triode serve answers: the index's 'unloaded' is a state, not a reason to repeat.
    if (r.state !== 'READY') throw Errors.modelNotReady(name, version, r.reason === 'unloaded' ? undefined : r.reason);
    return r;
  }

  /**
   * The gateway is exiting (SIGTERM: `triode gateway` calls this before it drains): as `triode
   * serve` and Triton's SERVER_EXITING, health answers UNAVAILABLE "Server exiting" and model
   * readiness, metadata and statistics and the repository extension "Server not ready", so a load balancer stops sending here
   * while the requests already in flight finish. The config still answers (Triton's GetModel).
   */
  beginExit(): void {
    this.#exiting = true;
  }

  #exiting = false;

  async isLive(): Promise<boolean> {
    if (this.#exiting) throw Errors.serverExiting();
    return this.#running;
  }

  /**
   * Ready: Redis reachable and at least one live worker; with strict readiness also every model
   * ready on some worker, except what was unloaded (Triton's rule, as `triode serve`): in explicit
   * mode a cluster with any subset loaded, or none, is ready.
   */
  async isReady(): Promise<boolean> {
    if (this.#exiting) throw Errors.serverExiting();
    if (!this.#running || this.#cmd.status !== 'ready' || this.#xadd.status !== 'ready') return false;
    try {
      if ((await this.#registry()).length === 0) return false;
      if (!this.#opts.strictReadiness) return true;
      const index = await this.repositoryIndex();
      // Linear in the index: a registry entry of 100,000 models (a forged or broken worker) held
      // the event loop 21 s a readiness probe when each name searched the whole index (review).
      const ready = new Set(index.filter((r) => r.state === 'READY').map((r) => r.name));
      return index.every((r) => r.reason === 'unloaded' || r.state === 'UNLOADING' || ready.has(r.name));
    } catch {
      return false;
    }
  }

  async serverMetadata(): Promise<ServerMetadata> {
    return { name: this.#opts.id, version: this.#opts.version, extensions: [...this.#opts.extensions] };
  }

  async modelReady(name: string, version?: number): Promise<boolean> {
    if (this.#exiting) throw Errors.serverNotReady();
    try {
      await this.#ready(name, version);
      return true;
    } catch {
      return false;
    }
  }

  async modelMetadata(name: string, version?: number): Promise<ModelMetadata> {
    const r = await this.#ready(name, version);
    if (this.#exiting) throw Errors.serverNotReady();
    const versions = [...new Set((await this.#entries(name)).filter((e) => e.state === 'READY').map((e) => e.version ?? ''))].sort((a, b) => Number(a) - Number(b));
    return { ...r.metadata!, versions: version !== undefined ? [String(version)] : versions };
  }

  async modelConfig(name: string, version?: number): Promise<Record<string, unknown>> {
    return (await this.#ready(name, version)).config ?? {};
  }

  /** Statistics summed over the workers. */
  async modelStatistics(name?: string, version?: number): Promise<ModelStatistics[]> {
    if (this.#exiting) throw Errors.serverNotReady();
    const sums = new Map<string, ModelStatistics>();
    for (const w of await this.#registry()) {
      for (const m of w.models) {
        if (!m.stats || (name && m.name !== name) || (version !== undefined && m.version !== String(version))) continue;
        const key = `${m.name}/${m.version ?? ''}`;
        const prev = sums.get(key);
        sums.set(key, prev ? addStats(prev, m.stats) : structuredClone(m.stats));
      }
    }
    if (name && sums.size === 0) {
      // As triode serve (Triton's TRITONSERVER_ServerModelStatistics): INVALID_ARG in Triton's words.
      if (this.#workers.length === 0) await this.#ready(name, version);
      const ready = (await this.#entries(name)).some((e) => e.state === 'READY');
      throw ready ? Errors.statsVersionNotAvailable(name) : Errors.statsModelNotAvailable(name);
    }
    return [...sums.values()].sort((a, b) => compareModelNames(a.name, b.name) || Number(a.version) - Number(b.version));
  }

  /** The union of the workers' indexes: a version is READY if it is ready on some live worker. */
  async repositoryIndex(readyOnly = false): Promise<ModelIndexEntry[]> {
    if (this.#exiting) throw Errors.serverNotReady();
    const rows = new Map<string, ModelIndexEntry>();
    for (const w of await this.#registry()) {
      for (const m of w.models) {
        const key = `${m.name}/${m.version ?? ''}`;
        const prev = rows.get(key);
        if (!prev || (prev.state !== 'READY' && m.state === 'READY')) {
          rows.set(key, { name: m.name, ...(m.version !== undefined ? { version: m.version } : {}), state: m.state, reason: m.reason });
        }
      }
    }
    return [...rows.values()].filter((r) => !readyOnly || r.state === 'READY').sort((a, b) => compareModelNames(a.name, b.name) || Number(a.version ?? 0) - Number(b.version ?? 0));
  }

  /** The live workers: id, host, device, what they have loaded and what they hold now. */
  async clusterWorkers(): Promise<ClusterWorkerInfo[]> {
    return (await this.#registry()).map(clusterWorkerInfo).sort((a, b) => a.id.localeCompare(b.id));
  }

  /**
   * Each served model's request stream as an autoscaler sees it: entries, not yet read (the
   * group's lag), read and not acknowledged, and the age of the oldest of those. One pipeline
   * per scrape; a model's per-worker sequence streams are not included.
   */
  async backlog(): Promise<StreamBacklog[]> {
    const models = [...new Set((await this.#registry()).flatMap((w) => w.models.map((m) => m.name)))].sort();
    if (models.length === 0) return [];
    const p = this.#cmd.pipeline();
    for (const m of models) {
      const key = this.#keys.requests(m);
      p.xlen(key);
      p.xinfo('GROUPS', key);
      p.xpending(key, this.#keys.group);
    }
    const answers = (await p.exec()) ?? [];
    const now = Date.now();
    return models.map((model, i) => {
      const [lenErr, len] = answers[i * 3] ?? [];
      const [groupsErr, groups] = answers[i * 3 + 1] ?? [];
      const [pendingErr, pending] = answers[i * 3 + 2] ?? [];
      const entries = lenErr ? 0 : Number(len ?? 0);
      const group = groupsErr ? undefined : ((groups ?? []) as unknown[][]).map(fieldsOf).find((g) => String(g['name']) === this.#keys.group);
      const summary = (pendingErr ? undefined : pending) as [number, string | null, string | null, unknown] | undefined;
      const held = summary ? Number(summary[0]) : 0;
      const oldest = summary?.[1] ? Number(summary[1].split('-')[0]) : undefined;
      // lag is Redis 7's count of entries the group has not read (null when Redis cannot tell).
      // It is entries-added minus entries-read, so an unread entry deleted (a request given up
      // before any worker read it) stays in it for good: unread entries are at most those in the
      // stream less those read and held (review: 20 cancelled requests showed as waiting forever).
      const lag = group?.['lag'];
      const waiting = waitingRequests(lag, entries, held);
      return { model, entries, waiting, pending: held, oldestPendingAgeSeconds: oldest !== undefined && oldest <= now ? (now - oldest) / 1000 : 0 };
    });
  }

  /**
   * The stream a request goes to: its model's shared stream, or for a sequence model the own
   * stream of the worker holding the sequence (sticky, kept in Redis so every gateway agrees;
   * it expires when the sequence has been idle well past its idle timeout).
   */
  async #streamFor(request: InferenceRequest, model: RegistryModel, parsed: Parsed): Promise<{ stream: string; undoEnd?: () => Promise<void> }> {
    const sb = sequenceBatching(model);
    // The sequence parameters as #send read them (once a request), else read here.
    const seq = sb ? (parsed === NOT_PARSED ? sequenceParams(request.parameters) : parsed) : undefined;
    if (!sb || !seq) return { stream: this.#keys.requests(request.modelName) };
    const key = this.#keys.sequence(request.modelName, seq.key);
    const ttl = Math.ceil((sb.max_sequence_idle_microseconds || 1_000_000) / 1000) + 5000;
    try {
      let worker: string | null;
      let undoEnd: (() => Promise<void>) | undefined;
      if (seq.start) {
        const live = (await this.#registry()).filter((w) => w.models.some((m) => m.name === request.modelName && m.state === 'READY'));
        if (live.length === 0) throw Errors.unavailable(`no live worker serves model '${request.modelName}'`);
        // A START for a sequence a live worker still holds restarts it there, as embedded mode
        // restarts it in its slot: another worker would leave that slot held until its idle timeout.
        const holder = await this.#cmd.get(key);
        worker = holder !== null && live.some((w) => w.workerId === holder) ? holder : live[Math.floor(Math.random() * live.length)]!.workerId;
        await this.#cmd.set(key, worker, 'PX', ttl);
      } else {
        worker = await this.#cmd.get(key);
        if (worker === null) return { stream: this.#keys.requests(request.modelName) }; // the worker answers "must START"
        if (!(await this.#registry()).some((w) => w.workerId === worker)) {
          throw Errors.unavailable(`the worker that held sequence ${String(seq.correlationId)} of model '${request.modelName}' is gone: start the sequence again`);
        }
        if (seq.end) {
          await this.#cmd.del(key);
          // An END that fails (a bad input refused before it reached the sequence, a timeout) may
          // leave the sequence held on its worker, as embedded mode leaves it: the route is put back
          // (unless a new START has set one meanwhile), so that a corrected END finds that worker.
          const holder = worker;
          undoEnd = () => (this.#cmd.set(key, holder, 'PX', ttl, 'NX') as Promise<unknown>).then(() => undefined, () => undefined);
        } else {
          await this.#cmd.pexpire(key, ttl);
        }
      }
      return { stream: this.#keys.workerRequests(request.modelName, worker), ...(undoEnd ? { undoEnd } : {}) };
    } catch (err) {
      if (err instanceof TriodeError) throw err;
      throw unavailable(err);
    }
  }

  async infer(request: InferenceRequest): Promise<InferenceResponse> {
    return this.#send(request);
  }

  /**
   * Takes back a request that set `waitMs` (an async job's) while no worker has read its entry:
   * the entry leaves its stream in one step with that check, and the request fails CANCELLED. An
   * exiting gateway hands such jobs back at once instead of waiting for them (review: it waited
   * out the whole exit timeout, then handed them back anyway).
   */
  async withdraw(request: InferenceRequest): Promise<boolean> {
    const take = this.#withdrawable.get(request);
    return take ? take() : false;
  }

  /**
   * Has `record` called with where `request` waits for a worker each time Redis has queued its entry
   * (once; again if it is sent again with its tensors), for a request that sets `waitMs` (an async job's). Call it before `infer`.
   */
  watchEntry(request: InferenceRequest, record: (entry: WaitingEntry) => void): void {
    this.#entryWatchers.set(request, record);
  }

  /**
   * Takes back a request that any gateway of the cluster holds (an async job's, as `watchEntry`
   * reported it) while no worker has read its entry: the entry leaves its stream and, in the same
   * step, the gateway that holds it gets a CANCELLED reply, signed as a worker's, so its `infer`
   * fails CANCELLED; with `guard`, only while its hash still records the entry, and the hash is
   * marked in the same step. Anything but 'withdrawn' means nothing was written. An entry naming
   * anything but this cluster's request and reply streams (a record someone else wrote to Redis;
   * with a cluster secret the caller checks its MAC first) counts as 'gone'.
   * @throws UNAVAILABLE when Redis fails
   */
  async withdrawEntry(entry: WaitingEntry, guard?: EntryGuard): Promise<EntryWithdrawOutcome> {
    const { stream, entryId, replyTo, requestKey } = entry;
    if (!stream.startsWith(this.#keys.requests('')) || !replyTo.startsWith(this.#keys.replies(''))
      || !isStreamId(entryId) || !/^\d{1,20}$/.test(requestKey)) return 'gone';
    const body = encodeReply({ requestKey, error: { code: 'CANCELLED', message: Errors.cancelled().message } });
    const mac = this.auth.mac('reply', [replyTo, body]);
    const keys = guard ? [stream, replyTo, guard.key] : [stream, replyTo];
    const args = [this.#keys.group, entryId, body, mac ?? '', ...(guard ? [guard.field, guard.text, guard.markField, guard.mark] : [])];
    let answer: unknown;
    try {
      answer = await this.#cmd.eval(WITHDRAW_AND_TELL, keys.length, ...keys, ...args);
    } catch (err) {
      throw unavailable(err);
    }
    const outcome = WITHDRAW_OUTCOMES[answer as keyof typeof WITHDRAW_OUTCOMES] as EntryWithdrawOutcome | undefined;
    if (!outcome) throw unavailable(new Error(`withdraw: unexpected answer ${String(answer)}`));
    return outcome;
  }

  /**
   * Per sequence (model and correlation id): the routing of its latest request. Each request of
   * a sequence is routed, and its XADD issued, only after the one before it: a START fixes its
   * worker before the next request asks where the sequence lives (requests sent back to back on
   * one gRPC stream raced here and got "must specify the START flag").
   */
  readonly #sequenceTail = new Map<string, Promise<void>>();

  /** Requests in #send now (what `drain` waits for), and who waits for the count to reach 0. */
  #inflight = 0;
  #drained: (() => void)[] = [];

  /**
   * Waits up to `timeoutMs` for the requests in flight to be answered (call `beginExit` first, so
   * no new ones start): triode serve's core drains so before its endpoints close. Resolves to the
   * number still in flight when it stopped waiting.
   */
  async drain(timeoutMs: number): Promise<number> {
    if (this.#inflight > 0) await settleWithin(new Promise<void>((r) => this.#drained.push(r)), timeoutMs);
    return this.#inflight;
  }

  async #send(request: InferenceRequest, onResponse?: (r: InferenceResponse) => void, onDecoupled?: () => void): Promise<InferenceResponse> {
    if (!this.#running) throw Errors.serverStopping();
    this.#inflight++;
    try {
      return await this.#sendCounted(request, onResponse, onDecoupled);
    } finally {
      if (--this.#inflight === 0 && this.#drained.length > 0) for (const r of this.#drained.splice(0)) r();
    }
  }

  #sendCounted(request: InferenceRequest, onResponse?: (r: InferenceResponse) => void, onDecoupled?: () => void): Promise<InferenceResponse> {
    let seq: ReturnType<typeof sequenceParams>;
    try {
      seq = sequenceParams(request.parameters);
    } catch {
      seq = undefined; // the worker answers the bad parameter
    }
    if (!seq) return this.#dispatch(request, onResponse, undefined, seq, onDecoupled);
    return this.#sendInSequence(request, seq, onResponse, onDecoupled);
  }

  /** A sequence's request, routed after the one before it. */
  async #sendInSequence(request: InferenceRequest, seq: NonNullable<ReturnType<typeof sequenceParams>>, onResponse?: (r: InferenceResponse) => void, onDecoupled?: () => void): Promise<InferenceResponse> {
    const key = `${request.modelName}\u0000${seq.key}`;
    const before = this.#sequenceTail.get(key);
    let routed!: () => void;
    const mine = new Promise<void>((r) => { routed = r; });
    this.#sequenceTail.set(key, mine);
    const release = () => {
      routed();
      if (this.#sequenceTail.get(key) === mine) this.#sequenceTail.delete(key);
    };
    try {
      if (before) await before;
      return await this.#dispatch(request, onResponse, release, seq, onDecoupled);
    } finally {
      release();
    }
  }

  /** Routes a request to its stream and waits for its reply; `queued` runs once its XADD is issued. */
  async #dispatch(request: InferenceRequest, onResponse?: (r: InferenceResponse) => void, queued?: () => void, parsed: Parsed = NOT_PARSED, onDecoupled?: () => void): Promise<InferenceResponse> {
    const model = this.#readyNow(request.modelName, request.modelVersion) ?? await this.#ready(request.modelName, request.modelVersion);
    const decoupled = (model.config as { model_transaction_policy?: { decoupled?: boolean } } | undefined)?.model_transaction_policy?.decoupled === true;
    if (decoupled && !onResponse) {
      throw Errors.unsupported(`model '${request.modelName}' is decoupled (0..N responses per request): use a streaming endpoint (gRPC ModelStreamInfer, HTTP generate_stream)`);
    }
    if (this.#exiting) this.#refuseWhileExiting(request, model, parsed);
    if (decoupled) onDecoupled?.();
    // A model without sequences goes to its shared stream: no promise to wait for.
    const { stream, undoEnd } = hasSequences(model) ? await this.#streamFor(request, model, parsed) : { stream: this.#keys.requests(request.modelName), undoEnd: undefined };
    if (!undoEnd) return this.#sendRouted(request, stream, onResponse, queued, decoupled, !hasSequences(model));
    try {
      return await this.#sendRouted(request, stream, onResponse, queued, decoupled, false);
    } catch (err) {
      // Before the client hears of it: a retry it sends at once must find the route.
      await undoEnd();
      throw err;
    }
  }

  /**
   * While the gateway exits, as triode serve's stopping schedulers (Triton's Scheduler::Stop): a
   * new request is refused UNAVAILABLE in their words, except one that continues a sequence, so
   * live sequences can still end. A request whose sequence parameters cannot be read goes on (its
   * worker answers the error, as when not exiting).
   */
  #refuseWhileExiting(request: InferenceRequest, model: RegistryModel, parsed: Parsed): void {
    let seq: ReturnType<typeof sequenceParams>;
    try {
      seq = sequenceBatching(model) ? (parsed === NOT_PARSED ? sequenceParams(request.parameters) : parsed) : undefined;
    } catch {
      return;
    }
    if (!seq || seq.start) throw Errors.schedulerStopping();
  }

  /** Adds a routed request to `stream` and waits for its reply. */
  #sendRouted(request: InferenceRequest, stream: string, onResponse: ((r: InferenceResponse) => void) | undefined, queued: (() => void) | undefined, decoupled: boolean, mayFetch: boolean): Promise<InferenceResponse> {
    // Cancelled while it was being routed (a registry read, its sequence's turn): an abort listener
    // added now would never fire, and the request would run for nobody (review: a decoupled one
    // streamed on with nothing to stop it).
    if (request.signal?.aborted) return Promise.reject(Errors.cancelled());
    const requestKey = `${this.#next++}`;
    const now = Date.now();
    // An async job waits for its answer longer than a client would (review: a burst of jobs for a
    // busy model failed after the request timeout with "no worker answered" while still queued).
    const waitMs = Math.min(MAX_TIMER_MS, Math.max(this.#opts.requestTimeoutMs, Number.isFinite(request.waitMs) ? request.waitMs! : 0));
    // The header and each tensor as separate stream fields: tensor bytes are not copied into one message.
    const env: WireEnvelope = {
      requestKey, replyTo: this.#replyKey, enqueuedMs: now, deadlineMs: now + waitMs,
      ...(this.#direct ? { direct: this.#direct } : {}),
    };
    // Traced (the frontend's Tracer sampled it): the worker is asked for the core's timestamps.
    if (request.trace) env.trace = true;
    const [head, ...tensors] = encodeRequestParts(request, env);
    const fields: (string | Buffer)[] = ['r', head!];
    let bytes = 0;
    for (const t of tensors) bytes += t.byteLength;
    // Large tensors stay here, for the worker to fetch (tensorFetchMinBytes); the header says their sizes.
    const fetched = mayFetch && this.#directReached && this.#direct !== undefined && bytes >= this.#opts.tensorFetchMinBytes;
    if (fetched) {
      fields.push('b', '1');
      this.#tensors.set(requestKey, { parts: tensors, served: 0 });
    } else {
      for (const t of tensors) fields.push('t', t);
    }
    // With a cluster secret, workers run only requests signed with it (the MAC covers the bytes as they are).
    const mac = this.auth.mac('request', [head!, ...tensors]);
    if (mac) fields.push('s', mac);
    // And a worker fetches tensors only for a header signed by itself: it connects where the
    // envelope says only when a gateway of this cluster wrote it.
    const headMac = fetched ? this.auth.mac('request-head', [head!]) : undefined;
    if (headMac) fields.push('h', headMac);
    return new Promise<InferenceResponse>((settle, fail) => {
      // The abort listener goes when the request settles: a gRPC stream gives all its requests one
      // signal, and a listener left on it would hold each request (and its tensors) until it closes.
      const signal = request.signal;
      // The entry's id once Redis has it, and whether the request was given up before that.
      let entryId: string | undefined;
      let abandoned = false;
      const withdrawable = request.waitMs !== undefined;
      // A withdrawable request's: settles when Redis has answered its latest XADD (with the id, or not).
      let added: Promise<void> | undefined;
      // The entry leaves its stream (a worker that has not read it never will; one that has goes on
      // with its copy), and the worker that holds it drops it from its queue, or tells a decoupled
      // model (isCancelled). Before, an abandoned request stayed in Redis, bodies of up to the
      // input limit each, until a worker got to it (review).
      const cancelOnWorker = (): void => {
        abandoned = true;
        if (entryId !== undefined) (this.#cmd.xdel(stream, entryId) as Promise<unknown>).catch(() => undefined);
        const cancel = this.auth.signText('cancel', JSON.stringify({ replyTo: this.#replyKey, requestKey }));
        (this.#cmd.publish(this.#keys.cancel, cancel) as Promise<unknown>).catch(() => undefined);
      };
      const onAbort = (): void => {
        if (!this.#waiting.delete(requestKey)) return;
        clearTimeout(waiting.timer);
        reject(Errors.cancelled());
        cancelOnWorker();
      };
      const resolve = (r: InferenceResponse): void => {
        signal?.removeEventListener('abort', onAbort);
        if (fetched) this.#tensors.delete(requestKey);
        if (withdrawable) this.#withdrawable.delete(request);
        settle(r);
      };
      const reject = (e: TriodeError): void => {
        signal?.removeEventListener('abort', onAbort);
        if (fetched) this.#tensors.delete(requestKey);
        if (withdrawable) this.#withdrawable.delete(request);
        fail(e);
      };
      // Given up: the worker is told too, so it does not run on for nobody (a decoupled model
      // streaming, a request still queued there).
      const expire = (why = `no worker answered the request for model '${request.modelName}' within ${waitMs / 1000} s`): void => {
        if (!this.#waiting.delete(requestKey)) return;
        reject(Errors.unavailable(why));
        cancelOnWorker();
      };
      // A request that may wait past the request timeout (an async job's) does so only while a
      // worker serves its model, as the registry says at each request timeout; once none does, it
      // has one request timeout left, as any request (review: a job queued for a model that was
      // then unloaded stayed 'active' for the job's whole wait, an hour).
      const timeoutMs = this.#opts.requestTimeoutMs;
      const check = (): void => {
        if (this.#waiting.get(requestKey) !== waiting) return;
        this.#ready(request.modelName, request.modelVersion).then(() => {
          if (this.#waiting.get(requestKey) !== waiting) return;
          const left = now + waitMs - Date.now();
          waiting.timer = left > timeoutMs ? setTimeout(check, timeoutMs) : setTimeout(expire, Math.max(0, left));
        }, (err: unknown) => {
          if (this.#waiting.get(requestKey) !== waiting) return;
          const why = `no worker serves model '${request.modelName}' any more (${TriodeError.from(err).message}), and none answered the request within ${timeoutMs / 1000} s after that`;
          waiting.timer = setTimeout(() => expire(why), timeoutMs);
        });
      };
      const waiting: Waiting = { resolve, reject, timer: waitMs > timeoutMs ? setTimeout(check, timeoutMs) : setTimeout(expire, waitMs) };
      if (request.trace) waiting.trace = request.trace;
      if (decoupled && onResponse) {
        waiting.onResponse = onResponse;
        // A stream that goes on sending is waited for; the timeout counts from its last response.
        waiting.rearm = () => {
          clearTimeout(waiting.timer);
          waiting.timer = setTimeout(expire, waitMs);
        };
      }
      // Tensors go to the socket as they are, in the turn's one writev (resp-connection.ts). XADDs
      // reach Redis in the order they are issued (a sequence's requests are issued in turn).
      // A worker's own stream (a sequence pinned to it) is only added to while it exists: its
      // worker makes it and renews its expiry, and deletes it when it stops; made here, it would
      // stay in Redis for good, read by nobody (review).
      const own = stream !== this.#keys.requests(request.modelName);
      const add = (entry: (string | Buffer)[]): void => {
        const answered = this.#xadd.send(respPieces('XADD', own ? [stream, 'NOMKSTREAM', 'MAXLEN', '~', '1000000', '*', ...entry] : [stream, 'MAXLEN', '~', '1000000', '*', ...entry])).then((id) => {
          if (id === null) {
            // No such stream: its worker has stopped (or expired), as a registry read would soon say.
            if (this.#waiting.get(requestKey) !== waiting) return;
            clearTimeout(waiting.timer);
            this.#waiting.delete(requestKey);
            reject(Errors.unavailable(`the worker that held this sequence of model '${request.modelName}' is gone: start the sequence again`));
            return;
          }
          entryId = Buffer.isBuffer(id) ? id.toString() : typeof id === 'string' ? id : undefined;
          if (abandoned && entryId !== undefined) (this.#cmd.xdel(stream, entryId) as Promise<unknown>).catch(() => undefined);
          else if (withdrawable && entryId !== undefined) this.#entryWatchers.get(request)?.({ stream, entryId, replyTo: this.#replyKey, requestKey });
        }, (err: unknown) => {
          if (this.#waiting.get(requestKey) !== waiting) return;
          clearTimeout(waiting.timer);
          this.#waiting.delete(requestKey);
          reject(unavailable(err));
        });
        if (withdrawable) added = answered;
      };
      if (withdrawable) {
        this.#withdrawable.set(request, async () => {
          await added;
          if (entryId === undefined || this.#waiting.get(requestKey) !== waiting) return false;
          const removed = await (this.#cmd.eval(WITHDRAW_UNREAD, 1, stream, this.#keys.group, entryId) as Promise<unknown>).catch(() => 0);
          // Unread and removed: no worker answers it, so only its own timer could have settled it meanwhile.
          if (removed !== 1 || this.#waiting.get(requestKey) !== waiting) return false;
          clearTimeout(waiting.timer);
          this.#waiting.delete(requestKey);
          reject(Errors.cancelled());
          return true;
        });
      }
      if (fetched) {
        // The worker that took the entry could not fetch the tensors (a flood of connections on the
        // direct port shut it out, its connection failed: review, every such request was a 503).
        // Not yet served to any fetch: the same request (key, header, MAC) goes again with its
        // tensors in the entry, once; a late fetch of it then hears it is gone, so it runs at most
        // once. Served (an answer with them left whole): a worker has them and runs it (that answer
        // came from a replayed or re-delivered entry). Sent again already: that copy is answered.
        let resent = false;
        waiting.unfetched = () => {
          const held = this.#tensors.get(requestKey);
          if (!held) return resent;
          if (held.served > 0) return true;
          this.#tensors.delete(requestKey);
          resent = true;
          const inline: (string | Buffer)[] = ['r', head!];
          for (const t of held.parts) inline.push('t', t);
          if (mac) inline.push('s', mac);
          add(inline);
          return true;
        };
      }
      this.#waiting.set(requestKey, waiting);
      // A cancelled call is answered at once; a worker may still run the request (its reply is dropped).
      signal?.addEventListener('abort', onAbort, { once: true });
      add(fields);
      queued?.();
    });
  }

  async inferStream(request: InferenceRequest, onResponse: ResponseHandler, options?: InferStreamOptions): Promise<void> {
    let streamed = false;
    // Replies come from the reply stream as workers send them: a gateway has no way to hold a
    // worker's next response, so a promise back (a client not reading) is not waited for. What
    // waits for the client is counted instead, and past the bound the request is cancelled
    // (before: one request of 300,000 responses to a client that read none grew a gateway by 600 MB).
    const limit = this.#opts.maxStreamBacklogBytes;
    const own = new CancelToken();
    const outer = request.signal;
    const onOuter = (): void => own.cancel();
    if (outer?.aborted) own.cancel();
    else outer?.addEventListener('abort', onOuter, { once: true });
    // The requests of one call (a gRPC stream gives them one signal) share their client's budget.
    const key: object = outer ?? own;
    const waiting = this.#backlogs.get(key) ?? { bytes: 0 };
    this.#backlogs.set(key, waiting);
    let overflow: TriodeError | undefined;
    const handle = (r: InferenceResponse): void => {
      streamed = true;
      const taken = onResponse(r);
      if (!taken) return;
      // Its strings too, as the frontend will write them: each response repeats the request's id
      // (a 1 MB id and 1,000 responses grew a gateway by 1 GB past the 16 MiB bound; review).
      let size = RESPONSE_OVERHEAD_BYTES + 2 * ((r.id?.length ?? 0) + r.modelName.length + r.modelVersion.length);
      for (const t of r.outputs) size += t.data.byteLength + 2 * t.name.length;
      for (const [k, v] of Object.entries(r.parameters ?? {})) size += 2 * (k.length + (typeof v === 'string' ? v.length : 0));
      waiting.bytes += size;
      this.#backlogBytes += size;
      const done = (): void => {
        waiting.bytes -= size;
        this.#backlogBytes -= size;
      };
      taken.then(done, done);
      if (overflow) return;
      if (waiting.bytes > limit) {
        overflow = Errors.unavailable(`the client did not read the responses of model '${echo(request.modelName)}': over ${limit} bytes of them waited, so the request was cancelled`);
        own.cancel();
      } else if (this.#backlogBytes > this.#opts.maxGatewayBacklogBytes) {
        overflow = Errors.unavailable(`clients of this gateway did not read over ${this.#opts.maxGatewayBacklogBytes} bytes of streamed responses, so this request of model '${echo(request.modelName)}' was cancelled`);
        own.cancel();
      }
    };
    try {
      const last = await this.#send({ ...request, signal: own }, handle, options?.onDecoupled);
      // A regular model's one response comes as the final reply (with no outputs too, if its config
      // has none); a decoupled one's came streamed, and its stream's end is no response.
      if (!streamed && !STREAM_ENDS.has(last)) void onResponse(last);
    } catch (err) {
      throw overflow ?? err;
    } finally {
      outer?.removeEventListener('abort', onOuter);
    }
  }

  /**
   * Sends a load/unload command to every live worker and waits for all of them to answer
   * (up to `timeoutMs`); fails with the workers' reasons (and the first one's code) if any failed,
   * naming the failed workers when others succeeded. Which worker said what is logged.
   */
  async #control(action: 'load' | 'unload', name: string, extra: Record<string, unknown>, timeoutMs = 120_000, signal?: AbortSignal): Promise<void> {
    checkModelName(name);
    // Each call holds a Redis connection of its own for up to timeoutMs (review: without a bound,
    // a client could open one per call, as many as it liked).
    if (action === 'unload') return this.#unload(name, extra, timeoutMs, signal);
    if (this.#loadCalls >= MAX_CONTROL_CALLS) {
      throw Errors.unavailable(`failed to load '${echo(name)}': ${MAX_CONTROL_CALLS} load calls are under way on this gateway, try again when they end`);
    }
    this.#loadCalls++;
    try {
      await this.#controlCall(action, name, extra, timeoutMs);
    } finally {
      this.#loadCalls--;
    }
  }

  /**
   * An unload is never refused, as in `triode serve`: MAX_CONTROL_CALLS loads that never end must
   * not keep out the unload that gives them up (review: loads and unloads shared one bound). Past
   * MAX_CONTROL_CALLS unloads under way it waits for one to end, and one of a model already being
   * unloaded (with the same unload_dependents) joins that one: the connections stay bounded. One
   * still waiting for its turn when every client that asked for it has left (`signal`) is given up
   * (review: it waited on, and the waiting ones grew with clients that came and went); once sent
   * to the workers it goes on, as a load does, and is recorded when they have answered.
   */
  #unload(name: string, extra: Record<string, unknown>, timeoutMs: number, signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(Errors.cancelled(`unload of '${echo(name)}'`));
    const key = `${extra['unloadDependents'] === true ? 1 : 0}${name}`;
    let shared = this.#unloads.get(key);
    if (!shared) {
      const s: SharedUnload = { done: Promise.resolve(), clients: 0 };
      s.done = (async () => {
        try {
          if (this.#unloadCalls >= MAX_CONTROL_CALLS) {
            await new Promise<void>((go, fail) => {
              const waiter = { go, fail };
              this.#unloadWaiters.push(waiter);
              s.giveUp = () => {
                const i = this.#unloadWaiters.indexOf(waiter);
                if (i >= 0) this.#unloadWaiters.splice(i, 1);
                fail(Errors.cancelled(`unload of '${echo(name)}'`));
              };
            });
          } else {
            this.#unloadCalls++;
          }
          s.giveUp = undefined;
          try {
            await this.#controlCall('unload', name, extra, timeoutMs);
          } finally {
            // The slot passes to the first waiting unload, or is freed.
            const next = this.#unloadWaiters.shift();
            if (next) next.go();
            else this.#unloadCalls--;
          }
        } finally {
          if (this.#unloads.get(key) === s) this.#unloads.delete(key);
        }
      })();
      this.#unloads.set(key, (shared = s));
    }
    const call = shared;
    call.clients++;
    if (signal) {
      const leave = () => { if (--call.clients === 0) call.giveUp?.(); };
      signal.addEventListener('abort', leave, { once: true });
      const off = () => signal.removeEventListener('abort', leave);
      call.done.then(off, off);
    }
    return call.done;
  }

  async #controlCall(action: 'load' | 'unload', name: string, extra: Record<string, unknown>, timeoutMs: number): Promise<void> {
    this.#registryAt = 0;
    let workers = (await this.#registry()).map((w) => w.workerId);
    if (workers.length === 0) throw Errors.unavailable(`failed to ${action} '${echo(name)}': no live worker is registered in the cluster`);
    const asked = workers.length;
    const id = randomUUID();
    const key = this.#keys.controlReplies(id);
    try {
      const answers = new Map<string, { code: string; message: string } | undefined>();
      const end = Date.now() + timeoutMs;
      // Answers are waited for, not polled: a connection of its own blocks on the answer list
      // (control commands are rare, and a blocking pop would stall every other command on #cmd).
      const listen = this.#cmd.duplicate({ enableOfflineQueue: true });
      listen.on('error', () => undefined);
      try {
        await this.#cmd.publish(this.#keys.control, this.auth.signText('control', JSON.stringify({ id, ts: Date.now(), action, model: name, ...extra })));
        let checkedAt = Date.now();
        while (answers.size < workers.length && Date.now() < end) {
          const popped = await listen.blpop(key, Math.max(0.01, Math.min(1, (end - Date.now()) / 1000)));
          // A worker that left meanwhile (stopped, killed: its registry entry is gone) is not
          // waited for: the call waited the whole timeout, failed, and the load was never
          // recorded for workers that join later (review).
          if (Date.now() - checkedAt >= 1000) {
            checkedAt = Date.now();
            this.#registryAt = 0;
            const live = new Set((await this.#registry().catch(() => this.#workers)).map((w) => w.workerId));
            workers = workers.filter((w) => live.has(w) || answers.has(w));
          }
          if (!popped) continue;
          const text = this.auth.openText('control-reply', popped[1], 'answer to a control message');
          if (text === undefined) continue;
          let a: { id?: string; workerId: string; error?: { code: string; message: string } };
          try {
            a = JSON.parse(text) as typeof a;
          } catch {
            continue;
          }
          if (a.id !== undefined && a.id !== id) continue;
          answers.set(a.workerId, a.error);
        }
      } finally {
        listen.disconnect();
      }
      const failed = [...answers.entries()].filter((e): e is [string, { code: string; message: string }] => e[1] !== undefined);
      if (failed.length > 0) {
        for (const [w, e] of failed) this.#opts.logger?.warning(`worker ${w} failed to ${action} '${name}': ${e.message}`);
        const first = failed[0]![1];
        const code = (isErrorCode(first.code) ? first.code : 'INTERNAL');
        const messages = [...new Set(failed.map(([, e]) => String(e.message)))];
        // Every worker failed alike: the embedded server's answer as it is. Some did: which ones.
        const which = failed.length < asked ? ` (on ${failed.length} of ${asked} workers: ${failed.map(([w]) => echo(w, 64)).join(', ')})` : '';
        // One answer as it is (a failed load's ends in Triton's newline); several, or one with the
        // workers named, on one line.
        const message = messages.length === 1 && !which ? messages[0]! : messages.map((m) => m.replace(/\n$/, '')).join('; ') + which;
        throw new TriodeError(code, message);
      }
      if (answers.size < workers.length) {
        throw Errors.unavailable(`failed to ${action} '${echo(name)}': ${workers.length - answers.size} of ${asked} workers did not answer within ${timeoutMs / 1000} s`);
      }
      if (workers.length < asked) this.#opts.logger?.info(`${action} '${name}': ${asked - workers.length} of ${asked} workers left the cluster before they answered`);
      if (action === 'load') await this.#cmd.hset(this.#keys.desired, name, this.auth.signText('desired', JSON.stringify({ model: name, action, ...extra })));
      else await this.#cmd.hdel(this.#keys.desired, name);
    } catch (err) {
      if (err instanceof TriodeError) throw err;
      throw unavailable(err);
    } finally {
      this.#registryAt = 0;
      await this.#cmd.del(key).catch(() => undefined);
    }
  }

  async loadModel(name: string, options: LoadOptions = {}): Promise<void> {
    if (this.#exiting) throw Errors.serverNotReady();
    await this.#control('load', name, {
      ...(options.config ? { config: options.config } : {}),
      ...(options.files ? { files: overrideFilesToJson(options.files) } : {}),
    });
  }

  async unloadModel(name: string, options: UnloadOptions = {}): Promise<void> {
    if (this.#exiting) throw Errors.serverNotReady();
    await this.#control('unload', name, { unloadDependents: options.unloadDependents === true }, undefined, options.signal);
  }

  /** Stops reading replies; requests still waiting get an error. */
  async stop(): Promise<void> {
    this.#running = false;
    clearInterval(this.#replyTtl);
    // A read blocked on a Redis that is gone never returns: stop waiting for it after a moment.
    await settleWithin(this.#loop ?? Promise.resolve(), this.#block.status === 'ready' ? 1000 : 0);
    for (const [k, w] of this.#waiting) {
      clearTimeout(w.timer);
      w.reject(Errors.serverStopping());
      this.#waiting.delete(k);
    }
    for (const w of this.#unloadWaiters.splice(0)) w.fail(Errors.serverStopping());
    // A Redis that is gone must not hold the exit up (the reply stream is trimmed by MAXLEN anyway).
    if (this.#cmd.status === 'ready') await settleWithin(this.#cmd.del(this.#replyKey), 1000);
    this.#directServer?.close();
    for (const socket of this.#directSockets) socket.destroy();
    this.#block.disconnect();
    this.#xadd.disconnect();
    this.#cmd.disconnect();
  }
}

function addStats(a: ModelStatistics, b: ModelStatistics): ModelStatistics {
  const out = structuredClone(a);
  out.last_inference = Math.max(a.last_inference, b.last_inference);
  out.inference_count += b.inference_count;
  out.execution_count += b.execution_count;
  for (const k of STAT_STAGES) {
    out.inference_stats[k].count += b.inference_stats[k].count;
    out.inference_stats[k].ns += b.inference_stats[k].ns;
  }
  // By batch size through a map: a forged entry of 40,000 batch sizes held the event loop 2 s a
  // statistics call when each searched the list (review).
  const bySize = new Map(out.batch_stats.map((x) => [x.batch_size, x]));
  for (const bs of b.batch_stats) {
    const mine = bySize.get(bs.batch_size);
    if (!mine) {
      const copy = structuredClone(bs);
      out.batch_stats.push(copy);
      bySize.set(copy.batch_size, copy);
      continue;
    }
    for (const k of ['compute_input', 'compute_infer', 'compute_output'] as const) {
      mine[k].count += bs[k].count;
      mine[k].ns += bs[k].ns;
    }
  }
  out.batch_stats.sort((x, y) => x.batch_size - y.batch_size);
  return out;
}

/** An unload under way or waiting for its turn, and the clients waiting for its answer. */
interface SharedUnload {
  done: Promise<void>;
  /** Callers still waiting for it (one without a signal never leaves). */
  clients: number;
  /** While it waits for its turn: gives it up (every client has left). */
  giveUp?: () => void;
}
