/**
 * System shared memory through both clients against an embedded server (HTTP and gRPC over one
 * InferenceServer, regions in a directory of the test's own, a stand-in for /dev/shm): register,
 * status, infer with inputs and outputs in a region (tritonclient's simple_*_shm_client examples),
 * outputs read back with SystemSharedMemoryRegion, unregister; and a server that does not allow
 * client shared memory answering with its own words.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, serializeBytesTensor } from '@triode/core';
import { SystemSharedMemory, createHttpApp, startGrpcServer, startHttpServer, type GrpcServerHandle, type HttpServerHandle } from '@triode/frontends';
import { makeRepository } from '../../../test/helpers/repository.js';
import { GrpcClient } from './grpc-client.js';
import { HttpClient, decodeInferResponse } from './http-client.js';
import { InferenceServerError } from './errors.js';
import { SystemSharedMemoryRegion } from './system-shared-memory.js';
import { splitBytes, type InferenceClient, type InferInput } from './types.js';

let dir: string;
let regions: SystemSharedMemory;
let server: InferenceServer;
let http: HttpServerHandle;
let grpc: GrpcServerHandle;
/** The same server's frontends without client shared memory (the default). */
let httpOff: HttpServerHandle;
let grpcOff: GrpcServerHandle;
const clients: Record<string, InferenceClient> = {};
const off: Record<string, InferenceClient> = {};

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i * 3);
const IN1 = Int32Array.from({ length: 16 }, (_, i) => i);
const SUM = Array.from(IN0, (x, i) => x + IN1[i]!);
const DIFF = Array.from(IN0, (x, i) => x - IN1[i]!);
/** Where each tensor lives in a test's object. */
const AT = { in0: 0, in1: 64, out0: 128, out1: 192 };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'triode-client-shm-'));
  regions = new SystemSharedMemory({ directory: dir });
  server = await InferenceServer.create({ modelRepositories: [makeRepository(['simple', 'simple_string'])], backends: [new OnnxRuntimeBackend()] });
  const backplane = new LocalBackplane(server);
  http = await startHttpServer(createHttpApp(backplane, { sharedMemory: regions }), 0, '127.0.0.1');
  grpc = await startGrpcServer(backplane, { address: '127.0.0.1:0', sharedMemory: regions });
  httpOff = await startHttpServer(createHttpApp(backplane), 0, '127.0.0.1');
  grpcOff = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
  clients['http'] = new HttpClient(`http://127.0.0.1:${http.port}`);
  clients['http-json'] = new HttpClient(`http://127.0.0.1:${http.port}`, { binary: false });
  clients['grpc'] = new GrpcClient(`127.0.0.1:${grpc.port}`);
  clients['grpc-js'] = new GrpcClient(`127.0.0.1:${grpc.port}`, { leanInfer: false });
  off['http'] = new HttpClient(`http://127.0.0.1:${httpOff.port}`);
  off['grpc'] = new GrpcClient(`127.0.0.1:${grpcOff.port}`);
}, 60000);

afterAll(async () => {
  for (const c of [...Object.values(clients), ...Object.values(off)]) c.close();
  await Promise.all([grpc?.close(1000), grpcOff?.close(1000), http?.close(1000), httpOff?.close(1000)]);
  await server?.stop(1000);
  regions?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A region of one page holding IN0 and IN1, registered as `name` through `c`. */
async function ioRegion(c: InferenceClient, name: string): Promise<SystemSharedMemoryRegion> {
  const region = SystemSharedMemoryRegion.create(`/${name}`, 4096, { directory: dir });
  expect(region.write(IN0, AT.in0)).toBe(64);
  expect(region.write(IN1, AT.in1)).toBe(64);
  await c.registerSystemSharedMemory(name, region.key, region.byteSize);
  return region;
}

const shmInputs = (region: string): InferInput[] => [
  { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], sharedMemory: { region, byteSize: 64 } },
  { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], sharedMemory: { region, byteSize: 64, offset: AT.in1 } },
];

