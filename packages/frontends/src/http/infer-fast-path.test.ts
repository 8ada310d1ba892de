import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, silentLogger } from '@triode/core';
import { binaryBody, makeRepository } from '../../../../test/helpers/repository.js';
import { createHttpApp } from './http-server.js';
import { Hono } from 'hono';
import { HttpLifecycle } from './lifecycle.js';
import { inferFastPathOf } from './infer-fast-path.js';
import { startHttpServer, type HttpServerHandle } from './listen.js';

let server: InferenceServer;
const handles: HttpServerHandle[] = [];
/** [fast path, Hono only] servers of one app, for each app variant. */
const pairs: Record<string, [number, number]> = {};

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i);
const IN1 = new Int32Array(16).fill(1);
const json = JSON.stringify({ inputs: [['INPUT0', IN0], ['INPUT1', IN1]].map(([name, d]) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from(d as Int32Array) })) });

/** Whether `b` holds a whole HTTP response: its head and the body its Content-Length or chunked framing announces. */
function complete(b: Buffer): boolean {
  const end = b.indexOf('\r\n\r\n');
  if (end < 0) return false;
  const head = b.subarray(0, end).toString('latin1');
  const length = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (length) return b.length >= end + 4 + Number(length[1]);
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) return b.subarray(end + 2).toString('latin1').endsWith('\r\n0\r\n\r\n');
  return false;
}

/**
 * One request on a fresh connection, the whole answer (Date blanked) as text. The client
 * half-closes once the answer is complete (a keep-alive server then closes too), not after a
 * fixed time: on a loaded machine an answer may take longer than any guess (a CI run caught it).
 */
function exchange(port: number, head: string, body: Uint8Array | string = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      if (complete(Buffer.concat(chunks))) s.end();
    });
    s.on('error', reject);
    s.on('close', () => resolve(Buffer.concat(chunks).toString('latin1').replace(/\r\nDate: [^\r]*/, '\r\nDate: -')));
    s.write(head.replace('{port}', String(port)));
    s.write(body);
  });
}

const request = (path: string, body: Uint8Array | string, headers: Record<string, string> = {}): [string, Uint8Array | string] => {
  const lines = [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1:{port}', `Content-Length: ${Buffer.byteLength(body)}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return [`${lines.join('\r\n')}\r\n\r\n`, body];
};

beforeAll(async () => {
  const repo = makeRepository(['simple']);
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend()] });
  const backplane = new LocalBackplane(server);
  const variants = {
    plain: () => createHttpApp(backplane, { maxInputSize: 4096, logger: silentLogger }),
    restricted: () => createHttpApp(backplane, { logger: silentLogger, restrictions: new Map([['inference', { key: 'infer-key', value: 'secret' }]]) }),
    stopping: () => {
      const lifecycle = new HttpLifecycle();
      void lifecycle.shutdown(0);
      return createHttpApp(backplane, { logger: silentLogger, lifecycle });
    },
  };
  for (const [name, make] of Object.entries(variants)) {
    const app = make();
    const fast = await startHttpServer(app, 0, '127.0.0.1');
    const hono = await startHttpServer(app, 0, '127.0.0.1', { inferFastPath: false });
    handles.push(fast, hono);
    pairs[name] = [fast.port, hono.port];
  }
});

afterAll(async () => {
  await Promise.all(handles.map((h) => h.close()));
  await server?.stop(1000);
});

const { body: bin, headerLength } = binaryBody({
  parameters: { binary_data_output: true },
  inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })),
}, [IN0, IN1]);

