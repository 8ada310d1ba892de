/**
 * @module Async inference (a Triode extension): submit a request and get a job id at once, poll
 * its state, fetch the result later, cancel it. Jobs are BullMQ jobs in the cluster's Redis; any
 * gateway can run them (through its backplane) and answer for them.
 *
 * What they keep in Redis is bounded: a request (and a result) of at most maxRequestBytes, at most
 * maxJobs jobs at once (waiting, running, or finished and kept), finished jobs for resultTtlSecs
 * (cleaned on a timer: BullMQ's own age limit only acts when another job finishes), the request
 * dropped once it ran, and BullMQ's event stream trimmed short. Job ids are random UUIDs (not
 * guessable), and nothing else is taken for one: a job id is a key in BullMQ's key space, where
 * names like `meta` or `events` are the queue's own. A failure is kept as data ({code,
 * message}); with a cluster secret, a job's request and its result are signed, and a forged one
 * is refused. While Redis is away the calls fail at once (503), they do not wait for it; while it
 * is connected but does not answer (paused, wedged), they fail after commandTimeoutMs (503).
 */
import { createHash, randomUUID } from 'node:crypto';
import { Queue, WaitingError, Worker, type Job, type JobJsonRaw, type RedisClient } from 'bullmq';
import {
  CancelToken, Errors, TriodeError, checkModelName, echo, fromWireError, normalizeRequest, settleWithin, type Backplane, type InferenceRequest, type InferenceResponse, type Logger, type ModelConfig,
  type AsyncInference, type JobStatus, type OutputEncoding,
} from '@triode/core';
import { ClusterAuth } from '../cluster-auth.js';
import { RateLimitedWarning } from '../rate-limited-warning.js';
import { decodeReply, decodeRequest, encodeReply, encodeRequest } from '../envelope/envelope-codec.js';
import { GATEWAY_COMMAND_TIMEOUT_MS, redisOptions } from '../redis/redis-connection.js';
import type { EntryWithdrawal, EntryWithdrawOutcome, WaitingEntry } from '../gateway/redis-backplane.js';

/** What `submit` issues (randomUUID); anything else is no job of ours. */
const JOB_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Finished jobs removed per clean call and state (the rest go at the next one). */
const CLEAN_BATCH = 1000;

/**
 * The job hash field that holds a finished job's reply (base64), beside BullMQ's own fields: only
 * a result fetch reads it. A status poll reads the few small fields it answers with, so polling a
 * job with a large result costs Redis and the gateway next to nothing (it used to load, parse and
 * hash the whole result each time). It goes with the job's hash when the job is removed.
 */
const REPLY_FIELD = 'triode-reply';

/**
 * With a cluster secret, the job hash field that holds the MAC of the job id and its model name
 * (hex), written at submit: a status poll checks the name it shows with it, without reading the
 * job's data (its request, up to maxRequestBytes).
 */
const NAME_SIG_FIELD = 'triode-name-sig';

/**
 * The job hash field where the gateway running a job records where its request waits for a worker
 * (the backplane's WaitingEntry as JSON; with a cluster secret, with its MAC): a DELETE on any
 * gateway takes the request back from there while no worker has read it.
 */
const ENTRY_FIELD = 'triode-entry';

/**
 * The job hash field a DELETE sets once it has taken the job's request back (with a cluster secret
 * the MAC of the job id, else '1'): the job reads as cancelled from then on, whatever its gateway
 * makes of it, and a gateway that comes to run it again (its own died) does not run it.
 */
const CANCELLED_FIELD = 'triode-cancelled';

/**
 * How long a DELETE of an active job waits for the job to settle (ms) once its withdraw found the
 * request's entry gone or the job's record changed, re-reading it every CANCEL_POLL_MS: the gateway
 * holding it took it back as it exited and moves it back to wait (a few Redis round trips), then
 * the DELETE removes it; or another gateway takes it again and records its new entry, which the
 * DELETE then takes back. Bounded, so a DELETE answers within it (503, try again).
 */
const CANCEL_SETTLE_MS = 2000;
const CANCEL_POLL_MS = 50;

/**
 * The failure reasons BullMQ itself writes for a job of ours (Triode's own failures are the job's
 * signed result). Any other reason came from someone else who writes to Redis: it is not shown
 * (review: a forged "Your result moved: fetch it from http://..." reached the client).
 */
const KNOWN_FAILED_REASONS: ReadonlySet<string> = new Set(['job stalled more than allowable limit', 'job started more than allowable limit']);

/** What a client is told of a BullMQ failure reason that is not one of KNOWN_FAILED_REASONS. */
const UNKNOWN_FAILED_REASON = 'job failed';

/** Result fetches a gateway reads from Redis at once; more wait their turn, up to RESULT_WAITERS. */
const RESULT_READS = 8;
const RESULT_WAITERS = 256;

/** Options of AsyncJobs. */
export interface AsyncJobsOptions {
  redis: string;
  /** Key prefix of the cluster. @default "triode" */
  prefix?: string;
  /** How long finished jobs (and their results or failure reasons) are kept (s). @default 3600 */
  resultTtlSecs?: number;
  /** Jobs this gateway runs at once. @default 64 */
  concurrency?: number;
  /** The largest request (and result) a job may carry, in bytes as encoded. @default 4 MiB */
  maxRequestBytes?: number;
  /** Jobs kept at once (waiting, running, finished and not yet expired); more are refused (503). @default 256 */
  maxJobs?: number;
  /** The cluster secret's signer (shared with the backplane, for one count of rejected messages). */
  auth?: ClusterAuth;
  /**
   * How long a client's call (and a metrics scrape) waits for Redis to answer before it fails
   * with 503. @default GATEWAY_COMMAND_TIMEOUT_MS (10 s)
   */
  commandTimeoutMs?: number;
  logger?: Logger;
}

