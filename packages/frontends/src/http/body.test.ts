import { EventEmitter } from 'node:events';
import type { IncomingMessage } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Errors, type Backplane, type InferenceRequest } from '@triode/core';
import { readIncomingBody } from './body.js';
import { createHttpApp } from './http-server.js';
import { HttpLifecycle } from './lifecycle.js';
import { startHttpServer, type HttpServerHandle } from './listen.js';

const lifecycle = new HttpLifecycle();
let http: HttpServerHandle;
let echoHttp: HttpServerHandle;

beforeAll(async () => {
  // The body is never complete, so the backplane is never reached.
  const backplane = {} as Backplane;
  http = await startHttpServer(createHttpApp(backplane, { lifecycle }), 0, '127.0.0.1');
  // Answers infer with its input N, doubled.
  const echoing = {
    modelConfig: async (name: string) => ({ name, input: [{ name: 'N', data_type: 'TYPE_INT32', dims: [-1] }] }),
    infer: async (r: InferenceRequest) => ({
      modelName: 'm', modelVersion: '1',
      outputs: [{ name: 'y', datatype: 'INT32', shape: r.inputs[0]!.shape, data: (r.inputs[0]!.data as Int32Array).map((v) => 2 * v) }],
    }),
  } as unknown as Backplane;
  echoHttp = await startHttpServer(createHttpApp(echoing, {}), 0, '127.0.0.1');
});

afterAll(async () => {
  await http.close();
  await echoHttp.close();
});

/** A stand-in for a Node request whose body the test pushes chunk by chunk. */
function fakeIncoming(headers: Record<string, string> = {}): IncomingMessage & { finish(): void } {
  const e = Object.assign(new EventEmitter(), { headers, complete: false, readableEnded: false });
  return Object.assign(e, { finish() { e.complete = true; e.emit('end'); } }) as unknown as IncomingMessage & { finish(): void };
}

