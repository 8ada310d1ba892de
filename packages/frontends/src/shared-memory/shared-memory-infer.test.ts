/**
 * The system shared memory extension end to end over HTTP and gRPC (the direct ModelInfer path,
 * grpc-js, and ModelStreamInfer), against `simple`: regions registered through each protocol,
 * inputs read from them and outputs written to them, as tritonclient's shared memory utilities
 * and perf_analyzer --shared-memory=system use them. Objects live in a directory of the test's
 * own (a stand-in for /dev/shm).
 */
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, truncateSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { Metadata, credentials, makeGenericClientConstructor, status, type Client, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, messageType, serviceDefinition, type Backplane, type InferenceRequest, type InferenceResponse } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { createHttpApp } from '../http/http-server.js';
import { startHttpServer, type HttpServerHandle } from '../http/listen.js';
import { MAX_STREAM_PENDING_BYTES, startGrpcServer, type GrpcServerHandle } from '../grpc/grpc-server.js';
import { PAGE_SIZE, SystemSharedMemory } from './system-shared-memory.js';

type Plain = Record<string, unknown>;
type Unary = (req: object, md: Metadata, opts: object, cb: (err: ServiceError | null, res: object) => void) => void;

let dir: string;
let regions: SystemSharedMemory;
let server: InferenceServer;
let app: ReturnType<typeof createHttpApp>;
let http: HttpServerHandle;
let grpc: GrpcServerHandle;
/** Takes the direct ModelInfer path (no compression). */
let fast: Client & Record<string, Unary>;
/** gzip: its ModelInfer calls go through grpc-js. */
let slow: Client & Record<string, Unary>;
const Service = makeGenericClientConstructor(serviceDefinition('inference.GRPCInferenceService'), 'GRPCInferenceService');

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i * 3);
const IN1 = Int32Array.from({ length: 16 }, (_, i) => i);
const bytes = (a: Int32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
/** Where the test's one object keeps each tensor (offsets in the region 'io'). */
const AT = { in0: 0, in1: 64, out0: 128, out1: 192 };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'triode-shm-infer-'));
  regions = new SystemSharedMemory({ directory: dir });
  server = await InferenceServer.create({ modelRepositories: [makeRepository(['simple'])], backends: [new OnnxRuntimeBackend()] });
  app = createHttpApp(new LocalBackplane(server), { sharedMemory: regions, maxInputSize: 1 << 20 });
  http = await startHttpServer(app, 0, '127.0.0.1');
  grpc = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', sharedMemory: regions });
  fast = new Service(`127.0.0.1:${grpc.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
  slow = new Service(`127.0.0.1:${grpc.port}`, credentials.createInsecure(), { 'grpc.default_compression_algorithm': 2 }) as unknown as Client & Record<string, Unary>;
});

afterAll(async () => {
  fast?.close();
  slow?.close();
  await grpc?.close(1000);
  await http?.close(1000);
  await server?.stop(1000);
  regions?.close();
  rmSync(dir, { recursive: true, force: true });
});

beforeEach(() => {
  regions.unregister();
  const object = Buffer.alloc(PAGE_SIZE);
  object.set(bytes(IN0), AT.in0);
  object.set(bytes(IN1), AT.in1);
  writeFileSync(join(dir, 'io'), object);
});

const outputs = (): [number[], number[]] => {
  const b = readFileSync(join(dir, 'io'));
  const read = (at: number) => Array.from(new Int32Array(b.buffer.slice(b.byteOffset + at, b.byteOffset + at + 64)));
  return [read(AT.out0), read(AT.out1)];
};
/** Zeroes the outputs' bytes, so that each check sees what the request it follows wrote. */
const clearOutputs = (): void => {
  const fd = openSync(join(dir, 'io'), 'r+');
  writeSync(fd, Buffer.alloc(128), 0, 128, AT.out0);
  closeSync(fd);
};
const SUM = Array.from(IN0, (x, i) => x + IN1[i]!);
const DIFF = Array.from(IN0, (x, i) => x - IN1[i]!);

const url = (path: string) => `http://127.0.0.1:${http.port}${path}`;
const postJson = (path: string, body: unknown) => fetch(url(path), { method: 'POST', body: JSON.stringify(body) });

const shmParams = (offset: number, size = 64) => ({ shared_memory_region: 'io', shared_memory_offset: offset, shared_memory_byte_size: size });
const httpRequest = (out0Size = 64) => ({
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: shmParams(AT.in0) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: shmParams(AT.in1) },
  ],
  outputs: [{ name: 'OUTPUT0', parameters: shmParams(AT.out0, out0Size) }, { name: 'OUTPUT1', parameters: shmParams(AT.out1) }],
});