describe.each(['http', 'http-json', 'grpc', 'grpc-js'])('%s client', (kind) => {
  const c = () => clients[kind]!;
  const name = `io_${kind.replace('-', '_')}`;

  it('registers a region, lists it, infers with inputs and outputs in it, reads the outputs back, unregisters', async () => {
    const region = await ioRegion(c(), name);
    try {
      expect(await c().systemSharedMemoryStatus(name)).toEqual([{ name, key: `/${name}`, offset: 0, byteSize: 4096 }]);
      expect(await c().systemSharedMemoryStatus()).toContainEqual({ name, key: `/${name}`, offset: 0, byteSize: 4096 });
      const r = await c().infer('simple', {
        inputs: shmInputs(name),
        outputs: [{ name: 'OUTPUT0', sharedMemory: { region: name, byteSize: 64, offset: AT.out0 } }, { name: 'OUTPUT1', sharedMemory: { region: name, byteSize: 64, offset: AT.out1 } }],
      });
      // No data in the answer: the outputs say where they are.
      expect(r.output('OUTPUT0')).toEqual({ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(0), sharedMemory: { region: name, byteSize: 64, offset: AT.out0 } });
      expect(r.output('OUTPUT1').sharedMemory).toEqual({ region: name, byteSize: 64, offset: AT.out1 });
      expect(Array.from(region.read('INT32', r.output('OUTPUT0').shape, AT.out0) as Int32Array)).toEqual(SUM);
      expect(Array.from(region.read('INT32', r.output('OUTPUT1').shape, AT.out1) as Int32Array)).toEqual(DIFF);

      // One input in the region, one in the request; one output to the region, one in the answer.
      region.write(new Int32Array(32), AT.out0);
      const mixed = await c().infer('simple', {
        inputs: [shmInputs(name)[0]!, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: IN1 }],
        outputs: [{ name: 'OUTPUT0', sharedMemory: { region: name, byteSize: 64, offset: AT.out0 } }, { name: 'OUTPUT1' }],
      });
      expect(mixed.output('OUTPUT0').data).toEqual(new Int32Array(0));
      expect(Array.from(region.read('INT32', [1, 16], AT.out0) as Int32Array)).toEqual(SUM);
      expect(mixed.output('OUTPUT1').sharedMemory).toBeUndefined();
      expect(Array.from(mixed.data<Int32Array>('OUTPUT1'))).toEqual(DIFF);

      // Prepared once, sent twice (the load generator's way).
      region.write(new Int32Array(32), AT.out0);
      const prepared = c().prepare('simple', { inputs: shmInputs(name), outputs: [{ name: 'OUTPUT1', sharedMemory: { region: name, byteSize: 64, offset: AT.out0 } }] });
      for (let i = 0; i < 2; i++) expect((await c().inferPrepared(prepared)).output('OUTPUT1').sharedMemory).toEqual({ region: name, byteSize: 64, offset: AT.out0 });
      expect(Array.from(region.read('INT32', [1, 16], AT.out0) as Int32Array)).toEqual(DIFF);

      await c().unregisterSystemSharedMemory(name);
      expect((await c().systemSharedMemoryStatus()).map((s) => s.name)).not.toContain(name);
    } finally {
      region.destroy();
    }
  });

  it('BYTES tensors in a region, serialized as Triton reads them (simple_string)', async () => {
    const region = SystemSharedMemoryRegion.create(`/${name}_str`, 4096, { directory: dir });
    try {
      const n0 = region.write(Array.from(IN0, String), 0);
      const n1 = region.write(Array.from(IN1, (x) => Buffer.from(String(x))), 1024);
      expect(n0).toBe(serializeBytesTensor(Array.from(IN0, String)).byteLength);
      await c().registerSystemSharedMemory(`${name}_str`, region.key, region.byteSize);
      const r = await c().infer('simple_string', {
        inputs: [
          { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], sharedMemory: { region: `${name}_str`, byteSize: n0 } },
          { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], sharedMemory: { region: `${name}_str`, byteSize: n1, offset: 1024 } },
        ],
        outputs: [{ name: 'OUTPUT0', sharedMemory: { region: `${name}_str`, byteSize: 1024, offset: 2048 } }],
      });
      expect(r.output('OUTPUT0')).toMatchObject({ datatype: 'BYTES', shape: [1, 16], data: new Uint8Array(0) });
      expect(r.bytes('OUTPUT0')).toEqual([]);
      const out = region.read('BYTES', [1, 16], 2048) as Uint8Array;
      expect(splitBytes(out).map((b) => Buffer.from(b).toString())).toEqual(SUM.map(String));
    } finally {
      await c().unregisterSystemSharedMemory(`${name}_str`);
      region.destroy();
    }
  });

  it('the server\'s refusals come back as InferenceServerError with its words', async () => {
    const missing = c().infer('simple', { inputs: shmInputs('no_such_region') });
    await expect(missing).rejects.toThrow(InferenceServerError);
    await expect(missing).rejects.toMatchObject({ message: "Unable to find shared memory region: 'no_such_region'", ...(kind.startsWith('http') ? { httpStatus: 404 } : { grpcCode: 5 }) });
    await expect(c().systemSharedMemoryStatus('no_such_region')).rejects.toMatchObject({ message: "Unable to find system shared memory region: 'no_such_region'" });
    await expect(c().registerSystemSharedMemory(`${name}_x`, '/no_such_object', 64)).rejects.toMatchObject({ message: "Unable to open shared memory region: '/no_such_object'" });
    // An unknown name is no error to unregister, as Triton.
    await expect(c().unregisterSystemSharedMemory('no_such_region')).resolves.toBeUndefined();
  });

  it('refuses a request it cannot send before sending it', async () => {
    const both = { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: IN0, sharedMemory: { region: 'r', byteSize: 64 } } as unknown as InferInput;
    await expect(c().infer('simple', { inputs: [both] })).rejects.toThrow("input 'INPUT0': give either data or sharedMemory, not both");
    const neither = { name: 'INPUT0', datatype: 'INT32', shape: [1, 16] } as unknown as InferInput;
    await expect(c().infer('simple', { inputs: [neither] })).rejects.toThrow("input 'INPUT0' has neither data nor sharedMemory");
    await expect(c().infer('simple', { inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], sharedMemory: { region: 'r', byteSize: -1 } }] }))
      .rejects.toThrow("input 'INPUT0': sharedMemory.byteSize must be a non-negative integer, not -1");
    await expect(c().infer('simple', { inputs: shmInputs('r'), outputs: [{ name: 'OUTPUT0', classCount: 2, sharedMemory: { region: 'r', byteSize: 64 } }] }))
      .rejects.toThrow("output 'OUTPUT0': shared memory can't be set on a classification output (classCount)");
    await expect(c().registerSystemSharedMemory('r', '/k', 64, 1.5)).rejects.toThrow("system shared memory region 'r': offset must be a non-negative integer, not 1.5");
  });
});

