/**
 * @module Every Redis connection of the cluster starts here: one parser for redis:// and
 * rediss:// URLs (host, port, TLS, user, password, database), one set of connection options per
 * role, and an `error` listener on every connection (an unhandled `error` event would end the
 * process). The gateway's backplane, the worker's consumer and the async jobs (BullMQ) all open
 * their ioredis clients with `openRedis`; the worker's blocking stream reader
 * (`resp-connection.ts`) reads the same endpoint from `parseRedisUrl`.
 */
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '@triode/core';

/** Where a Redis URL points. */
export interface RedisEndpoint {
  host: string;
  port: number;
  tls: boolean;
  username?: string;
  password?: string;
  db?: number;
}

/** host, port, TLS, credentials and database of a redis:// or rediss:// URL. */
export function parseRedisUrl(url: string): RedisEndpoint {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new Error('not a Redis URL (expected redis://[user:password@]host[:port][/db] or rediss://...)');
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') throw new Error(`not a Redis URL: ${u.protocol}// (expected redis:// or rediss://)`);
  const db = u.pathname.length > 1 ? Number(u.pathname.slice(1)) : undefined;
  return {
    host: u.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1',
    port: u.port ? Number(u.port) : 6379,
    tls: u.protocol === 'rediss:',
    ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
    ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
    ...(db !== undefined && Number.isInteger(db) && db > 0 ? { db } : {}),
  };
}

/** ioredis's options for an endpoint (a host name is also the TLS server name). */
export function endpointOptions(e: RedisEndpoint): RedisOptions {
  const isAddress = /^[\d.:]+$/.test(e.host);
  return {
    host: e.host,
    port: e.port,
    ...(e.username !== undefined ? { username: e.username } : {}),
    ...(e.password !== undefined ? { password: e.password } : {}),
    ...(e.db !== undefined ? { db: e.db } : {}),
    ...(e.tls ? { tls: isAddress ? {} : { servername: e.host } } : {}),
  };
}

/**
 * What a connection is for, and so how it behaves while Redis is away:
 * - `gateway`: fails a command at once while Redis is away, or after GATEWAY_COMMAND_TIMEOUT_MS
 *   unanswered (a client gets 503 rather than a request piling up); a command sent before the
 *   connection dropped is never sent again on the next one (ioredis's default): Redis may have run
 *   it already, and a request's XADD sent twice ran the request twice (review). It fails at its
 *   timeout instead;
 * - `gateway-blocking`: the gateway's reply reader, which waits through outages;
 * - `worker`: retries its commands until Redis is back (acks and replies must not be lost);
 * - `subscriber`: the worker's control-channel subscription;
 * - `jobs`: BullMQ's connections (BullMQ requires `maxRetriesPerRequest: null`); the async jobs'
 *   Queue, which issues no blocking commands, adds GATEWAY_COMMAND_TIMEOUT_MS itself (the Worker's
 *   blocking pops must not get one).
 */
export type RedisRole = 'gateway' | 'gateway-blocking' | 'worker' | 'subscriber' | 'jobs';

/**
 * How long a gateway's command may wait for Redis's answer. Without it, a Redis that accepts but
 * does not answer (CLIENT PAUSE, a long script, a half-open connection) held every request, and
 * its body, until the connection failed (minutes); now they get 503. Longer than the blocking
 * pops of load/unload answers (1 s each) on the connections duplicated from it.
 */
export const GATEWAY_COMMAND_TIMEOUT_MS = 10_000;

const ROLE_OPTIONS: Record<RedisRole, RedisOptions> = {
  gateway: { enableOfflineQueue: false, maxRetriesPerRequest: 1, enableAutoPipelining: true, retryStrategy: () => 200, commandTimeout: GATEWAY_COMMAND_TIMEOUT_MS, autoResendUnfulfilledCommands: false },
  'gateway-blocking': { enableOfflineQueue: false, maxRetriesPerRequest: null, enableAutoPipelining: true, retryStrategy: () => 200 },
  // ioredis's auto-pipelining mangles the Buffer variants of some commands (it dropped
  // XAUTOCLAIM's name and sent the key as the command): keep the claims out of the pipeline.
  worker: { maxRetriesPerRequest: null, enableAutoPipelining: true, autoPipeliningIgnoredCommands: ['XAUTOCLAIM', 'XCLAIM'] },
  subscriber: { maxRetriesPerRequest: null },
  jobs: { maxRetriesPerRequest: null },
};

/** The options a connection of `role` to `url` is opened with (BullMQ takes these as its `connection`). */
export function redisOptions(url: string, role: RedisRole): RedisOptions {
  return { ...endpointOptions(parseRedisUrl(url)), ...ROLE_OPTIONS[role] };
}

/**
 * A new ioredis client for `role` (`overrides` on top of its options), not yet connected (call
 * `connect()`), whose `error` events go to the log (verbose level 1: reconnects are routine)
 * instead of ending the process.
 */
export function openRedis(url: string, role: RedisRole, logger?: Logger, overrides: RedisOptions = {}): Redis {
  const client = new Redis({ ...redisOptions(url, role), ...overrides, lazyConnect: true });
  client.on('error', (e: Error) => logger?.verbose(1, `redis (${role}): ${e.message}`));
  return client;
}
