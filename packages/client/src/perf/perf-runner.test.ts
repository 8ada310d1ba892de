/**
 * runPerf against an embedded server over both protocols: closed and open loop, sequence models,
 * the server-side breakdown, and the reports. Short windows: this checks behaviour, not speed.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane } from '@triode/core';
import { manualClock } from '../../../core/src/scheduler/test-clock.js';
import { createHttpApp, startGrpcServer, startHttpServer, type GrpcServerHandle, type HttpServerHandle } from '@triode/frontends';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { GrpcClient } from '../grpc-client.js';
import { HttpClient } from '../http-client.js';
import type { InferenceClient, InferInput } from '../types.js';
import { runPerf } from './perf-runner.js';
import { perfCsv, perfTable } from './perf-report.js';

let server: InferenceServer;
let http: HttpServerHandle;
let grpc: GrpcServerHandle;

beforeAll(async () => {
  server = await InferenceServer.create({ modelRepositories: [makeRepository(['simple', 'simple_sequence', 'simple_string'])], backends: [new OnnxRuntimeBackend()] });
  http = await startHttpServer(createHttpApp(new LocalBackplane(server)), 0, '127.0.0.1');
  grpc = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0' });
}, 60000);

afterAll(async () => {
  await grpc?.close(1000);
  await http?.close();
  await server?.stop(1000);
});

const quick = { measurementIntervalMs: 300, maxTrials: 3, warmupRequests: 5 };

/**
 * A client whose statistics are read with no request in flight (it waits for them, and holds new
 * ones until the answer). The server's count over the windows then differs from the client's only
 * by the requests in flight at the first window's start and at the last one's end: at most the
 * concurrency. Without the hold the two counts race at the window edges, by any amount.
 */
