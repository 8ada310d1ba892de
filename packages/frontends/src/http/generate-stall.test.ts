/**
 * A generate_stream client that stops reading (review): before, the server turned each of the
 * backend's 64 untaken responses into an SSE event at once (a 1 MiB UINT8 output is ~3 MB of JSON
 * text, and its bytes again), and kept them until the client closed. Now an event is made only
 * when the one before has gone out, and a client that takes nothing for the stall time is given
 * up: its response is destroyed and what waited for it is dropped.
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { JavaScriptBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, silentLogger } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { createHttpApp } from './http-server.js';
import { startHttpServer, type HttpServerHandle } from './listen.js';
import { captureListens } from '../../../../test/helpers/servers.js';

const STALL_MS = 3000;
/** What three stalled clients may make the server hold, all together: about 40 MiB each (16 MiB of
 * untaken responses, an event or two of ~3.3 MB and its bytes, garbage not yet collected). */
const HELD_BOUND = 3 * 40 * 1024 * 1024;
let server: InferenceServer;
let http: HttpServerHandle;
/** The server's end of each connection, by the client's port: to see when the server gave one up. */
const serverEnds = new Map<number, Socket>();

beforeAll(async () => {
  const repo = makeRepository([], {
    'dec/config.pbtxt': `backend: "javascript"\nmodel_transaction_policy { decoupled: true }\n`
      + `input [ { name: "N" data_type: TYPE_INT32 dims: [ 1 ] }, { name: "SIZE" data_type: TYPE_INT32 dims: [ 1 ] } ]\n`
      + `output [ { name: "OUT" data_type: TYPE_UINT8 dims: [ -1 ] } ]\ninstance_group [ { count: 1, kind: KIND_CPU } ]\n`,
    'dec/1/model.mjs': `
      import { tensor } from 'triode';
      export default class {
        execute(requests) {
          for (const r of requests) {
            const n = r.input('N').data[0], size = r.input('SIZE').data[0];
            for (let i = 0; i < n && !r.isCancelled(); i++) {
              r.sender.send({ outputs: [tensor('OUT', 'UINT8', [size], new Uint8Array(size).fill(65), { owned: true })] });
            }
            r.sender.close();
          }
        }
      }`,
  });
  server = await InferenceServer.create({ modelRepositories: [repo], backends: [new JavaScriptBackend({ clientStallMs: STALL_MS })], logger: silentLogger });
  const { servers, stop } = captureListens();
  http = await startHttpServer(createHttpApp(new LocalBackplane(server), { logger: silentLogger, sseStallMs: STALL_MS }), 0, '127.0.0.1').finally(stop);
  servers[0]!.on('connection', (s: Socket) => serverEnds.set(s.remotePort!, s));
}, 30_000);

afterAll(async () => {
  await http?.close(100);
  await server?.stop(1000);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sends a generate_stream request on a raw socket that is never read. */
function stalledClient(n: number, size: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ N: [n], SIZE: [size] });
    const s = connect(http.port, '127.0.0.1', () => {
      s.pause();
      s.write(`POST /v2/models/dec/generate_stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      resolve(s);
    });
    s.on('error', reject);
  });
}

describe('generate_stream and a client that stops reading', () => {
  it('attack: 3 clients that never read 200 responses of 1 MiB: the server holds about an event each, serves others, and ends their responses after the stall', async () => {
    const mem = () => { const m = process.memoryUsage(); return m.rss; };
    global.gc?.();
    const before = mem();
    const clients = await Promise.all([0, 1, 2].map(() => stalledClient(200, 1 << 20)));
    let peak = 0;
    const watch = setInterval(() => { peak = Math.max(peak, mem() - before); }, 20);
    try {
      // While they are stalled (before the stall time is up), another client is answered.
      await sleep(1000);
      const r = await fetch(`http://127.0.0.1:${http.port}/v2/models/dec/generate_stream`, { method: 'POST', body: JSON.stringify({ N: [2], SIZE: [4] }) });
      const text = await r.text();
      expect(r.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      expect(text).toBe('data: {"OUT":[65,65,65,65],"model_name":"dec","model_version":"1"}\n\n'.repeat(2));
      // Each stalled response is ended once its client took nothing for the stall time (the
      // backend's stall-cancel, then the server's; one after another, the model has one
      // instance). Read only once the server has closed all three (reading earlier would end
      // a stall): the connection ends early, its chunked body unfinished, and nothing like 200
      // events came. (30 s: well before listen.ts's own 60 s stall close, which would pass too.)
      await vi.waitFor(() => expect(clients.map((s) => serverEnds.get(s.localPort!)?.destroyed)).toEqual([true, true, true]), { timeout: 30_000, interval: 100 });
      clearInterval(watch);
      console.log(`peak rss growth ${(peak / 1048576).toFixed(1)} MiB`);
      // Before: 64 events of ~3 MB (and their bytes) a client, 1.8 GB for three; then 64 MiB of
      // untaken responses a client, before they were bounded by bytes too (16 MiB).
      expect(peak).toBeLessThan(HELD_BOUND);
      const got = await Promise.all(clients.map((s) => new Promise<string>((res) => {
        let n = 0;
        let tail = '';
        s.on('data', (b: Buffer) => { n += b.length; tail = (tail + b.toString('latin1')).slice(-16); });
        const timer = setTimeout(() => res(`hung after ${n} bytes`), 5000);
        s.once('close', () => { clearTimeout(timer); res(tail.endsWith('0\r\n\r\n') ? 'finished' : n < 100 * 3 * 1024 * 1024 ? 'ended' : `ended after ${n} bytes`); });
        s.resume();
      })));
      expect(got).toEqual(['ended', 'ended', 'ended']);
    } finally {
      clearInterval(watch);
      for (const s of clients) s.destroy();
    }
  }, 120_000);
});

describe('generate_stream: a client that reads slowly but steadily', () => {
  it('gets a large event whole, however long it takes to send, as long as bytes keep going out (review: it was given up mid-event)', async () => {
    // ~12.6 MB of JSON in one event, read at ~1 MB/s: ~12 s, four times the stall time (and a
    // 180 s test timeout, for a loaded machine).
    const size = 4 * 1024 * 1024;
    const body = JSON.stringify({ N: [1], SIZE: [size] });
    const got = await new Promise<Buffer>((resolve) => {
      const chunks: Buffer[] = [];
      const s = connect(http.port, '127.0.0.1', () => {
        s.write(`POST /v2/models/dec/generate_stream HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
      });
      s.on('data', (c: Buffer) => {
        chunks.push(c);
        s.pause();
        setTimeout(() => s.resume(), Math.ceil(c.byteLength / 1000));
      });
      s.on('error', () => undefined);
      s.on('close', () => resolve(Buffer.concat(chunks)));
    });
    const text = got.toString('latin1');
    // The whole event and the chunked body's end: the response was not cut off.
    expect(text.endsWith('0\r\n\r\n')).toBe(true);
    const dechunked = text.slice(text.indexOf('\r\n\r\n') + 4).replace(/\r\n[0-9a-f]+\r\n/g, '').replace(/^[0-9a-f]+\r\n/, '');
    const event = dechunked.slice(0, dechunked.indexOf('\n\n'));
    expect(event.startsWith('data: {')).toBe(true);
    // The generate extension's answer: the output by name, its values flat.
    const answer = JSON.parse(event.slice('data: '.length)) as { model_name: string; OUT: number[] };
    expect(answer.model_name).toBe('dec');
    expect(answer.OUT).toHaveLength(size);
  }, 180_000);
});
