/**
 * The gRPC frontend through @grpc/grpc-js as a plain client (stubs from Triode's .proto files):
 * every RPC, Triton's error texts and status codes, stream ordering, decoupled streams,
 * cancellation, restricted protocols, compression and channel options.
 */
import { readFileSync } from 'node:fs';
import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { gzipSync } from 'node:zlib';
import { constants as http2, type ClientHttp2Stream } from 'node:http2';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Metadata, credentials, makeGenericClientConstructor, status, type Client, type ClientDuplexStream, type ServiceError } from '@grpc/grpc-js';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { Errors, InferenceServer, LocalBackplane, LogSettings, TriodeError, messageType, serializeBytesTensor, serviceDefinition, type Backend, type Backplane } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { until } from '../../../../test/helpers/process.js';
import { MODEL_INFER, MODEL_STREAM_INFER, grpcHeaders, grpcResult, inferOnce, openSession, rapidReset, simpleInferFrame, unacknowledgedStreams } from '../../../../test/helpers/grpc-attack.js';
import { MAX_CLIENT_MESSAGE_CHARS, clientMessage, grpcError } from './grpc-status.js';
import { UNEXPECTED_ERROR_MESSAGE } from '../error-mapping.js';
import { parseRestrictions } from '../control/restricted.js';
import { MAX_STREAM_PENDING, MAX_STREAM_PENDING_BYTES, startGrpcServer, type GrpcServerHandle } from './grpc-server.js';

type Plain = Record<string, unknown>;
type Unary = (req: object, md: Metadata, opts: object, cb: (err: ServiceError | null, res: Plain) => void) => void;

let server: InferenceServer;
let grpc: GrpcServerHandle;
let restricted: GrpcServerHandle;
let small: GrpcServerHandle;
let client: Client & Record<string, Unary>;
/** No compression: its ModelInfer calls take the server's fast path. */
let plainClient: Client & Record<string, Unary>;
const Service = makeGenericClientConstructor(serviceDefinition('inference.GRPCInferenceService'), 'GRPCInferenceService');
const Health = makeGenericClientConstructor(serviceDefinition('grpc.health.v1.Health'), 'Health');

const plain = (type: string, m: object): Plain => messageType(type).toObject(m as never, { longs: Number, enums: String, defaults: true }) as Plain;

/** Calls a unary RPC; resolves with the response as a plain object (defaults filled in). */
function call(rpc: string, req: object = {}, md = new Metadata(), c: Client & Record<string, Unary> = client): Promise<Plain> {
  const responseType = `${rpc === 'Check' ? 'grpc.health.v1.HealthCheck' : rpc === 'ModelInfer' ? 'ModelInfer' : rpc}Response`;
  return new Promise((resolve, reject) => {
    c[rpc]!(req, md, {}, (err, res) => (err ? reject(err) : resolve(plain(responseType.replace(/^Model(Infer)Response$/, 'ModelInferResponse'), res))));
  });
}

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i);
const IN1 = new Int32Array(16).fill(1);
const raw = (a: ArrayBufferView) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
const int32s = (b: Uint8Array) => Array.from(new Int32Array(new Uint8Array(b).buffer));
const simpleRequest = (extra: Plain = {}) => ({
  model_name: 'simple',
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
  raw_input_contents: [raw(IN0), raw(IN1)],
  ...extra,
});

/**
 * Serves `backplane` on a server of its own; a raw HTTP/2 client (node:http2, default 64 KiB
 * windows) opens one stream, sends `requests` one by one and ends it without reading: it takes no data, so
 * it sends no WINDOW_UPDATE; after 1 s `whilePaused` checks the server's side, then the client
 * reads to the end. Resolves with how many responses it read. (A grpc-js client went on taking
 * data while paused, so what the server held depended on the machine's socket buffers.)
 */
async function readLate(backplane: Backplane, requests: object[], whilePaused: () => void): Promise<number> {
  const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
  const session = await openSession(h.port);
  try {
    const stream = session.request(grpcHeaders(MODEL_STREAM_INFER));
    stream.pause();
    for (const r of requests) {
      const msg = messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject(r)).finish();
      const frame = Buffer.alloc(5 + msg.byteLength);
      frame.writeUInt32BE(msg.byteLength, 1);
      frame.set(msg, 5);
      stream.write(frame);
      // One message at a time, as a client streaming requests sends them: the server reads (or
      // holds) each before the next comes.
      await new Promise((r) => setTimeout(r, 1));
    }
    stream.end();
    await new Promise((r) => setTimeout(r, 1000));
    whilePaused();
    // Counts the gRPC messages (5-byte prefix, then the message) as they come.
    let n = 0;
    let pending = Buffer.alloc(0);
    stream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
        pending = pending.subarray(5 + pending.readUInt32BE(1));
        n++;
      }
    });
    stream.resume();
    await new Promise((r) => stream.on('close', r));
    return n;
  } finally {
    session.destroy();
    await h.close(500);
  }
}

/** INPUT0 of each request the 'held' model has started, in order. */
const heldRan: number[] = [];
let openHeld: () => void = () => undefined;
let heldGate = Promise.resolve();
/** Holds the 'held' model's executions from now until the returned function is called. */
const holdModel = (): (() => void) => {
  heldRan.length = 0;
  heldGate = new Promise<void>((r) => { openHeld = r; });
  return () => openHeld();
};
/**
 * In-process backend of the 'held' model: OUTPUT0 = INPUT0, each execution waits for the test to
 * open the gate (so "the first call is running, the second queued" is a state, not a guess of
 * how long a sleep lasts).
 */
const holding: Backend = {
  name: 'holding',
  async modelInitialize() {
    return {
      async instanceInitialize() {
        return {
          async execute(requests) {
            for (const r of requests) heldRan.push((r.inputs[0]!.data as Int32Array)[0]!);
            await heldGate;
            return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUTPUT0' }] })) };
          },
          async finalize() {},
        };
      },
      async finalize() {},
    };
  },
};
/** The 'held' model's queue depth (requests waiting, not executing). */
const heldPending = (): number | undefined => server.metricsSnapshot().find((m) => m.name === 'held')?.pending;
const heldReq = (v: number) => ({ model_name: 'held', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1] }], raw_input_contents: [raw(Int32Array.of(v))] });
const WAIT = { timeout: 30_000, interval: 10 };

beforeAll(async () => {
  const repo = makeRepository(['simple', 'simple_int8', 'simple_string', 'simple_sequence', 'repeat_int32'], {
    'slow/config.pbtxt': 'name: "slow"\nbackend: "javascript"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\ninstance_group [ { count: 1, kind: KIND_CPU } ]\nparameters { key: "delay_ms" value: { string_value: "400" } }\n',
    'slow/1/model.mjs': readFileSync(new URL('../../../../model_repository/sleepy/1/model.mjs', import.meta.url), 'utf8'),
    'held/config.pbtxt': 'name: "held"\nbackend: "holding"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] } ]\ninstance_group [ { count: 1, kind: KIND_CPU } ]\n',
    'held/1/.keep': '',
  });
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend(), new JavaScriptBackend(), holding] });
  const logSettings = new LogSettings();
  grpc = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', logSettings });
  restricted = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', restrictions: parseRestrictions(['inference,model-repository:api-key=s3cret']) });
  small = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', maxMessageBytes: 1024 });
  plainClient = new Service(`127.0.0.1:${grpc.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
  client = new Service(`127.0.0.1:${grpc.port}`, credentials.createInsecure(), {
    'grpc.max_receive_message_length': 1 << 20,
    'grpc.max_send_message_length': 1 << 20,
    'grpc.keepalive_time_ms': 10000,
    'grpc.keepalive_timeout_ms': 5000,
    'grpc.default_compression_algorithm': 2,
  }) as unknown as Client & Record<string, Unary>;
}, 60000);

afterAll(async () => {
  client?.close();
  plainClient?.close();
  await small?.close(1000);
  await grpc?.close(1000);
  await restricted?.close(1000);
  await server?.stop(1000);
});

describe('health, metadata, config', () => {
  it('ServerLive, ServerReady, grpc.health.v1 Check, ServerMetadata', async () => {
    expect(await call('ServerLive')).toEqual({ live: true });
    expect(await call('ServerReady')).toEqual({ ready: true });
    const meta = await call('ServerMetadata');
    expect(meta['name']).toBe('triton');
    expect(meta['extensions']).toEqual(expect.arrayContaining(['classification', 'statistics']));
    const health = new Health(`127.0.0.1:${grpc.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    expect(await call('Check', { service: '' }, new Metadata(), health)).toEqual({ status: 'SERVING' });
    await expect(call('Check', { service: 'nope' }, new Metadata(), health)).rejects.toMatchObject({ code: status.NOT_FOUND });
    health.close();
  });

  it('ModelReady, ModelMetadata, ModelConfig; unknown models and bad versions get Triton errors', async () => {
    expect(await call('ModelReady', { name: 'simple' })).toEqual({ ready: true });
    expect(await call('ModelReady', { name: 'nope' })).toEqual({ ready: false });
    const meta = await call('ModelMetadata', { name: 'simple' });
    expect(meta).toMatchObject({ name: 'simple', versions: ['1'], platform: 'onnxruntime_onnx' });
    expect(meta['inputs']).toEqual([{ name: 'INPUT0', datatype: 'INT32', shape: [-1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [-1, 16] }]);
    await expect(call('ModelMetadata', { name: 'nope' })).rejects.toMatchObject({ code: status.NOT_FOUND, details: "Request for unknown model: 'nope' is not found" });
    const cfg = (await call('ModelConfig', { name: 'simple' }))['config'] as Plain;
    expect(cfg).toMatchObject({ name: 'simple', platform: 'onnxruntime_onnx', backend: 'onnxruntime', max_batch_size: 8 });
    expect((cfg['input'] as Plain[])[0]).toMatchObject({ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [16] });
    await expect(call('ModelConfig', { name: 'simple_int8', version: 'wrong_specification' })).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT, details: "failed to get model version from specified version string 'wrong_specification' (details: stol), version should be an integral value > 0",
    });
  });

  it('a version is read as Triton reads it (std::stol) by every RPC', async () => {
    const stol = (v: string) => `failed to get model version from specified version string '${v}' (details: stol), version should be an integral value > 0`;
    // White space, a sign, leading zeros and what follows the digits: still version 1.
    for (const version of [' 1', '\t+01', '1abc', '1 2']) {
      expect(await call('ModelReady', { name: 'simple', version })).toEqual({ ready: true });
      expect(await call('ModelMetadata', { name: 'simple', version })).toMatchObject({ versions: ['1'] });
      expect((await call('ModelConfig', { name: 'simple', version }))['config']).toMatchObject({ name: 'simple' });
      expect((await call('ModelStatistics', { name: 'simple', version }))['model_stats']).toMatchObject([{ version: '1' }]);
    }
    // Past 2^53 (in int64): no model has it, not found; the model's own error first.
    const big = '9007199254740993';
    expect(await call('ModelReady', { name: 'simple', version: big })).toEqual({ ready: false });
    for (const rpc of ['ModelMetadata', 'ModelConfig']) {
      await expect(call(rpc, { name: 'simple', version: big })).rejects.toMatchObject({ code: status.NOT_FOUND, details: `Request for unknown model: 'simple' version ${big} is not found` });
      await expect(call(rpc, { name: 'nope', version: big })).rejects.toMatchObject({ code: status.NOT_FOUND, details: "Request for unknown model: 'nope' is not found" });
    }
    // Statistics say it in their own words (Triton's TRITONSERVER_ServerModelStatistics).
    await expect(call('ModelStatistics', { name: 'simple', version: big })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "requested model version is not available for model 'simple'" });
    await expect(call('ModelStatistics', { name: 'nope', version: big })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "requested model 'nope' is not available" });
    // No digits, past int64, negative: INVALID_ARGUMENT with Triton's texts, ModelReady too.
    for (const [version, details] of [['x1', stol('x1')], ['-', stol('-')], ['9223372036854775808', stol('9223372036854775808')], [`1${'0'.repeat(5000)}`, stol(`1${'0'.repeat(255)}...`)],
      ['-1', "invalid model version specified '-1' , version should be an integral value > 0"]] as const) {
      for (const rpc of ['ModelReady', 'ModelMetadata', 'ModelConfig', 'ModelStatistics']) {
        await expect(call(rpc, { name: 'simple', version })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details });
      }
    }
    expect(await call('ModelReady', { name: 'simple', version: '-0' })).toEqual({ ready: false });
    // Every model's statistics: the version is read all the same, then ignored.
    await expect(call('ModelStatistics', { version: 'x1' })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: stol('x1') });
    expect(((await call('ModelStatistics', { version: big }))['model_stats'] as Plain[]).length).toBeGreaterThan(1);
  });
});

