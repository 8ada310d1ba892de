/**
 * Issue #14 on a real socket: slow clients (slowloris), idle connections, oversized heads, and
 * control-route bodies refused before they are sent.
 */
import { connect, type Socket } from 'node:net';
import { deflateSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LogSettings, silentLogger, type Backplane } from '@triode/core';
import { createHttpApp } from './http-server.js';
import { startHttpServer, type HttpServerHandle } from './listen.js';
import { captureListens } from '../../../../test/helpers/servers.js';

let http: HttpServerHandle;
const settings = new LogSettings();

beforeAll(async () => {
  // infer takes longer than requestTimeoutMs: only receiving the request is timed, not answering it.
  const backplane = {
    infer: async () => {
      await new Promise((r) => setTimeout(r, 1000));
      return { modelName: 'm', modelVersion: '1', outputs: [] };
    },
  } as unknown as Backplane;
  http = await startHttpServer(createHttpApp(backplane, { logSettings: settings, logger: silentLogger }), 0, '127.0.0.1', {
    headersTimeoutMs: 300, requestTimeoutMs: 600, keepAliveTimeoutMs: 300, connectionsCheckingIntervalMs: 50, maxHeaderSize: 4096,
  });
});

afterAll(async () => {
  await http.close();
});

/**
 * Opens a socket, writes `bytes`; resolves with what came back and whether the server closed it
 * within `ms` (30 s: 10x and more past every limit here, so only a server that hangs reaches it).
 */
function talk(bytes: string | Uint8Array, ms = 30_000): Promise<{ reply: string; closed: boolean; socket: Socket }> {
  return new Promise((resolve) => {
    const socket = connect(http.port, '127.0.0.1');
    let reply = '';
    const timer = setTimeout(() => { resolve({ reply, closed: false, socket }); }, ms);
    socket.on('data', (d) => { reply += d.toString('latin1'); });
    socket.on('close', () => { clearTimeout(timer); resolve({ reply, closed: true, socket }); });
    socket.on('error', () => undefined);
    socket.write(bytes);
  });
}

