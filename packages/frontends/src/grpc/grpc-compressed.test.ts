/**
 * Compressed gRPC messages (grpc-encoding gzip or deflate) are inflated by the front door
 * (transport-guard.ts), each to at most its RPC's limit: 64 KiB for control calls and health
 * Check, the server's message limit for ModelInfer and ModelStreamInfer. grpc-js inflated them
 * itself up to 2 GiB before the 64 KiB check: 2 MB of gzip to SystemSharedMemoryStatus held 4.2 GB
 * and stalled the main thread ~15 s (review).
 */
import { createDeflate, createGzip, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, credentials, makeGenericClientConstructor, status, type Client, type ServiceError } from '@grpc/grpc-js';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, LogSettings, messageType, serviceDefinition } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { MODEL_INFER, MODEL_STREAM_INFER, grpcHeaders, grpcResult, openSession, simpleInferFrame, type GrpcResult } from '../../../../test/helpers/grpc-attack.js';
import { GRPC_CONTROL_MAX_MESSAGE_BYTES, startGrpcServer, type GrpcServerHandle } from './grpc-server.js';
import { memoryGrowth } from '../../../../test/helpers/memory.js';

type Plain = Record<string, unknown>;
type Unary = (req: object, md: Metadata, opts: object, cb: (err: ServiceError | null, res: Plain) => void) => void;

const MiB = 1024 * 1024;
const SERVICE = '/inference.GRPCInferenceService/';
const HEALTH_CHECK = '/grpc.health.v1.Health/Check';
/** The infer server's --grpc-max-message-size. */
const INFER_LIMIT = 16 * MiB;

let server: InferenceServer;
let grpc: GrpcServerHandle;
let limited: GrpcServerHandle;

/**
 * A compressed message whose field 1 (a string: a control request's name, Check's service,
 * ModelInfer's model_name) is `mib` MiB of zeros: about 1 KB per MiB, made without holding it.
 */
async function bomb(encoding: 'gzip' | 'deflate', mib: number): Promise<Buffer> {
  const n = mib * MiB;
  const varint: number[] = [];
  for (let v = n; ; v = Math.floor(v / 128)) {
    if (v < 128) {
      varint.push(v);
      break;
    }
    varint.push((v & 127) | 128);
  }
  const z = encoding === 'gzip' ? createGzip({ level: 9 }) : createDeflate({ level: 9 });
  const parts: Buffer[] = [];
  z.on('data', (d: Buffer) => parts.push(d));
  const ended = new Promise((r) => z.on('end', r));
  z.write(Buffer.from([0x0a, ...varint]));
  const zeros = Buffer.alloc(MiB);
  for (let i = 0; i < mib; i++) z.write(zeros);
  z.end();
  await ended;
  const body = Buffer.concat(parts);
  const prefix = Buffer.from([1, 0, 0, 0, 0]);
  prefix.writeUInt32BE(body.byteLength, 1);
  return Buffer.concat([prefix, body]);
}

/** Sends one message on a fresh stream of `port` and collects the outcome. */
async function send(port: number, path: string, encoding: string, frame: Buffer): Promise<GrpcResult> {
  const s = await openSession(port);
  try {
    const st = s.request(grpcHeaders(path, { 'grpc-encoding': encoding }));
    const done = grpcResult(st);
    st.end(frame);
    return await done;
  } finally {
    s.destroy();
  }
}

beforeAll(async () => {
  const repo = makeRepository(['simple']);
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()] });
  grpc = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', logSettings: new LogSettings() });
  limited = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', maxMessageBytes: INFER_LIMIT });
}, 60_000);

afterAll(async () => {
  await grpc?.close(1000);
  await limited?.close(1000);
  await server?.stop(1000);
});

/** A gRPC message frame (prefix and body) with its body gzipped and the compressed flag set. */
function gzipFrame(frame: Buffer): Buffer {
  const body = gzipSync(frame.subarray(5));
  const out = Buffer.alloc(5 + body.byteLength);
  out[0] = 1;
  out.writeUInt32BE(body.byteLength, 1);
  out.set(body, 5);
  return out;
}