describe('ModelInfer', () => {
  it('raw_input_contents in, raw_output_contents out (with the request id)', async () => {
    const r = await call('ModelInfer', simpleRequest({ id: 'r1' }));
    expect(r).toMatchObject({ model_name: 'simple', model_version: '1', id: 'r1' });
    expect((r['outputs'] as Plain[]).map((o) => [o['name'], o['datatype'], o['shape']])).toEqual([['OUTPUT0', 'INT32', [1, 16]], ['OUTPUT1', 'INT32', [1, 16]]]);
    const [sum, diff] = r['raw_output_contents'] as Uint8Array[];
    expect(int32s(sum!)).toEqual(Array.from(IN0, (x) => x + 1));
    expect(int32s(diff!)).toEqual(Array.from(IN0, (x) => x - 1));
  });

  it('typed int_contents for INT32 and INT8, bytes_contents for BYTES; outputs still raw', async () => {
    const typed = await call('ModelInfer', {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], contents: { int_contents: Array.from(IN0) } },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], contents: { int_contents: Array.from(IN1) } },
      ],
    });
    expect(int32s((typed['raw_output_contents'] as Uint8Array[])[0]!)).toEqual(Array.from(IN0, (x) => x + 1));
    const i8 = await call('ModelInfer', {
      model_name: 'simple_int8',
      inputs: [
        { name: 'INPUT0', datatype: 'INT8', shape: [1, 16], contents: { int_contents: Array.from(IN0) } },
        { name: 'INPUT1', datatype: 'INT8', shape: [1, 16], contents: { int_contents: Array.from(IN1) } },
      ],
    });
    expect(Array.from(new Int8Array(new Uint8Array((i8['raw_output_contents'] as Uint8Array[])[0]!).buffer))).toEqual(Array.from(IN0, (x) => x + 1));
    const strings = await call('ModelInfer', {
      model_name: 'simple_string',
      inputs: [
        { name: 'INPUT0', datatype: 'BYTES', shape: [1, 16], contents: { bytes_contents: Array.from(IN0, (x) => Buffer.from(String(x))) } },
        { name: 'INPUT1', datatype: 'BYTES', shape: [1, 16], contents: { bytes_contents: Array.from(IN1, (x) => Buffer.from(String(x))) } },
      ],
    });
    const out0 = Buffer.from((strings['raw_output_contents'] as Uint8Array[])[0]!);
    expect(out0.equals(Buffer.from(serializeBytesTensor(Array.from(IN0, (x) => String(x + 1)))))).toBe(true);
  });

  it('mixing raw and typed contents, missing data and unknown models fail with Triton texts', async () => {
    const mixed = simpleRequest();
    (mixed.inputs[0] as Plain)['contents'] = { int_contents: Array.from(IN0) };
    await expect(call('ModelInfer', mixed)).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT, details: "contents field must not be specified when using raw_input_contents for 'INPUT0' for model 'simple'",
    });
    await expect(call('ModelInfer', { model_name: 'simple', inputs: simpleRequest().inputs })).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT, details: "unable to find data for input tensor 'INPUT0' for model 'simple' in request.",
    });
    await expect(call('ModelInfer', simpleRequest({ model_name: 'nope' }))).rejects.toMatchObject({ code: status.NOT_FOUND });
    for (const c of [client, plainClient]) {
      await expect(call('ModelInfer', simpleRequest({ model_version: 'x1' }), undefined, c)).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT, details: "failed to get model version from specified version string 'x1' (details: stol), version should be an integral value > 0",
      });
      // As Triton's std::stol reads it: version 1; past 2^53, not found (the model's error first, before the inputs are read).
      expect(await call('ModelInfer', simpleRequest({ model_version: ' 01x' }), undefined, c)).toMatchObject({ model_version: '1' });
      await expect(call('ModelInfer', simpleRequest({ model_version: '9007199254740993' }), undefined, c)).rejects.toMatchObject({
        code: status.NOT_FOUND, details: "Request for unknown model: 'simple' version 9007199254740993 is not found",
      });
      await expect(call('ModelInfer', { model_name: 'nope', model_version: '9007199254740993', inputs: [{ name: 'x' }] }, undefined, c)).rejects.toMatchObject({
        code: status.NOT_FOUND, details: "Request for unknown model: 'nope' is not found",
      });
    }
  });

  it('ModelInfer on a decoupled model is UNIMPLEMENTED', async () => {
    await expect(call('ModelInfer', { model_name: 'repeat_int32', inputs: [] })).rejects.toMatchObject({ code: status.UNIMPLEMENTED });
  });

  it('a cancelled call leaves the queue without running; the running one finishes', async () => {
    const stats = async () => ((await call('ModelStatistics', { name: 'held' }))['model_stats'] as Plain[])[0]!;
    const before = await stats();
    const release = holdModel();
    try {
      const first = call('ModelInfer', heldReq(1));
      await vi.waitFor(() => expect(heldRan).toEqual([1]), WAIT);
      let secondDone: (err: ServiceError | null) => void = () => undefined;
      const secondErr = new Promise<ServiceError | null>((r) => { secondDone = r; });
      const second = client.makeUnaryRequest(`/inference.GRPCInferenceService/ModelInfer`, (m: object) => Buffer.from(messageType('ModelInferRequest').encode(m).finish()), (b: Buffer) => b, heldReq(2), (err) => secondDone(err));
      await vi.waitFor(() => expect(heldPending()).toBe(1), WAIT);
      second.cancel();
      // It left the queue (and counts as a failure) while the first still runs.
      await vi.waitFor(() => expect(heldPending()).toBe(0), WAIT);
      const fail = (s: Plain) => Number(((s['inference_stats'] as Plain)['fail'] as Plain)['count']);
      await vi.waitFor(async () => expect(fail(await stats()) - fail(before)).toBe(1), WAIT);
      expect((await secondErr)?.code).toBe(status.CANCELLED);
      release();
      expect(int32s(((await first)['raw_output_contents'] as Uint8Array[])[0]!)).toEqual([1]);
      await vi.waitFor(async () => expect(Number((await stats())['execution_count']) - Number(before['execution_count'])).toBe(1), WAIT);
      // The cancelled one never ran.
      expect(heldRan).toEqual([1]);
    } finally {
      release();
    }
  });
});

