/**
 * gRPC and @triode/client end to end, as users run them: `triode serve` with its gRPC port,
 * `triode perf` over both protocols as a child process, and both clients through a cluster
 * gateway (real redis-server, a worker and a gateway as child processes).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient, HttpClient, type InferenceClient, type InferInput } from '@triode/client';
import { ROOT, makeRepository } from './helpers/repository.js';
import { TRIODE_BIN, freePort, startTriode, until, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

const run = promisify(execFile);
const simpleInputs: InferInput[] = [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Int32Array.from({ length: 16 }, (_, i) => i) },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(1) },
];


describe('triode serve over gRPC, and triode perf', () => {
  let serve: Child;
  let httpPort: number;
  let grpcPort: number;

  beforeAll(async () => {
    httpPort = await freePort();
    grpcPort = await freePort();
    serve = await startTriode(['serve', '--model-repository', makeRepository(['simple', 'simple_sequence']), '--http-port', String(httpPort), '--http-address', '127.0.0.1',
      '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1', '--allow-metrics=false'], /Started GRPCInferenceService at 127.0.0.1:\d+/);
  });

  afterAll(async () => {
    await serve?.stop();
  });

  it('the gRPC port answers the client like the HTTP port', async () => {
    const grpc = new GrpcClient(`127.0.0.1:${grpcPort}`);
    const http = new HttpClient(`http://127.0.0.1:${httpPort}`);
    const [g, h] = await Promise.all([grpc.infer('simple', { inputs: simpleInputs }), http.infer('simple', { inputs: simpleInputs })]);
    expect(Array.from(g.data<Int32Array>('OUTPUT0'))).toEqual(Array.from(h.data<Int32Array>('OUTPUT0')));
    expect((await grpc.serverMetadata()).extensions).toEqual((await http.serverMetadata()).extensions);
    grpc.close();
    http.close();
  });

  it('a sequence id of 2^63 or more goes over gRPC as Triton takes it (int64, read as uint64), and stays its own sequence (review: the client sent uint64_param, which Triton refuses, and -1 was refused)', async () => {
    const grpc = new GrpcClient(`127.0.0.1:${grpcPort}`);
    const send = (id: bigint, v: number, flags: { start?: boolean; end?: boolean } = {}) =>
      grpc.infer('simple_sequence', { inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [v] }], sequence: { id, ...flags } });
    try {
      const top = 2n ** 64n - 1n;
      expect(Array.from((await send(top, 5, { start: true })).data<Int32Array>('OUTPUT'))).toEqual([6]);
      expect(Array.from((await send(top, 7)).data<Int32Array>('OUTPUT'))).toEqual([7]);
      // A neighbouring id is another sequence, which has not started.
      await expect(send(top - 1n, 1)).rejects.toThrow(/START/);
      expect(Array.from((await send(top, 2, { end: true })).data<Int32Array>('OUTPUT'))).toEqual([2]);
    } finally {
      grpc.close();
    }
  });

  it.each(['http', 'grpc'])('triode perf -i %s measures, prints the table and writes the CSV', async (protocol) => {
    const csv = join(mkdtempSync(join(tmpdir(), 'perf-')), 'out.csv');
    const url = `127.0.0.1:${protocol === 'grpc' ? grpcPort : httpPort}`;
    const { stdout } = await run(process.execPath, [TRIODE_BIN, 'perf', '-m', 'simple', '-i', protocol, '-u', url, '--concurrency-range', '1:2',
      '-p', '300', '-r', '3', '--warmup-request-count', '5', '-f', csv], { timeout: 60_000 });
    expect(stdout).toMatch(/\| +Concurrency \| +Infer\/s \|/);
    const lines = readFileSync(csv, 'utf8').trim().split('\n');
    expect(lines).toHaveLength(3);
    expect(Number(lines[1]!.split(',')[1])).toBeGreaterThan(0);
  });

  it('a script that uses GrpcClient for concurrent calls and never closes it still exits', async () => {
    const script = `import { GrpcClient } from '@triode/client';
      const c = new GrpcClient('127.0.0.1:${grpcPort}');
      const inputs = ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], data: new Int32Array(16) }));
      await Promise.all(Array.from({ length: 8 }, () => c.infer('simple', { inputs })));
      console.log('done');`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script], { timeout: 15_000, cwd: ROOT });
    expect(stdout.trim()).toBe('done');
  });

  it('triode perf exits 1 when requests failed, still printing the figures and the first error of a counted window', async () => {
    // Every other request of the input data has a shape 'simple' refuses.
    const dir = mkdtempSync(join(tmpdir(), 'perf-'));
    const ones = (n: number) => new Array(n).fill(1);
    writeFileSync(join(dir, 'data.json'), JSON.stringify({ data: [
      { INPUT0: { content: ones(16), shape: [16] }, INPUT1: { content: ones(16), shape: [16] } },
      { INPUT0: { content: ones(8), shape: [8] }, INPUT1: { content: ones(8), shape: [8] } },
    ] }));
    const r = await run(process.execPath, [TRIODE_BIN, 'perf', '-m', 'simple', '-u', `127.0.0.1:${httpPort}`, '-p', '200', '-r', '3',
      '--warmup-request-count', '2', '--input-data', join(dir, 'data.json')], { timeout: 60_000 }).catch((e: { code: number; stdout: string }) => e);
    expect((r as { code?: number }).code).toBe(1);
    expect((r as { stdout: string }).stdout).toMatch(/\| +Concurrency \| +Infer\/s \|/);
    expect((r as { stdout: string }).stdout).toMatch(/errors at 1: [1-9]\d* \(first: unexpected shape for input 'INPUT0'/);
  });

  it('triode perf exits 1 with a clear message for an unknown model', async () => {
    const r = await run(process.execPath, [TRIODE_BIN, 'perf', '-m', 'nope', '-u', `127.0.0.1:${httpPort}`, '-p', '300'], { timeout: 30_000 }).catch((e: { code: number; stderr: string }) => e);
    expect((r as { code: number }).code).toBe(1);
    expect((r as { stderr: string }).stderr).toMatch(/unknown model: 'nope'/);
  });
});

describe('@triode/client through a cluster gateway', () => {
  let redis: RedisHandle;
  let worker: Child;
  let gateway: Child;
  let gatewayMetrics: number;
  const clients: Record<string, InferenceClient> = {};

  beforeAll(async () => {
    redis = await startRedis();
    worker = await startTriode(['worker', '--metrics-port', '0', '--redis', redis.url, '--model-repository', makeRepository(['simple', 'simple_sequence', 'repeat_int32'])], /Started worker/);
    const httpPort = await freePort();
    const grpcPort = await freePort();
    gatewayMetrics = await freePort();
    gateway = await startTriode(['gateway', '--metrics-port', String(gatewayMetrics), '--metrics-address', '127.0.0.1', '--metrics-config', 'histogram_latencies=true', '--redis', redis.url, '--http-port', String(httpPort), '--http-address', '127.0.0.1', '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1'],
      /Started GRPCInferenceService/);
    clients['http'] = new HttpClient(`http://127.0.0.1:${httpPort}`);
    clients['grpc'] = new GrpcClient(`127.0.0.1:${grpcPort}`);
    await until(async () => clients['grpc']!.isServerReady());
  });

  afterAll(async () => {
    for (const c of Object.values(clients)) c.close();
    await gateway?.stop();
    await worker?.stop();
    await redis?.stop();
  });

  it.each(['http', 'grpc'])('%s: metadata, infer, sequences and statistics through the gateway', async (kind) => {
    const c = clients[kind]!;
    expect((await c.modelMetadata('simple')).platform).toBe('onnxruntime_onnx');
    expect(Array.from((await c.infer('simple', { inputs: simpleInputs })).data<Int32Array>('OUTPUT1'))).toEqual(Array.from({ length: 16 }, (_, i) => i - 1));
    const seq = async (v: number, start = false, end = false) => (await c.infer('simple_sequence', {
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [v] }], sequence: { id: kind === 'grpc' ? 77 : 78, start, end },
    })).data<Int32Array>('OUTPUT')[0];
    expect([await seq(0, true), await seq(5), await seq(3, false, true)]).toEqual([1, 5, 3]);
    // Workers publish their statistics with their heartbeat: the sum catches up within a beat.
    await until(async () => (await c.modelStatistics('simple'))[0]!.inference_stats.success.count > 0);
    expect((await c.repositoryIndex()).map((m) => m.name).sort()).toEqual(['repeat_int32', 'simple', 'simple_sequence']);
  });

  it("the gateway serves its frontend metrics under its own names: requests it relayed, by model and version; none for unknown models", async () => {
    await clients['grpc']!.infer('simple', { inputs: simpleInputs });
    await expect(clients['http']!.infer('nope', { inputs: simpleInputs })).rejects.toThrow();
    await expect(clients['grpc']!.infer('simple', { inputs: [{ ...simpleInputs[0]!, name: 'WRONG' }, simpleInputs[1]!] })).rejects.toThrow();
    const text = await (await fetch(`http://127.0.0.1:${gatewayMetrics}/metrics`)).text();
    expect(Number(/^triode_gateway_request_success\{model="simple",version="1"\} (\d+)/m.exec(text)?.[1])).toBeGreaterThanOrEqual(1);
    // Under the version that answers the model's requests, beside its successes (it was version="").
    expect(text).toMatch(/^triode_gateway_request_failure\{model="simple",version="1",reason="OTHER"\} 1$/m);
    expect(text).not.toContain('version=""');
    expect(text).toMatch(/^triode_gateway_first_response_histogram_ms_count\{model="simple",version="1"\} \d+/m);
    // A sum over gateways and workers of nv_inference_* counts each request once; a name a client
    // made up creates no series.
    expect(text).not.toMatch(/^nv_inference_/m);
    expect(text).not.toContain('model="nope"');
  });

  it('grpc: a ModelStreamInfer stream through the gateway keeps request order and streams decoupled responses', async () => {
    const c = clients['grpc'] as GrpcClient;
    const got: string[] = [];
    const s = c.stream((err, r) => got.push(err ? `error ${err.message}` : `${r!.id}:${r!.outputs.map((o) => Array.from(o.data as Int32Array)[0]).join(',')}`));
    s.infer('simple_sequence', { id: 'a0', sequence: { id: 900, start: true }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [0] }] });
    s.infer('simple_sequence', { id: 'a1', sequence: { id: 900 }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [9] }] });
    s.infer('simple_sequence', { id: 'a2', sequence: { id: 900, end: true }, inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [4] }] });
    await s.end();
    expect(got).toEqual(['a0:1', 'a1:9', 'a2:4']);
    const values: number[] = [];
    let finals = 0;
    const d = c.stream((err, r) => {
      expect(err).toBeUndefined();
      values.push(r!.data<Int32Array>('OUT')[0]!);
      if (r!.final) finals++;
    });
    d.infer('repeat_int32', { inputs: [
      { name: 'IN', datatype: 'INT32', shape: [3], data: [7, 8, 9] },
      { name: 'DELAY', datatype: 'UINT32', shape: [3], data: [1, 1, 1] },
      { name: 'WAIT', datatype: 'UINT32', shape: [1], data: [0] },
    ] });
    await d.end();
    expect(values).toEqual([7, 8, 9]);
    expect(finals).toBeLessThanOrEqual(1);
  });
});