function call(c: Client & Record<string, Unary>, rpc: string, req: object): Promise<Plain> {
  return new Promise((resolve, reject) => {
    c[rpc]!(req, new Metadata(), {}, (err, res) => (err ? reject(err) : resolve(messageType(`${rpc}Response`).toObject(res as never, { longs: Number, defaults: true }) as Plain)));
  });
}

const grpcShm = (offset: number, size = 64) => ({
  shared_memory_region: { string_param: 'io' }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: size },
});
const grpcRequest = (out0Size = 64) => ({
  model_name: 'simple',
  inputs: [
    { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], parameters: grpcShm(AT.in0) },
    { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], parameters: grpcShm(AT.in1) },
  ],
  outputs: [{ name: 'OUTPUT0', parameters: grpcShm(AT.out0, out0Size) }, { name: 'OUTPUT1', parameters: grpcShm(AT.out1) }],
});

describe('system shared memory over HTTP', () => {
  it('register, status, infer with inputs and outputs in the region (outputs carry no data), unregister', async () => {
    const reg = await postJson('/v2/systemsharedmemory/region/io/register', { key: '/io', offset: 0, byte_size: PAGE_SIZE });
    expect([reg.status, await reg.text()]).toEqual([200, '']);
    // As Triton's HandleSystemSharedMemory (Content-Type on every action, an empty body of length 0):
    // Triode's answer was chunked with no Content-Type (review).
    expect([reg.headers.get('content-type'), reg.headers.get('content-length'), reg.headers.get('transfer-encoding')]).toEqual(['application/json', '0', null]);
    expect(await (await fetch(url('/v2/systemsharedmemory/status'))).json()).toEqual([{ name: 'io', key: '/io', offset: 0, byte_size: PAGE_SIZE }]);
    const r = await postJson('/v2/models/simple/infer', httpRequest());
    expect(r.status).toBe(200);
    // Triton's FinalizeResponse: name, datatype and shape only.
    expect(await r.json()).toEqual({
      model_name: 'simple', model_version: '1',
      outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16] }],
    });
    expect(outputs()).toEqual([SUM, DIFF]);
    expect(outputs()).not.toEqual([new Array(16).fill(0), new Array(16).fill(0)]);
    // Through Hono's route too (a request the direct path leaves to it: a query string).
    clearOutputs();
    const viaHono = await app.request('/v2/models/simple/infer', { method: 'POST', body: JSON.stringify({ ...httpRequest(), inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array.from(IN0) }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array.from(IN1) }] }) });
    expect(viaHono.status).toBe(200);
    expect(outputs()).toEqual([SUM, DIFF]);
    const unreg = await postJson('/v2/systemsharedmemory/region/io/unregister', {});
    expect([unreg.status, await unreg.text(), unreg.headers.get('content-type'), unreg.headers.get('content-length')]).toEqual([200, '', 'application/json', '0']);
    const all = await postJson('/v2/systemsharedmemory/unregister', {});
    expect([all.status, await all.text(), all.headers.get('content-type'), all.headers.get('content-length')]).toEqual([200, '', 'application/json', '0']);
    expect(await (await fetch(url('/v2/systemsharedmemory/status'))).json()).toEqual([]);
  });

  it('register: Triton\'s checks and words over HTTP (region name, key, byte_size, types, duplicate)', async () => {
    const err = async (path: string, body: string) => {
      const r = await fetch(url(path), { method: 'POST', body });
      return [r.status, ((await r.json()) as { error: string }).error];
    };
    expect(await err('/v2/systemsharedmemory/register', '{"key":"io","byte_size":64}')).toEqual([400, "'region name' is necessary to register system shared memory region"]);
    expect(await err('/v2/systemsharedmemory/region/r/register', '{"byte_size":64}')).toEqual([400, "Shared memory register request has no 'key' field"]);
    expect(await err('/v2/systemsharedmemory/region/r/register', '{"key":"io"}')).toEqual([400, "Shared memory register request has no 'byte_size' field"]);
    expect(await err('/v2/systemsharedmemory/region/r/register', '{"key":7,"byte_size":64}')).toEqual([400, 'attempt to access JSON non-string as string']);
    expect(await err('/v2/systemsharedmemory/region/r/register', '{"key":"io","offset":-1,"byte_size":64}')).toEqual([400, 'attempt to access JSON non-unsigned-integer as unsigned-integer']);
    expect(await err('/v2/systemsharedmemory/region/r/register', '')).toEqual([400, 'failed to parse the request JSON buffer: The document is empty. at 0']);
    expect(await err('/v2/systemsharedmemory/region/r/register', '{"key":"nope","byte_size":64}')).toEqual([500, "Unable to open shared memory region: 'nope'"]);
    expect((await postJson('/v2/systemsharedmemory/region/r/register', { key: 'io', byte_size: 64 })).status).toBe(200);
    expect(await err('/v2/systemsharedmemory/region/r/register', '{"key":"io","byte_size":64}')).toEqual([400, "shared memory region 'r' already in manager"]);
  });

  it('register: a field given twice takes its last value, as every JSON body Triode reads (Triton: the first, README)', async () => {
    const register = (region: string, body: string) => fetch(url(`/v2/systemsharedmemory/region/${region}/register`), { method: 'POST', body });
    const r = await register('a', '{"key":"io","key":"nope","byte_size":64}');
    expect([r.status, ((await r.json()) as { error: string }).error]).toEqual([500, "Unable to open shared memory region: 'nope'"]);
    expect((await register('b', '{"key":"nope","key":"io","byte_size":8,"offset":1.5,"offset":0,"byte_size":64}')).status).toBe(200);
    expect(await (await fetch(url('/v2/systemsharedmemory/status'))).json()).toEqual([{ name: 'b', key: 'io', offset: 0, byte_size: 64 }]);
  });

  it('infer: an output its window cannot hold is 500 in Triton\'s words (the model ran); a window past the region, a size the tensor cannot have, data with a region: 400', async () => {
    regions.register('io', 'io', 0, PAGE_SIZE);
    const fail = async (body: unknown) => {
      const r = await postJson('/v2/models/simple/infer', body);
      return [r.status, ((await r.json()) as { error: string }).error];
    };
    expect(await fail(httpRequest(32))).toEqual([500, "shared memory size specified with the request for output 'OUTPUT0' (32 bytes) should be at least 64 bytes to hold the results"]);
    const req = httpRequest();
    req.inputs[0]!.parameters = shmParams(PAGE_SIZE - 8);
    expect(await fail(req)).toEqual([400, "Invalid offset + byte size for shared memory region: 'io'"]);
    req.inputs[0]!.parameters = shmParams(0, 60);
    expect(await fail(req)).toEqual([400, "input byte size mismatch for input 'INPUT0' for model 'simple'. Expected 64, got 60"]);
    expect(await fail({ ...httpRequest(), outputs: [{ name: 'OUTPUT0', parameters: { ...shmParams(AT.out0), binary_data: true } }] })).toEqual([400, "Output can't set both 'shared_memory_region' and 'binary_data'"]);
    expect(await fail({ ...httpRequest(), outputs: [{ name: 'OUTPUT0', parameters: { ...shmParams(AT.out0), classification: 2 } }] })).toEqual([400, "Output can't set both 'shared_memory_region' and 'classification'"]);
    // Every refused request gave its holds back: the region unregisters at once.
    regions.unregister('io');
    expect(regions.status()).toEqual([]);
  });
});