describe('ModelStreamInfer', () => {
  function stream(md = new Metadata()) {
    const s = client.makeBidiStreamRequest('/inference.GRPCInferenceService/ModelStreamInfer',
      (m: object) => Buffer.from(messageType('ModelInferRequest').encode(m).finish()),
      (b: Buffer) => plain('ModelStreamInferResponse', messageType('ModelStreamInferResponse').decode(b)), md);
    const got: Plain[] = [];
    const done = new Promise<Plain[]>((resolve, reject) => {
      s.on('data', (m: Plain) => got.push(m));
      s.on('end', () => resolve(got));
      s.on('error', reject);
    });
    return { s, got, done };
  }
  const seqReq = (id: string, seq: number, value: number, start = false, end = false) => ({
    model_name: 'simple_sequence', id,
    parameters: { sequence_id: { int64_param: seq }, sequence_start: { bool_param: start }, sequence_end: { bool_param: end } },
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }], raw_input_contents: [raw(Int32Array.of(value))],
  });

  it.each([['30 days', 30 * 86_400_000], ['3 days', 3 * 86_400_000]])('a deadline %s away is honoured as one, not as one past (before: grpc-js read the 2592000S a client sends for 30 days as negative: DEADLINE_EXCEEDED at once)', async (_, ms) => {
    const s = client.makeBidiStreamRequest('/inference.GRPCInferenceService/ModelStreamInfer',
      (m: object) => Buffer.from(messageType('ModelInferRequest').encode(m).finish()),
      (b: Buffer) => plain('ModelStreamInferResponse', messageType('ModelStreamInferResponse').decode(b)), new Metadata(), { deadline: Date.now() + ms });
    const got: Plain[] = [];
    const done = new Promise<Plain[]>((resolve, reject) => {
      s.on('data', (m: Plain) => got.push(m));
      s.on('end', () => resolve(got));
      s.on('error', reject);
    });
    s.write(simpleRequest({ id: 'far' }));
    s.end();
    const answers = await done;
    expect(answers.map((a) => [a['error_message'], (a['infer_response'] as Plain)['id']])).toEqual([['', 'far']]);
  });

  it('two interleaved sequences: responses in request order, each with its request id; errors in-band', async () => {
    const { s, done } = stream();
    const values = [11, 7, 5, 3, 2, 0, 1];
    s.write(seqReq('1000_0', 1000, 0, true));
    s.write(seqReq('1001_0', 1001, 100, true));
    s.write({ model_name: 'nope', id: 'bad', inputs: [] });
    values.forEach((v, i) => {
      const last = i === values.length - 1;
      s.write(seqReq(`1000_${i + 1}`, 1000, v, false, last));
      s.write(seqReq(`1001_${i + 1}`, 1001, -v, false, last));
    });
    s.end();
    const got = await done;
    expect(got.map((g) => (g['infer_response'] as Plain)['id'])).toEqual(['1000_0', '1001_0', 'bad', ...values.flatMap((_, i) => [`1000_${i + 1}`, `1001_${i + 1}`])]);
    expect(got[2]!['error_message']).toBe("Request for unknown model: 'nope' is not found");
    const outs = (seq: string) => got.filter((g) => String((g['infer_response'] as Plain)['id']).startsWith(seq)).map((g) => int32s(((g['infer_response'] as Plain)['raw_output_contents'] as Uint8Array[])[0]!)[0]);
    expect(outs('1000_')).toEqual([1, 11, 7, 5, 3, 2, 0, 1]);
    expect(outs('1001_')).toEqual([101, -11, -7, -5, -3, -2, 0, -1]);
  });

  it('a version past 2^53 is not found in-band, the model\'s own error first; one past int64 is refused', async () => {
    const { s, done } = stream();
    s.write({ ...simpleRequest({ id: 'big', model_version: '9007199254740993' }) });
    s.write({ model_name: 'nope', id: 'nope', model_version: '9007199254740993', inputs: [] });
    s.write({ ...simpleRequest({ id: 'int64', model_version: '9223372036854775808' }) });
    s.write({ ...simpleRequest({ id: 'ok', model_version: '+1' }) });
    s.end();
    const got = await done;
    expect(got.map((g) => [(g['infer_response'] as Plain)['id'], g['error_message']])).toEqual([
      ['big', "Request for unknown model: 'simple' version 9007199254740993 is not found"],
      ['nope', "Request for unknown model: 'nope' is not found"],
      ['int64', "failed to get model version from specified version string '9223372036854775808' (details: stol), version should be an integral value > 0"],
      ['ok', ''],
    ]);
  });

  it('a decoupled model streams 0..N responses marked triton_final_response; an empty final on request', async () => {
    const { s, done } = stream();
    const rq = (id: string, n: number, emptyFinal: boolean) => ({
      model_name: 'repeat_int32', id,
      ...(emptyFinal ? { parameters: { triton_enable_empty_final_response: { bool_param: true } } } : {}),
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [n] }, { name: 'DELAY', datatype: 'UINT32', shape: [n] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
      raw_input_contents: [raw(Int32Array.from({ length: n }, (_, i) => 100 + i)), raw(new Uint32Array(n).fill(5)), raw(Uint32Array.of(10))],
    });
    s.write(rq('a', 3, false));
    s.end();
    const got = await done;
    const a = got.map((g) => g['infer_response'] as Plain);
    expect(a.map((r) => int32s((r['raw_output_contents'] as Uint8Array[])[0]!)[0])).toEqual([100, 101, 102]);
    expect(a.every((r) => r['id'] === 'a')).toBe(true);
    const finals = a.map((r) => ((r['parameters'] as Record<string, Plain>)['triton_final_response'] ?? {})['bool_param']);
    expect(finals.slice(0, 2)).toEqual([false, false]);
    const s2 = stream();
    s2.s.write(rq('e', 0, true));
    s2.s.end();
    const empty = (await s2.done).map((g) => g['infer_response'] as Plain);
    expect(empty).toHaveLength(1);
    expect(((empty[0]!['parameters'] as Record<string, Plain>)['triton_final_response'] ?? {})['bool_param']).toBe(true);
  });

  it('a cancelled stream reaches a decoupled model: it stops (isCancelled), and the next request does not wait out the first', async () => {
    const repeat = (delays: number[]) => ({
      model_name: 'repeat_int32',
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [delays.length] }, { name: 'DELAY', datatype: 'UINT32', shape: [delays.length] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
      raw_input_contents: [raw(Int32Array.from(delays, (_d, i) => i)), raw(Uint32Array.from(delays)), raw(Uint32Array.of(0))],
    });
    const first = (client as unknown as { ModelStreamInfer(): ClientDuplexStream<object, Plain> }).ModelStreamInfer();
    first.on('error', () => undefined);
    const gotOne = new Promise((resolve) => first.once('data', resolve));
    first.write(repeat([0, 30_000]));
    await gotOne;
    first.cancel();
    // The model's one instance is free again long before the 30 s the first request asked for.
    const t0 = performance.now();
    const second = (client as unknown as { ModelStreamInfer(): ClientDuplexStream<object, Plain> }).ModelStreamInfer();
    const answers: Plain[] = [];
    second.on('data', (m: Plain) => answers.push(m));
    const ended = new Promise((resolve) => second.on('end', resolve));
    second.write(repeat([0]));
    second.end();
    await ended;
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(answers.length).toBeGreaterThan(0);
    expect(answers[0]!['error_message'] ?? '').toBe('');
  }, 20_000);

  it('as Triton: every response (regular, a model\'s error) is marked triton_final_response, a request refused before it runs gets only its id; a non-bool empty-final flag is INVALID_ARG; regular answers do not wait behind a streaming decoupled request', async () => {
    const finalOf = (g: Plain) => (((g['infer_response'] as Plain)['parameters'] as Record<string, Plain> | undefined)?.['triton_final_response'] ?? {})['bool_param'];
    const { s, done } = stream();
    // A decoupled request that answers at once, then again after 3 s; behind it, a regular request and an error.
    s.write({
      model_name: 'repeat_int32', id: 'slow',
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [2] }, { name: 'DELAY', datatype: 'UINT32', shape: [2] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
      raw_input_contents: [raw(Int32Array.of(1, 2)), raw(Uint32Array.of(0, 3000)), raw(Uint32Array.of(0))],
    });
    const firstSeen = new Promise<void>((resolve) => s.once('data', () => resolve()));
    await firstSeen;
    s.write(seqReq('after', 2000, 5, true, true));
    s.write({ model_name: 'nope', id: 'bad', inputs: [] });
    s.write({ ...seqReq('flag', 2001, 1, true, true), parameters: { sequence_id: { int64_param: 2001 }, sequence_start: { bool_param: true }, sequence_end: { bool_param: true }, triton_enable_empty_final_response: { int64_param: 1 } } });
    s.end();
    const got = await done;
    // Answered before the decoupled request's second response (sent 3 s after its first), not after its end.
    const order = got.map((g) => (g['infer_response'] as Plain)['id']);
    expect(order.indexOf('after')).toBeLessThan(order.lastIndexOf('slow'));
    const byId = (id: string) => got.filter((g) => (g['infer_response'] as Plain)['id'] === id);
    expect(byId('after').map(finalOf)).toEqual([true]);
    // An unknown model is refused before the request runs: Triton clears the response and repopulates its id only.
    expect(byId('bad').map(finalOf)).toEqual([undefined]);
    expect(byId('bad')[0]!['error_message']).toBe("Request for unknown model: 'nope' is not found");
    expect(byId('flag')[0]!['error_message']).toBe("invalid value type for 'triton_enable_empty_final_response' parameter, expected bool_param.");
    expect(byId('slow').map(finalOf)).toEqual([false, false, true].slice(0, byId('slow').length));
  });

  it('a regular answer does not wait for a decoupled request ahead of it to send its first response', async () => {
    const { s, done } = stream();
    // Its first response would come after 30 s: the regular request behind it is answered long before.
    s.write({
      model_name: 'repeat_int32', id: 'silent',
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1] }, { name: 'DELAY', datatype: 'UINT32', shape: [1] }, { name: 'WAIT', datatype: 'UINT32', shape: [1] }],
      raw_input_contents: [raw(Int32Array.of(1)), raw(Uint32Array.of(30_000)), raw(Uint32Array.of(0))],
    });
    s.write(seqReq('regular', 3000, 5, true, true));
    // Before: the regular answer was held in order behind the decoupled request until its first response.
    const first = await new Promise<Plain>((resolve) => s.once('data', resolve));
    expect((first['infer_response'] as Plain)['id']).toBe('regular');
    s.cancel();
    await done.catch(() => undefined);
  }, 15_000);

  it('with the triton_grpc_error header, an error ends the stream with its status', async () => {
    const md = new Metadata();
    md.set('triton_grpc_error', 'true');
    const { s, done } = stream(md);
    s.write({ model_name: 'nope', inputs: [] });
    await expect(done).rejects.toMatchObject({ code: status.NOT_FOUND });
  });
});