describe('chunked bodies (no Content-Length)', () => {
  it('a body sent one byte per chunk costs about its size, not a Buffer per byte', async () => {
    const incoming = fakeIncoming();
    const body = readIncomingBody(incoming, 64 << 20);
    const n = 1_000_000;
    const before = process.memoryUsage();
    for (let i = 0; i < n; i++) incoming.emit('data', Buffer.alloc(1, i & 0xff));
    const after = process.memoryUsage();
    // Kept as chunks, these million bytes held about 230 MB of heap.
    expect(after.heapUsed + after.arrayBuffers - before.heapUsed - before.arrayBuffers).toBeLessThan(32e6);
    incoming.finish();
    const bytes = await body;
    expect(bytes.byteLength).toBe(n);
    expect(bytes[0]).toBe(0);
    expect(bytes[n - 1]).toBe((n - 1) & 0xff);
    expect(bytes.buffer.byteLength).toBeLessThan(n + 16 * 1024 + 8);
  });

  it('attack: a declared Content-Length is not reserved whole before its bytes come (review: 64 MiB for a request that sent only its head)', async () => {
    const before = process.memoryUsage().arrayBuffers;
    const pending = Array.from({ length: 16 }, () => {
      const incoming = fakeIncoming({ 'content-length': String(64 << 20) });
      const body = readIncomingBody(incoming, 64 << 20);
      incoming.emit('data', Buffer.alloc(10));
      return { incoming, body };
    });
    // 16 x 64 MiB would be 1 GiB; 16 x 1 MiB is what may be reserved now.
    expect(process.memoryUsage().arrayBuffers - before).toBeLessThan(64 << 20);
    // A body that does come in full is read whole, grown up to its declared length.
    const whole = fakeIncoming({ 'content-length': String(3 << 20) });
    const read = readIncomingBody(whole, 64 << 20);
    for (let i = 0; i < 3 * 16; i++) whole.emit('data', Buffer.alloc(64 << 10, i));
    whole.finish();
    const got = await read;
    expect(got.byteLength).toBe(3 << 20);
    expect(got[0]).toBe(0);
    expect(got[(3 << 20) - 1]).toBe(47);
    for (const p of pending) {
      p.body.catch(() => undefined);
      p.incoming.emit('close');
    }
  });

  it('a large declared body is copied about once, not once per doubling (an 11 MB body was copied 26 MB over and read 1.3x slower)', async () => {
    const size = 11 << 20;
    const incoming = fakeIncoming({ 'content-length': String(size) });
    const body = readIncomingBody(incoming, 64 << 20);
    // Every copy into a body buffer goes through TypedArray set: the chunks' own and each growth's.
    const set = vi.spyOn(Uint8Array.prototype, 'set');
    let copied = 0;
    try {
      for (let i = 0; i < size / (64 << 10); i++) incoming.emit('data', Buffer.alloc(64 << 10, i));
      copied = set.mock.calls.reduce((n, [src]) => n + (src as ArrayLike<number>).length, 0);
    } finally {
      set.mockRestore();
    }
    incoming.finish();
    const got = await body;
    expect(got.byteLength).toBe(size);
    expect(got[size - 1]).toBe((size / (64 << 10) - 1) & 0xff);
    // The chunks (11 MB) and the growths from the first 1 MiB: 1 and 4 MiB. Doubling added 1, 2, 4 and 8.
    expect(copied).toBeLessThanOrEqual(1.5 * size);
  });

  it('leaves no byte of a body\'s memory as the allocator gave it: the pad in front and the spare after are zeroed', async () => {
    const alloc = Buffer.allocUnsafeSlow.bind(Buffer);
    // Memory as dirty as a reused allocation can be.
    const dirty = vi.spyOn(Buffer, 'allocUnsafeSlow').mockImplementation((n: number) => alloc(n).fill(0xaa));
    try {
      const incoming = fakeIncoming();
      const body = readIncomingBody(incoming, 1 << 20, 13);
      // 258,000 bytes: the buffer doubles to 256 KiB (not zero-filled from 64 KiB on), 4 KiB spare kept.
      for (let i = 0; i < 258; i++) incoming.emit('data', Buffer.alloc(1000, 1));
      incoming.finish();
      const got = await body;
      expect(got.byteLength).toBe(258_000);
      expect(dirty).toHaveBeenCalled();
      const whole = new Uint8Array(got.buffer);
      expect(whole.byteLength).toBeGreaterThan(got.byteLength);
      for (let i = 0; i < whole.byteLength; i++) {
        const inBody = i >= got.byteOffset && i < got.byteOffset + got.byteLength;
        if (whole[i] !== (inBody ? 1 : 0)) throw new Error(`byte ${i} of the body's memory is ${whole[i]}`);
      }
    } finally {
      dirty.mockRestore();
    }
  });

  it('still stops at the limit, and keeps the binary section 8-byte aligned', async () => {
    const over = fakeIncoming();
    const refused = readIncomingBody(over, 1000);
    for (let i = 0; i < 1001; i++) over.emit('data', Buffer.alloc(1));
    await expect(refused).rejects.toThrow(/Request JSON size of 1001 bytes exceeds the maximum allowed value of 1000 bytes/);

    const incoming = fakeIncoming();
    const body = readIncomingBody(incoming, 1 << 20, 13);
    for (let i = 0; i < 100; i++) incoming.emit('data', Buffer.alloc(777, i));
    incoming.finish();
    const bytes = await body;
    expect(bytes.byteLength).toBe(77_700);
    expect((bytes.byteOffset + 13) % 8).toBe(0);
    expect(bytes[77_699]).toBe(99);
  });

  it('a body labelled gzip that is not gzip is a decompression error, not a size its last bytes make up', async () => {
    const incoming = fakeIncoming({ 'content-encoding': 'gzip' });
    const body = readIncomingBody(incoming, 1000);
    incoming.emit('data', Buffer.from('{"inputs":[{"name":"zzzz"}]}'));
    incoming.finish();
    await expect(body).rejects.toThrow(/^failed to decompress the request body \(gzip\): /);
  });

  it('a gzip body with bytes after its member is a decompression error, not a size the trailing bytes make up (attack review)', async () => {
    // Its last four bytes read as 1,701,273,954: the "stated" size was refused as too large.
    const incoming = fakeIncoming({ 'content-encoding': 'gzip' });
    const body = readIncomingBody(incoming, 1 << 20);
    incoming.emit('data', Buffer.concat([gzipSync(Buffer.from('{"inputs":[]}')), Buffer.from('garbage')]));
    incoming.finish();
    await expect(body).rejects.toThrow(/^failed to decompress the request body \(gzip\): /);
  });

  it('a gzip bomb that states its size is still refused from it, before inflating', async () => {
    const bomb = gzipSync(Buffer.alloc(4 << 20));
    const incoming = fakeIncoming({ 'content-encoding': 'gzip' });
    const body = readIncomingBody(incoming, 1 << 20);
    incoming.emit('data', bomb);
    incoming.finish();
    await expect(body).rejects.toThrow(`Request JSON size of ${4 << 20} bytes exceeds the maximum allowed value of ${1 << 20} bytes`);
  });

  it('an infer request in 1-byte chunks over a socket gets its answer', async () => {
    const json = JSON.stringify({ inputs: [{ name: 'N', datatype: 'INT32', shape: [3], data: [1, 2, 3] }] });
    const answer = await new Promise<string>((resolve, reject) => {
      let got = '';
      const s = connect(echoHttp.port, '127.0.0.1', () => {
        s.write('POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n');
        s.write([...json].map((ch) => `1\r\n${ch}\r\n`).join('') + '0\r\n\r\n');
      });
      s.on('data', (d) => { got += d.toString(); });
      s.on('end', () => resolve(got));
      s.on('error', reject);
    });
    expect(answer).toMatch(/^HTTP\/1.1 200/);
    expect(answer).toContain('"data":[2,4,6]');
  });
});

