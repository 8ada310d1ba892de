/**
 * Both clients and `runPerf` against servers that answer wrongly on purpose: a response that does
 * not add up must reject with InferenceServerError (never crash the process, never resolve with
 * data cut to fit), and a server that trickles, never ends or never answers must not hold a call
 * or its memory forever.
 */
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createH2Server, type Http2Server, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { messageType } from '@triode/core';
import { InferenceServerError } from './errors.js';
import { GrpcClient } from './grpc-client.js';
import { HttpClient, decodeInferResponse } from './http-client.js';
import { runPerf } from './perf/perf-runner.js';
import type { InferenceClient, InferInput } from './types.js';

const inputs: InferInput[] = [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }];
const opened: { close(): void }[] = [];
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
});

/** An HTTP server whose every request goes to `handler` (set per test). */
let httpHandler: (req: IncomingMessage, res: ServerResponse) => void = (_q, res) => res.end();
let httpServer: Server | undefined;
async function httpClient(options: ConstructorParameters<typeof HttpClient>[1] = {}): Promise<HttpClient> {
  if (!httpServer) {
    httpServer = createHttpServer((req, res) => {
      res.on('error', () => undefined);
      req.resume();
      req.on('end', () => httpHandler(req, res));
    });
    await new Promise<void>((r) => httpServer!.listen(0, '127.0.0.1', r));
  }
  const c = new HttpClient(`http://127.0.0.1:${(httpServer.address() as AddressInfo).port}`, options);
  opened.push(c);
  return c;
}

/** An HTTP/2 (gRPC) server whose every finished request stream goes to `h2Handler`. */
let h2Handler: (s: ServerHttp2Stream) => void = (s) => s.close();
let h2Server: Http2Server | undefined;
async function grpcClient(options: ConstructorParameters<typeof GrpcClient>[1] = {}): Promise<GrpcClient> {
  if (!h2Server) {
    h2Server = createH2Server();
    h2Server.on('stream', (s) => {
      s.on('error', () => undefined);
      s.resume();
      s.on('end', () => h2Handler(s));
    });
    await new Promise<void>((r) => h2Server!.listen(0, '127.0.0.1', r));
  }
  const c = new GrpcClient(`127.0.0.1:${(h2Server.address() as AddressInfo).port}`, options);
  opened.push(c);
  return c;
}

afterAll(async () => {
  await new Promise((r) => (httpServer ? httpServer.close(r) : r(undefined)));
  await new Promise((r) => (h2Server ? h2Server.close(r) : r(undefined)));
});

/** A gRPC message with its 5-byte prefix. */
function grpcFrame(type: string, message: object): Buffer {
  const body = Buffer.from(messageType(type).encode(message).finish());
  const f = Buffer.alloc(5 + body.length);
  f.writeUInt32BE(body.length, 1);
  body.copy(f, 5);
  return f;
}

/** Answers a gRPC call with `body` and status OK. */
const grpcOk = (body: Buffer) => (s: ServerHttp2Stream) => {
  s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
  s.end(body);
};

async function rejection(p: Promise<unknown>): Promise<InferenceServerError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(InferenceServerError);
  return err as InferenceServerError;
}