describe('statistics, repository, logging, trace, shared memory', () => {
  it('ModelStatistics counts the requests above; RepositoryIndex lists every model with its state', async () => {
    const stats = ((await call('ModelStatistics', { name: 'simple' }))['model_stats'] as Plain[])[0]!;
    expect(stats['name']).toBe('simple');
    expect(Number(((stats['inference_stats'] as Plain)['success'] as Plain)['count'])).toBeGreaterThanOrEqual(2);
    expect(((await call('ModelStatistics'))['model_stats'] as Plain[]).length).toBeGreaterThanOrEqual(5);
    const index = (await call('RepositoryIndex', { ready: true }))['models'] as Plain[];
    expect(index.map((m) => m['name'])).toContain('simple');
    expect(index.find((m) => m['name'] === 'simple')).toMatchObject({ version: '1', state: 'READY' });
  });

  it('load and unload answer as Triton in model control mode NONE', async () => {
    await expect(call('RepositoryModelLoad', { model_name: 'simple' })).rejects.toMatchObject({ code: status.UNAVAILABLE, details: 'explicit model load / unload is not allowed if polling is enabled' });
    await expect(call('RepositoryModelUnload', { model_name: 'simple' })).rejects.toMatchObject({ code: status.UNAVAILABLE });
  });

  it('attack: RepositoryModelLoad with file:__proto__ hands over a file named __proto__ (review: it became the prototype of the files and was dropped)', async () => {
    let files: Record<string, Uint8Array> | undefined;
    const backplane = { loadModel: async (_name: string, o: { files?: Record<string, Uint8Array> }) => { files = o.files; } } as unknown as Backplane;
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    try {
      await call('RepositoryModelLoad', { model_name: 'm', parameters: { config: { string_param: '{}' }, 'file:__proto__': { bytes_param: Buffer.from('hello') } } }, new Metadata(), c);
      expect(Object.keys(files ?? {})).toEqual(['__proto__']);
      expect(Buffer.from(Object.getOwnPropertyDescriptor(files, '__proto__')?.value as Uint8Array).toString()).toBe('hello');
    } finally {
      c.close();
      await h.close(500);
    }
  });

  it('RepositoryModelLoad/Unload check parameter types as Triton: config a string_param, file: a bytes_param, no other name; unload_dependents a bool_param (review: a base64 string_param file was decoded, unknown names ignored, and the texts were Triode\'s)', async () => {
    const loads: unknown[] = [];
    const unloads: unknown[] = [];
    const backplane = {
      loadModel: async (_name: string, o: unknown) => { loads.push(o); },
      unloadModel: async (_name: string, o: unknown) => { unloads.push(o); },
    } as unknown as Backplane;
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    const load = (parameters: Record<string, unknown>) => call('RepositoryModelLoad', { model_name: 'm', parameters }, new Metadata(), c);
    const unload = (parameters: Record<string, unknown>) => call('RepositoryModelUnload', { model_name: 'm', parameters }, new Metadata(), c);
    const invalid = (details: string) => ({ code: status.INVALID_ARGUMENT, details });
    try {
      await expect(load({ config: { bytes_param: Buffer.from('{}') } })).rejects.toMatchObject(invalid("invalid value type for load parameter 'config', expected string_param."));
      await expect(load({ config: {} })).rejects.toMatchObject(invalid("invalid value type for load parameter 'config', expected string_param."));
      await expect(load({ config: { string_param: '{}' }, 'file:1/model.onnx': { string_param: 'AAAA' } })).rejects.toMatchObject(invalid("invalid value type for load parameter 'file:1/model.onnx', expected bytes_param."));
      await expect(load({ foo: { string_param: 'bar' } })).rejects.toMatchObject(invalid("unrecognized load parameter 'foo'."));
      await expect(load({ unload_dependents: { bool_param: true } })).rejects.toMatchObject(invalid("unrecognized load parameter 'unload_dependents'."));
      expect(loads).toEqual([]);
      await load({ config: { string_param: '{}' } });
      expect(loads).toHaveLength(1);
      await expect(unload({ unload_dependents: { string_param: 'true' } })).rejects.toMatchObject(invalid("invalid value type for 'unload_dependents' parameter, expected bool_param."));
      await expect(unload({ unload_dependents: {} })).rejects.toMatchObject(invalid("invalid value type for 'unload_dependents' parameter, expected bool_param."));
      expect(unloads).toEqual([]);
      // Other names are ignored by an unload, as Triton's.
      await unload({ unload_dependents: { bool_param: true }, other: { int64_param: 1 } });
      await unload({});
      expect(unloads).toEqual([{ unloadDependents: true, signal: expect.any(AbortSignal) }, { unloadDependents: false, signal: expect.any(AbortSignal) }]);
    } finally {
      c.close();
      await h.close(500);
    }
  });

  it('a RepositoryModelUnload is told when its client cancels the call (a cluster gateway gives up one still waiting for its turn; review: it waited on)', async () => {
    let seen: AbortSignal | undefined;
    const backplane = { unloadModel: (_name: string, o: { signal?: AbortSignal }) => { seen = o.signal; return new Promise<void>(() => undefined); } } as unknown as Backplane;
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & Record<string, (req: object, cb: (err: unknown) => void) => { cancel(): void }>;
    try {
      const pending = c['RepositoryModelUnload']!({ model_name: 'm' }, () => undefined);
      await until(async () => seen !== undefined);
      expect(seen!.aborted).toBe(false);
      pending.cancel();
      await until(async () => seen!.aborted);
    } finally {
      c.close();
      await h.close(500);
    }
  });

  it('attack: a RepositoryModelLoad with more parameters than a load may carry is refused before it is decoded (review: 5M empty entries, a 51 MB message, held the event loop 29 s and grew the server by 2.2 GB, in any model control mode and before the restricted-protocol check)', async () => {
    const loads: unknown[] = [];
    const backplane = { loadModel: async (_name: string, o: unknown) => { loads.push(o); } } as unknown as Backplane;
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    const files = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`file:${i}/x`, { bytes_param: Buffer.alloc(0) }]));
    const load = (parameters: Record<string, unknown>) => call('RepositoryModelLoad', { model_name: 'm', parameters }, new Metadata(), c);
    try {
      await expect(load({ config: { string_param: '{}' }, ...files(10_001) })).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: "a RepositoryModelLoad message with more than 10001 parameters is over the limit of a 'config' and 10000 'file:' overrides a load may carry",
      });
      expect(loads).toEqual([]);
      // At the limit it is decoded and read as before.
      await load({ config: { string_param: '{}' }, ...files(10_000) });
      expect(loads).toHaveLength(1);
    } finally {
      c.close();
      await h.close(500);
    }
  });

  it('attack: a RepositoryModelLoad that repeats a field past what a load holds is refused before it is decoded (review: 30M model_name fields, 90 MB, held the event loop 380 ms; 8 s at the 2 GiB limit)', async () => {
    const loads: string[] = [];
    const backplane = { loadModel: async (name: string) => { loads.push(name); } } as unknown as Backplane;
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const session = await openSession(h.port);
    const send = async (msg: Buffer) => {
      const st = session.request(grpcHeaders('/inference.GRPCInferenceService/RepositoryModelLoad'));
      const done = grpcResult(st);
      const frame = Buffer.alloc(5 + msg.byteLength);
      frame.writeUInt32BE(msg.byteLength, 1);
      frame.set(msg, 5);
      st.end(frame);
      return done;
    };
    // model_name (field 2) "a", 100,000 times; one parameters entry (field 3) of 100,000 keys.
    const name = Buffer.from([0x12, 0x01, 0x61]);
    const keys = Buffer.concat(Array.from({ length: 100_000 }, () => Buffer.from([0x0a, 0x01, 0x6b])));
    const entry = Buffer.concat([Buffer.from([0x1a, 0xe0, 0xa7, 0x12]), keys]);
    try {
      expect(await send(Buffer.concat(Array.from({ length: 100_000 }, () => name)))).toMatchObject({ status: status.INVALID_ARGUMENT, message: 'a RepositoryModelLoad message with more than 8 fields besides its parameters is not a load request' });
      expect(await send(entry)).toMatchObject({ status: status.INVALID_ARGUMENT, message: 'a RepositoryModelLoad parameter with more than 8 fields is not a load parameter' });
      expect(loads).toEqual([]);
      // A well-formed one is decoded and read as before.
      expect(await send(Buffer.concat([name, name]))).toMatchObject({ status: status.OK });
      expect(loads).toEqual(['a']);
    } finally {
      session.destroy();
      await h.close(500);
    }
  });

  it('a repository named in RepositoryIndex, load or unload is refused as Triton refuses it (UNIMPLEMENTED), and nothing is done', async () => {
    const refused = { code: status.UNIMPLEMENTED, details: "'repository_name' specification is not supported" };
    await expect(call('RepositoryIndex', { repository_name: 'any' })).rejects.toMatchObject(refused);
    await expect(call('RepositoryModelLoad', { repository_name: 'any', model_name: 'simple' })).rejects.toMatchObject(refused);
    await expect(call('RepositoryModelUnload', { repository_name: 'any', model_name: 'simple' })).rejects.toMatchObject(refused);
  });

  it('attack: a control call\'s message over 64 KiB is refused RESOURCE_EXHAUSTED before it is decoded (a TraceSetting of 140M empty strings ended the process)', async () => {
    const many = Array.from({ length: 40_000 }, () => '');
    await expect(call('TraceSetting', { settings: { trace_level: { value: many } } })).rejects.toMatchObject({
      // This client gzips: the front door stops inflating at the limit, so the size is not known.
      code: status.RESOURCE_EXHAUSTED, details: 'a TraceSetting message that decompresses to more than 65536 bytes is over the limit of 65536 bytes for control calls',
    });
    await expect(call('LogSettings', { settings: Object.fromEntries(Array.from({ length: 8_000 }, (_, i) => [`k${i}`, { bool_param: true }])) })).rejects.toMatchObject({ code: status.RESOURCE_EXHAUSTED });
    await expect(call('ModelReady', { name: 'x'.repeat(70_000) })).rejects.toMatchObject({ code: status.RESOURCE_EXHAUSTED });
    // Uncompressed, it is refused from its prefix, before it is read.
    await expect(call('TraceSetting', { settings: { trace_level: { value: many } } }, new Metadata(), plainClient)).rejects.toMatchObject({
      code: status.RESOURCE_EXHAUSTED, details: expect.stringMatching(/^a TraceSetting message of \d+ bytes is over the limit of 65536 bytes for control calls$/),
    });
    // Under the limit: answered as before.
    expect(await call('ServerLive')).toEqual({ live: true });
    expect(((await call('TraceSetting'))['settings'] as Record<string, Plain>)['trace_level']).toBeDefined();
  });

  it('LogSettings reads and changes the settings; TraceSetting stores global and per-model values', async () => {
    const logs = (await call('LogSettings'))['settings'] as Record<string, Plain>;
    expect(logs['log_info']).toMatchObject({ bool_param: true });
    const changed = (await call('LogSettings', { settings: { log_verbose_level: { uint32_param: 2 } } }))['settings'] as Record<string, Plain>;
    expect(changed['log_verbose_level']).toMatchObject({ uint32_param: 2 });
    // As Triton: a setting it does not know is ignored.
    await expect(call('LogSettings', { settings: { nope: { bool_param: true } } })).resolves.toBeDefined();
    await expect(call('LogSettings', { settings: { log_verbose_level: { uint32_param: 2 ** 32 - 1 } } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT });
    // A model it does not have: INVALID_ARGUMENT with Triton's words.
    await expect(call('TraceSetting', { model_name: 'nope', settings: {} })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: 'Request for unknown model : nope' });
    const t = (await call('TraceSetting', { settings: { trace_rate: { value: ['5'] } } }))['settings'] as Record<string, Plain>;
    expect(t['trace_rate']).toEqual({ value: ['5'] });
    // As Triton: a level that traces, with no trace file (a start-up setting), is refused.
    await expect(call('TraceSetting', { model_name: 'simple', settings: { trace_level: { value: ['TIMESTAMPS'] } } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: 'Attempting to set invalid trace setting :trace file name is not given' });
    const m = (await call('TraceSetting', { model_name: 'simple', settings: { trace_count: { value: ['3'] } } }))['settings'] as Record<string, Plain>;
    expect(m).toMatchObject({ trace_count: { value: ['3'] }, trace_rate: { value: ['5'] } });
    expect(((await call('TraceSetting'))['settings'] as Record<string, Plain>)['trace_level']).toEqual({ value: ['OFF'] });
    // As Triton (grpc_server.cc): a key it does not read is ignored, trace_mode is always reported,
    // a list for a single-valued setting and a number it cannot parse are INVALID_ARGUMENT with its words.
    const known = (await call('TraceSetting', { settings: { nope: { value: ['1'] }, trace_count: { value: ['3'] } } }))['settings'] as Record<string, Plain>;
    expect(known).toMatchObject({ trace_count: { value: ['3'] }, trace_mode: { value: ['triton'] } });
    expect(known['nope']).toBeUndefined();
    await expect(call('TraceSetting', { settings: { trace_rate: { value: ['1', '2'] } } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "expect only 1 value for 'trace_rate'" });
    await expect(call('TraceSetting', { settings: { log_frequency: { value: ['x'] } } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "Unable to parse 'log_frequency', got: x" });
    await expect(call('TraceSetting', { settings: { trace_count: { value: ['-2'] } } })).rejects.toMatchObject({ code: status.INVALID_ARGUMENT, details: "Unable to parse 'trace_count'. Expecting value >= -1, got: -2" });
    await call('TraceSetting', { settings: { trace_count: { value: [] } } });
  });

  it('without client shared memory: system status lists nothing, register and unregister say it is disabled (UNIMPLEMENTED), CUDA is not supported', async () => {
    await expect(call('SystemSharedMemoryStatus', {})).resolves.toMatchObject({ regions: {} });
    await expect(call('SystemSharedMemoryStatus', { name: 'r0' })).rejects.toMatchObject({ code: status.NOT_FOUND, details: "Unable to find system shared memory region: 'r0'" });
    for (const rpc of ['SystemSharedMemoryRegister', 'SystemSharedMemoryUnregister']) {
      await expect(call(rpc, { name: 'r0', key: 'k', byte_size: 64 })).rejects.toMatchObject({ code: status.UNIMPLEMENTED, details: expect.stringContaining('client shared memory is disabled') });
    }
    for (const rpc of ['CudaSharedMemoryStatus', 'CudaSharedMemoryRegister', 'CudaSharedMemoryUnregister']) {
      await expect(call(rpc)).rejects.toMatchObject({ code: status.UNIMPLEMENTED, details: expect.stringContaining('CUDA shared memory is not supported') });
    }
  });

  it('an output in a shared_memory_region with no value set is INVALID_ARGUMENT with Triton\'s words, not answered inline (fast path and grpc-js; review)', async () => {
    const request = simpleRequest({ outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: {} } }] });
    for (const c of [client, plainClient]) {
      await expect(call('ModelInfer', request, new Metadata(), c)).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT,
        details: "invalid value type for 'shared_memory_region' parameter for tensor 'OUTPUT0', expected string_param.",
      });
    }
  });

  it('attack: a string sequence_id over 256 bytes is INVALID_ARGUMENT before its sequence starts (fast path and grpc-js; review: 5 MB ids were held for max_sequence_idle)', async () => {
    const request = (id: string) => ({
      model_name: 'simple_sequence',
      parameters: { sequence_id: { string_param: id }, sequence_start: { bool_param: true }, sequence_end: { bool_param: true } },
      inputs: [{ name: 'INPUT', datatype: 'INT32', shape: [1, 1] }], raw_input_contents: [raw(Int32Array.of(4))],
    });
    for (const c of [client, plainClient]) {
      await expect(call('ModelInfer', request('7'.repeat(257)), new Metadata(), c)).rejects.toMatchObject({
        code: status.INVALID_ARGUMENT, details: 'string correlation ID (sequence_id) of 257 bytes is longer than the 256 bytes accepted',
      });
      const ok = await call('ModelInfer', request('7'.repeat(256)), new Metadata(), c);
      expect(int32s((ok['raw_output_contents'] as Uint8Array[])[0]!)).toEqual([5]);
    }
  });
});

