/**
 * HttpClient against a fake server and on its own encoder/decoder: abort, the idle timeout, and
 * JSON mode's 64-bit integers and BYTES.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { InferenceServerError } from './errors.js';
import { HttpClient, decodeInferResponse, idleTimeoutOf, type HttpClientOptions } from './http-client.js';
import { InferResult, type InferInput } from './types.js';

const inputs: InferInput[] = [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }];
const answer = '{"model_name":"m","model_version":"1","outputs":[]}';

/** Every request goes to `handler` once its body is read. */
let handler: (req: IncomingMessage, res: ServerResponse) => void = (_q, res) => res.end(answer);
let server: Server;
let url = '';
beforeAll(async () => {
  server = createServer((req, res) => {
    res.on('error', () => undefined);
    req.resume();
    req.on('end', () => handler(req, res));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => {
  server.closeAllConnections();
  return new Promise<void>((r) => server.close(() => r()));
});
const opened: HttpClient[] = [];
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
});
function client(options: HttpClientOptions = {}): HttpClient {
  const c = new HttpClient(url, options);
  opened.push(c);
  return c;
}

async function rejection(p: Promise<unknown>): Promise<InferenceServerError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(InferenceServerError);
  return err as InferenceServerError;
}

describe('HttpClient.infer() and its signal', () => {
  it('rejects at once when the signal aborts during the call (it resolved when the server answered)', async () => {
    // Answered 10 s on unless the client left: a 5 s bound (50x the abort's delay) still tells the
    // abort from the answer.
    handler = (_q, res) => {
      const t = setTimeout(() => res.end(answer), 10_000);
      res.on('close', () => clearTimeout(t));
    };
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 100);
    const t0 = Date.now();
    expect((await rejection(client().infer('m', { inputs, signal: ac.signal }))).message).toMatch(/aborted/);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('rejects an already-aborted signal without sending anything', async () => {
    let seen = 0;
    handler = (_q, res) => {
      seen++;
      res.end(answer);
    };
    expect((await rejection(client().infer('m', { inputs, signal: AbortSignal.abort() }))).message).toMatch(/aborted/);
    expect(seen).toBe(0);
  });

  it('a signal that never aborts leaves no listener behind', async () => {
    handler = (_q, res) => res.end(answer);
    const ac = new AbortController();
    const c = client();
    let listeners = 0;
    const add = ac.signal.addEventListener.bind(ac.signal);
    const remove = ac.signal.removeEventListener.bind(ac.signal);
    ac.signal.addEventListener = ((...a: Parameters<typeof add>) => { listeners++; add(...a); }) as typeof add;
    ac.signal.removeEventListener = ((...a: Parameters<typeof remove>) => { listeners--; remove(...a); }) as typeof remove;
    for (let i = 0; i < 3; i++) expect((await c.infer('m', { inputs, signal: ac.signal })).modelName).toBe('m');
    expect(listeners).toBe(0);
  });
});

describe('HttpClient idle timeout', () => {
  it('a server that never answers fails the call after idleTimeoutMs (there was no bound by default)', async () => {
    handler = () => undefined;
    const t0 = Date.now();
    expect((await rejection(client({ idleTimeoutMs: 200 }).infer('m', { inputs }))).message).toMatch(/no answer for 200 ms/);
    // 50x: a bound, not a measurement (ignored, the 60 s default would end it).
    expect(Date.now() - t0).toBeLessThan(10_000);
  });
});

describe('HttpClient JSON mode keeps 64-bit integers exact', () => {
  const json = (c: HttpClient, input: InferInput, extra: object = {}) => c.encodeInfer({ inputs: [input], ...extra }).body.toString();

  it('writes INT64 / UINT64 inputs past 2^53 as their digits', () => {
    const c = client({ binary: false });
    expect(json(c, { name: 'X', datatype: 'INT64', shape: [3], data: BigInt64Array.of(2n ** 53n + 1n, -(2n ** 63n), 5n) })).toContain('"data":[9007199254740993,-9223372036854775808,5]');
    expect(json(c, { name: 'X', datatype: 'UINT64', shape: [1], data: [2n ** 64n - 1n] })).toContain('"data":[18446744073709551615]');
  });

  it('refuses INT64 numbers that are not exact integers instead of rounding them', () => {
    const c = client({ binary: false });
    expect(() => json(c, { name: 'X', datatype: 'INT64', shape: [1], data: [2 ** 60] })).toThrow(/element 0 .* is not an exact integer: give 64-bit values past 2\^53 as bigints/);
    expect(() => json(c, { name: 'X', datatype: 'UINT64', shape: [1], data: [1.5] })).toThrow(InferenceServerError);
  });

  it('sends a bigint sequence id past 2^53 as a number, not a string (a string is another kind of correlation id)', () => {
    const text = json(client({ binary: false }), inputs[0]!, { sequence: { id: 2n ** 60n + 1n, start: true } });
    expect(text).toContain('"sequence_id":1152921504606846977');
    expect(json(client(), inputs[0]!, { sequence: { id: 2n ** 64n - 1n } })).toContain('"sequence_id":18446744073709551615');
  });

  it('reads INT64 / UINT64 outputs exactly, and leaves strings with long digit runs alone', () => {
    const body = Buffer.from('{"model_name":"m","model_version":"1","id":"12345678901234567890","outputs":['
      + '{"name":"I","datatype":"INT64","shape":[4],"data":[9007199254740993,4611686018427387907,-9223372036854775807,9223372036854775807]},'
      + '{"name":"U","datatype":"UINT64","shape":[1],"data":[18446744073709551615]},'
      + '{"name":"D","datatype":"FP64","shape":[2],"data":[12345678901234567890,1.5e300]},'
      + '{"name":"S","datatype":"BYTES","shape":[1],"data":["99999999999999999999 \\" 12345678901234567"]}]}');
    const r = decodeInferResponse(body, undefined);
    expect(Array.from(r.data<BigInt64Array>('I'))).toEqual([2n ** 53n + 1n, 2n ** 62n + 3n, -(2n ** 63n) + 1n, 2n ** 63n - 1n]);
    expect(Array.from(r.data<BigUint64Array>('U'))).toEqual([2n ** 64n - 1n]);
    expect(Array.from(r.data<Float64Array>('D'))).toEqual([Number(12345678901234567890n), 1.5e300]);
    expect(r.strings('S')).toEqual(['99999999999999999999 " 12345678901234567']);
    expect(r.id).toBe('12345678901234567890');
  });

  it('refuses INT64 / UINT64 outputs out of their range (they were clamped)', () => {
    const out = (dt: string, v: string) => Buffer.from(`{"outputs":[{"name":"O","datatype":"${dt}","shape":[1],"data":[${v}]}]}`);
    expect(() => decodeInferResponse(out('INT64', '9223372036854775808'), undefined)).toThrow(/is not a INT64 value/);
    expect(() => decodeInferResponse(out('UINT64', '18446744073709551616'), undefined)).toThrow(/is not a UINT64 value/);
    expect(() => decodeInferResponse(out('UINT64', '-1'), undefined)).toThrow(/is not a UINT64 value/);
  });
});

describe('HttpClient JSON mode BYTES', () => {
  it('refuses a BYTES element that is not UTF-8 instead of sending U+FFFD', () => {
    const c = client({ binary: false });
    expect(() => c.encodeInfer({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [2], data: ['ok', Uint8Array.of(0xff, 0xfe, 0x41)] }] }))
      .toThrow(/Failed to encode input 'S' using UTF-8: element 1 .*binary/);
    expect(client().encodeInfer({ inputs: [{ name: 'S', datatype: 'BYTES', shape: [1], data: [Uint8Array.of(0xff)] }] }).body.subarray(-5)).toEqual(Buffer.from([1, 0, 0, 0, 0xff]));
  });
});

describe('InferResult', () => {
  it('output() of a missing name throws InferenceServerError, as documented', () => {
    const r = new InferResult({ modelName: 'm', modelVersion: '1', outputs: [] });
    expect(() => r.output('X')).toThrow(InferenceServerError);
  });
});

describe('the idle timeout', () => {
  it('is 60 s by default, the per-call deadline when that is longer, and what the caller sets (review: triode perf --request-timeout 120000 was cut at 60 s)', () => {
    expect(idleTimeoutOf({})).toBe(60_000);
    expect(idleTimeoutOf({ timeoutMs: 0 })).toBe(60_000);
    expect(idleTimeoutOf({ timeoutMs: 5_000 })).toBe(60_000);
    expect(idleTimeoutOf({ timeoutMs: 120_000 })).toBe(120_000);
    expect(idleTimeoutOf({ timeoutMs: 120_000, idleTimeoutMs: 0 })).toBe(0);
    expect(idleTimeoutOf({ idleTimeoutMs: 1_000 })).toBe(1_000);
  });
});
