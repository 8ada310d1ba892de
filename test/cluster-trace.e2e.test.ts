/**
 * Tracing in cluster mode, end to end: a redis-server, a worker and a gateway started with
 * --trace-config (TIMESTAMPS, rate 1, log_frequency 1). One HTTP and one gRPC infer through the
 * gateway each give a trace file holding the gateway's frontend timestamps and the worker's core
 * timestamps, in the order embedded mode writes them, on one clock (CLOCK_MONOTONIC). Before,
 * a gateway took no --trace-config and wrote no trace, and the core's timestamps stayed on the worker.
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InferInput } from '@triode/client';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const CORE = ['REQUEST_START', 'QUEUE_START', 'COMPUTE_START', 'COMPUTE_INPUT_END', 'COMPUTE_OUTPUT_START', 'COMPUTE_END', 'REQUEST_END'];
const inputs: InferInput[] = [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(2) },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
];

let redis: RedisHandle;
let worker: Child;
let gateway: Child;
let httpPort: number;
let grpcPort: number;
const traceFile = join(mkdtempSync(join(tmpdir(), 'triode-cluster-trace-')), 'trace.json');

beforeAll(async () => {
  redis = await startRedis();
  worker = await startTriode(['worker', '--allow-metrics=false', '--redis', redis.url, '--model-repository', makeRepository(['simple'])], /Started worker/);
  [httpPort, grpcPort] = [await freePort(), await freePort()];
  gateway = await startTriode(['gateway', '--allow-metrics=false', '--redis', redis.url, '--http-port', String(httpPort), '--http-address', '127.0.0.1',
    '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1', '--advertise-address', '127.0.0.1',
    '--trace-config', `triton,file=${traceFile}`, '--trace-config', 'level=TIMESTAMPS', '--trace-config', 'rate=1', '--trace-config', 'log_frequency=1']);
  await until(async () => (await fetch(`http://127.0.0.1:${httpPort}/v2/models/simple/ready`)).status === 200);
});

afterAll(async () => {
  await Promise.all([gateway?.stop(), worker?.stop()]);
  await redis?.stop();
});

type Entry = { id: number; model_name?: string; timestamps?: [{ name: string; ns: number }] };

/** Whether `<file>.<k>` is there and written whole (the gateway writes trace files in the background, a piece at a time). */
function written(k: number): boolean {
  try {
    JSON.parse(readFileSync(`${traceFile}.${k}`, 'utf8'));
    return true;
  } catch {
    return false;
  }
}

/** The one trace of `<file>.<k>`: its model entry and its timestamps in the order written. */
function traceOf(k: number): { model: Entry; stamps: { name: string; ns: number }[] } {
  const entries = JSON.parse(readFileSync(`${traceFile}.${k}`, 'utf8')) as Entry[];
  expect(new Set(entries.map((e) => e.id)).size).toBe(1);
  return { model: entries.find((e) => e.model_name !== undefined)!, stamps: entries.flatMap((e) => e.timestamps ?? []) };
}

describe('cluster mode: a gateway traces with the core timestamps of its workers', () => {
  it('an HTTP and a gRPC infer each write a trace: the frontend\'s timestamps around the worker\'s core ones, in order, on one clock', async () => {
    const http = new HttpClient(`http://127.0.0.1:${httpPort}`);
    const grpc = new GrpcClient(`127.0.0.1:${grpcPort}`);
    try {
      expect(Array.from((await http.infer('simple', { inputs })).data<Int32Array>('OUTPUT0'))).toEqual(new Array(16).fill(3));
      await until(async () => written(0), 5000);
      expect(Array.from((await grpc.infer('simple', { inputs })).data<Int32Array>('OUTPUT0'))).toEqual(new Array(16).fill(3));
      await until(async () => written(1), 5000);
    } finally {
      http.close();
      grpc.close();
    }
    for (const [k, front] of [[0, 'HTTP'], [1, 'GRPC']] as const) {
      const { model, stamps } = traceOf(k);
      expect(model.model_name).toBe('simple');
      const [recv, sent] = front === 'HTTP' ? [['HTTP_RECV_START', 'HTTP_RECV_END'], ['HTTP_SEND_START', 'HTTP_SEND_END']] : [['GRPC_WAITREAD_START', 'GRPC_WAITREAD_END'], ['GRPC_SEND_START', 'GRPC_SEND_END']];
      expect(stamps.map((s) => s.name)).toEqual([...recv, ...CORE, ...sent]);
      // Gateway and worker stamp on CLOCK_MONOTONIC (one host): the worker's fall between the gateway's.
      for (let i = 1; i < stamps.length; i++) expect(stamps[i]!.ns, `${stamps[i - 1]!.name} <= ${stamps[i]!.name}`).toBeGreaterThanOrEqual(stamps[i - 1]!.ns);
      expect(stamps.every((s) => Number.isInteger(s.ns))).toBe(true);
    }
  });
});