describe('HTTP infer responses are checked before they are trusted', () => {
  const header = (doc: object) => Buffer.from(JSON.stringify(doc));
  const binary = (outputs: object[], data: Buffer) => {
    const h = header({ model_name: 'm', model_version: '1', outputs });
    return { body: Buffer.concat([h, data]), hl: String(h.byteLength) };
  };

  it.each([
    ['INT32', ['abc', {}, null], 0],
    ['UINT8', [300, -1], 0],
    ['INT32', [1, 3.7], 1],
    ['BOOL', ['false', 0], 0],
    ['FP32', [1, 1e300], 1],
    ['BYTES', ['ok', 1], 1],
  ])('refuses JSON %s data %j that is not of its type (review: converted and returned as valid)', (datatype, data, bad) => {
    const body = header({ model_name: 'm', model_version: '1', outputs: [{ name: 'O', datatype, shape: [data.length], data }] });
    expect(() => decodeInferResponse(body, undefined)).toThrow(new RegExp(`element ${bad} of its JSON data .* is not a ${datatype} value`));
  });

  it('reads JSON data at the edges of its type, NaN and infinities included', () => {
    const out = (datatype: string, data: unknown[], raw?: string) => {
      const text = raw ?? JSON.stringify({ model_name: 'm', model_version: '1', outputs: [{ name: 'O', datatype, shape: [data.length], data }] });
      return Array.from(decodeInferResponse(Buffer.from(text), undefined).outputs[0]!.data as ArrayLike<unknown>);
    };
    expect(out('UINT8', [0, 255])).toEqual([0, 255]);
    expect(out('INT8', [-128, 127])).toEqual([-128, 127]);
    expect(out('INT64', [], '{"model_name":"m","model_version":"1","outputs":[{"name":"O","datatype":"INT64","shape":[2],"data":[9223372036854775807,-9223372036854775808]}]}')).toEqual([2n ** 63n - 1n, -(2n ** 63n)]);
    expect(out('FP32', [], '{"model_name":"m","model_version":"1","outputs":[{"name":"O","datatype":"FP32","shape":[3],"data":[NaN,Infinity,-1.5]}]}')).toEqual([NaN, Infinity, -1.5]);
    expect(out('BOOL', [true, false])).toEqual([1, 0]);
  });

  it('refuses binary_data_size past the end, negative, or not whole elements', () => {
    let r = binary([{ name: 'S', datatype: 'BYTES', shape: [3], parameters: { binary_data_size: 1000 } }], Buffer.from([1, 0, 0, 0, 65]));
    expect(() => decodeInferResponse(r.body, r.hl)).toThrow(/binary_data_size 1000/);
    r = binary([{ name: 'A', datatype: 'INT32', shape: [1], parameters: { binary_data_size: -8 } }], Buffer.alloc(4));
    expect(() => decodeInferResponse(r.body, r.hl)).toThrow(InferenceServerError);
    r = binary([{ name: 'A', datatype: 'INT32', shape: [1], parameters: { binary_data_size: 6 } }], Buffer.alloc(6));
    expect(() => decodeInferResponse(r.body, r.hl)).toThrow(/6 bytes of data, not 1 INT32/);
  });

  it('refuses a header length that is negative, not a number or past the body', () => {
    const r = binary([], Buffer.alloc(0));
    for (const hl of ['-4', 'abc', String(r.body.byteLength + 1), '1e3']) {
      expect(() => decodeInferResponse(r.body, hl), hl).toThrow(/Inference-Header-Content-Length/);
    }
  });

  it('refuses BYTES data whose element count differs from the shape', () => {
    const two = Buffer.from([1, 0, 0, 0, 65, 1, 0, 0, 0, 66]);
    const r = binary([{ name: 'S', datatype: 'BYTES', shape: [3], parameters: { binary_data_size: two.byteLength } }], two);
    expect(() => decodeInferResponse(r.body, r.hl)).toThrow(/not 3 BYTES elements/);
    const json = header({ outputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: ['a', 'b'] }] });
    expect(() => decodeInferResponse(json, undefined)).toThrow(/has 2 elements of JSON data, not 1 \(shape \[1\]\)/);
  });

  it('attack: JSON data whose element count differs from the shape is refused before it is converted (200 MB of strings for a shape of [1] ran the client out of heap)', () => {
    const encode = vi.spyOn(TextEncoder.prototype, 'encode');
    const from = vi.spyOn(Float64Array, 'from');
    try {
      const strings = header({ outputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: Array.from({ length: 100_000 }, (_, i) => String(i)) }] });
      expect(() => decodeInferResponse(strings, undefined)).toThrow(/has 100000 elements of JSON data, not 1/);
      const doubles = header({ outputs: [{ name: 'D', datatype: 'FP64', shape: [2, 2], data: [[1, 2], [3, 4], [5, 6]] }] });
      expect(() => decodeInferResponse(doubles, undefined)).toThrow(/has 6 elements of JSON data, not 4 \(shape \[2,2\]\)/);
      expect(from).not.toHaveBeenCalled();
    } finally {
      encode.mockRestore();
      from.mockRestore();
    }
  });

  it('turns any malformed body into InferenceServerError, not SyntaxError or TypeError', () => {
    const bodies = ['<html>', 'null', '[]', '{"outputs":{}}', '{"outputs":[null]}', '{"outputs":[{"name":"A","datatype":"INT32"}]}',
      '{"outputs":[{"name":"A","datatype":"INT64","shape":[1],"data":[1.5]}]}', '{"outputs":[{"name":"A","datatype":"constructor","shape":[1],"data":[1]}]}',
      '{"outputs":[{"name":"A","datatype":"INT32","shape":[-1],"data":[]}]}'];
    for (const b of bodies) expect(() => decodeInferResponse(Buffer.from(b), undefined), b).toThrow(InferenceServerError);
    const ok = decodeInferResponse(header({ model_name: 'm', model_version: '1', outputs: [{ name: 'A', datatype: 'INT32', shape: [2], data: [[1], [2]] }] }), undefined);
    expect(Array.from(ok.data<Int32Array>('A'))).toEqual([1, 2]);
  });

  it('attack: a JSON answer of a million empty objects is refused before it is parsed', async () => {
    const c = await httpClient();
    // 3 bytes of text an object: a 64 MB answer took 37 s and 2 GB to parse, 200 MB ran out of memory.
    const body = `{"outputs":[${'{},'.repeat(1 << 20)}{}]}`;
    httpHandler = (_q, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(body);
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/more than 1048576 JSON objects and arrays/);
    httpHandler = (_q, res) => res.writeHead(200, { 'Content-Type': 'application/json' }).end(`[${'[],'.repeat(1 << 20)}[]]`);
    expect((await rejection(c.modelStatistics())).message).toMatch(/more than 1048576 JSON objects and arrays/);
  });

  it('a 200 that is not JSON, or statistics without a list, reject with InferenceServerError', async () => {
    const c = await httpClient();
    httpHandler = (_q, res) => res.end('<html>hello</html>');
    expect((await rejection(c.serverMetadata())).message).toMatch(/not JSON/);
    httpHandler = (_q, res) => res.end('{}');
    expect((await rejection(c.modelStatistics('m'))).message).toMatch(/no model_stats list/);
  });

  it('a connection closed in the middle of the body rejects with InferenceServerError', async () => {
    const c = await httpClient();
    httpHandler = (req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('{"model_name"');
      setTimeout(() => req.socket.destroy(), 20);
    };
    await rejection(c.infer('m', { inputs }));
  });
});