describe('restricted protocols', () => {
  it('restricted groups need the triton-grpc-protocol-<key> header; others stay open', async () => {
    const c = new Service(`127.0.0.1:${restricted.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    expect(await call('ServerLive', {}, new Metadata(), c)).toEqual({ live: true });
    await expect(call('ModelInfer', simpleRequest(), new Metadata(), c)).rejects.toMatchObject({
      code: status.UNAVAILABLE, details: "This protocol is restricted, expecting header 'triton-grpc-protocol-api-key'",
    });
    const md = new Metadata();
    md.set('triton-grpc-protocol-api-key', 's3cret');
    expect((await call('ModelInfer', simpleRequest(), md, c))['model_name']).toBe('simple');
    c.close();
  });
});

describe('ModelInfer fast path (uncompressed calls, served in front of grpc-js)', () => {
  const slowReq = (v: number) => ({ model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1] }], raw_input_contents: [raw(Int32Array.of(v))] });
  const callWith = (c: Client & Record<string, Unary>, req: object, opts: object = {}) => new Promise<Plain>((resolve, reject) => {
    c['ModelInfer']!(req, new Metadata(), opts, (err, res) => (err ? reject(err) : resolve(plain('ModelInferResponse', res))));
  });

  it('answers like grpc-js: outputs, ids, Triton error texts and codes', async () => {
    const r = await callWith(plainClient, simpleRequest({ id: 'fast' }));
    expect(r['id']).toBe('fast');
    expect(int32s((r['raw_output_contents'] as Uint8Array[])[1]!)).toEqual(Array.from(IN0, (x) => x - 1));
    const mixed = simpleRequest();
    (mixed.inputs[1] as Plain)['contents'] = { int_contents: Array.from(IN1) };
    await expect(callWith(plainClient, mixed)).rejects.toMatchObject({
      code: status.INVALID_ARGUMENT, details: "contents field must not be specified when using raw_input_contents for 'INPUT1' for model 'simple'",
    });
    await expect(callWith(plainClient, simpleRequest({ model_name: 'nöpe' }))).rejects.toMatchObject({ code: status.NOT_FOUND, details: "Request for unknown model: 'nöpe' is not found" });
  });

  it('a deadline passes: DEADLINE_EXCEEDED, and the queued request leaves the queue', async () => {
    const first = callWith(plainClient, slowReq(1));
    await expect(callWith(plainClient, slowReq(2), { deadline: Date.now() + 100 })).rejects.toMatchObject({ code: status.DEADLINE_EXCEEDED });
    await first;
  });

  it('a message above the server limit: RESOURCE_EXHAUSTED', async () => {
    const c = new Service(`127.0.0.1:${small.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    const big = { model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1024] }], raw_input_contents: [Buffer.alloc(4096)] };
    await expect(callWith(c, big)).rejects.toMatchObject({ code: status.RESOURCE_EXHAUSTED });
    expect((await callWith(c, simpleRequest()))['model_name']).toBe('simple');
    c.close();
  });

  it('a response above the server limit: RESOURCE_EXHAUSTED with grpc-js\'s words (fast path and grpc-js)', async () => {
    const bigAnswer = { infer: async () => ({ modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'UINT8', shape: [2000], data: new Uint8Array(2000) }] }) } as unknown as Backplane;
    const h = await startGrpcServer(bigAnswer, { address: '127.0.0.1:0', maxMessageBytes: 1024 });
    try {
      for (const options of [{}, { 'grpc.default_compression_algorithm': 2 }]) {
        const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure(), options) as unknown as Client & Record<string, Unary>;
        await expect(callWith(c, { model_name: 'm' }), JSON.stringify(options)).rejects.toMatchObject({ code: status.RESOURCE_EXHAUSTED, details: expect.stringMatching(/^Sent message larger than max \(20\d\d vs. 1024\)$/) });
        c.close();
      }
    } finally {
      await h.close(500);
    }
  });

  it('attack: a stream that sends without reading holds at most MAX_STREAM_PENDING requests; all are answered once it reads', async () => {
    let started = 0;
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    const held = {
      inferStream: async (r: { id?: string }, on: (x: object) => void) => {
        started++;
        await released;
        on({ id: r.id, modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'UINT8', shape: [1], data: new Uint8Array(1) }] });
      },
    } as unknown as Backplane;
    const h = await startGrpcServer(held, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, Plain> };
    try {
      const stream = c.ModelStreamInfer();
      for (let i = 0; i < MAX_STREAM_PENDING + 300; i++) stream.write({ model_name: 'm', id: String(i) });
      stream.end();
      await new Promise((r) => setTimeout(r, 1000));
      // Before the fix all 400 were read and started (each then held its response).
      expect(started).toBeLessThanOrEqual(MAX_STREAM_PENDING);
      expect(started).toBeGreaterThan(0);
      release();
      const ids: string[] = [];
      stream.on('data', (m: Plain) => ids.push(String((m['infer_response'] as Plain)['id'])));
      await new Promise((r) => stream.on('end', r));
      expect(ids).toEqual(Array.from({ length: MAX_STREAM_PENDING + 300 }, (_, i) => String(i)));
    } finally {
      c.close();
      await h.close(500);
    }
  }, 20_000);

  /**
   * A backplane whose requests answer at once with 2 MB each (or `answer(id)`), except those `held`
   * names, which wait for `release()`; `seen` has every request id it started.
   */
  const bigAnswers = (held: (id: string) => boolean, answer = (id: string): object => ({ id, modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'UINT8', shape: [BIG], data: new Uint8Array(BIG) }] })) => {
    const seen: string[] = [];
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    const backplane = {
      inferStream: async (r: { id?: string }, on: (x: object) => void) => {
        seen.push(r.id!);
        if (held(r.id!)) await released;
        on(answer(r.id!));
      },
    } as unknown as Backplane;
    return { backplane, seen, release };
  };
  const BIG = 2 << 20;
  /** The ids of a stream's answers, once it ends. */
  const answeredIds = (stream: ClientDuplexStream<object, Plain>) => new Promise<string[]>((resolve) => {
    const ids: string[] = [];
    stream.on('data', (m: Plain) => ids.push(String((m['infer_response'] as Plain)['id'])));
    stream.on('end', () => resolve(ids));
  });

  it('attack: answers waiting behind a slow first request hold at most MAX_STREAM_PENDING_BYTES; all are answered once it ends (before: 1,000 answers of 2 MB)', async () => {
    // The first request waits (a sequence slot, a slow model); the others answer at once.
    const { backplane, seen, release } = bigAnswers((id) => id === '0');
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, Plain> };
    try {
      const stream = c.ModelStreamInfer();
      const n = 100;
      for (let i = 0; i < n; i++) stream.write({ model_name: 'm', id: String(i) });
      stream.end();
      await new Promise((r) => setTimeout(r, 1000));
      // Reading stops once the answers held pass the budget (one more may be read as it pauses).
      expect(seen.length).toBeLessThanOrEqual(MAX_STREAM_PENDING_BYTES / BIG + 2);
      expect(seen.length).toBeGreaterThan(1);
      release();
      expect(await answeredIds(stream)).toEqual(Array.from({ length: n }, (_, i) => String(i)));
    } finally {
      c.close();
      await h.close(500);
    }
  }, 30_000);

  it('attack: requests with 1 MB ids count toward MAX_STREAM_PENDING_BYTES: reading stops near it (before: ids counted nothing, and 1,000 of them ran the server out of heap)', async () => {
    // Every request waits, as behind a slow model; each holds its 1 MB id.
    const { backplane, seen, release } = bigAnswers(() => true, (id) => ({ id: id.slice(0, 8), modelName: 'm', modelVersion: '1', outputs: [] }));
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, Plain> };
    try {
      const stream = c.ModelStreamInfer();
      const n = 100;
      const pad = 'x'.repeat(1 << 20);
      for (let i = 0; i < n; i++) stream.write({ model_name: 'm', id: `${String(i).padStart(4, '0')}${pad}` });
      stream.end();
      await new Promise((r) => setTimeout(r, 1500));
      expect(seen.length).toBeLessThanOrEqual(MAX_STREAM_PENDING_BYTES / (1 << 20) + 2);
      expect(seen.length).toBeGreaterThan(1);
      release();
      expect(await answeredIds(stream)).toHaveLength(n);
    } finally {
      c.close();
      await h.close(500);
    }
  }, 30_000);

  it('attack: 50 requests in flight on one stream print no MaxListenersExceededWarning (before: one a stream, a log line any client could add)', async () => {
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    const backplane = {
      inferStream: async (r: { id?: string; signal?: AbortSignal }, on: (x: object) => void) => {
        const onAbort = () => undefined;
        r.signal?.addEventListener('abort', onAbort);
        await released;
        r.signal?.removeEventListener('abort', onAbort);
        on({ id: r.id, modelName: 'm', modelVersion: '1', outputs: [] });
      },
    } as unknown as Backplane;
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on('warning', onWarning);
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, Plain> };
    try {
      const stream = c.ModelStreamInfer();
      for (let i = 0; i < 50; i++) stream.write({ model_name: 'm', id: String(i) });
      stream.end();
      await new Promise((r) => setTimeout(r, 500));
      release();
      expect(await answeredIds(stream)).toHaveLength(50);
      await new Promise((r) => setImmediate(r));
      expect(warnings).not.toContain('MaxListenersExceededWarning');
    } finally {
      process.off('warning', onWarning);
      c.close();
      await h.close(500);
    }
  });

  it('a request refused on the wire, or before it runs (an unknown model), gets only its id back with the error, as Triton (before: no id, or the whole model name echoed back)', async () => {
    const backplane = { inferStream: async (r: { modelName: string }) => { throw Errors.unknownModel(r.modelName); } } as unknown as Backplane;
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, Plain> };
    try {
      const stream = c.ModelStreamInfer();
      const got = new Promise<Plain[]>((resolve) => {
        const all: Plain[] = [];
        stream.on('data', (m: Plain) => all.push(m));
        stream.on('end', () => resolve(all));
      });
      // 300 parameters: refused by the wire scan before decoding.
      const parameters = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`p${i}`, { bool_param: true }]));
      stream.write({ model_name: 'm', id: 'many-params', parameters });
      stream.write({ model_name: 'n'.repeat(100_000), id: 'unknown-model' });
      stream.end();
      const [a, b] = await got;
      expect(a!['error_message']).toMatch(/more parameters than/);
      expect(a!['infer_response']).toMatchObject({ id: 'many-params', model_name: '' });
      expect(b!['error_message']).toMatch(/^Request for unknown model/);
      expect(b!['infer_response']).toMatchObject({ id: 'unknown-model', model_name: '', model_version: '' });
      expect((b!['infer_response'] as Plain)['parameters']).toEqual({});
    } finally {
      c.close();
      await h.close(500);
    }
  });

  it('attack: all streams together hold at most the server\'s maxStreamPendingBytes; a stream holding nothing is still read, and all are answered', async () => {
    const { backplane, seen, release } = bigAnswers((id) => id.endsWith(':0'));
    const h = await startGrpcServer(backplane, { address: '127.0.0.1:0', maxStreamPendingBytes: 5 << 20 });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, Plain> };
    try {
      const n = 20;
      const streams = [c.ModelStreamInfer(), c.ModelStreamInfer()];
      streams.forEach((stream, k) => {
        for (let i = 0; i < n; i++) stream.write({ model_name: 'm', id: `${k}:${i}` });
        stream.end();
      });
      await new Promise((r) => setTimeout(r, 1000));
      // Two first requests held, and answers of 2 MB up to the 5 MiB budget (and one more a stream
      // as each pauses), not 38.
      expect(seen.length).toBeLessThanOrEqual(2 + 3 + 2 + 2);
      // Both first requests were read, whichever stream filled the budget first.
      expect(seen).toEqual(expect.arrayContaining(['0:0', '1:0']));
      release();
      const answered = await Promise.all(streams.map(answeredIds));
      answered.forEach((ids, k) => expect(ids).toEqual(Array.from({ length: n }, (_, i) => `${k}:${i}`)));
    } finally {
      c.close();
      await h.close(500);
    }
  }, 30_000);

  it('attack: decoupled requests count toward MAX_STREAM_PENDING too (out of the answer order, they held no place in it)', async () => {
    let started = 0;
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    const held = {
      inferStream: async (r: { id?: string }, on: (x: object) => void, options?: { onDecoupled?: () => void }) => {
        started++;
        options?.onDecoupled?.();
        await released;
        on({ id: r.id, modelName: 'm', modelVersion: '1', final: true, outputs: [] });
      },
    } as unknown as Backplane;
    const h = await startGrpcServer(held, { address: '127.0.0.1:0' });
    const c = new Service(`127.0.0.1:${h.port}`, credentials.createInsecure()) as unknown as Client & { ModelStreamInfer(): ClientDuplexStream<object, Plain> };
    try {
      const stream = c.ModelStreamInfer();
      const ids: string[] = [];
      stream.on('data', (m: Plain) => ids.push(String((m['infer_response'] as Plain)['id'])));
      for (let i = 0; i < MAX_STREAM_PENDING + 300; i++) stream.write({ model_name: 'm', id: String(i) });
      stream.end();
      await new Promise((r) => setTimeout(r, 1000));
      // Before (review): every request was read and started, without limit.
      expect(started).toBeLessThanOrEqual(MAX_STREAM_PENDING);
      release();
      await new Promise((r) => stream.on('end', r));
      expect(ids).toHaveLength(MAX_STREAM_PENDING + 300);
    } finally {
      c.close();
      await h.close(500);
    }
  }, 20_000);

  it('attack: a stream whose client does not read its (large) responses stops being read, and goes on when it reads', async () => {
    let started = 0;
    const big = {
      inferStream: async (r: { id?: string }, on: (x: object) => void) => {
        started++;
        on({ id: r.id, modelName: 'm', modelVersion: '1', outputs: [{ name: 'y', datatype: 'UINT8', shape: [1 << 20], data: new Uint8Array(1 << 20) }] });
      },
    } as unknown as Backplane;
    const n = await readLate(big, Array.from({ length: 300 }, (_, i) => ({ model_name: 'm', id: String(i) })), () => {
      // Before the fix all 300 ran at once and their 300 MiB of answers waited in the server.
      expect(started).toBeLessThan(100);
    });
    expect(n).toBe(300);
  }, 30_000);

  it('attack: a decoupled request whose client does not read is told to wait (its responses are not all buffered), and goes on when it reads', async () => {
    let produced = 0;
    const flood = {
      inferStream: async (r: { id?: string }, on: (x: object) => void | Promise<void>) => {
        // A model sending 300 responses of 1 MiB, each when the stream is ready for it (as a
        // JavaScript model's sender waits on what the handler returns).
        for (let i = 0; i < 300; i++) {
          produced++;
          await on({ id: r.id, modelName: 'm', modelVersion: '1', final: i === 299, outputs: [{ name: 'y', datatype: 'UINT8', shape: [1 << 20], data: new Uint8Array(1 << 20) }] });
        }
      },
    } as unknown as Backplane;
    const n = await readLate(flood, [{ model_name: 'm', id: 'x' }], () => {
      // Before the fix the handler never said wait: all 300 MiB were produced and held by the server.
      // Now what HTTP/2 and the sockets buffer before they push back is the bound (16 MiB here).
      expect(produced).toBeGreaterThan(0);
      expect(produced).toBeLessThan(150);
    });
    expect(n).toBe(300);
  }, 30_000);

  it('a cancelled call leaves the queue without running', async () => {
    const stats = async () => ((await call('ModelStatistics', { name: 'held' }))['model_stats'] as Plain[])[0]!;
    const before = await stats();
    const release = holdModel();
    try {
      const first = callWith(plainClient, heldReq(1));
      await vi.waitFor(() => expect(heldRan).toEqual([1]), WAIT);
      const second = plainClient.makeUnaryRequest('/inference.GRPCInferenceService/ModelInfer', (m: object) => Buffer.from(messageType('ModelInferRequest').encode(m).finish()), (b: Buffer) => b, heldReq(2), () => undefined);
      await vi.waitFor(() => expect(heldPending()).toBe(1), WAIT);
      second.cancel();
      await vi.waitFor(() => expect(heldPending()).toBe(0), WAIT);
      release();
      await first;
      await vi.waitFor(async () => expect(Number((await stats())['execution_count']) - Number(before['execution_count'])).toBe(1), WAIT);
      // The cancelled one never ran.
      expect(heldRan).toEqual([1]);
    } finally {
      release();
    }
  });
});

