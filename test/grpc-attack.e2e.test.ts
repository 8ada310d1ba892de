/**
 * Hostile gRPC clients (issue #14): 1,000 in-flight ModelInfer calls reset (RST_STREAM CANCEL and
 * INTERNAL_ERROR), GOAWAY(PROTOCOL_ERROR)-ed, destroyed (session and socket) or left to their
 * deadlines, and 10,000 rapid resets on one connection (CVE-2023-44487), against `triode serve`
 * and against a cluster gateway (redis-server + `triode worker` + `triode gateway`). Each must
 * leave the process alive and answering a normal call within 1 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';
import { ATTACK_MODES, abandonCalls, inferOnce, rapidReset } from './helpers/grpc-attack.js';

/** ENHANCE_YOUR_CALM, the GOAWAY code of a connection closed for abuse. */
const ENHANCE_YOUR_CALM = 11;

let redis: RedisHandle;
const children: Child[] = [];
const targets: { name: string; child: Child; port: number }[] = [];

beforeAll(async () => {
  const repo = makeRepository(['simple']);
  const servePort = await freePort();
  const serve = await startTriode(['serve', '--model-repository', repo, '--http-port', '0', '--http-address', '127.0.0.1', '--allow-metrics=false',
    '--grpc-port', String(servePort), '--grpc-address', '127.0.0.1'], /Started GRPCInferenceService at 127.0.0.1:\d+/);
  children.push(serve);
  targets.push({ name: 'serve', child: serve, port: servePort });
  redis = await startRedis();
  children.push(await startTriode(['worker', '--metrics-port', '0', '--redis', redis.url, '--model-repository', repo, '--worker-id', 'w0'], /Started worker/));
  const gatewayPort = await freePort();
  const gateway = await startTriode(['gateway', '--metrics-port', '0', '--redis', redis.url, '--http-port', '0', '--http-address', '127.0.0.1',
    '--grpc-port', String(gatewayPort), '--grpc-address', '127.0.0.1', '--request-timeout-secs', '10'], /Started GRPCInferenceService at 127.0.0.1:\d+/);
  children.push(gateway);
  targets.push({ name: 'gateway', child: gateway, port: gatewayPort });
  await until(async () => (await inferOnce(gatewayPort, 5000)).status === 0);
}, 120_000);

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  await redis?.stop();
});

/** The process is still running and a normal ModelInfer call is answered, right, within 1 s. */
async function expectAnswering(t: { child: Child; port: number }): Promise<void> {
  expect(t.child.proc.exitCode, t.child.output()).toBeNull();
  const r = await inferOnce(t.port, 1000);
  expect(r.status, r.message).toBe(0);
  expect(r.body.byteLength).toBeGreaterThan(0);
  expect(t.child.proc.exitCode, t.child.output()).toBeNull();
}

describe.each(['serve', 'gateway'])('gRPC attacks on %s', (name) => {
  const target = () => targets.find((t) => t.name === name)!;

  it.each(ATTACK_MODES)('1,000 in-flight ModelInfer calls abandoned by %s: the server stays up and answers', async (mode) => {
    const t = target();
    await abandonCalls(t.port, mode, 1000, 4);
    await expectAnswering(t);
  }, 60_000);

  it('10,000 rapid resets on one connection: GOAWAY ENHANCE_YOUR_CALM, the server stays up and answers', async () => {
    const t = target();
    const r = await rapidReset(t.port, 10_000);
    expect(r.goawayCode).toBe(ENHANCE_YOUR_CALM);
    await expectAnswering(t);
  }, 60_000);
});