function quietStats(base: HttpClient): HttpClient {
  const inFlight = new Set<Promise<unknown>>();
  let hold: Promise<unknown> | undefined;
  return new Proxy(base, {
    get(target, key) {
      if (key === 'inferPrepared') {
        return async (p: Parameters<HttpClient['inferPrepared']>[0]) => {
          while (hold) await hold;
          const q = target.inferPrepared(p);
          inFlight.add(q);
          try {
            return await q;
          } finally {
            inFlight.delete(q);
          }
        };
      }
      if (key === 'modelStatistics') {
        return (...a: Parameters<HttpClient['modelStatistics']>) => {
          const stats = Promise.allSettled([...inFlight]).then(() => target.modelStatistics(...a));
          const h: Promise<unknown> = stats.then(() => undefined, () => undefined).finally(() => { if (hold === h) hold = undefined; });
          hold = h;
          return stats;
        };
      }
      const v = Reflect.get(target, key) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}

describe('runPerf', () => {
  it('measures concurrency levels over HTTP with the server-side breakdown', async () => {
    const base = new HttpClient(`http://127.0.0.1:${http.port}`);
    const results = await runPerf(quietStats(base), { model: 'simple', concurrency: [1, 2], ...quick });
    base.close();
    expect(results.map((r) => r.concurrency)).toEqual([1, 2]);
    for (const r of results) {
      expect(r.errors).toBe(0);
      expect(r.requests).toBeGreaterThan(10);
      expect(r.throughput).toBeCloseTo(r.requestsPerSec, 5);
      expect(r.latencyUs.p50).toBeGreaterThan(0);
      expect(r.latencyUs.p99).toBeGreaterThanOrEqual(r.latencyUs.p50);
      // The server's count is of the same windows (not the warm-up's, nor one window's).
      expect(Math.abs(r.server!.requests - r.requests)).toBeLessThanOrEqual(r.concurrency!);
      expect(r.server!.computeInferUs).toBeGreaterThan(0);
      // The server's overhead: its request time less queue and compute, per request.
      const s = r.server!;
      expect(s.requestUs).toBeGreaterThan(s.computeInferUs);
      expect(s.overheadUs).toBeCloseTo(s.requestUs - s.queueUs - s.computeInputUs - s.computeInferUs - s.computeOutputUs, 5);
      expect(s.overheadUs).toBeGreaterThanOrEqual(0);
    }
    expect(perfTable(results)).toMatch(/\| +Concurrency \| +Infer\/s \|/);
    const csv = perfCsv(results).trim().split('\n');
    expect(csv[0]).toBe('Concurrency,Inferences/Second,Server Queue,Server Compute Input,Server Compute Infer,Server Compute Output,p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,Errors,Client CPU,Server Overhead');
    expect(perfTable(results)).toMatch(/Server request µs \| Server overhead µs \|/);
    expect(csv).toHaveLength(3);
  });

  it('measures a request rate over gRPC with batch size 4 and zero data', async () => {
    const client = new GrpcClient(`127.0.0.1:${grpc.port}`);
    const [r] = await runPerf(client, { model: 'simple', concurrency: [], requestRates: [200], batchSize: 4, inputData: 'zero', ...quick });
    client.close();
    // Only what holds at any machine speed: the achieved rate depends on how the timers keep up
    // (a loaded machine bursts to catch up: 273/s once). The rate itself is exact in the
    // fake-clock test below.
    expect(r!.requestRate).toBe(200);
    expect(r!.errors).toBe(0);
    expect(r!.requests).toBeGreaterThan(0);
    expect(r!.requestsPerSec).toBeGreaterThan(0);
    expect(r!.throughput).toBeCloseTo(r!.requestsPerSec * 4, 5);
    // The batch-4 requests reached the model: the server counted them.
    expect(r!.server!.requests).toBeGreaterThan(0);
    expect(r!.server!.computeInferUs).toBeGreaterThan(0);
  });

  it('an open loop sends on its schedule: 200 requests/s over 300 ms windows is 60 requests a window (manual clock)', async () => {
    const clock = manualClock();
    const sentAt: number[] = [];
    // A server that answers each request 2 ms (of the manual clock) after it was sent.
    const fake = {
      modelMetadata: async () => ({ name: 'm', versions: ['1'], platform: 'x', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }], outputs: [] }),
      modelConfig: async () => ({ name: 'm', max_batch_size: 0 }),
      modelStatistics: async () => [],
      prepare: (model: string, o: { inputs: readonly InferInput[] }) => new HttpClient('http://127.0.0.1:1').prepare(model, o),
      inferPrepared: () => {
        sentAt.push(clock.nowNs() / 1e6);
        return new Promise<void>((r) => { clock.setTimeout(r, 2); });
      },
    } as unknown as InferenceClient;
    let done = false;
    // No warm-up: the first window then starts with the sender, not at an answer's time, so no
    // answer falls due on a window's end (which window takes it would be a matter of timer order).
    const run = runPerf(fake, { model: 'm', concurrency: [], requestRates: [200], ...quick, warmupRequests: 0 }, undefined, clock).finally(() => { done = true; });
    // Time moves 1 ms at a time, each step after everything the last one started has run.
    for (let steps = 0; !done && steps < 100_000; steps++) {
      await new Promise((r) => setImmediate(r));
      clock.advance(1e6);
    }
    const [r] = await run;
    expect(r!.requestRate).toBe(200);
    expect(r!.errors).toBe(0);
    // Three windows of 300 ms, 60 answers each; every request took 2 ms.
    expect(r!.requests).toBe(180);
    expect(r!.requestsPerSec).toBe(200);
    expect(r!.throughput).toBe(200);
    expect(r!.stable).toBe(true);
    expect(r!.latencyUs.p50).toBe(2000);
    expect(r!.latencyUs.p99).toBe(2000);
    // Requests went out every 5 ms, never in a burst.
    expect(sentAt.slice(1).map((t, i) => t - sentAt[i]!)).toEqual(Array(sentAt.length - 1).fill(5));
  });

  it('an open loop with every request slot in use waits for one to free, without spinning (it queued setImmediate turns back to back)', async () => {
    const base = new HttpClient(`http://127.0.0.1:${http.port}`);
    // Each request takes 150 ms: at 2000/s with 2 slots the sender is nearly always waiting.
    const slow = new Proxy(base, {
      get(target, key) {
        if (key === 'inferPrepared') {
          return async (p: Parameters<HttpClient['inferPrepared']>[0]) => {
            await new Promise((r) => setTimeout(r, 150));
            return target.inferPrepared(p);
          };
        }
        const v = Reflect.get(target, key) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const spy = vi.spyOn(globalThis, 'setImmediate');
    try {
      const [r] = await runPerf(slow, { model: 'simple', concurrency: [], requestRates: [2000], maxOutstanding: 2, measurementIntervalMs: 300, maxTrials: 3, warmupRequests: 0 });
      expect(r!.requestRate).toBe(2000);
      // Before: hundreds of thousands of turns in the ~1 s run.
      expect(spy.mock.calls.length).toBeLessThan(1000);
    } finally {
      spy.mockRestore();
      base.close();
    }
  });

  it('runs sequences on a sequence model, data from a perf_analyzer JSON file, BYTES inputs', async () => {
    const client = new HttpClient(`http://127.0.0.1:${http.port}`);
    const [seq] = await runPerf(client, { model: 'simple_sequence', concurrency: [2], sequenceLength: 5, ...quick });
    expect(seq!.errors).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), 'perf-'));
    writeFileSync(join(dir, 'data.json'), JSON.stringify({ data: [{ INPUT0: Array(16).fill('3'), INPUT1: { content: Array(16).fill('4'), shape: [16] } }] }));
    const [str] = await runPerf(client, { model: 'simple_string', concurrency: [1], inputData: { file: join(dir, 'data.json') }, ...quick });
    expect(str!.errors).toBe(0);
    await expect(runPerf(client, { model: 'nope', concurrency: [1], ...quick })).rejects.toThrow(/unknown model/);
    client.close();
  });
});