describe('HTTP calls are bounded in time and size', () => {
  it('an endless body fails at maxResponseBytes instead of filling memory', async () => {
    const c = await httpClient({ maxResponseBytes: 1 << 20 });
    const mb = Buffer.alloc(256 * 1024);
    httpHandler = (_q, res) => {
      res.writeHead(200);
      const pump = () => {
        while (!res.destroyed && res.write(mb));
        if (!res.destroyed) res.once('drain', pump);
      };
      pump();
    };
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/larger than maxResponseBytes/);
    httpHandler = (_q, res) => {
      res.writeHead(200, { 'content-length': String(2 << 20) });
      res.write('{');
    };
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/larger than maxResponseBytes/);
  });

  it('attack: a body sent as 1-byte chunks is copied as it comes, never kept chunk by chunk (8.9 GB and out of heap under maxResponseBytes)', async () => {
    const c = await httpClient();
    const json = JSON.stringify({ model_name: 'm', model_version: '1', outputs: [{ name: 'O', datatype: 'INT32', shape: [1], data: [7] }], pad: ' '.repeat(4000) });
    httpHandler = (_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      for (const ch of json) res.write(ch);
      res.end();
    };
    const concat = vi.spyOn(Buffer, 'concat');
    try {
      const r = await c.infer('m', { inputs });
      expect(Array.from(r.outputs[0]!.data as ArrayLike<number>)).toEqual([7]);
      // Before: one Buffer per chunk, joined at the end (a list of ~4,000).
      expect(Math.max(0, ...concat.mock.calls.map(([list]) => list.length))).toBeLessThan(100);
    } finally {
      concat.mockRestore();
    }
  });

  it('timeoutMs is a deadline for the whole call: a trickled body fails on time', async () => {
    const c = await httpClient({ timeoutMs: 300 });
    httpHandler = (_q, res) => {
      res.writeHead(200);
      const t = setInterval(() => (res.destroyed ? clearInterval(t) : res.write(' ')), 50);
      res.on('close', () => clearInterval(t));
    };
    const t0 = Date.now();
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/timed out after 300 ms/);
    // 30x the timeout: a bound, not a measurement (a trickle resetting an idle timer never ends).
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('refuses `.` and `..` as a model name or version: they would reach another route', async () => {
    const c = await httpClient();
    let seen = 0;
    httpHandler = (_q, res) => {
      seen++;
      res.end('{}');
    };
    await rejection(c.traceSettings({ trace_rate: '7' }, '..'));
    await rejection(c.modelMetadata('.'));
    await rejection(c.modelConfig('m', '..'));
    await rejection(c.loadModel('..'));
    expect(seen).toBe(0);
  });
});