/** Compressed calls that must still be served (the grpc-js client compresses every message with gzip). */
async function stillServes(port: number): Promise<void> {
  const options = { 'grpc.default_compression_algorithm': 2 };
  const Service = makeGenericClientConstructor(serviceDefinition('inference.GRPCInferenceService'), 'GRPCInferenceService');
  const Health = makeGenericClientConstructor(serviceDefinition('grpc.health.v1.Health'), 'Health');
  const client = new Service(`127.0.0.1:${port}`, credentials.createInsecure(), options) as unknown as Client & Record<string, Unary>;
  const health = new Health(`127.0.0.1:${port}`, credentials.createInsecure(), options) as unknown as Client & Record<string, Unary>;
  const call = (c: Client & Record<string, Unary>, rpc: string, req: object) => new Promise<Plain>((resolve, reject) => {
    c[rpc]!(req, new Metadata(), {}, (err, res) => (err ? reject(err) : resolve(res)));
  });
  try {
    expect((await call(health, 'Check', { service: '' }))['status']).toBe(1); // SERVING
    expect((await call(client, 'ModelReady', { name: 'simple' }))['ready']).toBe(true);
    const stats = await call(client, 'ModelStatistics', { name: 'simple' });
    expect((stats['model_stats'] as Plain[])[0]!['name']).toBe('simple');
    const raw = (a: Int32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);
    const answer = await call(client, 'ModelInfer', {
      model_name: 'simple',
      inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16] }, { name: 'INPUT1', datatype: 'INT32', shape: [1, 16] }],
      raw_input_contents: [raw(new Int32Array(16).fill(2)), raw(new Int32Array(16).fill(1))],
    });
    expect(answer['model_name']).toBe('simple');
  } finally {
    client.close();
    health.close();
  }
}

