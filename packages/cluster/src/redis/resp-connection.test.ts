import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { startRedis, type RedisHandle } from '../../../../test/helpers/redis.js';
import { RespConnection } from './resp-connection.js';
import { respPieces } from './resp.js';

let redis: RedisHandle;
beforeAll(async () => { redis = await startRedis(); });
afterAll(async () => { await redis?.stop(); });

describe('RespConnection', () => {
  it('reads a stream in a consumer group (blocking), can be unblocked, fails while Redis is away and reconnects', async () => {
    const admin = new Redis(redis.url);
    const conn = new RespConnection(redis.url, { reconnectMs: 50 });
    try {
      await admin.xgroup('CREATE', 's', 'g', '0', 'MKSTREAM');
      await conn.connect();
      expect(conn.status).toBe('ready');
      expect(conn.clientId).toBeGreaterThan(0);
      const tensor = Buffer.alloc(70_000, 9);
      await admin.xadd('s', '*', 'r', 'head', 't', tensor);
      const reply = await conn.xreadgroup('g', 'c1', 10, 100, ['s']);
      const [[stream, entries]] = reply as [[Buffer, [Buffer, Buffer[]][]]];
      const fields = entries[0]![1];
      expect(stream.toString()).toBe('s');
      expect(fields[3]!.equals(tensor)).toBe(true);
      // Nothing more: the read times out with nil.
      expect(await conn.xreadgroup('g', 'c1', 10, 50, ['s'])).toBeNull();
      // CLIENT UNBLOCK from another connection ends a long block early. Sent until Redis has the
      // read blocked (UNBLOCK answers 1 then, 0 before the read got there); the read's block
      // (an hour) is past the test's timeout, so only the UNBLOCK can have ended it.
      const blocked = conn.xreadgroup('g', 'c1', 10, 3_600_000, ['s']);
      await vi.waitFor(async () => expect(await admin.client('UNBLOCK', conn.clientId!)).toBe(1), { timeout: 30_000, interval: 20 });
      expect(await blocked).toBeNull();
      // Errors come back as rejections (NOGROUP).
      await expect(conn.xreadgroup('nogroup', 'c1', 1, 10, ['s'])).rejects.toThrow(/NOGROUP/);
      // Redis goes away: reads fail at once; when it is back the connection is ready again.
      const port = redis.port;
      await redis.stop();
      await expect(conn.xreadgroup('g', 'c1', 1, 10, ['s'])).rejects.toThrow(/closed/);
      redis = await startRedis(port);
      const deadline = Date.now() + 10_000;
      while (conn.status !== 'ready' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(conn.status).toBe('ready');
      expect(conn.clientId).toBeGreaterThan(0);
    } finally {
      conn.disconnect();
      admin.disconnect();
    }
  });

  it('gives up a connection whose blocking read never answers (a lost node) and opens a new one', async () => {
    // A server that answers the handshake (CLIENT ID) and then nothing.
    const connections: Socket[] = [];
    const server = createServer((sock) => {
      connections.push(sock);
      sock.on('data', (d) => { if (d.toString().includes('CLIENT')) sock.write(`:${connections.length}\r\n`); });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const conn = new RespConnection(`redis://127.0.0.1:${(server.address() as AddressInfo).port}`, { reconnectMs: 10, stallMs: 100 });
    try {
      await conn.connect();
      expect(conn.clientId).toBe(1);
      const t = Date.now();
      await expect(conn.xreadgroup('g', 'c', 1, 50, ['s'])).rejects.toThrow(/closed/);
      expect(Date.now() - t).toBeLessThan(2000);
      const deadline = Date.now() + 5000;
      while (conn.clientId !== 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(conn.clientId).toBe(2);
      expect(conn.status).toBe('ready');
    } finally {
      conn.disconnect();
      for (const c of connections) c.destroy();
      server.close();
    }
  });

  it('a large reply still arriving after the stall time is read, not cut off (it is not a lost node)', async () => {
    const payload = 'p'.repeat(600);
    const reply = Buffer.from(`*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nr\r\n$${payload.length}\r\n${payload}\r\n`);
    const timers: ReturnType<typeof setInterval>[] = [];
    const connections: Socket[] = [];
    const server = createServer((sock) => {
      connections.push(sock);
      sock.on('error', () => undefined);
      sock.on('data', (d) => {
        if (d.toString().includes('CLIENT')) sock.write(':1\r\n');
        else if (d.toString().includes('XREADGROUP')) {
          // 10 bytes every 50 ms: about 3.3 s in all, past block + stall (10 + 2000 ms); each gap is
          // 40x shorter than the stall time, so a stalled event loop cannot pass it between two chunks.
          let at = 0;
          const t = setInterval(() => {
            sock.write(reply.subarray(at, at + 10));
            at += 10;
            if (at >= reply.byteLength) clearInterval(t);
          }, 50);
          timers.push(t);
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const conn = new RespConnection(`redis://127.0.0.1:${(server.address() as AddressInfo).port}`, { reconnectMs: 10, stallMs: 2000 });
    try {
      await conn.connect();
      const t0 = Date.now();
      const got = await conn.xreadgroup('g', 'c', 1, 10, ['s']);
      const [[, entries]] = got as [[Buffer, [Buffer, Buffer[]][]]];
      expect(entries[0]![1][1]!.toString()).toBe(payload);
      // The read did outlast block + stall (else the test proves nothing).
      expect(Date.now() - t0).toBeGreaterThan(2010);
      expect(connections).toHaveLength(1);
    } finally {
      for (const t of timers) clearInterval(t);
      conn.disconnect();
      for (const c of connections) c.destroy();
      server.close();
    }
  });

  it('sends encoded commands with their Buffers as they are; a command past its timeout fails, and its late answer goes to it, not to the next command', async () => {
    const admin = new Redis(redis.url);
    // 1 s, not less: the GET below, sent while Redis holds the XADD, waits for an UNPAUSE round trip within it.
    const conn = new RespConnection(redis.url, { reconnectMs: 50, commandTimeoutMs: 1000 });
    try {
      await conn.connect();
      const tensor = Buffer.alloc(70_000, 7);
      // The commands of one turn, answered in order.
      const [a, b] = await Promise.all([
        conn.send(respPieces('XADD', ['sent', '*', 'r', 'head', 't', tensor])),
        conn.send(respPieces('XADD', ['sent', '*', 'r', 'two'])),
      ]);
      expect(Buffer.isBuffer(a) && /^\d+-\d+$/.test(a.toString())).toBe(true);
      expect(Buffer.isBuffer(b)).toBe(true);
      const entries = await admin.xrangeBuffer('sent', '-', '+');
      expect(entries).toHaveLength(2);
      expect(entries[0]![1][3]!.equals(tensor)).toBe(true);
      // An error answer rejects with its text.
      await expect(conn.send(respPieces('XADD', ['sent', 'not-an-id', 'r', 'x']))).rejects.toThrow(/Invalid stream ID/);
      // Redis holds write commands until CLIENT UNPAUSE (the 20 s pause cannot end first): the XADD
      // fails at 1 s (10x under the bound). The GET is sent while the XADD is still held, so the
      // XADD's late answer comes first, and the GET must get its own, not that one.
      await admin.set('k', 'v');
      await admin.call('CLIENT', 'PAUSE', '20000', 'WRITE');
      const t = Date.now();
      await expect(conn.send(respPieces('XADD', ['sent', '*', 'r', 'late']))).rejects.toThrow('Command timed out');
      expect(Date.now() - t).toBeLessThan(10_000);
      const get = conn.send(respPieces('GET', ['k']));
      await admin.call('CLIENT', 'UNPAUSE');
      expect((await get) as Buffer).toEqual(Buffer.from('v'));
      expect(await admin.xlen('sent')).toBe(3);
      // Sent while Redis is away: fails at once.
      conn.disconnect();
      await expect(conn.send(respPieces('GET', ['k']))).rejects.toThrow(/closed/);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE').catch(() => undefined);
      conn.disconnect();
      admin.disconnect();
    }
  });

  it('a command whose connection drops before its answer fails and is not sent again on the next connection (it may have run)', async () => {
    const seen: string[] = [];
    const connections: Socket[] = [];
    const server = createServer((sock) => {
      connections.push(sock);
      sock.on('error', () => undefined);
      sock.on('data', (d) => {
        const text = d.toString();
        if (text.includes('CLIENT')) sock.write(`:${connections.length}\r\n`);
        if (text.includes('XADD')) { seen.push(text); sock.destroy(); }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const conn = new RespConnection(`redis://127.0.0.1:${(server.address() as AddressInfo).port}`, { reconnectMs: 10 });
    try {
      await conn.connect();
      await expect(conn.send(respPieces('XADD', ['s', '*', 'r', 'x']))).rejects.toThrow(/closed/);
      const deadline = Date.now() + 5000;
      while ((conn.status !== 'ready' || conn.clientId !== 2) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      expect(conn.clientId).toBe(2);
      await new Promise((r) => setTimeout(r, 100));
      expect(seen).toHaveLength(1);
    } finally {
      conn.disconnect();
      for (const c of connections) c.destroy();
      server.close();
    }
  });
});
