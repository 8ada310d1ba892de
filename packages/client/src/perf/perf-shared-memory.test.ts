/**
 * `runPerf` with `sharedMemory: 'system'` against an embedded server that allows client shared
 * memory (regions in a directory of the test's own, a stand-in for /dev/shm): the requests name
 * windows and carry no tensor data, the server lists the run's regions while it measures and the
 * outputs it writes are there, and at the end (also after a refused registration, a failure
 * half-way through the set-up, and an abort) nothing is registered and no object is left.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane } from '@triode/core';
import { SystemSharedMemory, createHttpApp, startGrpcServer, startHttpServer, type GrpcServerHandle, type HttpServerHandle } from '@triode/frontends';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { GrpcClient } from '../grpc-client.js';
import { HttpClient } from '../http-client.js';
import type { InferenceClient, InferOptions, SystemSharedMemoryRegionStatus } from '../types.js';
import { runPerf, type PerfOptions } from './perf-runner.js';

let dir: string;
let regions: SystemSharedMemory;
let server: InferenceServer;
let http: HttpServerHandle;
let grpc: GrpcServerHandle;
let httpOff: HttpServerHandle;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'triode-perf-shm-'));
  regions = new SystemSharedMemory({ directory: dir });
  server = await InferenceServer.create({ modelRepositories: [makeRepository(['simple', 'simple_sequence', 'simple_string'])], backends: [new OnnxRuntimeBackend()] });
  const backplane = new LocalBackplane(server);
  http = await startHttpServer(createHttpApp(backplane, { sharedMemory: regions }), 0, '127.0.0.1');
  grpc = await startGrpcServer(backplane, { address: '127.0.0.1:0', sharedMemory: regions });
  httpOff = await startHttpServer(createHttpApp(backplane), 0, '127.0.0.1');
}, 60000);

afterAll(async () => {
  await Promise.all([grpc?.close(1000), http?.close(1000), httpOff?.close(1000)]);
  await server?.stop(1000);
  regions?.close();
  rmSync(dir, { recursive: true, force: true });
});

const quick = { measurementIntervalMs: 250, maxTrials: 3, warmupRequests: 5 };
const clientOf = (kind: string): InferenceClient => (kind === 'grpc' ? new GrpcClient(`127.0.0.1:${grpc.port}`) : new HttpClient(`http://127.0.0.1:${http.port}`));

/** `c`, recording the options of every request it prepares or sends, and failing the calls `fail` names. */
function recording(c: InferenceClient, sent: Omit<InferOptions, 'signal'>[], fail: (method: string, calls: number) => boolean = () => false): InferenceClient {
  const calls = new Map<string, number>();
  return new Proxy(c, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      const f = v as (...args: unknown[]) => unknown;
      return (...args: unknown[]) => {
        const name = String(prop);
        const n = (calls.get(name) ?? 0) + 1;
        calls.set(name, n);
        if (fail(name, n)) return Promise.reject(new Error(`${name} failed on purpose`));
        if (name === 'prepare' || name === 'infer') sent.push(args[1] as InferOptions);
        return f.apply(target, args);
      };
    },
  });
}

const ours = (s: SystemSharedMemoryRegionStatus[]) => s.filter((r) => r.name.startsWith('triode_perf_'));

describe.each(['http', 'grpc'])('runPerf --shared-memory system over %s', (kind) => {
  it('sends windows of registered regions, no tensor data; the outputs land there; all released after', async () => {
    const base = clientOf(kind);
    const sent: Omit<InferOptions, 'signal'>[] = [];
    const client = recording(base, sent);
    const during: Promise<SystemSharedMemoryRegionStatus[]>[] = [];
    const files: string[][] = [];
    const sums: boolean[] = [];
    try {
      const results = await runPerf(client, { model: 'simple', concurrency: [2], sharedMemory: 'system', sharedMemoryDirectory: dir, ...quick }, (line) => {
        if (!line.includes('window')) return;
        during.push(base.systemSharedMemoryStatus());
        const names = readdirSync(dir).filter((f) => f.startsWith('triode_perf_'));
        files.push(names);
        // simple: OUTPUT0 = INPUT0 + INPUT1; the inputs sit at 0 and 64 of the input object, the
        // outputs at 0 and 64 of the output object (every request writes the same sums).
        const input = readFileSync(join(dir, names.find((f) => f.endsWith('_input0'))!));
        const output = readFileSync(join(dir, names.find((f) => f.endsWith('_output'))!));
        const at = (b: Buffer, offset: number) => Array.from({ length: 16 }, (_, i) => b.readInt32LE(offset + 4 * i));
        const in0 = at(input, 0);
        const in1 = at(input, 64);
        sums.push(at(output, 0).every((x, i) => x === in0[i]! + in1[i]!) && at(output, 64).every((x, i) => x === in0[i]! - in1[i]!) && in0.some((x) => x !== 0));
      });
      expect(results[0]!.errors).toBe(0);
      expect(results[0]!.requests).toBeGreaterThan(5);
      expect(results[0]!.server!.requests).toBeGreaterThanOrEqual(results[0]!.requests);

      // While measuring, the server had the run's two regions: one input set, one for the outputs.
      const seen = await Promise.all(during);
      expect(seen.length).toBeGreaterThanOrEqual(3);
      for (const s of seen) {
        expect(ours(s).map((r) => r.name.replace(/^triode_perf_\d+_[0-9a-f]+_/, '')).sort()).toEqual(['input0', 'output']);
        expect(ours(s).find((r) => r.name.endsWith('_input0'))!.byteSize).toBe(128);
      }
      expect(files.every((f) => f.length === 2)).toBe(true);
      expect(sums.every(Boolean)).toBe(true);

      // Every request the runner made: inputs as windows without data, outputs into windows.
      expect(sent.length).toBeGreaterThan(0);
      for (const o of sent) {
        for (const i of o.inputs) {
          expect(i.data).toBeUndefined();
          expect(i.sharedMemory).toMatchObject({ byteSize: 64 });
        }
        expect(o.outputs?.map((x) => [x.name, x.sharedMemory?.byteSize, x.sharedMemory?.offset])).toEqual([['OUTPUT0', 64, 0], ['OUTPUT1', 64, 64]]);
      }

      expect(ours(await base.systemSharedMemoryStatus())).toEqual([]);
      expect(readdirSync(dir).filter((f) => f.startsWith('triode_perf_'))).toEqual([]);
    } finally {
      base.close();
    }
  });
});