describe('gRPC infer responses are checked before they are trusted', () => {
  const response = (outputs: object[], raw: Buffer[]) => grpcFrame('ModelInferResponse', { model_name: 'm', model_version: '1', outputs, raw_output_contents: raw });

  it.each([true, false])('an unknown datatype rejects (lean path %s), and the process lives', async (leanInfer) => {
    const c = await grpcClient({ leanInfer });
    h2Handler = grpcOk(response([{ name: 'X', datatype: 'FOO', shape: [1] }], [Buffer.alloc(4)]));
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/unknown datatype 'FOO'/);
  });

  it('refuses outputs without their raw contents, and contents that do not fill the shape', async () => {
    const c = await grpcClient();
    h2Handler = grpcOk(response([{ name: 'A', datatype: 'INT32', shape: [1, 16] }, { name: 'B', datatype: 'INT32', shape: [1, 16] }], [Buffer.alloc(64)]));
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/2 outputs with 1 raw_output_contents/);
    h2Handler = grpcOk(response([{ name: 'A', datatype: 'INT32', shape: [4] }], [Buffer.alloc(6)]));
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/not 4 INT32 elements/);
  });

  it('refuses a message whose length prefix differs from what came, and a status that is not a code', async () => {
    const c = await grpcClient();
    h2Handler = (s) => {
      const f = response([{ name: 'A', datatype: 'INT32', shape: [1] }], [Buffer.alloc(4)]);
      f.writeUInt32BE(1e6, 1);
      grpcOk(f)(s);
    };
    expect((await rejection(c.infer('m', { inputs }))).grpcCode).toBe(13);
    h2Handler = (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': 'abc', 'grpc-message': 'x' }));
      s.end();
    };
    const err = await rejection(c.infer('m', { inputs }));
    expect(err.grpcCode).toBe(2);
    expect(err.message).toMatch(/malformed grpc-status/);
  });

  it.each([true, false])('attack: a response of thousands of empty entries is refused before it is decoded (lean path %s)', async (leanInfer) => {
    const c = await grpcClient({ leanInfer });
    // Two bytes an entry on the wire, an object each decoded: 200 MB of them ran the client out of memory.
    const entries = (field: number, n: number) => Buffer.alloc(2 * n, Buffer.from([(field << 3) | 2, 0]));
    const frame = (body: Buffer) => {
      const f = Buffer.alloc(5 + body.length);
      f.writeUInt32BE(body.length, 1);
      body.copy(f, 5);
      return f;
    };
    h2Handler = grpcOk(frame(entries(6, 5000)));
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/more raw_output_contents than the 4096 a response may have/);
    h2Handler = grpcOk(frame(entries(5, 5000)));
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/more outputs than the 4096/);
    // In a stream response: the stream ends with INTERNAL, nothing is decoded; the callback gets that failure.
    const inner = entries(6, 5000);
    h2Handler = grpcOk(frame(Buffer.concat([Buffer.from([0x12]), Buffer.from(varint(inner.length)), inner])));
    const got: (number | undefined)[] = [];
    const stream = c.stream((err) => got.push(err?.grpcCode));
    stream.infer('m', { inputs });
    expect((await rejection(stream.end())).grpcCode).toBe(13);
    expect(got).toEqual([13]);
  });

  it('attack: packed bool contents (a byte on the wire, an array slot decoded) are counted before decoding', async () => {
    const c = await grpcClient({ leanInfer: true });
    const field = (no: number, body: Buffer) => Buffer.concat([Buffer.from(varint((no << 3) | 2)), Buffer.from(varint(body.length)), body]);
    // One output whose contents hold 17M packed bools (100 MB of them took 13 s and 2.7 GB decoded).
    const body = field(5, Buffer.concat([field(1, Buffer.from('y')), field(5, field(1, Buffer.alloc((1 << 24) + 1, 1)))]));
    const f = Buffer.alloc(5 + body.length);
    f.writeUInt32BE(body.length, 1);
    body.copy(f, 5);
    h2Handler = grpcOk(f);
    expect((await rejection(c.infer('m', { inputs }))).message).toMatch(/more bool, int, uint, fp32 and fp64 contents elements than the 16777216/);
  });

  it('the lean path refuses server push (it held a window of memory per pushed stream, without limit)', async () => {
    const c = await grpcClient({ leanInfer: true });
    let pushAllowed: boolean | undefined;
    h2Handler = (st) => {
      pushAllowed = st.pushAllowed;
      grpcOk(response([{ name: 'A', datatype: 'INT32', shape: [1] }], [Buffer.alloc(4)]))(st);
    };
    expect((await c.infer('m', { inputs })).outputs[0]!.name).toBe('A');
    expect(pushAllowed).toBe(false);
  });

  it('a malformed stream response goes to onResponse as an error instead of crashing the process', async () => {
    const c = await grpcClient();
    h2Handler = grpcOk(grpcFrame('ModelStreamInferResponse', { infer_response: { model_name: 'm', outputs: [{ name: 'X', datatype: 'FOO', shape: [1] }], raw_output_contents: [Buffer.alloc(4)] } }));
    const got: (string | undefined)[] = [];
    const stream = c.stream((err, r) => got.push(err?.message ?? r?.modelName));
    stream.infer('m', { inputs });
    await stream.end();
    expect(got).toEqual([expect.stringMatching(/unknown datatype 'FOO'/)]);
  });
});