describe('the fast path on the wire', () => {
  it("answers ModelInfer with gRPC's headers and trailers and no date header (gRPC's C++ server, Triton's, sends none)", async () => {
    const s = await openSession(grpc.port);
    try {
      const st = s.request(grpcHeaders(MODEL_INFER));
      const headers = new Promise<Record<string, unknown>>((resolve) => st.once('response', (h) => resolve({ ...h })));
      const done = grpcResult(st);
      st.end(simpleInferFrame(2));
      const [h, r] = await Promise.all([headers, done]);
      expect(r.status).toBe(0);
      expect(r.body.byteLength).toBeGreaterThan(0);
      expect(h[':status']).toBe(200);
      expect(h['content-type']).toBe('application/grpc+proto');
      expect(h['grpc-encoding']).toBe('identity');
      expect(h).not.toHaveProperty('date');
    } finally {
      s.destroy();
    }
  });
});

describe('response compression (--grpc-infer-response-compression-level)', () => {
  it('gzips ModelInfer responses for clients that accept gzip, and answers the same values', async () => {
    const gz = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', inferResponseCompression: 'high' });
    const c = new Service(`127.0.0.1:${gz.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    try {
      const r = await new Promise<Plain>((resolve, reject) => {
        c['ModelInfer']!(simpleRequest(), new Metadata(), {}, (err, res) => (err ? reject(err) : resolve(plain('ModelInferResponse', res))));
      });
      expect(int32s((r['raw_output_contents'] as Uint8Array[])[0]!)).toEqual(Array.from(IN0, (x) => x + 1));
      // On the wire: a raw HTTP/2 call shows the compressed flag and grpc-encoding.
      const { connect } = await import('node:http2');
      const session = connect(`http://127.0.0.1:${gz.port}`);
      const body = Buffer.from(messageType('ModelInferRequest').encode(simpleRequest()).finish());
      const frame = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), body]);
      frame.writeUInt32BE(body.byteLength, 1);
      const wire = await new Promise<{ encoding: unknown; flag: number }>((resolve, reject) => {
        const req = session.request({ ':method': 'POST', ':path': '/inference.GRPCInferenceService/ModelInfer', 'content-type': 'application/grpc', te: 'trailers', 'grpc-accept-encoding': 'identity,gzip' });
        let encoding: unknown;
        const chunks: Buffer[] = [];
        req.on('response', (h) => { encoding = h['grpc-encoding']; });
        req.on('data', (d: Buffer) => chunks.push(d));
        req.on('end', () => resolve({ encoding, flag: Buffer.concat(chunks)[0]! }));
        req.on('error', reject);
        req.end(frame);
      });
      session.close();
      expect(wire).toEqual({ encoding: 'gzip', flag: 1 });
    } finally {
      c.close();
      await gz.close(500);
    }
  });
});

