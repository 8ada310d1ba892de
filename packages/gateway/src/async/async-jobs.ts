/**
 * @module Async inference (a Triode extension): submit a request and get a job id at once, poll
 * its state, fetch the result later, cancel it. Jobs are BullMQ jobs in the cluster's Redis; any
 * gateway can run them (through its backplane) and answer for them.
 */
import { Queue, Worker, type Job } from 'bullmq';
import {
  Errors, TriodeError, decodeReply, decodeRequest, encodeReply, encodeRequest, settleWithin,
  type Backplane, type ErrorCode, type InferenceRequest, type InferenceResponse, type Logger,
} from '@triode/core';
import type { OutputEncoding } from '../http/infer-codec.js';

/** Options of AsyncJobs. */
export interface AsyncJobsOptions {
  redis: string;
  /** Key prefix of the cluster. @default "triode" */
  prefix?: string;
  /** How long finished jobs (and their results or failure reasons) are kept (s). @default 3600 */
  resultTtlSecs?: number;
  /** Jobs this gateway runs at once. @default 64 */
  concurrency?: number;
  logger?: Logger;
}

/** A job as `GET /v2/jobs/{id}` reports it. */
export interface JobStatus {
  job_id: string;
  model_name: string;
  state: 'waiting' | 'active' | 'completed' | 'failed' | 'delayed' | 'unknown';
  progress: number;
  created_ms: number;
  finished_ms?: number;
  error?: string;
}

interface JobData {
  request: string; // base64 of the encoded request
  binary: [string, boolean][];
  defaultBinary: boolean;
}

function connection(url: string): { host: string; port: number; username?: string; password?: string; db?: number; maxRetriesPerRequest: null } {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 6379),
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(u.pathname.length > 1 ? { db: Number(u.pathname.slice(1)) } : {}),
    maxRetriesPerRequest: null,
  };
}

/** Async jobs over BullMQ. */
export class AsyncJobs {
  readonly #queue: Queue;
  readonly #worker: Worker;
  readonly #ttl: number;
  /** Jobs this gateway is running now. */
  #running = 0;

  constructor(backplane: Backplane, options: AsyncJobsOptions) {
    const conn = connection(options.redis);
    const name = `${options.prefix ?? 'triode'}-async`;
    this.#ttl = options.resultTtlSecs ?? 3600;
    this.#queue = new Queue(name, { connection: conn });
    this.#worker = new Worker(name, async (job: Job<JobData>) => {
      this.#running++;
      try {
        const { request } = decodeRequest(Buffer.from(job.data.request, 'base64'));
        await job.updateProgress(10);
        const response = await backplane.infer(request);
        return encodeReply({ requestKey: job.id ?? '', response }).toString('base64');
      } catch (err) {
        const e = TriodeError.from(err);
        // The code travels in the message so a later GET can answer with the right status.
        throw new Error(`${e.code}: ${e.message}`);
      } finally {
        this.#running--;
      }
    }, { connection: conn, concurrency: options.concurrency ?? 64, autorun: false });
    this.#worker.on('error', (e) => options.logger?.warning(`async jobs: ${e.message}`));
  }

  start(): void {
    void this.#worker.run();
  }

  /** Queues a request; returns the job id. */
  async submit(request: InferenceRequest, encoding: OutputEncoding): Promise<string> {
    const data: JobData = {
      request: encodeRequest(request, { requestKey: '', replyTo: '', enqueuedMs: Date.now(), deadlineMs: Number.MAX_SAFE_INTEGER }).toString('base64'),
      binary: [...encoding.binary.entries()],
      defaultBinary: encoding.defaultBinary,
    };
    const job = await this.#queue.add(request.modelName, data, {
      removeOnComplete: { age: this.#ttl },
      removeOnFail: { age: this.#ttl },
      attempts: 1,
    });
    return job.id!;
  }

  async #job(id: string): Promise<Job<JobData>> {
    const job = (await this.#queue.getJob(id)) as Job<JobData> | undefined;
    if (!job) throw new TriodeError('NOT_FOUND', `async job '${id}' is not found (unknown, or its result expired)`);
    return job;
  }

  async status(id: string): Promise<JobStatus> {
    const job = await this.#job(id);
    const state = await job.getState();
    const s: JobStatus = {
      job_id: id,
      model_name: job.name,
      state: (['waiting', 'active', 'completed', 'failed', 'delayed'].includes(state) ? state : state === 'prioritized' || state === 'waiting-children' ? 'waiting' : 'unknown') as JobStatus['state'],
      progress: state === 'completed' ? 100 : typeof job.progress === 'number' ? job.progress : 0,
      created_ms: job.timestamp,
    };
    if (job.finishedOn) s.finished_ms = job.finishedOn;
    if (state === 'failed' && job.failedReason) s.error = job.failedReason.replace(/^[A-Z_]+: /, '');
    return s;
  }

  /** The result of a completed job, with the output encoding the request asked for. */
  async result(id: string): Promise<{ response: InferenceResponse; encoding: OutputEncoding }> {
    const job = await this.#job(id);
    const state = await job.getState();
    if (state === 'failed') {
      const m = /^([A-Z_]+): ([\s\S]*)$/.exec(job.failedReason ?? '');
      throw new TriodeError((m?.[1] as ErrorCode | undefined) ?? 'INTERNAL', m?.[2] ?? job.failedReason ?? 'the job failed');
    }
    if (state !== 'completed') throw Errors.unavailable(`async job '${id}' is ${state}: its result is not ready yet`);
    const reply = decodeReply(Buffer.from(job.returnvalue as string, 'base64'));
    if ('error' in reply) throw new TriodeError(reply.error.code as ErrorCode, reply.error.message);
    if (!('response' in reply)) throw Errors.internal(`async job '${id}' has no response`);
    return { response: reply.response, encoding: { binary: new Map(job.data.binary), defaultBinary: job.data.defaultBinary } };
  }

  /** Cancels a job that has not started. */
  async cancel(id: string): Promise<void> {
    const job = await this.#job(id);
    const state = await job.getState();
    if (state === 'active') throw new TriodeError('UNAVAILABLE', `async job '${id}' is running and can no longer be cancelled`);
    if (state === 'completed' || state === 'failed') throw new TriodeError('INVALID_ARG', `async job '${id}' has already finished (${state})`);
    await job.remove();
  }

  /** Stops taking jobs: those running finish first, unless Redis is gone (then it does not wait). */
  async stop(): Promise<void> {
    // With nothing running there is nothing to wait for (and a Redis that is gone would make
    // a graceful close wait for it).
    const graceful = this.#running > 0 && (await settleWithin(this.#worker.close(), 5000));
    if (!graceful) await settleWithin(this.#worker.close(true), 1000);
    if (!(await settleWithin(this.#queue.close(), 1000))) await settleWithin(this.#queue.disconnect(), 1000);
  }
}
