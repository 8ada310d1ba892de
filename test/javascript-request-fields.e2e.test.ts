/**
 * A JavaScript model reads a request's correlation id, flags and timeout, which it no longer finds
 * among its parameters (as in Triton, whose Python models read request.correlation_id(), flags(),
 * timeout()), from HTTP `/infer` parameters against `triode serve`.
 */
import { cpSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

let triode: Child;
let base: string;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const repo = makeRepository([]);
  const fixture = join(ROOT, 'test', 'fixtures', 'models', 'request_fields');
  cpSync(fixture, join(repo, 'fields'), { recursive: true });
  // A sequence model reads them too (besides its control inputs).
  cpSync(fixture, join(repo, 'fields_seq'), { recursive: true });
  writeFileSync(join(repo, 'fields_seq', 'config.pbtxt'), 'backend: "javascript"\nmax_batch_size: 4\nsequence_batching { }\ninput [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]\n');
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false']);
});

afterAll(async () => {
  await triode?.stop();
});

/** What the model answered for a request with `parameters` (JSON text, so a uint64 stays exact). */
async function fields(model: string, parameters: string): Promise<string> {
  const body = `{"parameters":${parameters},"inputs":[{"name":"IN","shape":[1,1],"datatype":"INT32","data":[1]}]}`;
  const r = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body });
  const json = await r.json() as { outputs?: { data: string[] }[]; error?: string };
  expect(r.status, json.error).toBe(200);
  return json.outputs![0]!.data[0]!;
}

describe('a JavaScript model reads what the HTTP request set', () => {
  it('its correlation id (a uint64 exact, or a string), flags and timeout; 0 when the request has none', async () => {
    expect(await fields('fields', '{}')).toBe('id=n0 start=false end=false flags=0 timeout=0 params=');
    expect(await fields('fields', '{"sequence_id":18446744073709551615,"sequence_start":true,"timeout":2500,"priority":0,"tenant":"a"}'))
      .toBe('id=n18446744073709551615 start=true end=false flags=1 timeout=2500 params=tenant');
    expect(await fields('fields', '{"sequence_id":"session-9","sequence_end":true,"binary_data_output":false}'))
      .toBe('id=ssession-9 start=false end=true flags=2 timeout=0 params=');
    expect(await fields('fields_seq', '{"sequence_id":77,"sequence_start":true}')).toBe('id=n77 start=true end=false flags=1 timeout=0 params=');
    expect(await fields('fields_seq', '{"sequence_id":77,"sequence_end":true,"tenant":"b"}')).toBe('id=n77 start=false end=true flags=2 timeout=0 params=tenant');
  });
});
