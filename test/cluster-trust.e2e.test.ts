/**
 * The cluster trust model end to end (issue #14, scope 6): a Redis with a password and an ACL
 * user, a worker and a gateway sharing a cluster secret, and an attacker who can write to Redis
 * (the admin password) but does not know the secret. Forged replies, requests and control
 * messages have no effect; the direct reply channel authenticates before it buffers, closes idle
 * unauthenticated connections and those over its cap; async jobs are bounded; the reply stream
 * expires.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ClusterAuth, encodeReply, encodeRequestParts, frame } from '@triode/cluster';
import { EXAMPLES, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const ADMIN_PW = 'admin-pw';
const USER_PW = 'triode-pw';
const SECRET = 'the-cluster-secret';
const MARKER = join(tmpdir(), `triode-pwned-${process.pid}-${Date.now()}`);

// A JavaScript model whose loading would prove code execution on the worker.
const PWN_CONFIG = `name: "pwn"
backend: "javascript"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]
`;
const PWN_MODEL = `import { writeFileSync } from 'node:fs';
export default class Pwn {
  initialize() { writeFileSync(${JSON.stringify(MARKER)}, 'pwned'); }
  execute(requests) { return requests.map(() => ({ outputs: [] })); }
}
`;
// sleepy, slower: a request stays in flight long enough to forge its reply.
const SLOW_CONFIG = readFileSync(join(EXAMPLES, 'sleepy', 'config.pbtxt'), 'utf8')
  .replace('name: "sleepy"', 'name: "slow"').replace('string_value: "20"', 'string_value: "1500"');
const SLOW_MODEL = readFileSync(join(EXAMPLES, 'sleepy', '1', 'model.mjs'), 'utf8');

let redis: RedisHandle;
let attacker: Redis;
let repo: string;
let worker: Child;
let gateway: Child;
let base: string;
let gatewayMetrics: string;
let workerMetrics: string;
let directPort: number;
const extraChildren: Child[] = [];

const simpleBody = (k: number) => JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(k) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
  ],
});

const metricsPort = (c: Child) => `http://127.0.0.1:${/Started Metrics Service at [^\s]*:(\d+)/.exec(c.output())![1]!}/metrics`;

/** triode_cluster_rejected_messages_total{kind} from a metrics endpoint. */
async function rejected(url: string, kind: string): Promise<number> {
  const text = await (await fetch(url)).text();
  return Number(new RegExp(`^triode_cluster_rejected_messages_total\\{kind="${kind}"\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
}

/** VmRSS of a process, in bytes. */
function rss(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
}

function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port }, () => resolve(s));
    s.once('error', reject);
  });
}

const closed = (s: Socket) => new Promise<void>((r) => { if (s.destroyed) r(); else s.once('close', () => r()); });

beforeAll(async () => {
  // The default user has a password; the cluster uses an ACL user of its own.
  redis = await startRedis(undefined, ['--requirepass', ADMIN_PW, '--user', 'triode', 'on', `>${USER_PW}`, '~*', '&*', '+@all']);
  const userUrl = `redis://triode:${USER_PW}@127.0.0.1:${redis.port}`;
  attacker = new Redis(`redis://:${ADMIN_PW}@127.0.0.1:${redis.port}`);
  repo = makeRepository(['simple'], {
    'pwn/config.pbtxt': PWN_CONFIG, 'pwn/1/model.mjs': PWN_MODEL,
    'slow/config.pbtxt': SLOW_CONFIG, 'slow/1/model.mjs': SLOW_MODEL,
  });
  // The worker takes the secret from the environment, the gateway from its flag.
  process.env['TRIODE_CLUSTER_SECRET'] = SECRET;
  try {
    worker = await startTriode(['worker', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', userUrl, '--model-repository', repo, '--worker-id', 'w0',
      '--model-control-mode', 'explicit', '--load-model', 'simple', '--load-model', 'slow'], /Started worker/);
  } finally {
    delete process.env['TRIODE_CLUSTER_SECRET'];
  }
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  gateway = await startTriode(['gateway', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', userUrl, '--http-port', String(port), '--http-address', '127.0.0.1',
    '--allow-grpc=false', '--cluster-secret', SECRET, '--advertise-address', '127.0.0.1', '--reply-auth-timeout-ms', '1500', '--reply-max-connections', '4',
    '--reply-stream-ttl-secs', '30', '--async-max-request-bytes', '4096'], /direct replies at 127\.0\.0\.1:\d+[\s\S]*Started HTTPService/);
  directPort = Number(/direct replies at 127\.0\.0\.1:(\d+)/.exec(gateway.output())![1]);
  gatewayMetrics = metricsPort(gateway);
  workerMetrics = metricsPort(worker);
  await until(async () => (await fetch(`${base}/v2/models/slow/ready`)).status === 200);
});

afterAll(async () => {
  await Promise.all([gateway?.stop(), worker?.stop(), ...extraChildren.map((c) => c.stop())]);
  await attacker?.quit().catch(() => undefined);
  await redis?.stop();
});

describe('cluster trust: Redis with a password and an ACL user, and a cluster secret', () => {
  it('serves inference and async jobs end to end; the Redis password is not logged', async () => {
    const r = await fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: simpleBody(4) });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual(new Array(16).fill(5));
    const submitted = await fetch(`${base}/v2/models/simple/infer_async`, { method: 'POST', body: simpleBody(2) });
    expect(submitted.status).toBe(202);
    const { job_id: id } = (await submitted.json()) as { job_id: string };
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await until(async () => ((await (await fetch(`${base}/v2/jobs/${id}`)).json()) as { state: string }).state === 'completed', 10_000);
    const result = await fetch(`${base}/v2/jobs/${id}/result`);
    expect(result.status).toBe(200);
    expect(((await result.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual(new Array(16).fill(3));
    expect(gateway.output() + worker.output()).not.toContain(USER_PW);
  });

  it('an async job keeps its error code across Redis; one over the size limit answers 400 at once', async () => {
    const bad = await fetch(`${base}/v2/models/simple/infer_async`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) }] }) });
    // Either refused at once or failed as a job: a client error either way, never a 500.
    if (bad.status === 202) {
      const { job_id: id } = (await bad.json()) as { job_id: string };
      await until(async () => ((await (await fetch(`${base}/v2/jobs/${id}`)).json()) as { state: string }).state === 'failed', 10_000);
      expect((await fetch(`${base}/v2/jobs/${id}/result`)).status).toBe(400);
    } else {
      expect(bad.status).toBe(400);
    }
    // Over the limit as queued (a parameter of 5,000 characters): JSON text alone is no measure.
    const big = JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(123456789) })), parameters: { pad: 'x'.repeat(5000) } });
    const over = await fetch(`${base}/v2/models/simple/infer_async`, { method: 'POST', body: big });
    expect(over.status).toBe(400);
    expect(((await over.json()) as { error: string }).error).toMatch(/over the limit of 4096 bytes \(--async-max-request-bytes\)/);
  });

  it('the gateway\'s reply stream has a TTL, renewed while the gateway lives', async () => {
    const keys = await attacker.keys('triode:reply:*');
    expect(keys).toHaveLength(1);
    const ttl = await attacker.pttl(keys[0]!);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(30_000);
  });

  it('a forged control message (unsigned, wrongly signed, or replayed) does not load a model', async () => {
    const before = await rejected(workerMetrics, 'control');
    const msg = JSON.stringify({ id: 'forged-1', ts: Date.now(), action: 'load', model: 'pwn' });
    await attacker.publish('triode:control', msg);
    await attacker.publish('triode:control', new ClusterAuth('not-the-secret').signText('control', msg));
    // A genuine message replayed: applied once, then dropped.
    const genuine = new ClusterAuth(SECRET).signText('control', JSON.stringify({ id: 'genuine-1', ts: Date.now(), action: 'unload', model: 'nope' }));
    await attacker.publish('triode:control', genuine);
    await attacker.publish('triode:control', genuine);
    await until(async () => (await rejected(workerMetrics, 'control')) >= before + 3, 10_000);
    expect(existsSync(MARKER)).toBe(false);
    const index = (await (await fetch(`${base}/v2/repository/index`, { method: 'POST' })).json()) as { name: string; state?: string }[];
    expect(index.find((m) => m.name === 'pwn')?.state).not.toBe('READY');
    // The genuine one is answered once its (asynchronous) unload is done: waited for, not raced.
    await until(async () => (await attacker.llen('triode:control:reply:genuine-1')) >= 1, 10_000);
    expect(await attacker.llen('triode:control:reply:genuine-1')).toBe(1);
    expect(await attacker.llen('triode:control:reply:forged-1')).toBe(0);
  });

  it('a hostile model name in a signed control message never becomes a path; errors keep their code and name no worker', async () => {
    const auth = new ClusterAuth(SECRET);
    await attacker.publish('triode:control', auth.signText('control', JSON.stringify({ id: 'path-1', ts: Date.now(), action: 'load', model: '../../etc' })));
    await until(async () => (await attacker.llen('triode:control:reply:path-1')) === 1, 10_000);
    const answer = JSON.parse(auth.openText('control-reply', (await attacker.lrange('triode:control:reply:path-1', 0, -1))[0]!)!) as { error: { code: string; message: string } };
    expect(answer.error.code).toBe('INVALID_ARG');
    expect(answer.error.message).toMatch(/invalid model name/);
    const unknown = await fetch(`${base}/v2/repository/models/nope/load`, { method: 'POST' });
    // Core's code for a model that is not in the repository (INTERNAL, as in embedded mode), not re-derived.
    expect(unknown.status).toBe(500);
    const text = ((await unknown.json()) as { error: string }).error;
    expect(text).toMatch(/^failed to load 'nope'/);
    expect(text).not.toMatch(/w0|worker/);
    expect(worker.output() + gateway.output()).toMatch(/worker w0 failed to load 'nope'/);
  });

  it('a forged loaded-set entry is not loaded by a worker that joins later', async () => {
    await attacker.hset('triode:desired', 'pwn', JSON.stringify({ model: 'pwn', action: 'load' }));
    process.env['TRIODE_CLUSTER_SECRET'] = SECRET;
    let late: Child;
    try {
      late = await startTriode(['worker', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', `redis://triode:${USER_PW}@127.0.0.1:${redis.port}`,
        '--model-repository', repo, '--worker-id', 'w1', '--model-control-mode', 'explicit'], /Started worker/);
    } finally {
      delete process.env['TRIODE_CLUSTER_SECRET'];
    }
    extraChildren.push(late);
    expect(await rejected(metricsPort(late), 'desired')).toBe(1);
    expect(existsSync(MARKER)).toBe(false);
    await late.stop();
    await attacker.hdel('triode:desired', 'pwn');
  });

  it('forged replies (stream and direct channel) and forged requests have no effect', async () => {
    const pending = fetch(`${base}/v2/models/slow/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'INT32', data: [7] }] }) });
    // The request is in flight once the worker has read it (its entry is pending).
    await until(async () => ((await attacker.xpending('triode:req:slow', 'workers')) as [number])[0] >= 1, 5000);
    const [[, fields]] = (await attacker.xrangeBuffer('triode:req:slow', '-', '+')) as [[Buffer, Buffer[]]];
    const head = fields[1]!;
    const env = (JSON.parse(head.subarray(4, 4 + head.readUInt32LE(0)).toString()) as { env: { replyTo: string; direct: { address: string; token: string } } }).env;
    const forged = (key: number) => encodeReply({ requestKey: String(key), response: { modelName: 'slow', modelVersion: '1', outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 1], data: new Int32Array([666]) }] } });
    const beforeReplies = await rejected(gatewayMetrics, 'reply');
    for (let k = 0; k < 20; k++) {
      await attacker.xadd(env.replyTo, '*', 'r', forged(k));
      await attacker.xadd(env.replyTo, '*', 'r', forged(k), 's', new ClusterAuth('wrong').mac('reply', [env.replyTo, forged(k)])!);
    }
    // The token read from Redis does not open the direct channel.
    const beforeAuth = await rejected(gatewayMetrics, 'direct-auth');
    const s = await open(directPort);
    s.on('error', () => undefined);
    s.write(frame(Buffer.from(env.direct.token)));
    s.write(frame(forged(0)));
    await closed(s);
    // An unsigned request straight to the model's stream is dropped by the worker.
    const beforeRequests = await rejected(workerMetrics, 'request');
    const [h, ...tensors] = encodeRequestParts({ modelName: 'simple', inputs: [] }, { requestKey: '0', replyTo: env.replyTo, enqueuedMs: Date.now(), deadlineMs: Date.now() + 60_000 });
    await attacker.xadd('triode:req:simple', '*', 'r', h!, ...tensors.flatMap((t) => ['t', t]));
    const r = await pending;
    expect(r.status).toBe(200);
    expect(((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([7]);
    await until(async () => (await rejected(gatewayMetrics, 'reply')) >= beforeReplies + 40, 5000);
    expect(await rejected(gatewayMetrics, 'direct-auth')).toBe(beforeAuth + 1);
    await until(async () => (await rejected(workerMetrics, 'request')) === beforeRequests + 1, 5000);
    expect(gateway.output()).toMatch(/cluster: dropped an unsigned reply on the reply stream/);
  });
});

describe('cluster trust: the direct reply channel', () => {
  it('drops a client that sends megabytes without authenticating, after its first frame; the gateway does not grow', async () => {
    const pid = gateway.proc.pid!;
    const before = rss(pid);
    const chunk = Buffer.alloc(64 * 1024, 1);
    // A 1 GiB frame announced, then a short but wrong first frame: both are dropped after the first frame.
    for (const first of [Buffer.from([0x40, 0, 0, 0]), frame(Buffer.alloc(100, 2))]) {
      const s = await open(directPort);
      let sent = 0;
      let gone = false;
      s.on('error', () => undefined);
      s.once('close', () => { gone = true; });
      s.write(first);
      while (!gone && sent < 8 * 1024 * 1024) {
        sent += chunk.byteLength;
        if (!s.write(chunk)) await Promise.race([new Promise((r) => s.once('drain', r)), closed(s)]);
      }
      await closed(s);
      expect(gone).toBe(true);
    }
    expect(rss(pid) - before).toBeLessThan(4 * 1024 * 1024);
  });

  it('closes unauthenticated connections after the auth timeout, and those beyond the cap at once', async () => {
    // The cap is 4 (the worker may hold one): of 5 new connections, at most 4 wait for the timeout.
    const opened: { s: Socket; at: number; closedAfter?: number }[] = [];
    for (let i = 0; i < 5; i++) {
      const s = await open(directPort);
      s.on('error', () => undefined);
      const entry: { s: Socket; at: number; closedAfter?: number } = { s, at: Date.now() };
      s.once('close', () => { entry.closedAfter = Date.now() - entry.at; });
      opened.push(entry);
    }
    await Promise.all(opened.map((o) => closed(o.s)));
    const early = opened.filter((o) => o.closedAfter! < 1000);
    const timedOut = opened.filter((o) => o.closedAfter! >= 1000);
    expect(early.length).toBeGreaterThanOrEqual(1);
    expect(timedOut.length).toBeGreaterThanOrEqual(1);
    expect(timedOut.length).toBeLessThanOrEqual(4);
    for (const o of timedOut) expect(o.closedAfter!).toBeLessThan(10_000);
  });

  it('attack: a client that drips its auth frame a byte at a time is closed at the auth timeout, not kept while it drips', async () => {
    // The timeout was idle-only: a byte every second kept the connection (and one of the few slots) for minutes.
    const s = await open(directPort);
    s.on('error', () => undefined);
    const at = Date.now();
    let closedAfter: number | undefined;
    s.once('close', () => { closedAfter = Date.now() - at; });
    s.write(Buffer.from([0, 0, 0, 100]));
    // Drips for up to 45 s (90 bytes, the frame never completes): kept while it drips, it would
    // close after 45 s, far past the bound below.
    for (let i = 0; i < 90 && closedAfter === undefined; i++) {
      await new Promise((r) => setTimeout(r, 500));
      if (!s.destroyed) s.write(Buffer.from([1]));
    }
    await Promise.race([closed(s), new Promise((r) => setTimeout(r, 2000))]);
    expect(closedAfter).toBeDefined();
    // --reply-auth-timeout-ms 1500: closed then, though it sent a byte every 500 ms.
    expect(closedAfter!).toBeLessThan(10_000);
  }, 90_000);
});

describe('cluster trust: TLS', () => {
  it('rediss:// end to end (gateway, worker and its read connection, async jobs), and the direct reply channel over TLS', async () => {
    // A self-signed certificate for 127.0.0.1: Redis's, the reply channel's, and the CA that trusts both.
    const dir = mkdtempSync(join(tmpdir(), 'triode-tls-'));
    const cert = join(dir, 'cert.pem');
    const key = join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const port = await freePort();
    const tlsRedis = await startRedis(undefined, ['--port', '0', '--tls-port', String(port), '--tls-cert-file', cert, '--tls-key-file', key, '--tls-ca-cert-file', cert,
      '--tls-auth-clients', 'no', '--requirepass', ADMIN_PW]);
    const url = `rediss://:${ADMIN_PW}@127.0.0.1:${port}`;
    const children: Child[] = [];
    process.env['NODE_EXTRA_CA_CERTS'] = cert;
    try {
      children.push(await startTriode(['worker', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', url, '--model-repository', makeRepository(['simple']),
        '--cluster-secret', SECRET, '--reply-tls-ca', cert], /Started worker/));
      const http = await freePort();
      children.push(await startTriode(['gateway', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', url, '--http-port', String(http), '--http-address', '127.0.0.1',
        '--allow-grpc=false', '--cluster-secret', SECRET, '--advertise-address', '127.0.0.1', '--reply-tls-cert', cert, '--reply-tls-key', key],
      /direct replies at tls:\/\/127\.0\.0\.1:\d+[\s\S]*Started HTTPService/));
      const gw = `http://127.0.0.1:${http}`;
      await until(async () => (await fetch(`${gw}/v2/models/simple/ready`)).status === 200);
      const admin = new Redis(url, { tls: { ca: readFileSync(cert) } });
      try {
        const xadds = async () => Number(/cmdstat_xadd:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
        // The first reply makes the worker open its TLS channel (a handshake, done some time
        // later): wait until a reply came over it (1 XADD, the request's; 2 through Redis), then
        // count Redis writes afresh.
        await until(async () => {
          await admin.config('RESETSTAT');
          const r = await fetch(`${gw}/v2/models/simple/infer`, { method: 'POST', body: simpleBody(0) });
          await r.arrayBuffer();
          return r.status === 200 && (await xadds()) === 1;
        });
        await admin.config('RESETSTAT');
        for (let k = 0; k < 10; k++) {
          const r = await fetch(`${gw}/v2/models/simple/infer`, { method: 'POST', body: simpleBody(k) });
          expect(((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data[0]).toBe(k + 1);
        }
        // 10 requests added to the model's stream; their replies came over the TLS channel, not Redis.
        expect(await xadds()).toBe(10);
        const submitted = (await (await fetch(`${gw}/v2/models/simple/infer_async`, { method: 'POST', body: simpleBody(5) })).json()) as { job_id: string };
        await until(async () => ((await (await fetch(`${gw}/v2/jobs/${submitted.job_id}`)).json()) as { state: string }).state === 'completed', 10_000);
        expect((await fetch(`${gw}/v2/jobs/${submitted.job_id}/result`)).status).toBe(200);
      } finally {
        await admin.quit();
      }
    } finally {
      delete process.env['NODE_EXTRA_CA_CERTS'];
      await Promise.all(children.map((c) => c.stop()));
      await tlsRedis.stop();
    }
  });
});