/** Default of AsyncJobsOptions.maxRequestBytes. */
export const DEFAULT_ASYNC_MAX_REQUEST_BYTES = 4 * 1024 * 1024;

interface JobData {
  request: string; // base64 of the encoded request ('' once it ran)
  binary: [string, boolean][];
  defaultBinary: boolean;
  /** When the job was submitted (ms since the epoch). */
  submittedMs?: number;
  /** With a cluster secret: the MAC of the job id, submit time, model name, request and encoding (hex). */
  sig?: string;
}

/**
 * What a finished job returns (BullMQ's `returnvalue`, small): the error as data, or the digest of
 * the reply it stored in REPLY_FIELD.
 */
interface JobResult {
  /** sha256 (hex) of the reply as stored (base64). */
  digest?: string;
  error?: { code: string; message: string };
  /** With a cluster secret: the MAC of the job id, the digest and the error (hex). */
  sig?: string;
}

const digestOf = (reply: string): string => createHash('sha256').update(reply).digest('hex');

/** The job hash fields `status` and `result` read. */
interface JobFields {
  name: string;
  timestamp: number;
  finishedOn?: number;
  progress: number;
  failedReason?: string;
  returnvalue?: unknown;
  /** NAME_SIG_FIELD, if there is one. */
  nameSig?: string;
  /** CANCELLED_FIELD, if there is one. */
  cancelled?: string;
}


/**
 * A job this gateway is running: `cancel` is its request's signal; `handedBack` is set by stop().
 * `request` is what it sent to the backplane; `withdrawn`, once asked for, whether the backplane
 * took that request back before any worker took it (then the job goes back too).
 */
interface Run {
  cancel: CancelToken;
  handedBack: boolean;
  request?: InferenceRequest;
  withdrawn?: Promise<boolean>;
}

/** Submits that may wait for their turn at once: each takes a few Redis round trips, and holds its request meanwhile (up to maxRequestBytes). */
const MAX_SUBMITS_WAITING = 32;

/** HSET KEYS[1] ARGV[1] ARGV[2], only if the hash KEYS[1] exists. */
const WRITE_IF_JOB = "if redis.call('EXISTS', KEYS[1]) == 1 then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return -1";

/**
 * As a gateway takes a job: HGET KEYS[1] ARGV[1] (the cancelled mark) and HDEL KEYS[1] ARGV[2] (the
 * entry a former take recorded) in one step, so a DELETE acts on no entry of a former take once
 * this one runs, and one that acted before has its mark seen here.
 */
const TAKE_JOB = "local c = redis.call('HGET', KEYS[1], ARGV[1]) redis.call('HDEL', KEYS[1], ARGV[2]) return c";

/**
 * HSET KEYS[1] ARGV[1] ARGV[2] while the job's lock KEYS[2] is still ARGV[3] (this take's token):
 * a gateway that stalled past its lock records no entry over the one of the take after it.
 */
const WRITE_IF_LOCKED = "if redis.call('GET', KEYS[2]) == ARGV[3] then return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end return -1";

/**
 * True for the refusal of an exiting backplane (a new request refused in the stopping schedulers'
 * words): the request was not sent, so no worker ran it.
 */
function refusedAtExit(err: unknown): boolean {
  const refusal = Errors.schedulerStopping();
  return err instanceof TriodeError && err.code === refusal.code && err.message === refusal.message;
}

/** A MAC in hex as a job carries it, if it is text (anything else counts as unsigned). */
const sigOf = (sig: unknown): Buffer | undefined => (typeof sig === 'string' && sig ? Buffer.from(sig, 'hex') : undefined);

/** True when a job's data has the shape `submit` writes (anyone who reaches Redis can write a job). */
function isJobData(d: unknown): d is JobData {
  if (typeof d !== 'object' || d === null) return false;
  const j = d as Record<string, unknown>;
  return typeof j['request'] === 'string' && typeof j['defaultBinary'] === 'boolean'
    && (j['submittedMs'] === undefined || Number.isSafeInteger(j['submittedMs']))
    && Array.isArray(j['binary']) && j['binary'].every((b) => Array.isArray(b) && b.length === 2 && typeof b[0] === 'string' && typeof b[1] === 'boolean');
}

/**
 * A BullMQ worker that takes a job whose hash it cannot parse (data, options or progress that are
 * not JSON: only someone else who writes to Redis makes one) as a job with no data, which #run
 * then fails as malformed. BullMQ threw while it made the job, after it had moved it to active,
 * and it stayed active for good: it held a place under maxJobs and DELETE answered "running"
 * (review).
 */
class TolerantWorker<D> extends Worker<D> {
  protected override createJob(raw: JobJsonRaw, jobId: string): Job<D> {
    try {
      return super.createJob(raw, jobId);
    } catch {
      const { parent: _parent, parentKey: _parentKey, ...rest } = raw;
      return super.createJob({ ...rest, data: 'null', opts: '{}', progress: '0' }, jobId);
    }
  }

  /** The blocking connection's client (bullmq is pinned exactly: a private field, checked in the tests). */
  blockingClient(): Promise<RedisClient> {
    return (this as unknown as { blockingConnection: { client: Promise<RedisClient> } }).blockingConnection.client;
  }

  /**
   * What BullMQ's close does once the jobs have finished, for a close that never gets there (Redis
   * gone: its wait for the next job never ends): stops the lock renewal (a timer every 7.5 s that
   * kept the process alive) and the stalled-job check (one every 30 s). Private API of the pinned
   * bullmq, checked in the tests.
   */
  stopTimers(): Promise<void> {
    (this as unknown as { stalledCheckStopper?: () => void }).stalledCheckStopper?.();
    return this.lockManager.close();
  }
}