/** A protobuf varint. */
function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

describe('gRPC calls are bounded in time and size', () => {
  it('the lean path enforces timeoutMs itself: a silent server fails with DEADLINE_EXCEEDED', async () => {
    const c = await grpcClient({ timeoutMs: 300 });
    h2Handler = () => undefined;
    const t0 = Date.now();
    expect((await rejection(c.infer('m', { inputs }))).grpcCode).toBe(4);
    // 30x the timeout: a bound, not a measurement (a silent server holds the call otherwise).
    expect(Date.now() - t0).toBeLessThan(10_000);
  });

  it('an endless response fails at maxResponseBytes (RESOURCE_EXHAUSTED)', async () => {
    const c = await grpcClient({ maxResponseBytes: 1 << 20 });
    const chunk = Buffer.alloc(256 * 1024);
    h2Handler = (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc' });
      const pump = () => {
        while (!s.destroyed && !s.closed && s.write(chunk));
        if (!s.destroyed && !s.closed) s.once('drain', pump);
      };
      pump();
    };
    expect((await rejection(c.infer('m', { inputs }))).grpcCode).toBe(8);
  });
});

describe('answers the client copies as they come (reviews)', () => {
  it('attack: a gRPC answer to a control call over maxControlResponseBytes is refused before it is decoded (20 MiB of empty statistics entries ran the client out of heap)', async () => {
    const c = await grpcClient({ maxControlResponseBytes: 64 * 1024 });
    // 100,000 empty model_stats entries: 200 KB on the wire, each a whole object with defaults once decoded.
    const entries = Buffer.alloc(200_000);
    for (let i = 0; i < entries.length; i += 2) entries[i] = 0x0a;
    h2Handler = (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
      const prefix = Buffer.alloc(5);
      prefix.writeUInt32BE(entries.length, 1);
      s.end(Buffer.concat([prefix, entries]));
    };
    const err = await rejection(c.modelStatistics());
    expect(err.message).toMatch(/ModelStatistics answer of 200000 bytes is larger than maxControlResponseBytes \(65536\)/);
  });

  it('attack: the lean gRPC path copies 1-byte DATA frames into one buffer, and refuses a message whose length prefix passes maxResponseBytes at once', async () => {
    const c = await grpcClient({ maxResponseBytes: 1 << 20 });
    const concat = vi.spyOn(Buffer, 'concat');
    h2Handler = (s) => {
      s.respond({ ':status': 200, 'content-type': 'application/grpc' });
      // The prefix of a 2 GiB message, then a byte now and then: refused on the prefix.
      s.write(Buffer.from([0, 0x80, 0, 0, 0]));
      const t = setInterval(() => (s.destroyed || s.closed ? clearInterval(t) : s.write(Buffer.alloc(1))), 20);
      s.on('close', () => clearInterval(t));
    };
    try {
      const t0 = Date.now();
      expect((await rejection(c.infer('m', { inputs }))).grpcCode).toBe(8);
      expect(Date.now() - t0).toBeLessThan(3000);
      expect(concat.mock.calls.length).toBe(0);
    } finally {
      concat.mockRestore();
    }
  });

  it('attack: a Content-Length of 1 GiB with 10 bytes sent reserves nothing near it (64 such calls reserved 64 GiB)', async () => {
    const c = await httpClient({ timeoutMs: 1000 });
    httpHandler = (_q, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(2 ** 30) });
      res.write('0123456789');
    };
    const before = process.memoryUsage().arrayBuffers;
    const calls = Array.from({ length: 16 }, () => rejection(c.infer('m', { inputs })));
    await new Promise((r) => setTimeout(r, 300));
    const reserved = process.memoryUsage().arrayBuffers - before;
    await Promise.all(calls);
    expect(reserved).toBeLessThan(64 * 1024 * 1024);
  });

  it('a binary output\'s buffer holds no stale memory past the body (the spare room is zeroed)', async () => {
    const c = await httpClient();
    const header = Buffer.from(JSON.stringify({ model_name: 'm', model_version: '1', outputs: [{ name: 'O', datatype: 'UINT8', shape: [4], parameters: { binary_data_size: 4 } }] }));
    httpHandler = (_q, res) => {
      // Chunked (no Content-Length): the buffer is larger than the body.
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(header.length) });
      res.write(header);
      res.end(Buffer.from([1, 2, 3, 4]));
    };
    const r = await c.infer('m', { inputs, outputs: [{ name: 'O', binary: true }] });
    const data = r.outputs[0]!.data as Uint8Array;
    expect(Array.from(data)).toEqual([1, 2, 3, 4]);
    const whole = new Uint8Array(data.buffer);
    expect(whole.subarray(data.byteOffset + data.byteLength).every((b) => b === 0)).toBe(true);
  });
});