describe('gRPC stream', () => {
  it('outputs in a region come back marked on a stream, matched to their request by id', async () => {
    const c = clients['grpc'] as GrpcClient;
    const region = await ioRegion(c, 'io_stream');
    try {
      const results: unknown[] = [];
      const s = c.stream((err, r) => {
        results.push(err ? err.message : { id: r!.id, shm: r!.output('OUTPUT0').sharedMemory, data: r!.output('OUTPUT0').data.length });
      });
      s.infer('simple', { id: 'a', inputs: shmInputs('io_stream'), outputs: [{ name: 'OUTPUT0', sharedMemory: { region: 'io_stream', byteSize: 64, offset: AT.out0 } }] });
      s.infer('simple', { id: 'b', inputs: shmInputs('io_stream'), outputs: [{ name: 'OUTPUT0' }] });
      s.infer('simple', { id: 'a', inputs: shmInputs('io_stream'), outputs: [{ name: 'OUTPUT0', sharedMemory: { region: 'io_stream', byteSize: 64, offset: AT.out1 } }] });
      await s.end();
      expect(results).toEqual([
        { id: 'a', shm: { region: 'io_stream', byteSize: 64, offset: AT.out0 }, data: 0 },
        { id: 'b', shm: undefined, data: 16 },
        { id: 'a', shm: { region: 'io_stream', byteSize: 64, offset: AT.out1 }, data: 0 },
      ]);
      expect(Array.from(region.read('INT32', [1, 16], AT.out0) as Int32Array)).toEqual(SUM);
      expect(Array.from(region.read('INT32', [1, 16], AT.out1) as Int32Array)).toEqual(SUM);
    } finally {
      await c.unregisterSystemSharedMemory('io_stream');
      region.destroy();
    }
  });
});