describe('runPerf --shared-memory system', () => {
  it('sequence models, and BYTES outputs in --output-shared-memory-size windows (too small: the requests fail, nothing is left)', async () => {
    const client = clientOf('grpc');
    try {
      const [seq] = await runPerf(client, { model: 'simple_sequence', concurrency: [2], sequenceLength: 5, sharedMemory: 'system', sharedMemoryDirectory: dir, ...quick });
      expect(seq!.errors).toBe(0);
      expect(seq!.requests).toBeGreaterThan(5);

      const sent: Omit<InferOptions, 'signal'>[] = [];
      const [str] = await runPerf(recording(client, sent), { model: 'simple_string', concurrency: [1], sharedMemory: 'system', sharedMemoryDirectory: dir, ...quick });
      expect(str!.errors).toBe(0);
      expect(sent[0]!.outputs!.map((o) => o.sharedMemory!.byteSize)).toEqual([102400, 102400]);

      const [small] = await runPerf(client, { model: 'simple_string', concurrency: [1], sharedMemory: 'system', sharedMemoryDirectory: dir, outputSharedMemorySize: 8, ...quick, maxTrials: 3 });
      expect(small!.requests).toBe(0);
      expect(small!.errors).toBeGreaterThan(0);
      expect(small!.firstError).toMatch(/shared memory/i);

      expect(ours(await client.systemSharedMemoryStatus())).toEqual([]);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      client.close();
    }
  });

  it('a server without client shared memory: its refusal ends the run before any load, the object made for it removed', async () => {
    const client = new HttpClient(`http://127.0.0.1:${httpOff.port}`);
    const sent: Omit<InferOptions, 'signal'>[] = [];
    try {
      await expect(runPerf(recording(client, sent), { model: 'simple', concurrency: [1], sharedMemory: 'system', sharedMemoryDirectory: dir, ...quick }))
        .rejects.toThrow('client shared memory is disabled');
      expect(sent).toEqual([]);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      client.close();
    }
  });

  it('a registration failing half-way through the set-up: what was registered is unregistered, both objects removed', async () => {
    const base = clientOf('http');
    const unregistered: string[] = [];
    const client = recording(base, [], (method, n) => {
      if (method === 'unregisterSystemSharedMemory') unregistered.push(String(n));
      return method === 'registerSystemSharedMemory' && n === 2;
    });
    try {
      await expect(runPerf(client, { model: 'simple', concurrency: [1], sharedMemory: 'system', sharedMemoryDirectory: dir, ...quick })).rejects.toThrow('registerSystemSharedMemory failed on purpose');
      expect(unregistered).toEqual(['1']);
      expect(ours(await base.systemSharedMemoryStatus())).toEqual([]);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      base.close();
    }
  });

  it('an abort mid-run (Ctrl-C in the CLI) rejects with its reason once the regions are released', async () => {
    const client = clientOf('grpc');
    const stop = new AbortController();
    let registered: SystemSharedMemoryRegionStatus[] = [];
    const windows: string[] = [];
    try {
      const run = runPerf(client, { model: 'simple', concurrency: [2], sharedMemory: 'system', sharedMemoryDirectory: dir, ...quick, maxTrials: 10, stabilityPercentage: 1, measurementIntervalMs: 5000, signal: stop.signal }, (line) => {
        windows.push(line);
        if (line.includes('regions registered')) {
          void client.systemSharedMemoryStatus().then((s) => {
            registered = ours(s);
            stop.abort(new Error('interrupted (SIGINT)'));
          });
        }
      });
      const t0 = Date.now();
      await expect(run).rejects.toThrow('interrupted (SIGINT)');
      // Ended at once, mid-window (not at the end of a 5 s window).
      expect(Date.now() - t0).toBeLessThan(3000);
      expect(windows.some((l) => l.includes('window 1'))).toBe(false);
      expect(registered).toHaveLength(2);
      expect(ours(await client.systemSharedMemoryStatus())).toEqual([]);
      expect(readdirSync(dir)).toEqual([]);
    } finally {
      client.close();
    }
  });

  it('refuses a kind of shared memory it does not have', async () => {
    const client = clientOf('http');
    try {
      await expect(runPerf(client, { model: 'simple', concurrency: [1], sharedMemory: 'cuda' as unknown as PerfOptions['sharedMemory'] })).rejects.toThrow("shared memory 'cuda' is not supported: use none or system");
    } finally {
      client.close();
    }
  });
});