const CASES: Record<string, [string, Uint8Array | string]> = {
  'JSON': request('/v2/models/simple/infer', json),
  'JSON, a version': request('/v2/models/simple/versions/1/infer', json),
  'binary tensors': request('/v2/models/simple/infer', bin, { 'Inference-Header-Content-Length': String(headerLength) }),
  // The header of 'binary tensors' again (HeaderCache gives it once seen), with a body of another length.
  'binary tensors, 4 bytes short': request('/v2/models/simple/infer', bin.subarray(0, bin.length - 4), { 'Inference-Header-Content-Length': String(headerLength) }),
  'binary tensors, 3 bytes too many': request('/v2/models/simple/infer', Buffer.concat([bin, Buffer.alloc(3)]), { 'Inference-Header-Content-Length': String(headerLength) }),
  'a gzip answer': request('/v2/models/simple/infer', json, { 'Accept-Encoding': 'gzip' }),
  'a gzip request': request('/v2/models/simple/infer', gzipSync(json), { 'Content-Encoding': 'gzip' }),
  'an unknown Content-Encoding': request('/v2/models/simple/infer', json, { 'Content-Encoding': 'br' }),
  'a bad Inference-Header-Content-Length': request('/v2/models/simple/infer', json, { 'Inference-Header-Content-Length': 'x' }),
  'a body over the limit': request('/v2/models/simple/infer', 'x'.repeat(5000)),
  'invalid JSON': request('/v2/models/simple/infer', '{"inputs": [1,'),
  'a number array for inputs': request('/v2/models/simple/infer', '{"inputs": [1, 2]}'),
  'a wrong shape': request('/v2/models/simple/infer', json.replace('[1,16]', '[2,8]')),
  'an unknown model': request('/v2/models/nope/infer', json),
  'invalid JSON to an unknown model': request('/v2/models/nope/infer', '{"inputs": [1,'),
  'an unknown Content-Encoding to an unknown version': request('/v2/models/simple/versions/7/infer', json, { 'Content-Encoding': 'br' }),
  'a body over the limit to an unknown model': request('/v2/models/nope/infer', 'x'.repeat(5000)),
  'an unknown version': request('/v2/models/simple/versions/7/infer', json),
  'a version past 2^53': request('/v2/models/simple/versions/9007199254740993/infer', json),
  'a version past 2^53, of an unknown model': request('/v2/models/nope/versions/9007199254740993/infer', json),
  'a version past int64': request('/v2/models/simple/versions/99999999999999999999/infer', json),
  'a version that is not a number': request('/v2/models/simple/versions/one/infer', json),
  'a percent-encoded name': request('/v2/models/sim%70le/infer', json),
  'a query': request('/v2/models/simple/infer?x=1', json),
  'a trailing slash': request('/v2/models/simple/infer/', json),
  'the restricted header': request('/v2/models/simple/infer', json, { 'infer-key': 'secret' }),
  'a wrong restricted header': request('/v2/models/simple/infer', json, { 'infer-key': 'guess' }),
};

describe('the HTTP infer fast path', () => {
  for (const variant of ['plain', 'restricted', 'stopping']) {
    it(`answers byte for byte as the Hono route (${variant} app)`, async () => {
      const [fast, hono] = pairs[variant]!;
      await Promise.all(Object.entries(CASES).map(async ([what, [head, body]]) => {
        const [a, b] = await Promise.all([exchange(fast, head, body), exchange(hono, head, body)]);
        expect(a.replace(`:${fast}`, ''), what).toBe(b.replace(`:${hono}`, ''));
        expect(a, what).toMatch(/^HTTP\/1\.1 \d{3} /);
      }));
    });
  }

  it('is registered for the apps createHttpApp builds only', () => {
    expect(inferFastPathOf(createHttpApp(new LocalBackplane(server)))).toBeTypeOf('function');
    expect(inferFastPathOf(new Hono())).toBeUndefined();
  });

  it('attack: a binary request whose header was seen, then the same header with bodies of other lengths: 400 each, and the next good one is answered as the first', async () => {
    const [fast] = pairs['plain']!;
    const good = CASES['binary tensors']!;
    const first = await exchange(fast, ...good);
    expect(first).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    for (const bad of ['binary tensors, 4 bytes short', 'binary tensors, 3 bytes too many']) {
      const answer = await exchange(fast, ...CASES[bad]!);
      expect(answer, bad).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
      expect(answer, bad).toMatch(/unexpected (size for input 'INPUT1'|additional input data)/);
      expect(await exchange(fast, ...good)).toBe(first);
    }
  });

  it('serves a plain infer request', async () => {
    const [fast] = pairs['plain']!;
    const [head, body] = CASES['JSON']!;
    const answer = await exchange(fast, head, body);
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\nContent-Type: application\/json\r\n/);
    expect(answer).toContain('"data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]');
  });
});
