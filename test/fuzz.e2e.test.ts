/**
 * The fuzz suite in CI (issue #14): a fixed seed and a fixed number of attack cases over HTTP and
 * gRPC against a `triode serve` child (explicit model control, every example loaded). Malformed
 * JSON, wrong shapes and types, huge dims, binary-header lies, chunked bodies, slowloris, truncated
 * and corrupt protobuf, resets, GOAWAY, cancel and deadline storms, hostile names and override
 * paths for the repository API. Fails on any crash, hang, 5xx without a cause, leaked internals or
 * file written outside the repository, printing the seed and a replay line per failure.
 * Longer runs: `node bench/fuzz.mjs --minutes N` (engine: test/fuzz/).
 */
import { rmSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { classify } from './fuzz/classify.mjs';
import { formatSummary, makeRepository, runFuzz } from './fuzz/runner.mjs';
import type { FuzzSummary } from './fuzz/runner.mjs';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis } from './helpers/redis.js';

/** The seed and case count CI runs: a count, not a time budget, so every run sends the same bytes. */
const SEED = 14;
const CASES = 3000;
/** Through a gateway, a worker and Redis: fewer (each case crosses Redis twice), the same bytes. */
const CLUSTER_CASES = 1000;

/** What every run must show: the cases reached the server, it answered both ways, and nothing failed. */
function expectClean(s: FuzzSummary, cases: number): string {
  const report = formatSummary(s);
  console.log(report.slice(0, report.indexOf('\n\n', report.indexOf('by status:'))));
  expect(s.cases).toBe(cases);
  // The cases reached the server and it answered both ways (a fuzzer that hits nothing proves nothing).
  const least = Math.round(cases / 60);
  expect(s.byStatus['http 200'] ?? 0, report).toBeGreaterThan(least);
  expect(s.byStatus['http 400'] ?? 0, report).toBeGreaterThan(4 * least);
  expect(s.byStatus['grpc OK'] ?? 0, report).toBeGreaterThan(least);
  expect(s.byStatus['grpc INVALID_ARGUMENT'] ?? 0, report).toBeGreaterThan(least);
  expect(s.failures.map((f) => `case ${f.index} (${f.protocol} ${f.family}) ${f.desc}: ${f.detail.split('\n')[0]} -- replay: ${f.replay}`), report).toEqual([]);
  return report;
}

describe('fuzz suite (seeded, fixed count)', () => {
  it('its checks flag what they must: 5xx without a cause, JS internals, server paths, long echoes, hangs', () => {
    const types = (o: Parameters<typeof classify>[1], c = {}, request = '') => classify(c, o, request, ['/srv/repo']).map((f) => f.type);
    expect(types({ status: 500, body: '{"error":"x"}' })).toEqual(['unexplained-5xx']);
    expect(types({ status: 500, body: '{"error":"failed to load \'m\', failed to poll from model repository"}' })).toEqual(['explained-5xx']);
    expect(types({ status: 503, body: '{"error":"Cannot read properties of undefined (reading \'x\')"}' })).toEqual(['explained-5xx', 'leak']);
    expect(types({ status: 400, body: '{"error":"bad: /srv/repo/m/1/model.onnx"}' })).toEqual(['leak']);
    expect(types({ status: 400, body: JSON.stringify({ error: `unknown '${'q'.repeat(700)}'` }) }, {}, 'q'.repeat(700))).toEqual(['leak']);
    expect(types({ status: 400, body: JSON.stringify({ error: `unknown '${'q'.repeat(256)}...'` }) }, {}, 'q'.repeat(700))).toEqual([]);
    expect(types({ status: 404, body: '{"error":"no model \'/tmp/x\'"}' }, {}, 'GET /v2/models/%2Ftmp%2Fx\n/tmp/x')).toEqual([]);
    expect(types({ grpc: 13, message: 'Error deserializing request' }, { badBytes: true })).toEqual(['explained-5xx']);
    expect(types({ grpc: 13, message: 'oops' })).toEqual(['unexplained-5xx']);
    expect(types({ grpc: 2, message: 'x is not a function' }, { badBytes: true })).toEqual(['unexplained-5xx', 'leak']);
    expect(types({ grpc: 0, streamErrors: ['    at Object.<anonymous> (/x.js:1:2)'], streamResponses: 0 }, { expectResponses: 1 })).toEqual(['leak', 'drop']);
    expect(types({ hang: true })).toEqual(['hang']);
    expect(types({ closed: true })).toEqual(['drop']);
    expect(types({ closed: true }, { mayClose: true })).toEqual([]);
  });

  it(`seed ${SEED}, ${CASES} cases over HTTP and gRPC: no crash, hang, unexplained 5xx, leak or escape; RSS bounded`, async () => {
    const s = await runFuzz({ seed: SEED, protocol: 'all', cases: CASES });
    const report = expectClean(s, CASES);
    // Thousands of rejected requests must not leave memory behind (generous: allocator noise).
    expect(s.rss.endKb - s.rss.startKb, report).toBeLessThan(300 * 1024);
  }, 300_000);

  // The same attacks through `triode gateway` to a `triode worker` over Redis: what a client sends
  // is encoded into a Redis message and decoded by the worker, a path embedded mode never takes.
  // Before: a gRPC double parameter of NaN was written as null, the worker dropped the request as
  // malformed, and the client got nothing until the gateway's 30 s timeout (case 776 of this seed,
  // an Infinity parameter "x" on ppocr_cls, hung).
  it(`through a cluster (gateway, worker, Redis), seed ${SEED}, ${CLUSTER_CASES} cases: no crash, hang, unexplained 5xx, leak or escape`, async () => {
    const redis = await startRedis();
    const repo = makeRepository();
    const children: Child[] = [];
    try {
      const worker = await startTriode(['worker', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', redis.url, '--model-repository', repo,
        '--worker-id', 'fuzz', '--model-control-mode', 'explicit', '--load-model', '*', '--exit-timeout-secs', '0'], /Started worker/, 120_000);
      children.push(worker);
      const [httpPort, grpcPort] = [await freePort(), await freePort()];
      const gateway = await startTriode(['gateway', '--metrics-port', '0', '--metrics-address', '127.0.0.1', '--redis', redis.url,
        '--http-port', String(httpPort), '--http-address', '127.0.0.1', '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1',
        '--http-max-input-size', String(4 * 1024 * 1024), '--exit-timeout-secs', '0'], /Started GRPCInferenceService/, 60_000);
      children.push(gateway);
      // The gateway knows the worker's models once it has read the registry.
      for (const m of ['simple', 'simple_string', 'simple_identity', 'ppocr_cls']) {
        await until(async () => (await fetch(`http://127.0.0.1:${httpPort}/v2/models/${m}/ready`)).ok);
      }
      const s = await runFuzz({ seed: SEED, protocol: 'all', cases: CLUSTER_CASES, httpPort, grpcPort, pid: gateway.proc.pid });
      const report = expectClean(s, CLUSTER_CASES);
      // A worker that died would show as 503s "with a cause" (no live worker): it must still be there.
      expect(worker.proc.exitCode, `${report}\n${worker.output().slice(-4000)}`).toBeNull();
      expect(worker.proc.signalCode).toBeNull();
    } finally {
      for (const c of children.reverse()) await c.stop(5000);
      await redis.stop();
      rmSync(repo, { recursive: true, force: true });
    }
  }, 300_000);
});