describe('transport hardening (issue #14): resets, GOAWAY, limits from headers and prefix, client-facing errors', () => {
  const slowReq = (v: number) => ({ model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1] }], raw_input_contents: [raw(Int32Array.of(v))] });
  const slowFrame = (v: number) => {
    const body = messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject({
      model_name: 'slow', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1] }], raw_input_contents: [raw(Int32Array.of(v))],
    })).finish();
    const frame = Buffer.alloc(5 + body.byteLength);
    frame.writeUInt32BE(body.byteLength, 1);
    frame.set(body, 5);
    return frame;
  };
  const executions = async () => Number((((await call('ModelStatistics', { name: 'slow' }))['model_stats'] as Plain[])[0]!)['execution_count']);
  /** The first grpc-status a stream gets (trailers-only headers or trailers), with its message. */
  const firstStatus = (st: ClientHttp2Stream) => new Promise<{ status: number; message: string }>((resolve, reject) => {
    const take = (h: Record<string, unknown>) => {
      if (h['grpc-status'] !== undefined) resolve({ status: Number(h['grpc-status']), message: decodeURIComponent(String(h['grpc-message'] ?? '')) });
    };
    st.on('response', take);
    st.on('trailers', take);
    st.on('error', () => undefined);
    st.on('close', () => reject(new Error(`stream closed without a status (rst ${st.rstCode})`)));
  });

  it.each([
    ['RST_STREAM INTERNAL_ERROR', (st: ClientHttp2Stream) => st.close(http2.NGHTTP2_INTERNAL_ERROR)],
    ['RST_STREAM CANCEL', (st: ClientHttp2Stream) => st.close(http2.NGHTTP2_CANCEL)],
    ['GOAWAY PROTOCOL_ERROR', (st: ClientHttp2Stream) => { st.session!.goaway(http2.NGHTTP2_PROTOCOL_ERROR); st.session!.destroy(); }],
    ['a destroyed session', (st: ClientHttp2Stream) => st.session!.destroy()],
  ])('a queued fast-path call whose client goes away (%s) is cancelled: it never runs, nothing throws', async (_, goAway) => {
    const before = await executions();
    // The first call runs (400 ms); once the server has read it (a PING round trip), the second queues behind it.
    const s1 = await openSession(grpc.port);
    const st1 = s1.request(grpcHeaders(), { endStream: false });
    const first = grpcResult(st1);
    st1.end(slowFrame(1));
    await new Promise<void>((r) => s1.ping(() => r()));
    const s = await openSession(grpc.port);
    const st = s.request(grpcHeaders(), { endStream: false });
    st.on('error', () => undefined);
    st.end(slowFrame(2));
    await new Promise<void>((r) => s.ping(() => r()));
    goAway(st);
    s.destroy();
    expect((await first).status).toBe(0);
    s1.destroy();
    // FIFO queue: had the abandoned call stayed queued, it would run before this one.
    await call('ModelInfer', slowReq(3), new Metadata(), plainClient);
    expect(await executions() - before).toBe(2);
  });

  it('attack: request metadata over 16 KiB (gRPC C++\'s hard limit) is refused RESOURCE_EXHAUSTED before any handler, from clients that acknowledge the limit or not (before: 64 KiB, 100 KB held per idle stream)', async () => {
    const md = (bytes: number) => {
      const m = new Metadata();
      m.set('x-pad', 'a'.repeat(bytes));
      return m;
    };
    // Under the limit: served (grpc-js, and the fast path).
    expect((await call('ServerLive', {}, md(12_000)))['live']).toBe(true);
    expect((await call('ModelInfer', simpleRequest(), md(12_000), plainClient))['model_name']).toBe('simple');
    for (const [rpc, req, c] of [['ServerLive', {}, client], ['ModelInfer', simpleRequest(), plainClient]] as const) {
      await expect(call(rpc, req, md(20_000), c)).rejects.toMatchObject({ code: status.RESOURCE_EXHAUSTED });
    }
    // A client that never acknowledges the server's SETTINGS: its streams (60 KB of headers each,
    // 1 byte a copy on the wire) are closed all the same, not left open holding their headers.
    const raw = await unacknowledgedStreams(grpc.port, 50, 60);
    try {
      await vi.waitFor(() => expect(raw.closedByServer()).toBe(50), { timeout: 5000, interval: 20 });
    } finally {
      raw.close();
    }
  }, 15_000);

  it('a restricted protocol is refused from the headers alone, before any message byte (fast path and grpc-js)', async () => {
    const s = await openSession(restricted.port);
    try {
      for (const path of [MODEL_INFER, '/inference.GRPCInferenceService/RepositoryModelLoad', '/inference.GRPCInferenceService/ModelStreamInfer']) {
        const st = s.request(grpcHeaders(path), { endStream: false });
        expect(await firstStatus(st)).toEqual({ status: status.UNAVAILABLE, message: "This protocol is restricted, expecting header 'triton-grpc-protocol-api-key'" });
      }
    } finally {
      s.destroy();
    }
  }, 10_000);

  it('a prefix announcing more than max_receive_message_length: RESOURCE_EXHAUSTED at once, the rest never read (fast path and grpc-js)', async () => {
    const s = await openSession(small.port);
    try {
      for (const encoding of ['identity', 'gzip']) {
        const st = s.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': encoding }), { endStream: false });
        const prefix = Buffer.from([encoding === 'gzip' ? 1 : 0, 0, 0, 0, 0]);
        prefix.writeUInt32BE(1 << 30, 1);
        st.write(Buffer.concat([prefix, Buffer.alloc(100)]));
        const r = await firstStatus(st);
        expect(r.status).toBe(status.RESOURCE_EXHAUSTED);
        expect(r.message).toMatch(/larger than/);
        st.close(http2.NGHTTP2_CANCEL);
      }
    } finally {
      s.destroy();
    }
    expect((await call('ModelInfer', simpleRequest(), new Metadata(), plainClient))['model_name']).toBe('simple');
  }, 10_000);

  it('attack: a control call announcing a 1 GiB message is refused RESOURCE_EXHAUSTED from its prefix, while the body is still coming, and not read further (review: grpc-js buffered it whole, up to --grpc-max-message-size, before the 64 KiB check)', async () => {
    const GiB = 1 << 30;
    const cases: [path: string, rpc: string, encoding: string, flag: number][] = [
      ['/inference.GRPCInferenceService/ServerMetadata', 'ServerMetadata', 'identity', 0],
      // A plain message on a stream that says gzip (gRPC allows it), and a flagged one that says identity (grpc-js reads it as it is).
      ['/inference.GRPCInferenceService/ModelConfig', 'ModelConfig', 'gzip', 0],
      ['/grpc.health.v1.Health/Check', 'Check', 'identity', 1],
    ];
    const s = await openSession(grpc.port);
    try {
      for (const [path, rpc, encoding, flag] of cases) {
        const st = s.request(grpcHeaders(path, { 'grpc-encoding': encoding }), { endStream: false });
        const done = grpcResult(st);
        const prefix = Buffer.from([flag, 0, 0, 0, 0]);
        prefix.writeUInt32BE(GiB, 1);
        st.write(prefix);
        // A few MB of the announced GiB (within the 8 MiB flow-control window, so all of it can
        // arrive): the body is never complete, so only a refusal from the prefix can answer.
        const chunk = Buffer.alloc(256 << 10);
        for (let i = 0; i < 12 && !st.closed; i++) st.write(chunk);
        let timer: NodeJS.Timeout | undefined;
        const r = await Promise.race([done, new Promise<undefined>((resolve) => { timer = setTimeout(() => resolve(undefined), 20_000); })]);
        clearTimeout(timer);
        if (!st.closed) st.close(http2.NGHTTP2_CANCEL);
        expect({ rpc, status: r?.status, message: r?.message }).toEqual({
          rpc, status: status.RESOURCE_EXHAUSTED, message: `a ${rpc} message of ${GiB} bytes is over the limit of 65536 bytes for control calls`,
        });
        // The server closed the stream (RST_STREAM NO_ERROR after its answer): it reads no more of it.
        expect(r!.rstCode).toBe(http2.NGHTTP2_NO_ERROR);
      }
    } finally {
      s.destroy();
    }
    // The server goes on serving control calls and infers.
    expect((await call('ServerMetadata'))['name']).toBeTruthy();
    const health = new Health(`127.0.0.1:${grpc.port}`, credentials.createInsecure()) as unknown as Client & Record<string, Unary>;
    try {
      expect(await call('Check', {}, new Metadata(), health)).toEqual({ status: 'SERVING' });
    } finally {
      health.close();
    }
    expect((await call('ModelInfer', simpleRequest(), new Metadata(), plainClient))['model_name']).toBe('simple');
  }, 60_000);

  it('a ModelStreamInfer message over the limit is refused in gRPC C++\'s words "(N vs. L)", first or after a response (review: grpc-js\'s "(N vs L)")', async () => {
    const s = await openSession(small.port);
    const over = Buffer.from([0, 0, 0, 0, 0]);
    over.writeUInt32BE(2000, 1);
    try {
      const first = s.request(grpcHeaders(MODEL_STREAM_INFER), { endStream: false });
      first.write(Buffer.concat([over, Buffer.alloc(100)]));
      expect(await firstStatus(first)).toEqual({ status: status.RESOURCE_EXHAUSTED, message: 'Received message larger than max (2000 vs. 1024)' });
      const later = s.request(grpcHeaders(MODEL_STREAM_INFER), { endStream: false });
      const answered = new Promise((resolve) => later.once('data', resolve));
      later.write(simpleInferFrame());
      await answered;
      later.write(Buffer.concat([over, Buffer.alloc(100)]));
      expect(await firstStatus(later)).toEqual({ status: status.RESOURCE_EXHAUSTED, message: 'Received message larger than max (2000 vs. 1024)' });
    } finally {
      s.destroy();
    }
  }, 10_000);

  it('attack: entries that decode into millions of objects are INVALID_ARGUMENT before decoding (fast path and grpc-js, gzip)', async () => {
    const encode = (m: object) => Buffer.from(messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject(m)).finish());
    const head = encode({ model_name: 'simple' });
    const cases: [Buffer, string][] = [
      // 200,000 empty raw_input_contents: 400 KB that decoded to ~30 MB of Buffers (20 MB: 1.3 GB, 80 MB: out of memory).
      [Buffer.concat([head, Buffer.from('3a00'.repeat(200_000), 'hex')]), 'the request has more raw_input_contents than the 1024 a request may have'],
      [Buffer.concat([head, Buffer.from('2a00'.repeat(200_000), 'hex')]), 'the request has more inputs than the 1024 a request may have'],
      [encode({ model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: new Array(100_000).fill(0) }] }), 'the request has more dims in the shape of an input than the 64 a request may have'],
      [encode({ model_name: 'simple', parameters: Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`p${i}`, { bool_param: true }])) }), 'the request has more parameters than the 256 a request may have'],
      // An empty group (field 15, wire types 3 and 4: protobufjs skips it) in front must not end the check.
      [Buffer.concat([Buffer.from('7b7c', 'hex'), head, Buffer.from('3a00'.repeat(5000), 'hex')]), 'the request has more raw_input_contents than the 1024 a request may have'],
      // 2M packed int64 zeros: a Long each when decoded.
      [encode({ model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT64', shape: [2_000_000], contents: { int64_contents: new Array(2_000_000).fill(0) } }] }), 'the request has more bytes_contents, int64_contents and uint64_contents elements than the 1048576 a request may have'],
    ];
    const s = await openSession(grpc.port);
    try {
      for (const [msg, message] of cases) {
        for (const encoding of ['identity', 'gzip']) {
          const payload = encoding === 'gzip' ? gzipSync(msg) : msg;
          const frame = Buffer.alloc(5 + payload.byteLength);
          frame[0] = encoding === 'gzip' ? 1 : 0;
          frame.writeUInt32BE(payload.byteLength, 1);
          frame.set(payload, 5);
          const st = s.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': encoding }));
          st.end(frame);
          const r = await grpcResult(st);
          expect({ encoding, status: r.status, message: r.message }).toEqual({ encoding, status: status.INVALID_ARGUMENT, message });
        }
      }
    } finally {
      s.destroy();
    }
    // A stream gets it in-band and goes on.
    const stream = (client as unknown as { ModelStreamInfer(): ClientDuplexStream<object, Plain> }).ModelStreamInfer();
    const answers: Plain[] = [];
    stream.on('data', (m: Plain) => answers.push(m));
    const ended = new Promise((resolve) => stream.on('end', resolve));
    stream.write({ model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: new Array(100).fill(1) }] });
    stream.write(simpleRequest({ id: 'after' }));
    stream.end();
    await ended;
    expect(answers.map((a) => a['error_message'])).toEqual(['the request has more dims in the shape of an input than the 64 a request may have', '']);
    expect((answers[1]!['infer_response'] as Plain)['id']).toBe('after');
  }, 20_000);

  it('attack: queued ModelInfer calls with typed contents hold their tensors, not the decoded JS arrays (fast path and grpc-js, gzip; before: 40 calls of 16M int_contents, 16 KB gzipped each, ran the server out of heap)', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const heap = (): number => {
      gc();
      gc();
      return getHeapStatistics().used_heap_size;
    };
    // A model that holds every request until released: the calls stay queued, as behind a busy instance.
    let started = 0;
    let release!: () => void;
    const released = new Promise<void>((r) => { release = r; });
    const held = {
      infer: async () => {
        started++;
        await released;
        return { modelName: 'm', modelVersion: '1', outputs: [] };
      },
    } as unknown as Backplane;
    const h = await startGrpcServer(held, { address: '127.0.0.1:0' });
    const s = await openSession(h.port);
    const n = 2_000_000;
    const encode = (m: object) => Buffer.from(messageType('ModelInferRequest').encode(messageType('ModelInferRequest').fromObject(m)).finish());
    const messages = [
      encode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'INT32', shape: [n], contents: { int_contents: new Array(n).fill(0) } }] }),
      encode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'FP32', shape: [n], contents: { fp32_contents: new Array(n).fill(0) } }] }),
      encode({ model_name: 'm', inputs: [{ name: 'x', datatype: 'BYTES', shape: [500_000], contents: { bytes_contents: new Array(500_000).fill(Buffer.alloc(0)) } }] }),
    ];
    const calls: Promise<unknown>[] = [];
    try {
      const before = heap();
      for (const msg of messages) {
        for (const encoding of ['identity', 'gzip']) {
          const payload = encoding === 'gzip' ? gzipSync(msg) : msg;
          const frame = Buffer.alloc(5 + payload.byteLength);
          frame[0] = encoding === 'gzip' ? 1 : 0;
          frame.writeUInt32BE(payload.byteLength, 1);
          frame.set(payload, 5);
          const st = s.request(grpcHeaders(MODEL_INFER, { 'grpc-encoding': encoding }));
          calls.push(grpcResult(st));
          st.end(frame);
        }
      }
      const deadline = Date.now() + 30_000;
      while (started < 6 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(started).toBe(6);
      // Their tensors are typed arrays (outside the heap); the decoded arrays held ~16 MB (a
      // number) or ~50 MB (a Buffer) a call each, over 200 MB in all.
      expect(heap() - before).toBeLessThan(48 << 20);
      release();
      expect((await Promise.all(calls) as { status?: number }[]).map((r) => r.status)).toEqual(new Array(6).fill(0));
    } finally {
      release();
      s.destroy();
      await h.close(500);
    }
  }, 60_000);

  it('attack: a stream message that passes the scan but does not decode is answered in band; the requests around it are answered', async () => {
    const s = await openSession(grpc.port);
    try {
      const st = s.request(grpcHeaders(MODEL_STREAM_INFER), { endStream: false });
      const chunks: Buffer[] = [];
      let grpcStatus: number | undefined;
      st.on('data', (c: Buffer) => chunks.push(c));
      st.on('trailers', (h) => { grpcStatus = Number(h['grpc-status']); });
      const closed = new Promise((r) => st.on('close', r));
      // A parameters entry whose value is a truncated varint: the scan does not look inside it.
      const bad = Buffer.from([0, 0, 0, 0, 4, 0x22, 0x02, 0x10, 0xff]);
      st.write(simpleInferFrame(1));
      st.write(bad);
      st.end(simpleInferFrame(3));
      await closed;
      const frames = Buffer.concat(chunks);
      const answers: Plain[] = [];
      for (let i = 0; i + 5 <= frames.length;) {
        const n = frames.readUInt32BE(i + 1);
        const type = messageType('ModelStreamInferResponse');
        answers.push(type.toObject(type.decode(frames.subarray(i + 5, i + 5 + n))) as Plain);
        i += 5 + n;
      }
      // Before: the whole stream ended INTERNAL "Error deserializing request", the first request unanswered.
      expect(grpcStatus).toBe(status.OK);
      expect(answers.map((a) => a['error_message'] ?? '')).toEqual(['', 'malformed ModelInferRequest (the message does not decode)', '']);
    } finally {
      s.destroy();
    }
  });

  it.each([
    ['uncompressed', {}, (f: Buffer) => f],
    ['gzip', { 'grpc-encoding': 'gzip' }, (f: Buffer) => {
      const z = gzipSync(f.subarray(5));
      const out = Buffer.alloc(5 + z.byteLength);
      out[0] = 1;
      out.writeUInt32BE(z.byteLength, 1);
      z.copy(out, 5);
      return out;
    }],
  ])('a ModelStreamInfer client that ends its stream mid-message: the whole messages are answered, the cut one dropped, the call ends OK, as gRPC C++ (Triton) (%s)', async (_, extra, encode) => {
    // gRPC C++ (chttp2_transport.cc grpc_chttp2_maybe_complete_recv_message): a message still
    // incomplete when the stream's read side closes is dropped and the read sees the end of the
    // stream; Triton's stream handler then finishes the call OK.
    const s = await openSession(grpc.port);
    try {
      const st = s.request(grpcHeaders(MODEL_STREAM_INFER, extra), { endStream: false });
      const r = grpcResult(st);
      st.write(encode(simpleInferFrame(1)));
      const cut = encode(simpleInferFrame(2));
      st.end(cut.subarray(0, cut.byteLength - 10));
      const done = await r;
      expect(done.status).toBe(status.OK);
      // One answer (the body after its 5-byte prefix is exactly one message), for request 1.
      const answer = messageType('ModelStreamInferResponse').toObject(messageType('ModelStreamInferResponse').decode(done.body), { defaults: true }) as Plain;
      const raw0 = (answer['infer_response'] as Plain)['raw_output_contents'] as Uint8Array[];
      expect(int32s(raw0[0]!)).toEqual(new Array(16).fill(2));
      expect(answer['error_message'] ?? '').toBe('');
    } finally {
      s.destroy();
    }
  });

  it('the status is data, not message text: a model named "larger than max" is NOT_FOUND, not RESOURCE_EXHAUSTED', async () => {
    await expect(call('ModelInfer', simpleRequest({ model_name: 'larger than max' }), new Metadata(), plainClient)).rejects.toMatchObject({
      code: status.NOT_FOUND, details: "Request for unknown model: 'larger than max' is not found",
    });
  });

  it('errors say what went wrong, not what is inside: no decoder internals, echoes cut, no stacks or paths', async () => {
    const s = await openSession(grpc.port);
    const st = s.request(grpcHeaders(), { endStream: false });
    st.end(Buffer.from([0, 0, 0, 0, 3, 0xff, 0xff, 0xff]));
    expect(await firstStatus(st)).toEqual({ status: status.INTERNAL, message: 'malformed ModelInferRequest (the message does not decode)' });
    s.destroy();
    const long = `BAD\n${'x'.repeat(5000)}`;
    const err = await call('ModelInfer', { model_name: 'simple', inputs: [{ name: 'INPUT0', datatype: long, shape: [1] }] }, new Metadata(), plainClient).catch((e: ServiceError) => e);
    expect(err).toMatchObject({ code: status.INVALID_ARGUMENT });
    expect((err as ServiceError).details).toContain("invalid datatype 'BAD\\u000a");
    expect((err as ServiceError).details.length).toBeLessThan(500);
    const logged: string[] = [];
    const logger = { error: () => undefined, warning: () => undefined, info: () => undefined, verbose: (_: number, m: string) => logged.push(m) };
    const e = grpcError(new TriodeError('INTERNAL', "failed to read '/srv/secret/repo/m/1/model.onnx': broken\n    at read (/work/main/x.js:1:1)"), logger);
    expect(e).toMatchObject({ code: status.INTERNAL, details: "failed to read '.../model.onnx': broken" });
    expect(logged.join('\n')).toContain('/srv/secret/repo/m/1/model.onnx');
    expect(clientMessage(new TriodeError('INVALID_ARG', 'y'.repeat(5000)))).toHaveLength(MAX_CLIENT_MESSAGE_CHARS + 3);
    // Not a TriodeError (a bug, a library's exception): a fixed message, as over HTTP; the detail is logged.
    const errors: string[] = [];
    const plainThrow = grpcError(new Error("ENOENT: no such file or directory, open '/srv/secret/x.onnx'"), { ...logger, error: (m: string) => errors.push(m) });
    expect(plainThrow).toMatchObject({ code: status.INTERNAL, details: UNEXPECTED_ERROR_MESSAGE });
    expect(errors.join('\n')).toContain('/srv/secret/x.onnx');
    // A 100 KB model name never becomes a 100 KB grpc-message trailer.
    const huge = await call('ModelInfer', simpleRequest({ model_name: 'm'.repeat(100_000) }), new Metadata(), plainClient).catch((x: ServiceError) => x);
    expect(huge).toMatchObject({ code: status.NOT_FOUND });
    expect((huge as ServiceError).details.length).toBeLessThanOrEqual(MAX_CLIENT_MESSAGE_CHARS + 3);
  });

  it('a grpc-timeout of zero is a deadline already passed: DEADLINE_EXCEEDED on every RPC, and nothing runs, as gRPC C++ (Triton) (before: OK for a call answered at once)', async () => {
    const before = await executions();
    const s = await openSession(grpc.port);
    try {
      const once = (path: string, timeout: string, body: Buffer) => {
        const st = s.request(grpcHeaders(path, { 'grpc-timeout': timeout }));
        const r = grpcResult(st);
        st.end(body);
        return r;
      };
      const unknown = simpleInferFrame();
      unknown.write('nope!!', unknown.indexOf('simple'));
      for (const timeout of ['0n', '0u', '0m', '0S', '0M', '00000000H']) {
        for (const [path, body] of [
          ['/inference.GRPCInferenceService/ServerLive', Buffer.alloc(5)],
          [MODEL_INFER, unknown],
          [MODEL_INFER, slowFrame(1)],
          [MODEL_STREAM_INFER, slowFrame(1)],
        ] as const) {
          const r = await once(path, timeout, body);
          expect({ timeout, path, status: r.status, message: r.message }).toEqual({ timeout, path, status: status.DEADLINE_EXCEEDED, message: 'Deadline Exceeded' });
        }
      }
    } finally {
      s.destroy();
    }
    expect(await executions()).toBe(before);
  });

  it('a malformed grpc-timeout is no deadline on every path, as on the fast path and in gRPC C++ (before: grpc-js answered INTERNAL "Invalid grpc-timeout value", or read a deadline out of "100mm")', async () => {
    const s = await openSession(grpc.port);
    try {
      for (const timeout of ['abc', '1.5S', '100mm', 'x5S', '5', '123456789S', '-1S']) {
        const st = s.request(grpcHeaders('/inference.GRPCInferenceService/ServerLive', { 'grpc-timeout': timeout }));
        const r = grpcResult(st);
        st.end(Buffer.alloc(5));
        expect({ timeout, status: (await r).status }).toEqual({ timeout, status: 0 });
      }
    } finally {
      s.destroy();
    }
    expect((await inferOnce(grpc.port, 10_000, { 'grpc-timeout': 'abc' })).status).toBe(0);
  });

  it('a grpc-timeout beyond what a timer holds is no deadline (not one that fires at once)', async () => {
    expect((await inferOnce(grpc.port, 10_000, { 'grpc-timeout': '99999999H' })).status).toBe(0);
  });

  it('bounds streams per connection and closes a connection that resets too fast with GOAWAY ENHANCE_YOUR_CALM; others keep working', async () => {
    const tight = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', maxConcurrentStreams: 100, maxStreamResetBurst: 20, maxStreamResetsPerSecond: 1 });
    try {
      const s = await openSession(tight.port);
      await new Promise<void>((r) => s.ping(() => r()));
      expect(s.remoteSettings.maxConcurrentStreams).toBe(100);
      s.destroy();
      const r = await rapidReset(tight.port, 200);
      expect(r.goawayCode).toBe(http2.NGHTTP2_ENHANCE_YOUR_CALM);
      const ok = await inferOnce(tight.port, 10_000);
      expect(ok.status).toBe(0);
    } finally {
      await tight.close(500);
    }
  });
});