describe('runPerf against a broken server', () => {
  /** A fake server's answers to what runPerf asks before it measures. */
  function fake(config: Record<string, unknown>, datatype: string, infer: () => Promise<unknown>, stats: () => Promise<unknown>): InferenceClient {
    const c = {
      modelMetadata: async () => ({ name: 'm', versions: ['1'], platform: 'x', inputs: [{ name: 'IN', datatype, shape: [1] }], outputs: [] }),
      modelConfig: async () => ({ name: 'm', max_batch_size: 0, ...config }),
      modelStatistics: stats,
      prepare: (model: string, o: { inputs: readonly InferInput[] }) => new HttpClient('http://127.0.0.1:1').prepare(model, o),
      inferPrepared: infer,
      infer,
    };
    return c as unknown as InferenceClient;
  }
  const quick = { measurementIntervalMs: 100, maxTrials: 3, warmupRequests: 2 };
  /** An answer after a turn of the event loop, as a real transport gives. */
  const answer = () => new Promise<void>((r) => setImmediate(r));

  it('statistics that are not a list count as none, and the run ends', async () => {
    const results = await runPerf(fake({}, 'INT32', answer, async () => ({})), { model: 'm', concurrency: [1], ...quick });
    expect(results[0]!.requests).toBeGreaterThan(0);
    expect(results[0]!.server).toBeUndefined();
  });

  it('a statistics failure stops the workers', async () => {
    let sent = 0;
    let calls = 0;
    const client = fake({}, 'INT32', async () => { sent++; await answer(); }, async () => { if (++calls > 1) throw new Error('boom'); return []; });
    // A throwing statistics call is tolerated (no breakdown); the run ends and no worker goes on.
    await runPerf(client, { model: 'm', concurrency: [2], ...quick });
    const after = sent;
    await new Promise((r) => setTimeout(r, 100));
    expect(sent).toBe(after);
  });

  it('a sequence model whose inputs cannot be encoded fails at once instead of spinning', async () => {
    const client = fake({ sequence_batching: {} }, 'FOO', answer, async () => []);
    await expect(runPerf(client, { model: 'm', concurrency: [1], ...quick })).rejects.toThrow();
  });

  it('a warm-up request that fails ends the warm-up: the windows count the failures (review: a silent server held the warm-up for its count times the timeout)', async () => {
    let sent = 0;
    let sentAtStats = -1;
    const client = fake({}, 'INT32', async () => { sent++; await answer(); throw new Error('timed out'); }, async () => { if (sentAtStats < 0) sentAtStats = sent; return []; });
    const [r] = await runPerf(client, { model: 'm', concurrency: [1], ...quick, warmupRequests: 1000 });
    // The first statistics call comes right after the warm-up: after one request, not 1,000.
    expect(sentAtStats).toBeLessThan(10);
    expect(r!.errors).toBeGreaterThan(0);
    expect(r!.firstError).toBe('timed out');
  });

  it('requests that fail before any I/O still let the windows end', async () => {
    const client = fake({ sequence_batching: {} }, 'INT32', () => Promise.reject(new Error('refused')), async () => []);
    const [r] = await runPerf(client, { model: 'm', concurrency: [1], ...quick });
    expect(r!.errors).toBeGreaterThan(0);
    expect(r!.firstError).toBe('refused');
  });
});
