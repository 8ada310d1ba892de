/**
 * Decoupled models over HTTP: `generate_stream` streams each response as a server-sent event as
 * the model sends it; `generate` answers models with one response; `/infer` refuses decoupled
 * models with a clear error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

let triode: Child;
let base: string;

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  triode = await startTriode(['serve', '--model-repository', makeRepository(['repeat_int32', 'simple_identity', 'simple']), '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false']);
});

afterAll(async () => {
  await triode?.stop();
});

/** Reads an SSE response, noting when each event arrived. */
async function events(r: Response): Promise<{ at: number; data: Record<string, unknown> }[]> {
  const out: { at: number; data: Record<string, unknown> }[] = [];
  const reader = r.body!.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const chunk = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const line = chunk.split('\n').find((l) => l.startsWith('data:'));
      if (line) out.push({ at: performance.now(), data: JSON.parse(line.slice(5).trim()) as Record<string, unknown> });
    }
  }
  return out;
}

describe('decoupled models and the generate extension', () => {
  it('generate_stream sends repeat_int32\'s responses one by one, in order', async () => {
    const r = await fetch(`${base}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [100, 101, 102, 103], DELAY: [0, 0, 0, 0], WAIT: [0] }) });
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const ev = await events(r);
    expect(ev.map((e) => [e.data['OUT'], e.data['IDX']])).toEqual([[100, 0], [101, 1], [102, 2], [103, 3]]);
  });

  it('generate_stream sends each response as it is made, not buffered until the end', async () => {
    const leaving = new AbortController();
    // The second response is held 10 minutes: a buffered stream would show nothing before the test's timeout.
    const r = await fetch(`${base}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [100, 101], DELAY: [0, 600_000], WAIT: [0] }), signal: leaving.signal });
    try {
      expect(r.status).toBe(200);
      const reader = r.body!.getReader();
      const dec = new TextDecoder();
      let buf = '';
      while (!buf.includes('\n\n')) {
        const { done, value } = await reader.read();
        expect(done).toBe(false);
        buf += dec.decode(value, { stream: true });
      }
      const end = buf.indexOf('\n\n');
      const line = buf.slice(0, end).split('\n').find((l) => l.startsWith('data:'));
      expect(JSON.parse(line!.slice(5).trim())).toMatchObject({ OUT: 100, IDX: 0 });
      expect(buf.slice(end + 2)).toBe(''); // only the first: the second is still held
    } finally {
      leaving.abort(); // cancels the request, freeing the model's one instance for the next tests
    }
  });

  it('a client that leaves a generate_stream cancels it: the model stops, and the next request does not wait out the first', async () => {
    const leaving = new AbortController();
    const r = await fetch(`${base}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [1, 2], DELAY: [0, 30_000], WAIT: [0] }), signal: leaving.signal });
    const reader = r.body!.getReader();
    await reader.read(); // the first response
    leaving.abort();
    const t0 = performance.now();
    const next = await fetch(`${base}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [7], DELAY: [0], WAIT: [0] }) });
    const ev = await events(next);
    expect(ev.map((e) => e.data['OUT'])).toEqual([7]);
    // The model has one instance: before, the second request waited the first one's 30 s.
    expect(performance.now() - t0).toBeLessThan(5000);
  }, 20_000);

  it('a client that leaves a generate request cancels it, as on /infer: the model stops and its instance is free', async () => {
    const leaving = new AbortController();
    // repeat_int32 with one element answers once: a /generate request; it would hold the instance 30 s.
    const r = fetch(`${base}/v2/models/repeat_int32/generate`, { method: 'POST', body: JSON.stringify({ IN: [1], DELAY: [30_000], WAIT: [0] }), signal: leaving.signal });
    await new Promise((res) => setTimeout(res, 300));
    leaving.abort();
    await expect(r).rejects.toThrow();
    const t0 = performance.now();
    const next = await fetch(`${base}/v2/models/repeat_int32/generate`, { method: 'POST', body: JSON.stringify({ IN: [7], DELAY: [0], WAIT: [0] }) });
    expect(await next.json()).toMatchObject({ OUT: 7 });
    // Before, the abandoned request ran its 30 s on the model's one instance and this one waited.
    expect(performance.now() - t0).toBeLessThan(5000);
  }, 20_000);

  it('an error from the model arrives as an error event; as the first response, its status is the stream\'s', async () => {
    const r = await fetch(`${base}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: [1, 2], DELAY: [0], WAIT: [0] }) });
    // The model's error (INTERNAL): 500, as Triton sets the status from the first response.
    expect(r.status).toBe(500);
    expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const ev = await events(r);
    expect(ev).toEqual([{ at: expect.any(Number), data: { error: 'expected DELAY to have 2 elements, got 1' } }]);
  });

  it('/infer refuses a decoupled model with a clear error', async () => {
    const r = await fetch(`${base}/v2/models/repeat_int32/infer`, { method: 'POST', body: JSON.stringify({ inputs: [] }) });
    expect(r.status).toBe(501);
    expect((await r.json() as { error: string }).error).toBe("model 'repeat_int32' is decoupled (0..N responses per request): use a streaming endpoint (gRPC ModelStreamInfer, HTTP generate_stream)");
  });

  it('generate answers a regular model with its outputs as fields', async () => {
    const r = await fetch(`${base}/v2/models/simple_identity/generate`, { method: 'POST', body: JSON.stringify({ id: 'g1', INPUT0: ['hello'] }) });
    expect(r.status).toBe(200);
    expect(await r.json()).toEqual({ id: 'g1', model_name: 'simple_identity', model_version: '1', OUTPUT0: 'hello' });
    const s = await fetch(`${base}/v2/models/simple/generate`, { method: 'POST', body: JSON.stringify({ INPUT0: new Array(16).fill(2), INPUT1: new Array(16).fill(1) }) });
    expect(await s.json()).toMatchObject({ OUTPUT0: new Array(16).fill(3), OUTPUT1: new Array(16).fill(1) });
    // A field that names no input is a request parameter (Triton's ExactMappingInput): the inputs are then missing.
    const bad = await fetch(`${base}/v2/models/simple/generate`, { method: 'POST', body: JSON.stringify({ NOPE: 1 }) });
    expect(bad.status).toBe(400);
    expect((await bad.json() as { error: string }).error).toMatch(/^expected 2 inputs but got 0 inputs for model 'simple'/);
  });
});