/** Async jobs over BullMQ. */
export class AsyncJobs implements AsyncInference {
  readonly #queue: Queue;
  readonly #worker: TolerantWorker<JobData>;
  readonly #ttl: number;
  readonly #auth: ClusterAuth;
  /** The largest request (and result) a job may carry, in bytes. */
  readonly maxRequestBytes: number;
  readonly #maxJobs: number;
  /** Jobs this gateway is running now. */
  #running = 0;
  readonly #backplane: Backplane & Partial<EntryWithdrawal>;
  /** Removes expired results now and then (BullMQ removes them only when another job finishes). */
  #cleaner: NodeJS.Timeout | undefined;
  /** Submits of this gateway, one at a time: the count of kept jobs and the add are one step. */
  #submitting: Promise<unknown> = Promise.resolve();
  /** Submits of this gateway not yet answered (at most maxJobs, and MAX_SUBMITS_WAITING). */
  #submitsWaiting = 0;
  /** Result fetches reading Redis now, and those waiting for a turn. */
  #resultReads = 0;
  readonly #resultWaiters: (() => void)[] = [];
  readonly #logger: Logger | undefined;
  readonly #commandTimeoutMs: number;
  /** Set by beginExit: no more jobs are taken. */
  #exiting = false;
  /** The jobs running now: `stop` hands back those still waiting for their answer. */
  readonly #runs = new Set<Run>();

