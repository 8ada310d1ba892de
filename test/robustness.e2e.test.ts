/**
 * Bad input never crashes the server or makes it hold on to memory: malformed and mutated
 * requests (over fetch and raw sockets) against a `triode serve` child, then a good request.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, rawExchange, startTriode, type Child } from './helpers/process.js';

let triode: Child;
let port: number;
let base: string;

const valid = JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from({ length: 16 }, (_, i) => i) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
  ],
});

function rssKb(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? 0);
}

/** Sends raw bytes and resolves with whatever comes back before the socket closes or 2 s pass. */
const raw = (bytes: string | Buffer): Promise<string> => rawExchange(port, [bytes], { timeoutMs: 2000, end: true });

/** A deterministic mutation of the valid request body. */
function mutate(seed: number): string {
  let x = seed;
  const rnd = () => ((x = (x * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const chars = valid.split('');
  const edits = 1 + Math.floor(rnd() * 4);
  for (let e = 0; e < edits; e++) {
    const i = Math.floor(rnd() * chars.length);
    const k = rnd();
    if (k < 0.33) chars.splice(i, 1);
    else if (k < 0.66) chars.splice(i, 0, '{}[],:"-0123456789eE.x\\'[Math.floor(rnd() * 22)]!);
    else chars[i] = String.fromCharCode(Math.floor(rnd() * 128));
  }
  return chars.join('');
}

beforeAll(async () => {
  port = await freePort();
  base = `http://127.0.0.1:${port}`;
  triode = await startTriode(['serve', '--model-repository', makeRepository(['simple', 'simple_string']), '--http-port', String(port), '--http-address', '127.0.0.1', '--http-max-input-size', '1048576', '--allow-grpc=false', '--allow-metrics=false']);
});

afterAll(async () => {
  await triode?.stop();
});

describe('bad input', () => {
  it('gets 4xx answers for 600 mutated JSON bodies, and the server keeps serving', async () => {
    const statuses = new Map<number, number>();
    for (let i = 0; i < 600; i += 20) {
      const batch = await Promise.all(Array.from({ length: 20 }, (_, k) => fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: mutate(i + k + 1) })
        .then(async (r) => { await r.arrayBuffer(); return r.status; })));
      for (const s of batch) statuses.set(s, (statuses.get(s) ?? 0) + 1);
    }
    for (const s of statuses.keys()) expect([200, 400]).toContain(s);
    expect(statuses.get(400)).toBeGreaterThan(300);
    const ok = await fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: valid });
    expect(ok.status).toBe(200);
  });

  it('survives malformed HTTP: garbage, truncated bodies, lying lengths, broken chunking', async () => {
    const cases = [
      'GARBAGE\r\n\r\n',
      'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"inputs":',
      'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nInference-Header-Content-Length: 99999999999999999999\r\n\r\n{}abc',
      'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\nabc\r\n0\r\n\r\n',
      'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\nnotgzipped',
      'POST /v2/models/simple_string/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 150\r\nInference-Header-Content-Length: 142\r\n\r\n{"inputs":[{"name":"INPUT0","shape":[1,16],"datatype":"BYTES","parameters":{"binary_data_size":8}}]}' + '\xff\xff\xff\x7f' + 'abcd',
      `POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n${'x'.repeat(100000)}`,
    ];
    for (const c of cases) await raw(c);
    expect((await fetch(`${base}/v2/health/live`)).status).toBe(200);
    const ok = await fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: valid });
    expect(ok.status).toBe(200);
  });

  it('does not grow memory over 3000 rejected requests', async () => {
    const pid = triode.proc.pid!;
    const bad = JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(1000).fill(1) }] });
    const round = () => Promise.all(Array.from({ length: 50 }, () => fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: bad }).then((r) => r.arrayBuffer())));
    for (let i = 0; i < 10; i++) await round();
    const before = rssKb(pid);
    for (let i = 0; i < 60; i++) await round();
    const after = rssKb(pid);
    // Generous bound: what matters is that 3000 failures do not each leave something behind.
    expect(after - before).toBeLessThan(40 * 1024);
  });
});

