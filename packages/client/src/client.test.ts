/**
 * HttpClient and GrpcClient against an embedded server (both frontends over one
 * InferenceServer): the same calls and the same answers through either protocol.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { credentials } from '@grpc/grpc-js';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane } from '@triode/core';
import { createHttpApp, startGrpcServer, startHttpServer, type GrpcServerHandle, type HttpServerHandle } from '@triode/frontends';
import { makeRepository } from '../../../test/helpers/repository.js';
import { GrpcClient } from './grpc-client.js';
import { HttpClient } from './http-client.js';
import { InferenceServerError } from './errors.js';
import type { InferenceClient, InferInput } from './types.js';

let server: InferenceServer;
let http: HttpServerHandle;
let grpc: GrpcServerHandle;
const clients: Record<string, InferenceClient> = {};

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i);
const IN1 = new Int32Array(16).fill(1);
const simpleInputs: InferInput[] = [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: IN0 },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array.from(IN1) },
];

beforeAll(async () => {
  const repo = makeRepository(['simple', 'simple_string', 'simple_identity', 'simple_sequence', 'repeat_int32']);
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()], modelControlMode: 'explicit', startupModels: ['*'] });
  const backplane = new LocalBackplane(server);
  http = await startHttpServer(createHttpApp(backplane), 0, '127.0.0.1');
  grpc = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
  clients['http'] = new HttpClient(`http://127.0.0.1:${http.port}`);
  clients['http-json'] = new HttpClient(`127.0.0.1:${http.port}`, { binary: false });
  clients['grpc'] = new GrpcClient(`127.0.0.1:${grpc.port}`);
}, 60000);

afterAll(async () => {
  for (const c of Object.values(clients)) c.close();
  await grpc?.close(1000);
  await http?.close();
  await server?.stop(1000);
});

describe.each(['http', 'http-json', 'grpc'])('%s client', (kind) => {
  const c = () => clients[kind]!;

  it('health and metadata', async () => {
    expect(await c().isServerLive()).toBe(true);
    expect(await c().isServerReady()).toBe(true);
    expect(await c().isModelReady('simple')).toBe(true);
    expect(await c().isModelReady('nope')).toBe(false);
    expect((await c().serverMetadata()).name).toBe('triton');
    const meta = await c().modelMetadata('simple', 1);
    expect(meta).toMatchObject({ name: 'simple', versions: ['1'], platform: 'onnxruntime_onnx' });
    expect(meta.inputs[0]).toEqual({ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] });
    expect(await c().modelConfig('simple')).toMatchObject({ name: 'simple', max_batch_size: 8 });
  });

  it('infer with typed arrays and plain arrays in, typed arrays out', async () => {
    const r = await c().infer('simple', { inputs: simpleInputs, id: 'x1' });
    expect(r.id).toBe('x1');
    expect(r.modelVersion).toBe('1');
    expect(Array.from(r.data<Int32Array>('OUTPUT0'))).toEqual(Array.from(IN0, (x) => x + 1));
    expect(r.output('OUTPUT1')).toMatchObject({ datatype: 'INT32', shape: [1, 16] });
    const only = await c().infer('simple', { inputs: simpleInputs, outputs: [{ name: 'OUTPUT1' }] });
    expect(only.outputs.map((o) => o.name)).toEqual(['OUTPUT1']);
  });

  it('BYTES as strings and as raw bytes (with NULs) round-trip exactly', async () => {
    const s = await c().infer('simple_string', {
      inputs: [
        { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], data: Array.from(IN0, String) },
        { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], data: Array.from(IN1, String) },
      ],
    });
    expect(s.strings('OUTPUT0')).toEqual(Array.from(IN0, (x) => String(x + 1)));
    const weird = kind === 'http-json' ? ['he\u0000llo'] : [Buffer.from('he\u0000llo'), Uint8Array.of(0, 1, 2, 3)];
    const id = await c().infer('simple_identity', { inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, weird.length], data: weird }] });
    expect(id.bytes('OUTPUT0').map((b) => Buffer.from(b).toString('hex'))).toEqual(weird.map((w) => Buffer.from(w).toString('hex')));
  });

  it('classification and sequence parameters', async () => {
    const cls = await c().infer('simple', { inputs: simpleInputs, outputs: [{ name: 'OUTPUT0', classCount: 2 }] });
    expect(cls.strings('OUTPUT0')).toEqual(['16:15', '15:14']);
    const seq = (v: number, start = false, end = false) => c().infer('simple_sequence', {
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1], data: [v] }], sequence: { id: `${kind}-7`, start, end },
    });
    const outs = [await seq(0, true), await seq(11), await seq(7, false, true)].map((r) => r.data<Int32Array>('OUTPUT')[0]);
    expect(outs).toEqual([1, 11, 7]);
  });

  it('errors carry the server message and the protocol status', async () => {
    const err = await c().infer('nope', { inputs: simpleInputs }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InferenceServerError);
    expect((err as Error).message).toBe("Request for unknown model: 'nope' is not found");
    if (kind === 'grpc') expect((err as InferenceServerError).grpcCode).toBe(5);
    else expect((err as InferenceServerError).httpStatus).toBe(404);
    await expect(c().infer('simple', { inputs: [simpleInputs[0]!] })).rejects.toThrow(/expected 2 inputs but got 1 inputs/);
    await expect(c().infer('simple', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: [1, 2] }] })).rejects.toThrow(/8 bytes of data for 16 INT32 elements/);
  });

  it('file: overrides load a model from the request; an over-long file name fails and the server stays live', async () => {
    const onnx = readFileSync(new URL('../../../model_repository/simple/1/model.onnx', import.meta.url));
    const name = `simple_files_${kind.replace('-', '_')}`;
    const config = { name, platform: 'onnxruntime_onnx', max_batch_size: 8, input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'INPUT1', data_type: 'TYPE_INT32', dims: [16] }], output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [16] }, { name: 'OUTPUT1', data_type: 'TYPE_INT32', dims: [16] }] };
    await c().loadModel(name, { config, files: { '1/model.onnx': onnx } });
    expect(Array.from((await c().infer(name, { inputs: simpleInputs })).data<Int32Array>('OUTPUT0'))).toEqual(Array.from(IN0, (x) => x + 1));
    const err = await c().loadModel('simple_long', { config, files: { [`1/${'a'.repeat(256)}`]: onnx } }).catch((e: unknown) => e as InferenceServerError);
    expect((err as Error).message).toMatch(/failed to load 'simple_long', failed to poll from model repository/);
    if (kind === 'grpc') expect((err as InferenceServerError).grpcCode).toBe(13);
    expect(await c().isServerLive()).toBe(true);
    await expect(c().loadModel('simple_nocfg', { files: { '1/model.onnx': onnx } })).rejects.toThrow(/a 'config' parameter must be given with 'file:' overrides/);
    await c().unloadModel(name);
  });

  it('statistics, repository index, unload and load', async () => {
    const stats = await c().modelStatistics('simple');
    expect(stats[0]!.inference_stats.success.count).toBeGreaterThan(0);
    expect((await c().repositoryIndex()).map((m) => m.name)).toContain('simple_identity');
    // The server leaves an empty reason out, as Triton; the client gives '' as over gRPC.
    expect((await c().repositoryIndex()).find((m) => m.state === 'READY')).toMatchObject({ reason: '' });
    await c().unloadModel('simple_identity');
    expect(await c().isModelReady('simple_identity')).toBe(false);
    await c().loadModel('simple_identity', { config: { max_batch_size: '4', backend: 'javascript', input: [{ name: 'INPUT0', data_type: 'TYPE_STRING', dims: [-1] }], output: [{ name: 'OUTPUT0', data_type: 'TYPE_STRING', dims: [-1] }] } });
    expect((await c().modelConfig('simple_identity'))['max_batch_size']).toBe(4);
    await expect(c().loadModel('nope')).rejects.toThrow(/failed to load 'nope'/);
    await expect(c().loadModel('simple', { config: '{"max_batch_size": oops' })).rejects.toThrow(/failed to load 'simple'/);
    expect(await c().isModelReady('simple')).toBe(true);
  });
});

describe('gRPC streams', () => {
  it('a decoupled model streams its responses; the last is final', async () => {
    const c = clients['grpc'] as GrpcClient;
    const got: { value: number; final: boolean | undefined }[] = [];
    const s = c.stream((err, r) => {
      if (err) throw err;
      got.push({ value: r!.data<Int32Array>('OUT')[0]!, final: r!.final });
    });
    s.infer('repeat_int32', {
      id: 'd',
      inputs: [
        { name: 'IN', datatype: 'INT32', shape: [3], data: [4, 5, 6] },
        { name: 'DELAY', datatype: 'UINT32', shape: [3], data: [1, 1, 1] },
        { name: 'WAIT', datatype: 'UINT32', shape: [1], data: [0] },
      ],
    });
    await s.end();
    expect(got.map((g) => g.value)).toEqual([4, 5, 6]);
    expect(got.slice(0, 2).every((g) => g.final === false)).toBe(true);
  });

  it('in-band errors keep the stream open; grpcErrors mode ends it with the status', async () => {
    const c = clients['grpc'] as GrpcClient;
    const seen: string[] = [];
    const s = c.stream((err, r) => seen.push(err ? `error:${r?.id}` : `ok:${r?.id}`));
    s.infer('nope', { id: 'a', inputs: [] });
    s.infer('simple', { id: 'b', inputs: simpleInputs });
    await s.end();
    expect(seen).toEqual(['error:a', 'ok:b']);
    const strict = c.stream(() => undefined, { grpcErrors: true });
    strict.infer('nope', { inputs: [] });
    await expect(strict.end()).rejects.toMatchObject({ grpcCode: 5 });
  });

  it('an aborted call rejects with CANCELLED', async () => {
    const ac = new AbortController();
    ac.abort();
    await expect((clients['grpc'] as GrpcClient).infer('simple', { inputs: simpleInputs, signal: ac.signal })).rejects.toMatchObject({ grpcCode: 1 });
  });
});

describe('TLS', () => {
  const tls = (f: string) => readFileSync(new URL(`../../../test/fixtures/tls/${f}`, import.meta.url));

  it('GrpcClient over TLS, and mutual TLS refusing a client without its certificate', async () => {
    const one = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', tls: { cert: tls('server.crt'), key: tls('server.key') } });
    const mutual = await startGrpcServer(new LocalBackplane(server), {
      address: '127.0.0.1:0', tls: { cert: tls('server.crt'), key: tls('server.key'), rootCert: tls('client.crt'), mutual: true },
    });
    try {
      const c = new GrpcClient(`localhost:${one.port}`, { credentials: credentials.createSsl(tls('server.crt')) });
      expect(Array.from((await c.infer('simple', { inputs: simpleInputs })).data<Int32Array>('OUTPUT0'))).toEqual(Array.from(IN0, (x) => x + 1));
      c.close();
      const withCert = new GrpcClient(`localhost:${mutual.port}`, { credentials: credentials.createSsl(tls('server.crt'), tls('client.key'), tls('client.crt')) });
      expect(await withCert.isServerLive()).toBe(true);
      withCert.close();
      const without = new GrpcClient(`localhost:${mutual.port}`, { credentials: credentials.createSsl(tls('server.crt')), timeoutMs: 3000 });
      await expect(without.isServerLive()).rejects.toBeInstanceOf(InferenceServerError);
      without.close();
    } finally {
      await one.close(500);
      await mutual.close(500);
    }
  });
});