describe('system shared memory over gRPC', () => {
  it('register, status, ModelInfer on the direct path and through grpc-js (outputs leave an empty raw entry), unregister', async () => {
    await call(fast, 'SystemSharedMemoryRegister', { name: 'io', key: 'io', offset: 0, byte_size: PAGE_SIZE });
    expect(await call(fast, 'SystemSharedMemoryStatus', {})).toEqual({ regions: { io: { name: 'io', key: 'io', offset: 0, byte_size: PAGE_SIZE } } });
    for (const c of [fast, slow]) {
      clearOutputs();
      const r = await call(c, 'ModelInfer', grpcRequest());
      expect(r['raw_output_contents']).toEqual([Buffer.alloc(0), Buffer.alloc(0)]);
      expect((r['outputs'] as Plain[]).map((o) => [o['name'], o['shape']])).toEqual([['OUTPUT0', [1, 16]], ['OUTPUT1', [1, 16]]]);
      expect(outputs()).toEqual([SUM, DIFF]);
    }
    await expect(call(slow, 'ModelInfer', grpcRequest(16))).rejects.toMatchObject({
      code: status.INTERNAL, details: "shared memory size specified with the request for output 'OUTPUT0' (16 bytes) should be at least 64 bytes to hold the results",
    });
    await call(fast, 'SystemSharedMemoryUnregister', { name: '' });
    expect(await call(fast, 'SystemSharedMemoryStatus', {})).toEqual({ regions: {} });
  });

  it('ParseSharedMemoryParams: Triton\'s words for a byte size missing, an offset without a region, wrong kinds, contents with a region', async () => {
    regions.register('io', 'io', 0, PAGE_SIZE);
    const refused = (inputParams: Plain, extra: Plain = {}) => {
      const req = grpcRequest();
      req.inputs[0] = { ...req.inputs[0]!, parameters: inputParams as never, ...extra };
      return call(fast, 'ModelInfer', req);
    };
    await expect(refused({ shared_memory_region: { string_param: 'io' } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "'shared_memory_byte_size' must be specified along with 'shared_memory_region' parameter for tensor 'INPUT0'" });
    await expect(refused({ shared_memory_offset: { int64_param: 0 } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "'shared_memory_offset' can not be specified without 'shared_memory_region' parameter for tensor 'INPUT0'" });
    await expect(refused({ shared_memory_region: { string_param: 'io' }, shared_memory_byte_size: { string_param: '64' } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "invalid value type for 'shared_memory_byte_size' parameter for tensor 'INPUT0', expected int64_param." });
    await expect(refused(grpcShm(0), { contents: { int_contents: Array.from(IN0) } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "unexpected 'content' provided when using shared memory for input tensor 'INPUT0' for model 'simple'" });
    // A negative int64 is the uint64 Triton's size_t makes of it.
    await expect(refused(grpcShm(-8))).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "Invalid offset for shared memory region: 'io'" });
    const cls = grpcRequest();
    cls.outputs[0] = { name: 'OUTPUT0', parameters: { ...grpcShm(AT.out0), classification: { int64_param: 2 } } as never };
    await expect(call(fast, 'ModelInfer', cls)).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "output can't set both 'shared_memory_region' and 'classification'" });
    // An input in a region takes no raw_input_contents entry: INPUT1's is the first.
    clearOutputs();
    const mixed = { ...grpcRequest(), inputs: [grpcRequest().inputs[0], { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }], raw_input_contents: [bytes(IN1)] };
    await call(fast, 'ModelInfer', mixed);
    expect(outputs()).toEqual([SUM, DIFF]);
    regions.unregister('io');
    expect(regions.status()).toEqual([]);
  });

  it('ModelStreamInfer writes each response\'s outputs to its region and holds it until the request is done', async () => {
    regions.register('io', 'io', 0, PAGE_SIZE);
    const stream = slow.makeBidiStreamRequest('/inference.GRPCInferenceService/ModelStreamInfer',
      (m: object) => Buffer.from(messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject(m)).finish()),
      (b: Buffer) => messageType('ModelStreamInferResponse').toObject(messageType('ModelStreamInferResponse').decode(b), { longs: Number, defaults: true }) as Plain);
    const got = new Promise<Plain>((resolve, reject) => {
      stream.once('data', resolve);
      stream.once('error', reject);
    });
    clearOutputs();
    stream.write(grpcRequest());
    const m = await got;
    stream.end();
    expect(m['error_message']).toBe('');
    expect((m['infer_response'] as Plain)['raw_output_contents']).toEqual([Buffer.alloc(0), Buffer.alloc(0)]);
    expect(outputs()).toEqual([SUM, DIFF]);
    // Held, it stays listed until the server has released it (after the response went out).
    regions.unregister('io');
    await vi.waitFor(() => expect(regions.status()).toEqual([]), { timeout: 30_000, interval: 20 });
  });
});

