import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { until } from '../../../../test/helpers/process.js';
import { createHttpApp } from './http-server.js';

let server: InferenceServer;
let app: ReturnType<typeof createHttpApp>;

const post = (path: string, body?: unknown) => app.request(path, { method: 'POST', ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
const index = async () => (await (await post('/v2/repository/index')).json()) as { name: string; version?: string; state: string; reason?: string }[];
const simpleBody = JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) })) });

beforeAll(async () => {
  const repo = makeRepository(['simple', 'simple_int8', 'custom_identity_int32', 'identity_chain']);
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()], modelControlMode: 'explicit', startupModels: ['simple'] });
  app = createHttpApp(new LocalBackplane(server));
});

afterAll(async () => {
  await server?.stop(2000);
});

describe('model repository extension (explicit mode)', () => {
  it('loads only --load-model at start; the others are listed as unloaded and do not hold readiness back', async () => {
    expect(await index()).toEqual([
      { name: 'custom_identity_int32', state: 'UNAVAILABLE', reason: 'unloaded' },
      { name: 'identity_chain', state: 'UNAVAILABLE', reason: 'unloaded' },
      // As Triton (TRITONSERVER_ServerModelIndex): no 'reason' when it is empty.
      { name: 'simple', version: '1', state: 'READY' },
      { name: 'simple_int8', state: 'UNAVAILABLE', reason: 'unloaded' },
    ]);
    expect(((await (await post('/v2/repository/index', { ready: true })).json()) as unknown[]).length).toBe(1);
    expect((await app.request('/v2/health/ready')).status).toBe(200);
  });

  it('reads request bodies as Triton: a non-object body is no parameters; wrong types get its JSON reader\'s words (review: Triode\'s own texts, and a number or boolean load parameter was accepted)', async () => {
    const error = async (path: string, body: unknown) => {
      const r = await app.request(path, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
      return [r.status, await r.json()];
    };
    // Triton's TritonJson finds no member in a value that is not an object.
    for (const body of ['[]', '3', '"x"', 'null']) expect((await post('/v2/repository/index', JSON.parse(body))).status, body).toBe(200);
    expect(await error('/v2/repository/index', { ready: 1 })).toEqual([400, { error: 'attempt to access JSON non-boolean as boolean' }]);
    expect(await error('/v2/repository/index', { ready: null })).toEqual([400, { error: 'attempt to access JSON non-boolean as boolean' }]);
    const load = '/v2/repository/models/simple/load';
    expect(await error(load, { parameters: [] })).toEqual([400, { error: 'attempt to get members for non-object' }]);
    expect(await error(load, { parameters: 3 })).toEqual([400, { error: 'attempt to get members for non-object' }]);
    expect(await error(load, { parameters: { config: 5 } })).toEqual([400, { error: 'attempt to access JSON non-string as string' }]);
    expect(await error(load, { parameters: { 'file:1/model.onnx': true } })).toEqual([400, { error: 'attempt to access JSON non-string as string' }]);
    expect(await error(load, { parameters: { other: 1 } })).toEqual([400, { error: 'attempt to access JSON non-string as string' }]);
    expect(await error(load, { parameters: { other: 'x' } })).toEqual([400, { error: 'unexpected error on creating Triton parameter' }]);
    const unload = '/v2/repository/models/simple/unload';
    expect(await error(unload, { parameters: { unload_dependents: 'true' } })).toEqual([400, { error: "Unable to parse 'unload_dependents': attempt to access JSON non-boolean as boolean" }]);
    // None of these did anything; a load whose body is not an object loads, an unload whose
    // 'parameters' is not an object reads no unload_dependents, as Triton's.
    expect((await app.request('/v2/models/simple/ready')).status).toBe(200);
    expect((await post(load, [])).status).toBe(200);
    expect((await app.request('/v2/models/simple/ready')).status).toBe(200);
  });

  it('attack: reads load, unload and index bodies with the infer route\'s bounds, 512 levels and 2^20 objects and arrays (review: JSON.parse took 5.5 s of the event loop and 1.8 GB for a 30 MB load body of [[[...]]])', async () => {
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const refused = async (path: string, body: string) => {
      const r = await app.request(path, { method: 'POST', body });
      return [r.status, ((await r.json()) as { error: string }).error];
    };
    // Before: JSON.parse read them whole, and the unload went through (a body that is not an object has no parameters).
    expect(await refused('/v2/repository/models/simple/unload', deep(600))).toEqual([400, expect.stringMatching(/^failed to parse the request JSON buffer: JSON nested too deeply at position 51\d$/)]);
    expect(await refused('/v2/repository/models/simple/load', `{"parameters":${deep(600)}}`)).toEqual([400, expect.stringMatching(/^failed to parse the request JSON buffer: JSON nested too deeply/)]);
    expect(await refused('/v2/repository/index', `{"x":${deep(600)}}`)).toEqual([400, expect.stringMatching(/^failed to parse the request JSON buffer: JSON nested too deeply/)]);
    expect(await refused('/v2/repository/models/simple/load', `[${'{},'.repeat(1 << 20)}{}]`)).toEqual([400, 'failed to parse the request JSON buffer: JSON holds more than 1048576 objects and arrays at position 3145726']);
    expect((await app.request('/v2/models/simple/ready')).status).toBe(200);
    // An array of numbers as parameters is still not an object, as before.
    expect(await refused('/v2/repository/models/simple/load', '{"parameters":[1,2]}')).toEqual([400, 'attempt to get members for non-object']);
    // A body of white space is no body.
    expect((await app.request('/v2/repository/index', { method: 'POST', body: ' \r\n\t' })).status).toBe(200);
  });

  it('loads a model, which then serves', async () => {
    expect((await post('/v2/repository/models/simple_int8/load')).status).toBe(200);
    expect((await app.request('/v2/models/simple_int8/ready')).status).toBe(200);
  });

  it('refuses a load or unload that names a repository in its path, as Triton (501), and does nothing; success is application/json', async () => {
    for (const action of ['unload', 'load']) {
      const r = await post(`/v2/repository/any/models/simple_int8/${action}`);
      expect(r.status).toBe(501);
      expect(await r.json()).toEqual({ error: "'repository_name' specification is not supported" });
    }
    // Before, the unload went through: the model was gone.
    expect((await app.request('/v2/models/simple_int8/ready')).status).toBe(200);
    const ok = await post('/v2/repository/models/simple_int8/load');
    expect([ok.status, ok.headers.get('content-type'), await ok.text()]).toEqual([200, 'application/json', '']);
    // The index ignores a repository name, as Triton's does.
    expect((await post('/v2/repository/any/index')).status).toBe(200);
  });

  it('accepts a config override with integers as strings', async () => {
    const r = await post('/v2/repository/models/simple/load', { parameters: { config: '{"max_batch_size":"16"}' } });
    expect(r.status).toBe(200);
    expect(((await (await app.request('/v2/models/simple/config')).json()) as { max_batch_size: number }).max_batch_size).toBe(16);
    expect((await post('/v2/models/simple/infer', JSON.parse(simpleBody))).status).toBe(200);
  });

  it('fails with "failed to load" for a bad override (400) or an unknown model (Triton: 500), and the old version keeps serving', async () => {
    const bad = await post('/v2/repository/models/simple/load', { parameters: { config: '{"max_batch_size": ' } });
    expect(bad.status).toBe(400);
    expect((await bad.json() as { error: string }).error).toMatch(/^failed to load 'simple': failed to parse the config override/);
    const unknown = await post('/v2/repository/models/nope/load');
    expect(unknown.status).toBe(500);
    expect(await unknown.json()).toEqual({ error: "failed to load 'nope', failed to poll from model repository" });
    expect((await app.request('/v2/models/simple/ready')).status).toBe(200);
  });

  it('answers 400 for a hostile model name before reading the body', async () => {
    for (const name of ['..%2Fescaped', 'a%2Fb', 'a%5Cb', 'x%00y', 'x%0Ay', 'a'.repeat(600)]) {
      for (const action of ['load', 'unload']) {
        // A body that never ends: a route that read it first would never answer.
        const body = new ReadableStream<Uint8Array>({ start(c) { c.enqueue(new TextEncoder().encode('{"parameters": {')); } });
        const r = await app.request(`/v2/repository/models/${name}/${action}`, { method: 'POST', body, duplex: 'half' } as RequestInit);
        expect(r.status, `${action} ${name}`).toBe(400);
        expect((await r.json() as { error: string }).error).toMatch(/^invalid model name '.*'(, model name must not contain path traversal characters|: the name (contains a path separator|contains a control character|is longer than 255 bytes))$/);
      }
    }
  });

  it('attack: a load body of too many parameters is refused as it is read, before any is decoded (review: 3 million file: members, 53 MB, held the event loop 18 s, in any model control mode)', async () => {
    const files = (n: number) => `{"parameters":{${Array.from({ length: n }, (_, i) => `"file:${i}":""`).join(',')}}}`;
    const load = async (body: string) => { const r = await app.request('/v2/repository/models/simple/load', { method: 'POST', body }); return [r.status, ((await r.json()) as { error: string }).error]; };
    expect(await load(files(200_000))).toEqual([400, expect.stringMatching(/^failed to parse the request JSON buffer: JSON objects hold more than 65536 members at position \d+$/)]);
    expect(await load(files(10_002))).toEqual([400, "a load request with more than 10001 parameters is over the limit of a 'config' and 10000 'file:' overrides a load may carry"]);
    // A body of white space is no body; arrays of numbers are not objects.
    expect((await app.request('/v2/repository/models/simple/load', { method: 'POST', body: ' \n\t ' })).status).toBe(200);
    expect(await load('{"parameters":[1,2]}')).toEqual([400, 'attempt to get members for non-object']);
    expect((await app.request('/v2/repository/models/simple/load', { method: 'POST', body: '[1,2]' })).status).toBe(200);
    expect((await app.request('/v2/models/simple/ready')).status).toBe(200);
  });

  it('refuses a load of a name Triton\'s load refuses, with its words, after the model control mode (review: a..b and a blank name were looked for and answered 500)', async () => {
    for (const [name, error] of [['a..b', "invalid model name 'a..b', model name must not contain path traversal characters"], ['%20%20', 'model name must not contain only whitespace characters']]) {
      const r = await post(`/v2/repository/models/${name}/load`);
      expect([r.status, await r.json()]).toEqual([400, { error }]);
    }
  });

  it('answers 400 for override paths that leave the model directory, and Triton\'s 500 for an over-long component', async () => {
    const config = JSON.stringify({ backend: 'javascript', max_batch_size: 0, input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [1] }], output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [1] }] });
    for (const rel of ['../x', '/etc/x', '1/../../x', '1//model.js']) {
      const r = await post('/v2/repository/models/ovr/load', { parameters: { config, [`file:${rel}`]: 'AAAA' } });
      expect(r.status, rel).toBe(400);
      expect((await r.json() as { error: string }).error).toMatch(/^failed to load 'ovr': invalid file override path/);
    }
    const long = await post('/v2/repository/models/ovr/load', { parameters: { config, [`file:1/${'a'.repeat(256)}`]: 'AAAA' } });
    expect(long.status).toBe(500);
    expect(await long.json()).toEqual({ error: "failed to load 'ovr', failed to poll from model repository" });
  });

  it('attack: a file override named __proto__ is written as a file like any other (review: it became the prototype of the files and was dropped)', async () => {
    const config = JSON.stringify({ backend: 'javascript', max_batch_size: 0, input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [1] }], output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [1] }] });
    // Answers the size of the model directory's file '__proto__'.
    const model = `import { readFileSync } from 'node:fs';
      import { tensor } from 'triode';
      export default class {
        initialize(args) { this.size = readFileSync(args.model_repository + '/' + args.model_name + '/__proto__').length; }
        execute(requests) { return requests.map(() => ({ outputs: [tensor('OUTPUT0', 'INT32', [1], [this.size])] })); }
      }`;
    const load = await post('/v2/repository/models/protofile/load', { parameters: { config, 'file:1/model.mjs': Buffer.from(model).toString('base64'), 'file:__proto__': Buffer.from('hello').toString('base64') } });
    expect(load.status, await load.text()).toBe(200);
    const r = await post('/v2/models/protofile/infer', { inputs: [{ name: 'INPUT0', shape: [1], datatype: 'INT32', data: [0] }] });
    expect(((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([5]);
    expect((await post('/v2/repository/models/protofile/unload')).status).toBe(200);
  });

  it('reloads with no failed request for a client running throughout', async () => {
    let running = true;
    const statuses: number[] = [];
    const client = (async () => {
      while (running) statuses.push((await app.request('/v2/models/simple/infer', { method: 'POST', body: simpleBody })).status);
    })();
    for (let i = 0; i < 3; i++) expect((await post('/v2/repository/models/simple/load')).status).toBe(200);
    running = false;
    await client;
    expect(statuses.length).toBeGreaterThan(10);
    expect(statuses.every((s) => s === 200)).toBe(true);
  });

  it('unloads a model (not ready afterwards), and with unload_dependents the ensembles using it', async () => {
    expect((await post('/v2/repository/models/custom_identity_int32/load')).status).toBe(200);
    expect((await post('/v2/repository/models/identity_chain/load')).status).toBe(200);
    expect((await app.request('/v2/models/identity_chain/ready')).status).toBe(200);
    expect((await post('/v2/repository/models/custom_identity_int32/unload', { parameters: { unload_dependents: true } })).status).toBe(200);
    expect((await app.request('/v2/models/identity_chain/ready')).status).toBe(400);
    expect((await post('/v2/repository/models/simple_int8/unload')).status).toBe(200);
    expect((await app.request('/v2/models/simple_int8/ready')).status).toBe(400);
    // As Triton's index after an unload: each version it had, UNAVAILABLE 'unloaded' (review: the version was dropped).
    expect((await index()).filter((r) => r.name === 'simple_int8')).toEqual([{ name: 'simple_int8', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }]);
    // A request for that version is refused as for a version not ready (Triton: UNAVAILABLE), without 'unloaded' repeated.
    const r = await post('/v2/models/simple_int8/versions/1/infer', { inputs: [] });
    expect([r.status, await r.json()]).toEqual([503, { error: "Request for unknown model: 'simple_int8' version 1 is not at ready state" }]);
  });

  it('an unload is told when its client leaves (a cluster gateway gives up one still waiting for its turn; review: it waited on)', async () => {
    let seen: AbortSignal | undefined;
    const backplane = { unloadModel: (_name: string, o: { signal?: AbortSignal }) => { seen = o.signal; return new Promise<void>(() => undefined); } } as unknown as LocalBackplane;
    const client = new AbortController();
    const answer = createHttpApp(backplane).request('/v2/repository/models/m/unload', { method: 'POST', body: '{}', signal: client.signal });
    await until(async () => seen !== undefined);
    expect(seen!.aborted).toBe(false);
    client.abort();
    expect(seen!.aborted).toBe(true);
    void Promise.resolve(answer).catch(() => undefined);
  });

  it('refuses load / unload when the model control mode is none', async () => {
    const none = await InferenceServer.create({ modelRepositories: [makeRepository(['simple'])], backends: [new OnnxRuntimeBackend()] });
    try {
      const r = await createHttpApp(new LocalBackplane(none)).request('/v2/repository/models/simple/load', { method: 'POST' });
      // As Triton, whose text names polling in mode NONE too.
      expect(r.status).toBe(503);
      expect((await r.json() as { error: string }).error).toBe('explicit model load / unload is not allowed if polling is enabled');
    } finally {
      await none.stop(1000);
    }
  });
});