  /**
   * @param backplane where jobs' requests go; with `EntryWithdrawal` (RedisBackplane), a job whose
   * request waits unread for a worker can be cancelled from any gateway.
   */
  constructor(backplane: Backplane & Partial<EntryWithdrawal>, options: AsyncJobsOptions) {
    this.#backplane = backplane;
    const conn = redisOptions(options.redis, 'jobs');
    const name = `${options.prefix ?? 'triode'}-async`;
    this.#ttl = options.resultTtlSecs ?? 3600;
    this.#auth = options.auth ?? new ClusterAuth();
    this.maxRequestBytes = options.maxRequestBytes ?? DEFAULT_ASYNC_MAX_REQUEST_BYTES;
    this.#maxJobs = options.maxJobs ?? 256;
    this.#logger = options.logger;
    this.#commandTimeoutMs = options.commandTimeoutMs ?? GATEWAY_COMMAND_TIMEOUT_MS;
    // Nothing reads BullMQ's event stream (results are read from the job): keep it short, not
    // 10,000 events each with a copy of a result. The queue serves HTTP calls: while Redis is
    // away they fail at once (503) instead of queueing in ioredis until it is back, and a command
    // Redis does not answer fails at its timeout (review: with Redis paused the async routes and
    // the metric never answered). The queue's connection issues no blocking commands (the
    // worker's blocking pops are on the worker's own connections, which get no timeout).
    this.#queue = new Queue(name, {
      connection: { ...conn, enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: this.#commandTimeoutMs },
      streams: { events: { maxLen: 100 } },
    });
    this.#queue.on('error', (e) => options.logger?.verbose(1, `async jobs queue: ${e.message}`));
    this.#worker = new TolerantWorker<JobData>(name, async (job: Job<JobData>, token?: string) => {
      // Taken just as this gateway began to exit (the take was on its way to Redis when beginExit
      // closed the worker): it goes back, first in line, for another gateway.
      if (this.#exiting) {
        // (Failing that, its lock lapses and it is taken again as a stalled job.)
        await job.moveToWait(token).catch(() => undefined);
        throw new WaitingError();
      }
      this.#running++;
      const run: Run = { cancel: new CancelToken(), handedBack: false };
      this.#runs.add(run);
      try {
        const result = await this.#run(backplane, job, run, token);
        if (result) return result;
        // Handed back by stop(): first in line for another gateway, as it was never run.
        await job.moveToWait(token).catch(() => undefined);
        throw new WaitingError();
      } finally {
        this.#runs.delete(run);
        this.#running--;
      }
    }, { connection: conn, concurrency: options.concurrency ?? 64, autorun: false });
    // Rate-limited: the worker reports some errors once per job (a job whose repeat options cannot
    // be scheduled), and anyone who writes to Redis can add such jobs at will.
    const workerErrors = new RateLimitedWarning(options.logger);
    this.#worker.on('error', (e) => workerErrors.warn(`async jobs: ${e.message}`));
  }

  /**
   * What a job's MAC covers: its id and submit time too, so captured job data cannot run again
   * under another id, nor (with the TTL check in #run) under its own once it has expired (review:
   * a captured signed job was replayed without limit under new ids).
   */
  #dataParts(id: string, model: string, d: JobData): string[] {
    return [id, String(d.submittedMs ?? ''), model, d.request, JSON.stringify(d.binary), String(d.defaultBinary)];
  }

  /** What NAME_SIG_FIELD signs (a leading 'name' keeps it apart from a job's own MAC). */
  #nameParts(id: string, model: string): string[] {
    return ['name', id, model];
  }

  /** What a job's ENTRY_FIELD signs: all of it, so a DELETE acts on no entry but the one its gateway recorded. */
  #entryParts(id: string, e: WaitingEntry): string[] {
    return ['entry', id, e.stream, e.entryId, e.replyTo, e.requestKey];
  }

  /** What CANCELLED_FIELD signs. */
  #cancelledParts(id: string): string[] {
    return ['cancelled', id];
  }

  /** True when the job was cancelled while it ran (its CANCELLED_FIELD, signed with the secret). */
  #wasCancelled(id: string, f: Pick<JobFields, 'cancelled'>): boolean {
    return f.cancelled !== undefined && this.#auth.verify('job', this.#cancelledParts(id), sigOf(f.cancelled), 'async job cancellation');
  }

  /** HSET of one field of a job's hash through `client` (BullMQ's ioredis), only if the job is still there. */
  async #writeIfJob(client: Promise<unknown>, id: string, field: string, value: string): Promise<void> {
    await this.#eval(client, WRITE_IF_JOB, [this.#queue.toKey(id)], field, value);
  }

  /** The eval of BullMQ's client (ioredis; its IRedisClient type leaves eval out). */
  async #eval(client: Promise<unknown>, script: string, keys: string[], ...args: string[]): Promise<unknown> {
    const c = (await client) as { eval(script: string, keys: number, ...args: string[]): Promise<unknown> };
    return c.eval(script, keys.length, ...keys, ...args);
  }

  /**
   * Records where a job's request waits (ENTRY_FIELD), each time its backplane has queued it, while
   * this take (`token`) still holds the job's lock.
   */
  #recordEntry(id: string, token: string, entry: WaitingEntry): void {
    const mac = this.#auth.mac('job', this.#entryParts(id, entry));
    const text = JSON.stringify({ ...entry, ...(mac ? { sig: mac.toString('hex') } : {}) });
    const key = this.#queue.toKey(id);
    this.#eval(this.#worker.client, WRITE_IF_LOCKED, [key, `${key}:lock`], ENTRY_FIELD, text, token)
      .catch((e: unknown) => this.#logger?.verbose(1, `async jobs: recording where job '${id}' waits: ${(e as Error).message}`));
  }

  /** A job's ENTRY_FIELD, if it has the shape #recordEntry writes and (with a secret) its MAC. */
  #entryOf(id: string, text: string | null): WaitingEntry | undefined {
    let e: unknown;
    try {
      e = JSON.parse(text ?? '') as unknown;
    } catch {
      return undefined;
    }
    if (typeof e !== 'object' || e === null) return undefined;
    const { stream, entryId, replyTo, requestKey, sig } = e as Record<string, unknown>;
    if (typeof stream !== 'string' || typeof entryId !== 'string' || typeof replyTo !== 'string' || typeof requestKey !== 'string') return undefined;
    const entry: WaitingEntry = { stream, entryId, replyTo, requestKey };
    return this.#auth.verify('job', this.#entryParts(id, entry), sigOf(sig), 'async job request entry') ? entry : undefined;
  }

  #resultParts(id: string, r: JobResult): string[] {
    return [id, r.digest ?? '', JSON.stringify(r.error ?? null)];
  }

  #signResult(id: string, r: JobResult): JobResult {
    const mac = this.#auth.mac('job-result', this.#resultParts(id, r));
    return mac ? { ...r, sig: mac.toString('hex') } : r;
  }

  /** Runs a job; its outcome (the reply or the error, as data) is the job's return value. */
  async #run(backplane: Backplane & Partial<EntryWithdrawal>, job: Job<JobData>, run: Run, token: string | undefined): Promise<JobResult | undefined> {
    const id = job.id ?? '';
    let result: JobResult;
    try {
      // The entry a former take recorded goes first, in the step that reads the cancelled mark
      // (acted on below, after the checks): a DELETE from now on finds this take's own, or none
      // (review: it took back the former take's entry, still unread, and marked the job cancelled
      // while this take ran it; and a take refused by a check below, before this step, left it).
      const cancelled = backplane.withdrawEntry
        ? await this.#eval(this.#worker.client, TAKE_JOB, [this.#queue.toKey(id)], CANCELLED_FIELD, ENTRY_FIELD)
        : null;
      const d = job.data as unknown;
      if (!isJobData(d)) throw Errors.invalidArg('the async job is malformed: refused');
      if (!this.#auth.verify('job', this.#dataParts(id, job.name, d), sigOf(d.sig), 'async job')) {
        throw Errors.invalidArg('the async job is not signed with the cluster secret: refused');
      }
      if (this.#auth.enabled && (d.submittedMs === undefined || Date.now() - d.submittedMs > this.#ttl * 1000)) {
        this.#auth.reject('job', 'an async job submitted longer ago than --async-result-ttl-secs (a replay?)');
        throw Errors.invalidArg(`the async job was submitted more than ${this.#ttl} s ago (--async-result-ttl-secs): refused`);
      }
      const { request } = decodeRequest(Buffer.from(d.request, 'base64'));
      checkModelName(request.modelName);
      if (request.modelName !== job.name) throw Errors.invalidArg('the async job names another model than its request');
      // A job waits for its answer up to the result TTL after its submit, not the backplane's
      // request timeout, which is for clients waiting on /infer (review: 11 of 20 jobs queued
      // behind a model that took 15 s a batch failed "no worker answered ... within 30 s").
      request.waitMs = (d.submittedMs ?? Date.now()) + this.#ttl * 1000 - Date.now();
      request.signal = run.cancel;
      // Cancelled while its request waited for a worker, and taken again since (the gateway that
      // held it died, or handed it back as it exited): it is not run.
      if (typeof cancelled === 'string' && this.#wasCancelled(id, { cancelled })) throw Errors.cancelled(`async job '${echo(id)}'`);
      await job.updateProgress(10);
      // The gateway began to exit meanwhile: the backplane would refuse the request, failing the job.
      if (this.#exiting) return undefined;
      run.request = request;
      if (token !== undefined) backplane.watchEntry?.(request, (entry) => this.#recordEntry(id, token, entry));
      const response = await backplane.infer(request);
      const reply = encodeReply({ requestKey: id, response });
      if (reply.byteLength > this.maxRequestBytes) {
        throw Errors.invalidArg(`the result of ${reply.byteLength} bytes is over the async job limit of ${this.maxRequestBytes} bytes (--async-max-request-bytes)`);
      }
      const stored = reply.toString('base64');
      // Only into the job's hash as it still is: a job removed meanwhile (deleted by its client,
      // cleaned after a stall) must not come back as a key no one expires (review: a gateway that
      // stalled past its lock wrote up to maxRequestBytes into Redis for good, each time).
      await this.#writeIfJob(this.#worker.client, id, REPLY_FIELD, stored);
      result = { digest: digestOf(stored) };
    } catch (err) {
      // Given up by stop(), or taken back before any worker took it, or refused by the exiting
      // backplane before it was sent (it was still being routed at beginExit, a registry read or
      // its sequence's turn, so the withdraw found nothing): not the job's outcome; its request is
      // kept for the next run (review: such a job failed "Server is stopping" for good).
      if (run.handedBack || (run.withdrawn !== undefined && (await run.withdrawn)) || (this.#exiting && refusedAtExit(err))) return undefined;
      const e = TriodeError.from(err);
      result = { error: { code: e.code, message: e.message } };
    }
    // The request is not needed any more: only the result stays until it expires.
    await job.updateData({ ...job.data, request: '' }).catch(() => undefined);
    return this.#signResult(id, result);
  }

  start(): void {
    void this.#worker.run();
    const every = Math.min(60, Math.max(1, this.#ttl)) * 1000;
    this.#cleaner = setInterval(() => void this.#clean().catch((e: unknown) => this.#logger?.verbose(1, `async jobs: cleaning expired results failed: ${(e as Error).message}`)), every);
    this.#cleaner.unref();
  }

  /**
   * Takes no more jobs (those running go on): the gateway is exiting, and its backplane refuses
   * new requests. Before, it went on taking the waiting jobs while it drained, and failed each with
   * "Server is stopping" (review: 35 of 100 jobs queued for a busy model, and every job submitted
   * during the drain), where another gateway would have run them.
   */
  beginExit(): void {
    this.#exiting = true;
    // BullMQ's close, not its pause: the jobs running go on (close waits for them, and keeps the
    // worker's connection and locks until then), and the blocking wait for the next job is cut at
    // once. pause(true) left that wait in place: the next job queued (one submitted during the
    // drain), or any waiting job once the wait timed out, was taken, then handed back (review: a
    // poll of that job saw it 'active' now and then).
    void this.#worker.close().catch(() => undefined);
    // Those no worker has taken yet go back now, first in line for another gateway, instead of
    // holding the drain up to the exit timeout (review); those a worker has taken drain with the
    // gateway's other requests.
    for (const run of this.#runs) this.#withdraw(run);
  }

  /** Asks the backplane to take a run's request back if no worker has taken it (once). */
  #withdraw(run: Run): void {
    if (run.request === undefined || run.withdrawn !== undefined || !this.#backplane.withdraw) return;
    run.withdrawn = this.#backplane.withdraw(run.request).catch(() => false);
  }

  /** Removes finished jobs older than the result TTL. */
  async #clean(): Promise<number> {
    const grace = this.#ttl * 1000;
    const [done, failed] = await Promise.all([this.#queue.clean(grace, CLEAN_BATCH, 'completed'), this.#queue.clean(grace, CLEAN_BATCH, 'failed')]);
    return done.length + failed.length;
  }

  /**
   * A Redis call from a client's request: anything but a TriodeError means Redis failed it (503).
   * The whole call (a submit is several commands) gets commandTimeoutMs, then 503.
   */
  async #redis<T>(what: string, call: (gaveUp: () => boolean) => Promise<T>): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    // The race does not stop `call`: it goes on after its caller has its answer, and can ask
    // whether it was given up before a step that must not happen then.
    let over = false;
    try {
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer from Redis in ${this.#commandTimeoutMs} ms`)), this.#commandTimeoutMs);
      });
      return await Promise.race([call(() => over), late]);
    } catch (err) {
      over = true;
      if (err instanceof TriodeError) throw err;
      this.#logger?.verbose(1, `async jobs: ${what}: ${(err as Error).message}`);
      throw Errors.unavailable(`async jobs: Redis is unavailable (${what})`);
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Queues a request; returns the job id.
   * @throws NOT_FOUND for an unknown model, UNAVAILABLE for one not ready or when maxJobs jobs are
   * kept, INVALID_ARG for a bad model name, inputs the model does not take, or a request over
   * maxRequestBytes, UNSUPPORTED for a decoupled model.
   */
  async submit(request: InferenceRequest, encoding: OutputEncoding): Promise<string> {
    checkModelName(request.modelName);
    // What /infer would refuse at once is refused before the job is queued, with the same status:
    // an unknown model (404), one not ready (503), inputs the model does not take (400), a
    // decoupled model (501).
    const config = (await this.#backplane.modelConfig(request.modelName, request.modelVersion)) as ModelConfig;
    if (config.model_transaction_policy?.decoupled) {
      throw Errors.unsupported(`model '${request.modelName}' is decoupled (0..N responses per request): use a streaming endpoint (gRPC ModelStreamInfer, HTTP generate_stream)`);
    }
    normalizeRequest({ ...request, inputs: request.inputs.map((t) => ({ ...t })), ...(request.outputs ? { outputs: request.outputs.map((o) => ({ ...o })) } : {}) }, config);
    const encoded = encodeRequest(request, { requestKey: '', replyTo: '', enqueuedMs: Date.now(), deadlineMs: Number.MAX_SAFE_INTEGER });
    if (encoded.byteLength > this.maxRequestBytes) {
      throw Errors.invalidArg(`async request of ${encoded.byteLength} bytes is over the limit of ${this.maxRequestBytes} bytes (--async-max-request-bytes); send it to the infer endpoint instead`);
    }
    const data: JobData = {
      request: encoded.toString('base64'),
      binary: [...encoding.binary.entries()],
      defaultBinary: encoding.defaultBinary,
      submittedMs: Date.now(),
    };
    // The id is chosen before signing: the MAC covers it.
    const jobId = randomUUID();
    const mac = this.#auth.mac('job', this.#dataParts(jobId, request.modelName, data));
    if (mac) data.sig = mac.toString('hex');
    // One submit at a time per gateway, so that concurrent submits cannot all pass the count
    // (across gateways the limit can be passed by at most one job per other gateway). Those
    // waiting for their turn are bounded: each holds its request (review: the line had no end).
    if (this.#submitsWaiting >= Math.min(this.#maxJobs, MAX_SUBMITS_WAITING)) {
      throw Errors.unavailable(`too many async submits at once on this gateway (${this.#submitsWaiting} waiting): try again`);
    }
    this.#submitsWaiting++;
    // Set once the add is sent: a failure after that (Redis answering too late, the connection
    // lost) may come after Redis queued the job, so the client is told which job to look for
    // before it submits again (review: it saw a plain 503, retried, and the job ran twice).
    let sent = false;
    const added = this.#submitting.then(() => this.#redis('submit', async (gaveUp) => {
      let kept = await this.#kept();
      if (kept >= this.#maxJobs && (await this.#clean()) > 0) kept = await this.#kept();
      if (kept >= this.#maxJobs) {
        throw Errors.unavailable(`too many async jobs (${kept}, the limit is ${this.#maxJobs}, --async-max-jobs): try again when results have expired (--async-result-ttl-secs) or were deleted (DELETE of v2/jobs/{id})`);
      }
      // The deadline passed during the count or the clean: the client has its plain 503 (nothing
      // was queued) and may submit again, so this one must not add its job after all (review: it
      // did, and the job ran twice).
      if (gaveUp()) throw Errors.unavailable('async jobs: the submit was given up before its add');
      sent = true;
      const job = await this.#queue.add(request.modelName, data, {
        jobId,
        removeOnComplete: { age: this.#ttl },
        removeOnFail: { age: this.#ttl },
        attempts: 1,
      });
      const id = job.id!;
      const nameSig = this.#auth.mac('job', this.#nameParts(id, request.modelName));
      // Before the id is answered, so no client polls the job without it.
      if (nameSig) await this.#writeIfJob(this.#queue.client, id, NAME_SIG_FIELD, nameSig.toString('hex'));
      return id;
    })).catch((err: unknown) => {
      if (!sent || !(err instanceof TriodeError) || err.code !== 'UNAVAILABLE') throw err;
      throw Errors.unavailable(`async jobs: Redis did not confirm the submit: job '${jobId}' may have been queued all the same; GET v2/jobs/${jobId} tells (404: it was not) before you submit again`);
    });
    this.#submitting = added.catch(() => undefined);
    return added.finally(() => { this.#submitsWaiting--; });
  }

  async #kept(): Promise<number> {
    return Object.values(await this.#counts()).reduce((a, b) => a + b, 0);
  }

  async #counts(): Promise<Record<string, number>> {
    return this.#queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed', 'paused');
  }

  /**
   * Jobs kept in Redis now, by state (waiting, active, completed, failed, ...).
   * @throws UNAVAILABLE when Redis does not answer (within commandTimeoutMs)
   */
  async counts(): Promise<Record<string, number>> {
    return this.#redis('job counts', () => this.#counts());
  }

  #notFound(id: string): TriodeError {
    return new TriodeError('NOT_FOUND', `async job '${echo(id)}' is not found (unknown, or its result expired)`);
  }

  /**
   * The small fields of a job's hash (never its request or its reply).
   * @throws NOT_FOUND for an id `submit` did not issue or a job that is gone
   */
  async #fields(id: string): Promise<JobFields> {
    if (!JOB_ID.test(id)) throw this.#notFound(id);
    const key = this.#queue.toKey(id);
    const [name, timestamp, finishedOn, progress, failedReason, returnvalue, nameSig, cancelled] = await this.#redis('get job', async () =>
      (await this.#queue.client).hmget(key, 'name', 'timestamp', 'finishedOn', 'progress', 'failedReason', 'returnvalue', NAME_SIG_FIELD, CANCELLED_FIELD));
    if (name === null || name === undefined) throw this.#notFound(id);
    const json = (text: string | null | undefined): unknown => {
      if (!text) return undefined;
      try {
        return JSON.parse(text) as unknown;
      } catch {
        return undefined;
      }
    };
    const p = json(progress);
    const f: JobFields = { name, timestamp: Number(timestamp) || 0, progress: typeof p === 'number' ? p : 0, returnvalue: json(returnvalue) };
    if (finishedOn) f.finishedOn = Number(finishedOn) || 0;
    if (failedReason) f.failedReason = failedReason;
    if (nameSig) f.nameSig = nameSig;
    if (cancelled) f.cancelled = cancelled;
    return f;
  }

  /**
   * A job's state, then its fields: in that order, since BullMQ sets the state `completed` and the
   * return value in one step; read the other way round, a job finishing in between looked
   * completed with no result (a poll answered `failed`).
   */
  async #stateAndFields(id: string): Promise<[string, JobFields]> {
    if (!JOB_ID.test(id)) throw this.#notFound(id);
    const state = await this.#redis('job state', () => this.#queue.getJobState(id));
    return [state, await this.#fields(id)];
  }

  /** A finished job's outcome, checked against the cluster secret. */
  #outcome(id: string, returnvalue: unknown): JobResult {
    const r = returnvalue as JobResult | null | undefined;
    if (!r || typeof r !== 'object' || (r.digest !== undefined && typeof r.digest !== 'string') || (r.digest === undefined && r.error === undefined)) {
      return { error: { code: 'INTERNAL', message: `async job '${echo(id)}' has no result` } };
    }
    if (!this.#auth.verify('job-result', this.#resultParts(id, r), sigOf(r.sig), 'async job result')) {
      return { error: { code: 'INTERNAL', message: `the result of async job '${echo(id)}' is not signed with the cluster secret: refused` } };
    }
    return r;
  }

  /** A BullMQ failure reason as a client may see it: only one BullMQ writes (else UNKNOWN_FAILED_REASON). */
  #failedReason(job: JobFields): string {
    return job.failedReason !== undefined && KNOWN_FAILED_REASONS.has(job.failedReason) ? job.failedReason : UNKNOWN_FAILED_REASON;
  }

  async status(id: string): Promise<JobStatus> {
    const [first, job] = await this.#stateAndFields(id);
    let state = first;
    let error: string | undefined;
    // Cancelled while it ran (its request taken back before a worker read it): so from the DELETE
    // on, whatever its gateway has made of it yet.
    if (this.#wasCancelled(id, job)) state = 'cancelled';
    else if (state === 'completed') {
      const out = this.#outcome(id, job.returnvalue);
      if (out.error) {
        state = 'failed';
        error = fromWireError(out.error).message;
      }
    } else if (state === 'failed') {
      error = this.#failedReason(job);
    }
    // With a secret, the model name only if it is the one the job was submitted with (review:
    // it was shown as anyone who writes to Redis set it).
    const named = this.#auth.verify('job', this.#nameParts(id, job.name), sigOf(job.nameSig), 'async job name');
    const s: JobStatus = {
      job_id: id,
      ...(named ? { model_name: job.name } : {}),
      state: (['waiting', 'active', 'completed', 'failed', 'delayed', 'cancelled'].includes(state) ? state : state === 'prioritized' || state === 'waiting-children' ? 'waiting' : 'unknown') as JobStatus['state'],
      progress: state === 'completed' ? 100 : job.progress,
      created_ms: job.timestamp,
    };
    if (job.finishedOn) s.finished_ms = job.finishedOn;
    if (state === 'failed' && error) s.error = error;
    return s;
  }

  /** Waits for a turn to read a result from Redis (RESULT_READS at once, RESULT_WAITERS waiting). */
  async #resultTurn(): Promise<() => void> {
    if (this.#resultReads >= RESULT_READS) {
      if (this.#resultWaiters.length >= RESULT_WAITERS) {
        throw Errors.unavailable(`async jobs: too many result fetches at once (${RESULT_READS} reading, ${RESULT_WAITERS} waiting): try again`);
      }
      await new Promise<void>((r) => this.#resultWaiters.push(r));
    } else {
      this.#resultReads++;
    }
    // The turn passes straight to the next waiter, or is given back.
    return () => {
      const next = this.#resultWaiters.shift();
      if (next) next();
      else this.#resultReads--;
    };
  }

  /**
   * The error a finished job's result answers with: its own, except UNAVAILABLE (503), which is
   * this endpoint's "not finished yet, try again" (review: a job that failed with 503 looked like
   * one still running, and a client polled it until it expired). It becomes final: INTERNAL.
   */
  #finalError(id: string, e: TriodeError): TriodeError {
    return e.code === 'UNAVAILABLE' ? Errors.internal(`async job '${echo(id)}' failed: ${e.message}`) : e;
  }

  /** The result of a completed job, with the output encoding the request asked for. */
  async result(id: string): Promise<{ response: InferenceResponse; encoding: OutputEncoding }> {
    const [state, job] = await this.#stateAndFields(id);
    if (this.#wasCancelled(id, job)) throw Errors.cancelled(`async job '${echo(id)}'`);
    // BullMQ's own failures (a job stalled past its limit: gateways that died running it). Final,
    // so not UNAVAILABLE, which would have the client retry until the job expires.
    // Its reason only if BullMQ wrote it (review: anyone who writes to Redis could set one).
    if (state === 'failed') throw Errors.internal(`async job '${echo(id)}' failed: ${this.#failedReason(job)}`);
    if (state !== 'completed') throw Errors.unavailable(`async job '${echo(id)}' is ${state}: its result is not ready yet`);
    const out = this.#outcome(id, job.returnvalue);
    if (out.error) throw this.#finalError(id, fromWireError(typeof out.error === 'object' ? out.error : {}));
    const done = await this.#resultTurn();
    try {
      const key = this.#queue.toKey(id);
      const [data, stored] = await this.#redis('get job result', async () => (await this.#queue.client).hmget(key, 'data', REPLY_FIELD));
      if (stored === null || stored === undefined) throw this.#notFound(id);
      let d: unknown;
      let reply: ReturnType<typeof decodeReply>;
      try {
        d = JSON.parse(data ?? '') as unknown;
        if (!isJobData(d)) throw Errors.invalidArg('malformed job data');
        if (digestOf(stored) !== out.digest) throw Errors.invalidArg('it is not the reply its job returned');
        reply = decodeReply(Buffer.from(stored, 'base64'));
      } catch (err) {
        throw Errors.internal(`the result of async job '${echo(id)}' is malformed: ${(err as Error).message}`);
      }
      if ('error' in reply) throw this.#finalError(id, fromWireError(reply.error));
      if (!('response' in reply)) throw Errors.internal(`async job '${echo(id)}' has no response`);
      return { response: reply.response, encoding: { binary: new Map(d.binary), defaultBinary: d.defaultBinary } };
    } finally {
      done();
    }
  }

  /**
   * Cancels a job that has not started ('cancelled'): one no gateway has taken is removed; one whose
   * request waits for a worker that has not read it is taken back (by whichever gateway holds it)
   * and kept as cancelled. Or deletes a finished job and its result ('deleted'), which frees its
   * place under maxJobs before its TTL.
   * @throws UNAVAILABLE for a job that is running (a worker has read its request), or that cannot
   * be cancelled now (try again).
   */
  async cancel(id: string): Promise<'cancelled' | 'deleted'> {
    const [first, job] = await this.#stateAndFields(id);
    let state = first;
    if (state === 'active') {
      const left = await this.#cancelActive(id, job);
      if (left === 'cancelled') return left;
      state = left.state;
    }
    const removed = await this.#redis('remove job', () => this.#queue.remove(id));
    if (removed !== 1) {
      // A worker took it between the state and the remove (it is running now), or it expired.
      await this.#fields(id);
      throw this.#runningError(id);
    }
    return state === 'completed' || state === 'failed' ? 'deleted' : 'cancelled';
  }

  /** A DELETE of a job a worker is running (it has read its request). */
  #runningError(id: string): TriodeError {
    return new TriodeError('UNAVAILABLE', `async job '${echo(id)}' is running and can no longer be cancelled`);
  }

  /**
   * A DELETE of an active job: takes its request back where the job's record says it waits
   * ('cancelled'), or answers the state the job has left 'active' for meanwhile (waiting again, or
   * finished), for `cancel` to remove it as such.
   */
  async #cancelActive(id: string, first: JobFields): Promise<'cancelled' | { state: string }> {
    const withdraw = this.#backplane.withdrawEntry?.bind(this.#backplane);
    const key = this.#queue.toKey(id);
    const record = async (): Promise<string | null> =>
      withdraw ? this.#redis('get job request entry', async () => (await this.#queue.client).hget(key, ENTRY_FIELD)) : null;
    const mark = this.#auth.mac('job', this.#cancelledParts(id))?.toString('hex') ?? '1';
    let job = first;
    let text = await record();
    // The record last withdrawn through, and how many more a changed record may be tried.
    let tried: string | undefined;
    let retries = 1;
    // Set once a withdraw found the entry gone or the record changed: till then the job settles.
    let deadline: number | undefined;
    for (;;) {
      if (this.#wasCancelled(id, job)) return 'cancelled';
      if (text !== null && text !== tried && (tried === undefined || retries-- > 0)) {
        const entry = this.#entryOf(id, text);
        if (!withdraw || !entry) throw this.#runningError(id);
        // The gateway that holds it is told in the same step (it fails the job CANCELLED), and the
        // job is marked, only while its hash still records this entry (a gateway that takes the job
        // again clears it): the mark makes the job read as cancelled from now on, and keeps it from
        // running if that gateway died meanwhile and another takes it (review: the mark was a step
        // of its own, after the withdraw, and a gateway could take the job in between).
        const guarded = text;
        const outcome: EntryWithdrawOutcome = await this.#redis('withdraw job request', () =>
          withdraw(entry, { key, field: ENTRY_FIELD, text: guarded, markField: CANCELLED_FIELD, mark }));
        if (outcome === 'withdrawn') return 'cancelled';
        if (outcome === 'read') throw this.#runningError(id);
        // Its gateway's reply stream is not there (nothing was done): it died, and BullMQ gives the
        // job to another gateway once its lock lapses, or its stream expired.
        if (outcome === 'no-holder') throw Errors.unavailable(`async job '${echo(id)}' cannot be cancelled now (the gateway running it has no reply stream: gone, or its stream expired): try again`);
        // 'gone': another DELETE took it back first (the job is marked), or its gateway did as it
        // exited and moves the job back to wait (a few steps), or a worker has answered it (the job
        // finishes). 'moved': another gateway took the job again (its record is cleared, and
        // written anew once Redis queues its request). Either way the job settles in a moment
        // (review: re-read at once, it was still active, and the DELETE answered 503 "can no
        // longer be cancelled" where a retry a moment later removed it).
        tried = text;
        deadline ??= Date.now() + CANCEL_SETTLE_MS;
      } else if (tried === undefined) {
        // No record yet (between a gateway taking it and Redis queuing its request), or none kept
        // (a backplane without withdrawEntry: it runs here).
        throw this.#runningError(id);
      } else if (deadline === undefined || Date.now() >= deadline) {
        throw Errors.unavailable(`async job '${echo(id)}' cannot be cancelled now (its request left the stream it waited in, and the job has neither gone back to wait nor finished yet): try again`);
      } else {
        await new Promise((r) => setTimeout(r, CANCEL_POLL_MS));
      }
      let state: string;
      [state, job] = await this.#stateAndFields(id);
      if (state !== 'active') return { state };
      text = await record();
    }
  }

  /** Stops taking jobs: those running finish first, unless Redis is gone (then it does not wait). */
  async stop(): Promise<void> {
    clearInterval(this.#cleaner);
    // Jobs still waiting for their answer go back to wait for another gateway (their requests
    // are cancelled on the workers). Before, the backplane's stop failed each one for good with
    // "Server is stopping" (review: 20 of 20 jobs queued for a busy model when their gateway
    // exited), or, if BullMQ's connection went first, they stalled (and a second stall fails a job).
    this.#exiting = true;
    for (const run of this.#runs) {
      run.handedBack = true;
      run.cancel.cancel();
    }
    // With nothing running there is nothing to wait for (and a Redis that is gone would make
    // a graceful close wait for it).
    const graceful = this.#running > 0 && (await settleWithin(this.#worker.close(), 5000));
    if (!graceful && !(await settleWithin(this.#worker.close(true), 1000))) {
      // A close begun before (beginExit's graceful one) is what close(true) gives back: nothing was
      // forced, and with Redis gone the worker's connections went on reconnecting for good
      // (review). Cut each one that is not ready, on its own, without waiting for an 'end' that a
      // client between two tries never emits (its disconnect only cancels the next try); a ready
      // one (Redis slow, not gone) lets the close finish what it has in flight (a handback).
      let ready = 0;
      const cut = (client: Promise<RedisClient>): Promise<boolean> => settleWithin(client.then((c) => {
        if (c.status === 'ready') ready++;
        else c.disconnect();
      }), 1000);
      await Promise.all([cut(this.#worker.client), cut(this.#worker.blockingClient())]);
      // That close never gets to stopping BullMQ's timers either: its lock renewal went on for
      // good, and kept the process alive (review).
      if (ready < 2) await settleWithin(this.#worker.stopTimers(), 1000);
    }
    // With Redis gone the queue's close "succeeds" (its QUIT fails at once, offline queue off, and
    // BullMQ takes that as closed) and its client went on reconnecting for good (review): cut it.
    await settleWithin(this.#queue.close(), 1000);
    await settleWithin(this.#queue.client.then((c) => {
      if (c.status !== 'end') c.disconnect();
    }), 1000);
  }
}
