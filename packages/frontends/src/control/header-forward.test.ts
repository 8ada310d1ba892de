/** Header forwarding: matching HTTP headers and gRPC metadata reach the model as request parameters. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metadata, credentials, makeGenericClientConstructor, type Client, type ServiceError } from '@grpc/grpc-js';
import { JavaScriptBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, deserializeBytesTensor, serializeBytesTensor, serviceDefinition } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { createHttpApp } from '../http/http-server.js';
import { startGrpcServer, type GrpcServerHandle } from '../grpc/grpc-server.js';
import { forwardHeaders, headerPattern } from './header-forward.js';

/** A model that answers with its request's parameters as JSON. */
const ECHO_PARAMS = {
  'params/config.pbtxt': 'backend: "javascript"\nmax_batch_size: 0\ninput [ { name: "IN" data_type: TYPE_STRING dims: [ 1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]\n',
  'params/1/model.mjs': "import { tensor } from 'triode';\nexport default class { execute(requests) { return requests.map((r) => ({ outputs: [tensor('OUT', 'BYTES', [1], [JSON.stringify(r.parameters)])] })); } }\n",
};

let server: InferenceServer;
let grpc: GrpcServerHandle;

beforeAll(async () => {
  server = await InferenceServer.create({ modelRepositories: [makeRepository([], ECHO_PARAMS)], backends: [new JavaScriptBackend()] });
  grpc = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', headerForwardPattern: headerPattern('^x-tenant')! });
}, 30_000);

afterAll(async () => {
  await grpc?.close(500);
  await server?.stop(1000);
});

describe('header forwarding', () => {
  it('forwardHeaders adds matching names only, and never overrides a request parameter', () => {
    const req = { modelName: 'm', inputs: [], parameters: { 'x-tenant-id': 'own' } };
    forwardHeaders(req, [['x-tenant-id', 'h'], ['x-tenant-region', 'eu'], ['authorization', 'secret'], [':path', '/']], /^x-tenant/i);
    expect(req.parameters).toEqual({ 'x-tenant-id': 'own', 'x-tenant-region': 'eu' });
  });

  it('attack: a header named as a parameter the core acts on is not forwarded (review: a `priority` header, sent by browsers and curl, failed every request; a `sequence_id` one became the correlation id)', () => {
    const req = { modelName: 'm', inputs: [] };
    forwardHeaders(req, [['priority', 'u=3, i'], ['Sequence_Id', '7'], ['timeout', 'x'], ['sequence_start', 'yes'], ['binary_data_output', 'no'], ['x-tenant', 't']], /./i);
    expect(req).toEqual({ modelName: 'm', inputs: [], parameters: { 'x-tenant': 't' } });
  });

  it('over HTTP (--http-header-forward-pattern) and gRPC (--grpc-header-forward-pattern)', async () => {
    const app = createHttpApp(new LocalBackplane(server), { headerForwardPattern: headerPattern('^X-Tenant')! });
    const r = await app.request('/v2/models/params/infer', {
      method: 'POST', headers: { 'x-tenant-id': 'acme', 'x-other': 'no' },
      body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'BYTES', shape: [1], data: ['x'] }] }),
    });
    const out = (await r.json() as { outputs: { data: string[] }[] }).outputs[0]!.data[0]!;
    expect(JSON.parse(out)).toEqual({ 'x-tenant-id': 'acme' });

    const Service = makeGenericClientConstructor(serviceDefinition('inference.GRPCInferenceService'), 'S');
    const c = new Service(`127.0.0.1:${grpc.port}`, credentials.createInsecure()) as unknown as Client & Record<string, (req: object, md: Metadata, o: object, cb: (e: ServiceError | null, r: { raw_output_contents: Uint8Array[] }) => void) => void>;
    const md = new Metadata();
    md.set('x-tenant-id', 'globex');
    const res = await new Promise<{ raw_output_contents: Uint8Array[] }>((resolve, reject) => {
      c['ModelInfer']!({ model_name: 'params', inputs: [{ name: 'IN', datatype: 'BYTES', shape: [1] }], raw_input_contents: [serializeBytesTensor(['x'])] }, md, {}, (e, v) => (e ? reject(e) : resolve(v)));
    });
    c.close();
    const text = new TextDecoder().decode(deserializeBytesTensor(new Uint8Array(res.raw_output_contents[0]!))[0]);
    expect(JSON.parse(text)).toMatchObject({ 'x-tenant-id': 'globex' });
  });

  it('a pattern matching everything forwards the client\'s metadata only, not transport headers (fast path and grpc-js)', async () => {
    const all = await startGrpcServer(new LocalBackplane(server), { address: '127.0.0.1:0', headerForwardPattern: headerPattern('.*')! });
    const Service = makeGenericClientConstructor(serviceDefinition('inference.GRPCInferenceService'), 'S');
    type Infer = (req: object, md: Metadata, o: object, cb: (e: ServiceError | null, r: { raw_output_contents: Uint8Array[] }) => void) => void;
    try {
      // Plain: the fast path; gzip: grpc-js.
      for (const options of [{}, { 'grpc.default_compression_algorithm': 2 }]) {
        const c = new Service(`127.0.0.1:${all.port}`, credentials.createInsecure(), options) as unknown as Client & Record<string, Infer>;
        const md = new Metadata();
        md.set('x-custom', 'yes');
        const res = await new Promise<{ raw_output_contents: Uint8Array[] }>((resolve, reject) => {
          c['ModelInfer']!({ model_name: 'params', inputs: [{ name: 'IN', datatype: 'BYTES', shape: [1] }], raw_input_contents: [serializeBytesTensor(['x'])] }, md, { deadline: Date.now() + 10_000 }, (e, v) => (e ? reject(e) : resolve(v)));
        });
        c.close();
        const keys = Object.keys(JSON.parse(new TextDecoder().decode(deserializeBytesTensor(new Uint8Array(res.raw_output_contents[0]!))[0])) as object);
        expect(keys).toContain('x-custom');
        for (const k of keys) expect(k, JSON.stringify(options)).not.toMatch(/^(:|grpc-|te$|content-type$|accept-encoding$)/);
      }
    } finally {
      await all.close(500);
    }
  });
});