describe('compressed gRPC messages are inflated no further than their RPC allows', () => {
  it('attack: gzip/deflate bombs to control calls and health Check are RESOURCE_EXHAUSTED at 64 KiB; memory stays flat; the server goes on', async () => {
    // 48 MiB: ~48 KB compressed, within what 64 KiB could compress to, so it is inflated (and
    // stopped); 256 MiB: ~260 KB compressed, more than 64 KiB can come from, refused from its prefix.
    const cases: [string, 'gzip' | 'deflate', number][] = [
      ['SystemSharedMemoryStatus', 'gzip', 48], ['SystemSharedMemoryRegister', 'deflate', 48],
      ['SystemSharedMemoryUnregister', 'gzip', 256], ['TraceSetting', 'gzip', 48], ['LogSettings', 'deflate', 48],
      ['ModelStatistics', 'gzip', 48], ['ModelConfig', 'deflate', 256], ['Check', 'gzip', 48], ['Check', 'deflate', 48],
      ['Check', 'gzip', 256],
    ];
    const frames = await Promise.all(cases.map(([, encoding, mib]) => bomb(encoding, mib)));
    // Before: each was inflated whole by grpc-js (chunks and a copy: ~2x) before the size check.
    const { result, grownBytes } = await memoryGrowth(() => Promise.all(cases.map(([rpc, encoding], i) => send(grpc.port, rpc === 'Check' ? HEALTH_CHECK : SERVICE + rpc, encoding, frames[i]!))));
    cases.forEach(([rpc, encoding, mib], i) => {
      expect({ rpc, encoding, mib, status: result[i]!.status }).toEqual({ rpc, encoding, mib, status: status.RESOURCE_EXHAUSTED });
      expect(result[i]!.message).toMatch(new RegExp(`^a ${rpc} message .* is over the limit of ${GRPC_CONTROL_MAX_MESSAGE_BYTES} bytes for control calls$`));
    });
    expect(grownBytes).toBeLessThan(100 * MiB);
    await stillServes(grpc.port);
  }, 60_000);

  it('attack: a gzip/deflate bomb to ModelInfer and ModelStreamInfer (the grpc-js path) stops at the server\'s message limit', async () => {
    const frames = await Promise.all([bomb('gzip', 256), bomb('deflate', 256), bomb('gzip', 256)]);
    const paths = [MODEL_INFER, MODEL_INFER, MODEL_STREAM_INFER];
    const { result, grownBytes } = await memoryGrowth(() => Promise.all(paths.map((path, i) => send(limited.port, path, i === 1 ? 'deflate' : 'gzip', frames[i]!))));
    for (const r of result) {
      expect(r.status).toBe(status.RESOURCE_EXHAUSTED);
      expect(r.message).toBe(`Received message larger than max (over ${INFER_LIMIT} bytes decompressed vs. ${INFER_LIMIT})`);
    }
    // Three messages held to 16 MiB each (its chunks, then one copy), not 256 MiB.
    expect(grownBytes).toBeLessThan(150 * MiB);
    await stillServes(limited.port);
  }, 60_000);

  it('attack: with --grpc-max-message-size past what a Buffer can hold (8 GiB), a compressed ModelInfer is inflated and answered (zlib threw out of the read path; review)', async () => {
    const big = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', maxMessageBytes: 8 * 1024 * MiB });
    try {
      expect((await send(big.port, MODEL_INFER, 'gzip', gzipFrame(simpleInferFrame(1)))).status).toBe(status.OK);
      await stillServes(big.port);
    } finally {
      await big.close(1000);
    }
  });

  it('a compressed message announcing more than its limit could compress to is refused from its prefix, the rest unread', async () => {
    const s = await openSession(grpc.port);
    try {
      const st = s.request(grpcHeaders(SERVICE + 'ServerMetadata', { 'grpc-encoding': 'gzip' }), { endStream: false });
      const done = grpcResult(st);
      st.write(Buffer.from([1, 0x10, 0, 0, 0]));
      const r = await done;
      expect(r.status).toBe(status.RESOURCE_EXHAUSTED);
      expect(r.message).toBe(`a ServerMetadata message of ${0x10000000} compressed bytes is over the limit of ${GRPC_CONTROL_MAX_MESSAGE_BYTES} bytes for control calls`);
    } finally {
      s.destroy();
    }
  });

  it('a stream of gzip and plain messages, split anywhere across DATA frames, is answered in order; a bad one is INTERNAL', async () => {
    const all = Buffer.concat([gzipFrame(simpleInferFrame(1)), simpleInferFrame(2), gzipFrame(simpleInferFrame(3))]);
    const s = await openSession(grpc.port);
    try {
      const st = s.request(grpcHeaders(MODEL_STREAM_INFER, { 'grpc-encoding': 'gzip' }), { endStream: false });
      const chunks: Buffer[] = [];
      st.on('data', (c: Buffer) => chunks.push(c));
      const done = grpcResult(st);
      for (let at = 0; at < all.byteLength; at += 7) {
        st.write(all.subarray(at, at + 7));
        if (at % 70 === 0) await new Promise((r) => setImmediate(r));
      }
      st.end();
      const r = await done;
      expect(r.status).toBe(status.OK);
      // Three responses, in order (their OUTPUT0 is INPUT0 + INPUT1: k + 1).
      const frames = Buffer.concat(chunks);
      const firsts: number[] = [];
      const type = messageType('ModelStreamInferResponse');
      for (let i = 0; i + 5 <= frames.byteLength; i += 5 + frames.readUInt32BE(i + 1)) {
        const m = type.toObject(type.decode(frames.subarray(i + 5, i + 5 + frames.readUInt32BE(i + 1)))) as { error_message?: string; infer_response: { raw_output_contents: Uint8Array[] } };
        expect(m.error_message ?? '').toBe('');
        firsts.push(Buffer.from(m.infer_response.raw_output_contents[0]!).readInt32LE(0));
      }
      expect(firsts).toEqual([2, 3, 4]);
      // Not gzip at all: grpc-js's words, as before.
      const bad = Buffer.from([1, 0, 0, 0, 3, 1, 2, 3]);
      expect(await send(grpc.port, MODEL_INFER, 'gzip', bad)).toMatchObject({ status: status.INTERNAL, message: 'Failed to decompress message' });
      // Cut short: the stream ends before the announced bytes, as grpc-js answers it.
      const cut = await send(grpc.port, SERVICE + 'ServerLive', 'gzip', Buffer.from([1, 0, 0, 0, 50, 1, 2]));
      expect(cut.status).not.toBe(status.OK);
    } finally {
      s.destroy();
    }
  });
});