describe('ModelStreamInfer with triton_grpc_error', () => {
  it('an output its region cannot hold ends the call with INTERNAL, as any error on such a stream (before: sent in the stream, the call went on)', async () => {
    regions.register('io', 'io', 0, PAGE_SIZE);
    const md = new Metadata();
    md.set('triton_grpc_error', 'true');
    const stream = slow.makeBidiStreamRequest('/inference.GRPCInferenceService/ModelStreamInfer',
      (m: object) => Buffer.from(messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject(m)).finish()),
      (b: Buffer) => messageType('ModelStreamInferResponse').toObject(messageType('ModelStreamInferResponse').decode(b), { longs: Number, defaults: true }) as Plain, md);
    const data: Plain[] = [];
    stream.on('data', (m: Plain) => data.push(m));
    const ended = new Promise<ServiceError>((resolve) => stream.once('error', resolve));
    stream.write(grpcRequest(16));
    const err = await ended;
    expect([err.code, err.details]).toEqual([status.INTERNAL, "shared memory size specified with the request for output 'OUTPUT0' (16 bytes) should be at least 64 bytes to hold the results"]);
    expect(data).toEqual([]);
    // Held, it stays listed until the server has released it (the call failed).
    regions.unregister();
    await vi.waitFor(() => expect(regions.status()).toEqual([]), { timeout: 30_000, interval: 20 });
  });
});