describe('socket limits', () => {
  it('a client that never finishes its headers is answered 408 and disconnected (headersTimeout)', async () => {
    const { reply, closed } = await talk('GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: ');
    expect(closed).toBe(true);
    expect(reply).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a connection that sends nothing is answered 408 and disconnected (headersTimeout: Node times a connection\'s first request from when it connects)', async () => {
    const { reply, closed } = await talk('');
    expect(closed).toBe(true);
    expect(reply).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a connection that sends one byte of a request and stops is answered 408 and disconnected (headersTimeout, as for any unfinished head)', async () => {
    const { reply, closed } = await talk('G');
    expect(closed).toBe(true);
    expect(reply).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a client that never finishes its body is disconnected (requestTimeout)', async () => {
    const { reply, closed } = await talk('POST /v2/repository/models/m/load HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"par');
    expect(closed).toBe(true);
    expect(reply).toMatch(/^HTTP\/1\.1 408/);
  });

  it('a model that takes longer than requestTimeout still answers', async () => {
    const body = '{"inputs":[]}';
    const { reply } = await talk(`POST /v2/models/m/infer HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    expect(reply).toMatch(/^HTTP\/1\.1 200/);
    expect(reply).toContain('"model_name":"m"');
  });

  it('an idle keep-alive connection is closed (keepAliveTimeout)', async () => {
    const { reply, closed } = await talk('GET /v2/logging HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(reply).toMatch(/^HTTP\/1\.1 200/);
    expect(closed).toBe(true);
  });

  it('a request head over maxHeaderSize is answered 431', async () => {
    const { reply, closed } = await talk(`GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(8192)}\r\n\r\n`);
    expect(reply).toMatch(/^HTTP\/1\.1 431/);
    expect(closed).toBe(true);
  });

  it('a control route answers 413 on its Content-Length alone, before the client sends the body, and closes', async () => {
    const { reply, closed } = await talk(`POST /v2/logging HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${64 << 20}\r\n\r\n`);
    expect(reply).toMatch(/^HTTP\/1\.1 413/);
    expect(reply).toContain(`Request body of ${64 << 20} bytes exceeds the limit of 65536 bytes of this endpoint`);
    expect(closed).toBe(true);
  });

  it('a chunked control-route body is cut at the limit with 413', async () => {
    const chunk = `4000\r\n${' '.repeat(0x4000)}\r\n`;
    const { reply, closed } = await talk(`POST /v2/logging HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n12\r\n{"log_info":false}\r\n${chunk.repeat(6)}`);
    expect(reply).toMatch(/^HTTP\/1\.1 413/);
    expect(closed).toBe(true);
    expect(settings.log_info).toBe(true);
  });
});

describe('a connection\'s first byte', () => {
  it('a client that sends its first request late, but within headersTimeout, is served, and its connection is then timed by keepAliveTimeout alone', async () => {
    // Margins of seconds, so that a loaded machine cannot turn "in time" into "late".
    const h = await startHttpServer(createHttpApp({} as Backplane, { logSettings: settings, logger: silentLogger }), 0, '127.0.0.1', {
      headersTimeoutMs: 3000, requestTimeoutMs: 6000, keepAliveTimeoutMs: 4000, connectionsCheckingIntervalMs: 50,
    });
    try {
      const socket = connect(h.port, '127.0.0.1');
      const opened = Date.now();
      let reply = '';
      let closedAt: number | undefined;
      socket.on('data', (d) => { reply += d.toString('latin1'); });
      socket.on('error', () => undefined);
      socket.on('close', () => { closedAt = Date.now(); });
      await new Promise((r) => setTimeout(r, 1000));
      socket.write('GET /v2/logging HTTP/1.1\r\nHost: x\r\n\r\n');
      for (const end = Date.now() + 30_000; !/^HTTP\/1\.1 200/.test(reply) && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
      expect(reply).toMatch(/^HTTP\/1\.1 200/);
      // Past the first byte's deadline (3 s after connecting), still open: keep-alive now governs it.
      await new Promise((r) => setTimeout(r, Math.max(0, opened + 4000 - Date.now())));
      expect(closedAt).toBeUndefined();
      for (const end = Date.now() + 30_000; closedAt === undefined && Date.now() < end;) await new Promise((r) => setTimeout(r, 20));
      expect(closedAt).toBeDefined();
    } finally {
      await h.close();
    }
  });
});

/** A request: `head` (its blank line included), then `body` as one chunk and the last chunk. */
const withChunk = (head: string, body: Uint8Array | string): Buffer => {
  const b = Buffer.from(body);
  return Buffer.concat([Buffer.from(`${head}${b.length.toString(16)}\r\n`), b, Buffer.from('\r\n0\r\n\r\n')]);
};

describe('transfer codings', () => {
  const errorOf = (reply: string) => (JSON.parse(reply.slice(reply.indexOf('\r\n\r\n') + 4)) as { error: string }).error;

  it('attack: a body in a transfer coding besides chunked (gzip, chunked) is 501 and the connection closed (before: read as if plain, 400 on its compressed bytes)', async () => {
    const infer = gzipSync('{"inputs":[]}');
    for (const [path, te, body] of [
      ['/v2/models/m/infer', 'gzip, chunked', infer],
      ['/v2/models/m/infer', 'GZIP,chunked', infer],
      ['/v2/logging', 'deflate, chunked', deflateSync('{"log_info":false}')],
      ['/v2/logging', 'identity, chunked', '{"log_info":false}'],
    ] as const) {
      const { reply, closed } = await talk(withChunk(`POST ${path} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${te}\r\n\r\n`, body));
      expect(reply, te).toMatch(/^HTTP\/1\.1 501 /);
      expect(reply, te).toMatch(/\r\nconnection: close\r\n/i);
      expect(errorOf(reply)).toBe(`Transfer-Encoding '${te}' is not supported: only chunked is (send a compressed body with Content-Encoding)`);
      expect(closed, te).toBe(true);
    }
    // Two Transfer-Encoding fields are one list (RFC 9110 section 5.3).
    const { reply, closed } = await talk(withChunk('POST /v2/logging HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n', gzipSync('{"log_info":false}')));
    expect([reply.slice(0, 12), errorOf(reply).slice(0, 34), closed]).toEqual(['HTTP/1.1 501', "Transfer-Encoding 'gzip, chunked' ", true]);
    expect(settings.log_info).toBe(true);
  });

  it('a Transfer-Encoding whose last coding is not chunked is 400 and the connection closed (RFC 9112 section 6.3)', async () => {
    const { reply, closed } = await talk(withChunk('POST /v2/logging HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n', gzipSync('{"log_info":false}')));
    expect(reply).toMatch(/^HTTP\/1\.1 400 /);
    expect(closed).toBe(true);
    expect(settings.log_info).toBe(true);
  });

  it('chunked (in any case) is read, and a chunked body with Content-Encoding gzip or deflate is decoded', async () => {
    const doc = '{"log_info":true}';
    for (const [te, ce, body] of [['chunked', '', doc], ['Chunked', '', doc], ['chunked', 'gzip', gzipSync(doc)], ['chunked', 'deflate', deflateSync(doc)]] as const) {
      const { reply } = await talk(withChunk(`POST /v2/logging HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${te}\r\n${ce ? `Content-Encoding: ${ce}\r\n` : ''}\r\n`, body));
      expect(reply, `${te} ${ce}`).toMatch(/^HTTP\/1\.1 200 /);
      expect(reply).toContain('"log_info":true');
    }
  });
});

describe('a listening server\'s own errors', () => {
  it('attack: an error the HTTP server emits after it listens (a failed accept) is a warning, not the end of the process', async () => {
    const { servers, stop } = captureListens();
    let h: HttpServerHandle | undefined;
    const warned: string[] = [];
    const onWarning = (w: Error) => warned.push(w.message);
    process.on('warning', onWarning);
    try {
      h = await startHttpServer(createHttpApp({} as Backplane, { logSettings: settings, logger: silentLogger }), 0, '127.0.0.1');
      stop();
      expect(servers).toHaveLength(1);
      // Before: no 'error' listener once listening, so emit threw (in a server: an uncaught exception).
      expect(() => servers[0]!.emit('error', Object.assign(new Error('accept ENOBUFS'), { code: 'ENOBUFS' }))).not.toThrow();
      await new Promise((r) => setImmediate(r));
      expect(warned).toContain('HTTP server: accept ENOBUFS');
    } finally {
      stop();
      process.off('warning', onWarning);
      await h?.close();
    }
  });
});
