/**
 * GrpcClient against fake HTTP/2 servers: which path ModelInfer takes (lean node:http2 or
 * grpc-js), what a non-gRPC answer becomes, and how a stream reports its own end.
 */
import { createServer, type Http2Server, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { messageType } from '@triode/core';
import { InferenceServerError } from './errors.js';
import { GrpcClient, type GrpcClientOptions } from './grpc-client.js';
import type { InferInput } from './types.js';

const inputs: InferInput[] = [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }];

/** Every request stream goes to `handler` with its headers, once the client has half-closed it. */
let handler: (s: ServerHttp2Stream, h: IncomingHttpHeaders) => void = (s) => s.close();
let server: Http2Server;
let port = 0;
beforeAll(async () => {
  server = createServer();
  server.on('stream', (s, h) => {
    s.on('error', () => undefined);
    s.resume();
    s.on('end', () => handler(s, h));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const opened: GrpcClient[] = [];
afterEach(() => {
  for (const c of opened.splice(0)) c.close();
});
function client(options: GrpcClientOptions = {}, address = `127.0.0.1:${port}`): GrpcClient {
  const c = new GrpcClient(address, options);
  opened.push(c);
  return c;
}

/** A ModelInferResponse with one INT32 output, framed, then status OK. */
function answerOk(s: ServerHttp2Stream): void {
  const body = Buffer.from(messageType('ModelInferResponse').encode({ model_name: 'm', outputs: [{ name: 'A', datatype: 'INT32', shape: [1] }], raw_output_contents: [Buffer.alloc(4)] }).finish());
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
  s.end(frame);
}

async function rejection(p: Promise<unknown>): Promise<InferenceServerError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(InferenceServerError);
  return err as InferenceServerError;
}

describe('GrpcClient sends ModelInfer the way grpc-js would', () => {
  it.each(['dns:///127.0.0.1', 'ipv4:127.0.0.1', '[::ffff:127.0.0.1]'])('reaches the server at the address %s:<port> (the lean path took dns as a host name)', async (host) => {
    handler = answerOk;
    expect((await client({}, `${host}:${port}`).infer('m', { inputs })).outputs[0]!.name).toBe('A');
  });

  it('honours grpc.max_receive_message_length on the lean path', async () => {
    handler = answerOk;
    const err = await rejection(client({ channelOptions: { 'grpc.max_receive_message_length': 16 } }).infer('m', { inputs }));
    expect(err.grpcCode).toBe(8);
  });

  it('a channel option the lean path does not know sends ModelInfer through grpc-js', async () => {
    let agent: string | undefined;
    handler = (s, h) => {
      agent = h['user-agent'];
      answerOk(s);
    };
    await client({ channelOptions: { 'grpc.primary_user_agent': 'triode-test-agent' } }).infer('m', { inputs });
    expect(agent).toMatch(/triode-test-agent/);
  });

  it.each([
    [503, 'text/html', 14], [502, 'text/html', 14], [404, 'text/plain', 12], [401, 'text/plain', 16], [403, 'text/plain', 7],
    [400, 'text/plain', 13], [500, 'text/plain', 2],
  ])('the lean path maps HTTP %i (%s, no grpc-status) to gRPC code %i instead of reading the page as a message', async (status, type, code) => {
    handler = (s) => {
      s.respond({ ':status': status, 'content-type': type });
      s.end('<html>Service Unavailable</html>');
    };
    const err = await rejection(client({ leanInfer: true }).infer('m', { inputs }));
    expect([err.grpcCode, err.message]).toEqual([code, expect.stringMatching(new RegExp(`HTTP status code ${status}`))]);
  });

  it('the lean path refuses a 200 whose content-type is not application/grpc', async () => {
    handler = (s) => {
      s.respond({ ':status': 200, 'content-type': 'text/html' });
      s.end('<html>hello</html>');
    };
    const err = await rejection(client({ leanInfer: true }).infer('m', { inputs }));
    expect([err.grpcCode, err.message]).toEqual([2, expect.stringMatching(/content-type 'text\/html'/)]);
  });
});

describe('GrpcClient streams', () => {
  it('a status that ends the stream reaches the callback, and infer() then throws', async () => {
    handler = (s) => s.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '14', 'grpc-message': 'backend went away' }, { endStream: true });
    const got: (string | undefined)[] = [];
    const c = client();
    const stream = c.stream((err) => got.push(`${err?.grpcCode} ${err?.message}`));
    stream.infer('m', { inputs });
    expect((await rejection(stream.end())).grpcCode).toBe(14);
    expect(got).toEqual(['14 backend went away']);
    expect(() => stream.infer('m', { inputs })).toThrow(new InferenceServerError('stream is closed'));
  });

  it('infer() after end() throws instead of being dropped', async () => {
    handler = (s) => s.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true });
    const stream = client().stream(() => undefined);
    await stream.end();
    expect(() => stream.infer('m', { inputs })).toThrow(/stream is closed/);
  });

  it('timeoutMs bounds unary calls, not streams; streamTimeoutMs bounds a stream', async () => {
    handler = (s) => s.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true });
    const open = async (options: GrpcClientOptions) => {
      const got: (number | undefined)[] = [];
      const stream = client(options).stream((err) => got.push(err?.grpcCode));
      stream.infer('m', { inputs });
      await new Promise((r) => setTimeout(r, 400));
      const end = await stream.end().then(() => 'ok', (e: InferenceServerError) => e.grpcCode);
      return { end, got };
    };
    expect(await open({ timeoutMs: 100 })).toEqual({ end: 'ok', got: [] });
    expect(await open({ streamTimeoutMs: 100 })).toEqual({ end: 4, got: [4] });
  });
});