describe('a server without client shared memory', () => {
  it.each([['http', { httpStatus: 501 }], ['grpc', { grpcCode: 12 }]] as const)('%s: register and unregister are refused in the server\'s words; status lists nothing', async (kind, code) => {
    const c = off[kind]!;
    const region = SystemSharedMemoryRegion.create(`/off_${kind}`, 4096, { directory: dir });
    try {
      const err = await c.registerSystemSharedMemory('r', region.key, 4096).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InferenceServerError);
      expect(err).toMatchObject({ message: expect.stringMatching(/^client shared memory is disabled: start the server with --allow-client-shm=true/), ...code });
      await expect(c.unregisterSystemSharedMemory()).rejects.toMatchObject({ message: expect.stringMatching(/^client shared memory is disabled/), ...code });
      expect(await c.systemSharedMemoryStatus()).toEqual([]);
      await expect(c.infer('simple', { inputs: shmInputs('r') })).rejects.toMatchObject({ message: "Unable to find shared memory region: 'r'" });
    } finally {
      region.destroy();
    }
  });
});

describe('HTTP answers with outputs in shared memory', () => {
  const body = (outputs: unknown[]) => Buffer.from(JSON.stringify({ model_name: 'm', model_version: '1', outputs }));
  const shm = new Map([['OUT', { region: 'r', byteSize: 64, offset: 0 }]]);

  it('an output asked for in a region may come without data; one that was not may not', () => {
    const r = decodeInferResponse(body([{ name: 'OUT', datatype: 'FP32', shape: [2, 8] }]), undefined, shm);
    expect(r.output('OUT')).toEqual({ name: 'OUT', datatype: 'FP32', shape: [2, 8], data: new Float32Array(0), sharedMemory: { region: 'r', byteSize: 64, offset: 0 } });
    expect(() => decodeInferResponse(body([{ name: 'OTHER', datatype: 'FP32', shape: [2] }]), undefined, shm)).toThrow("output 'OTHER' has neither data nor binary_data_size");
    expect(() => decodeInferResponse(body([{ name: 'OUT', datatype: 'FP32', shape: [2] }]), undefined)).toThrow("output 'OUT' has neither data nor binary_data_size");
    expect(() => decodeInferResponse(body([{ name: 'OUT', datatype: 'NOPE', shape: [2] }]), undefined, shm)).toThrow("output 'OUT' has an unknown datatype 'NOPE'");
    expect(() => decodeInferResponse(body([{ name: 'OUT', datatype: 'FP32', shape: [-2] }]), undefined, shm)).toThrow("output 'OUT' has an invalid shape");
    // Data sent anyway is read as data.
    expect(decodeInferResponse(body([{ name: 'OUT', datatype: 'FP32', shape: [1], data: [1.5] }]), undefined, shm).output('OUT')).toEqual({ name: 'OUT', datatype: 'FP32', shape: [1], data: Float32Array.of(1.5) });
  });
});