describe('request bodies over a socket', () => {
  it('a client that closes mid-body does not leave its request in flight', async () => {
    await new Promise<void>((resolve) => {
      const s = connect(http.port, '127.0.0.1', () => {
        s.write(`POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 500000\r\n\r\n${'{'.repeat(1000)}`);
        setTimeout(() => { s.destroy(); resolve(); }, 50);
      });
    });
    const deadline = Date.now() + 2000;
    while (lifecycle.inflight > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(lifecycle.inflight).toBe(0);
  });
});

/** Sends raw bytes and returns the whole answer (the request asks to close the connection). */
function exchange(port: number, raw: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    let got = '';
    const s = connect(port, '127.0.0.1', () => s.write(raw));
    s.on('data', (d) => { got += d.toString(); });
    s.on('end', () => resolve(got));
    s.on('error', reject);
  });
}

describe('a request target in absolute form with credentials (user:pw@host)', () => {
  it('is answered as without them on a route whose body is read first (review: 500 and a stack trace in the log for each)', async () => {
    const plain = await exchange(echoHttp.port, 'POST /v2/logging HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    const withCredentials = await exchange(echoHttp.port, 'POST http://user:pw@127.0.0.1/v2/logging HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}');
    const status = (answer: string) => answer.slice(0, 12);
    expect(status(plain)).not.toBe('HTTP/1.1 500');
    expect(status(withCredentials)).toBe(status(plain));
    const fallback = await exchange(echoHttp.port, 'DELETE http://user:pw@127.0.0.1/v2/models/stats HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    expect(fallback).toMatch(/^HTTP\/1.1 405 /);
  });
});

describe('methods that carry no body in a route', () => {
  it('TRACE with a body is 405 on a known path and 404 elsewhere, not 500', async () => {
    for (const [path, status] of [['/v2/logging', 405], ['/v2/models/m/infer', 405], ['/v2/nowhere', 404]] as const) {
      const answer = await exchange(echoHttp.port, `TRACE ${path} HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello`);
      expect(answer, path).toMatch(new RegExp(`^HTTP/1.1 ${status} `));
    }
    // And the server still answers.
    expect(await exchange(echoHttp.port, 'GET /v2/nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')).toMatch(/^HTTP\/1.1 404 /);
  });
});

describe('a client that goes away', () => {
  it('attack: cancels its infer request (fast path and Hono route): a queued request does not wait to run for nobody', async () => {
    const seen: { aborted: boolean }[] = [];
    const waiting = {
      modelConfig: async (name: string) => ({ name, input: [{ name: 'N', data_type: 'TYPE_INT32', dims: [-1] }] }),
      infer: (r: InferenceRequest) => new Promise((_resolve, reject) => {
        const entry = { aborted: false };
        seen.push(entry);
        r.signal?.addEventListener('abort', () => { entry.aborted = true; reject(Errors.cancelled()); });
      }),
    } as unknown as Backplane;
    const fast = await startHttpServer(createHttpApp(waiting, {}), 0, '127.0.0.1');
    // A header forward pattern takes requests off the fast path, to the Hono route.
    const hono = await startHttpServer(createHttpApp(waiting, { headerForwardPattern: /^x-none$/ }), 0, '127.0.0.1');
    try {
      const body = JSON.stringify({ inputs: [{ name: 'N', datatype: 'INT32', shape: [1], data: [1] }] });
      for (const h of [fast, hono]) {
        const before = seen.length;
        const s = connect(h.port, '127.0.0.1', () => s.write(`POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`));
        s.on('error', () => undefined);
        const deadline = Date.now() + 2000;
        while (seen.length === before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
        expect(seen.length).toBe(before + 1);
        s.destroy();
        while (!seen.at(-1)!.aborted && Date.now() < deadline + 2000) await new Promise((r) => setTimeout(r, 10));
        expect(seen.at(-1)!.aborted).toBe(true);
      }
    } finally {
      await fast.close();
      await hono.close();
    }
  });
});
