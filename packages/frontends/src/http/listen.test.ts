/**
 * Issue #14 on a real socket: slow clients (slowloris), idle connections, oversized heads, and
 * control-route bodies refused before they are sent.
 */
import { connect, type Socket } from 'node:net';
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
function talk(bytes: string, ms = 30_000): Promise<{ reply: string; closed: boolean; socket: Socket }> {
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