describe('large windows and budgets', () => {
  /** A backplane whose model returns its input `x` as output `y` (or holds every request until `release`). */
  function echo(hold?: Promise<void>): { backplane: Backplane; started: () => number } {
    let started = 0;
    const answer = async (r: InferenceRequest): Promise<InferenceResponse> => {
      started++;
      if (hold) await hold;
      const x = r.inputs[0]!;
      return { modelName: r.modelName, modelVersion: '1', outputs: [{ name: 'y', datatype: x.datatype, shape: x.shape, data: x.data }] };
    };
    const backplane = {
      isLive: async () => true, isReady: async () => true, modelReady: async () => true,
      serverMetadata: async () => ({ name: 'triton', version: '0', extensions: [] }),
      modelConfig: async (name: string) => ({ name }),
      infer: answer,
      inferStream: async (r: InferenceRequest, on: (x: InferenceResponse) => void) => { on(await answer(r)); },
    };
    return { backplane: backplane as unknown as Backplane, started: () => started };
  }

  it('a window over 1 MiB is read off the event loop and written back, over HTTP (both paths) and gRPC (both paths)', async () => {
    const n = (1 << 20) + 3 * PAGE_SIZE;
    const object = Buffer.alloc(2 * n + PAGE_SIZE);
    for (let i = 0; i < n; i++) object[i] = (i * 7) & 0xff;
    writeFileSync(join(dir, 'big'), object);
    const own = new SystemSharedMemory({ directory: dir });
    own.register('big', 'big', 0, object.byteLength);
    const { backplane } = echo();
    const bigApp = createHttpApp(backplane, { sharedMemory: own, maxInputSize: 4 << 20 });
    const h = await startHttpServer(bigApp, 0, '127.0.0.1');
    const g = await startGrpcServer(backplane, { address: '127.0.0.1:0', sharedMemory: own });
    const out = n + PAGE_SIZE;
    const written = () => readFileSync(join(dir, 'big')).subarray(out, out + n);
    const clear = () => {
      const fd = openSync(join(dir, 'big'), 'r+');
      writeSync(fd, Buffer.alloc(n), 0, n, out);
      closeSync(fd);
    };
    const win = (offset: number) => ({ shared_memory_region: 'big', shared_memory_offset: offset, shared_memory_byte_size: n });
    const body = JSON.stringify({ inputs: [{ name: 'x', datatype: 'UINT8', shape: [n], parameters: win(0) }], outputs: [{ name: 'y', parameters: win(out) }] });
    const clients = [new Service(`127.0.0.1:${g.port}`, credentials.createInsecure()), new Service(`127.0.0.1:${g.port}`, credentials.createInsecure(), { 'grpc.default_compression_algorithm': 2 })] as unknown as (Client & Record<string, Unary>)[];
    try {
      for (const send of [
        () => fetch(`http://127.0.0.1:${h.port}/v2/models/m/infer`, { method: 'POST', body }).then((r) => r.status),
        async () => (await bigApp.request('/v2/models/m/infer', { method: 'POST', body })).status,
      ]) {
        clear();
        expect(await send()).toBe(200);
        expect(written().equals(object.subarray(0, n))).toBe(true);
      }
      const g64 = (offset: number) => ({ shared_memory_region: { string_param: 'big' }, shared_memory_offset: { int64_param: offset }, shared_memory_byte_size: { int64_param: n } });
      for (const c of clients) {
        clear();
        await call(c, 'ModelInfer', { model_name: 'm', inputs: [{ name: 'x', datatype: 'UINT8', shape: [n], parameters: g64(0) }], outputs: [{ name: 'y', parameters: g64(out) }] });
        expect(written().equals(object.subarray(0, n))).toBe(true);
      }
      expect(own.inflightInputBytes).toBe(0);
      own.unregister();
      expect(own.status()).toEqual([]);
    } finally {
      for (const c of clients) c.close();
      await g.close(500);
      await h.close(500);
      own.close();
    }
  });

  it('attack: a stream\'s requests reach the server in the order sent, one reading a large window first (a sequence\'s next request overtook its START)', async () => {
    const n = (1 << 20) + PAGE_SIZE;
    writeFileSync(join(dir, 'first'), '');
    truncateSync(join(dir, 'first'), n);
    const own = new SystemSharedMemory({ directory: dir });
    own.register('first', 'first', 0, n);
    const order: string[] = [];
    const backplane = {
      inferStream: async (r: InferenceRequest, on: (x: InferenceResponse) => void) => {
        order.push(r.id ?? '');
        on({ modelName: r.modelName, modelVersion: '1', outputs: [] });
      },
    } as unknown as Backplane;
    const g = await startGrpcServer(backplane, { address: '127.0.0.1:0', sharedMemory: own });
    const c = new Service(`127.0.0.1:${g.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, object> };
    try {
      const stream = c.ModelStreamInfer();
      let answers = 0;
      stream.on('data', () => { answers++; });
      stream.on('error', () => undefined);
      const params = (start: boolean) => ({ sequence_id: { int64_param: 7 }, sequence_start: { bool_param: start } });
      // The START reads its input (over 1 MiB) from a region, off the event loop; the next request
      // of its sequence carries its own.
      stream.write({ model_name: 'm', id: 'start', parameters: params(true), inputs: [{ name: 'x', datatype: 'UINT8', shape: [n], parameters: { shared_memory_region: { string_param: 'first' }, shared_memory_byte_size: { int64_param: n } } }] });
      stream.write({ model_name: 'm', id: 'next', parameters: params(false), inputs: [{ name: 'x', datatype: 'UINT8', shape: [1] }], raw_input_contents: [Buffer.of(1)] });
      await vi.waitFor(() => expect(answers).toBe(2), { timeout: 30_000, interval: 10 });
      expect(order).toEqual(['start', 'next']);
      stream.end();
      await new Promise((r) => stream.on('end', r).on('close', r));
    } finally {
      c.close();
      await g.close(500);
      own.close();
    }
  }, 40_000);

  it('attack: inputs read from regions count against a gRPC stream\'s budget (review: 40 requests naming 16 MiB windows all started, 640 MiB against 64)', async () => {
    const size = 16 << 20;
    writeFileSync(join(dir, 'huge'), '');
    truncateSync(join(dir, 'huge'), size);
    const own = new SystemSharedMemory({ directory: dir, maxInflightInputBytes: 4 * 2 ** 30 });
    own.register('huge', 'huge', 0, size);
    let release!: () => void;
    const held = new Promise<void>((r) => { release = r; });
    const { backplane, started } = echo(held);
    const g = await startGrpcServer(backplane, { address: '127.0.0.1:0', sharedMemory: own });
    const c = new Service(`127.0.0.1:${g.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, object> };
    try {
      const stream = c.ModelStreamInfer();
      stream.on('data', () => undefined);
      stream.on('error', () => undefined);
      const req = { model_name: 'm', inputs: [{ name: 'x', datatype: 'UINT8', shape: [size], parameters: { shared_memory_region: { string_param: 'huge' }, shared_memory_byte_size: { int64_param: size } } }] };
      for (let i = 0; i < 40; i++) stream.write(req);
      // The first starts (a poll: a loaded machine may take longer), then the rest have 1.5 s to pile up.
      await vi.waitFor(() => expect(started()).toBeGreaterThan(0), { timeout: 30_000 });
      await new Promise((r) => setTimeout(r, 1500));
      // Paused once 64 MiB are held (MAX_STREAM_PENDING_BYTES): 4 requests, the fifth read before the pause.
      expect(started() * size).toBeLessThanOrEqual(MAX_STREAM_PENDING_BYTES + size);
      release();
      stream.end();
      await new Promise((r) => stream.on('end', r).on('close', r));
    } finally {
      release();
      c.close();
      await g.close(500);
      own.close();
    }
  }, 20_000);
});
