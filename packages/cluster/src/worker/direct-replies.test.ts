import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { describe, expect, it, vi } from 'vitest';
import { ClusterAuth, MAC_BYTES } from '../cluster-auth.js';
import { FrameBudget, FrameReader, confirmFrame, fetchRequest, tensorsFrameHead } from '../reply-frames.js';
import { DirectReplies, MAX_FETCH_BYTES, parseDirectAddress, type ReplyOutcome } from './direct-replies.js';

const ignore: ReplyOutcome = { confirmed: () => undefined, lost: () => undefined };

/** A gateway stand-in on 127.0.0.1 that keeps each frame it gets (the auth frame first) as text. */
async function frameServer(): Promise<{ got: string[]; address: string; server: ReturnType<typeof createServer> }> {
  const got: string[] = [];
  const server = createServer((s) => {
    const r = new FrameReader();
    s.on('data', (c: Buffer) => { for (const f of r.push(c)) got.push(f.toString()); });
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  return { got, address: `127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

describe('DirectReplies', () => {
  it('opens a connection on first use (that reply goes elsewhere), sends the token first, then frames', async () => {
    const { got, address, server } = await frameServer();
    const d = new DirectReplies();
    try {
      expect(d.send({ address, token: 'tok' }, Buffer.from('first'), undefined, ignore)).toBe(false);
      // Open once the gateway has the token: the worker marks the connection open as it writes it.
      await vi.waitFor(() => expect(got).toEqual(['tok']), { timeout: 30_000 });
      expect(d.send({ address, token: 'tok' }, Buffer.from('second'), undefined, ignore)).toBe(true);
      // 'first' never follows: it went elsewhere (another frame before 'second' would never match).
      await vi.waitFor(() => expect(got).toEqual(['tok', 'second']), { timeout: 30_000 });
    } finally {
      d.close();
      server.close();
    }
  });

  it('a reply for an earlier gateway on the same address never goes over a connection made for a later one (its token differs)', async () => {
    // A gateway restarted on the same --reply-port: without a cluster secret, a late reply to the old
    // gateway's request must not reach the new gateway, whose request keys start over and could match.
    const { got, address, server } = await frameServer();
    const d = new DirectReplies();
    try {
      expect(d.send({ address, token: 'new' }, Buffer.from('opens'), undefined, ignore)).toBe(false);
      await vi.waitFor(() => expect(got).toEqual(['new']), { timeout: 30_000 });
      expect(d.send({ address, token: 'new' }, Buffer.from('for-new'), undefined, ignore)).toBe(true);
      expect(d.send({ address, token: 'old' }, Buffer.from('for-old'), undefined, ignore)).toBe(false);
      // 'for-new' on the open connection, and the token of the one opened for the old gateway
      // (two connections: in either order); 'for-old' nowhere.
      await vi.waitFor(() => expect(got).toHaveLength(3), { timeout: 30_000 });
      expect([...got].sort()).toEqual(['for-new', 'new', 'old']);
      expect(got.indexOf('new')).toBeLessThan(got.indexOf('for-new'));
    } finally {
      d.close();
      server.close();
    }
  });

  it('fetches a request\'s tensors on the reply connection (opened for it, the fetch sent after the auth frame); a gone request is undefined', async () => {
    const frames: Buffer[] = [];
    const server = createServer((s) => {
      const r = new FrameReader();
      s.on('data', (c: Buffer) => {
        for (const f of r.push(c)) {
          frames.push(f);
          const key = f.subarray(4).toString('latin1');
          if (f.byteLength < 4 || f.readUInt32LE(0) !== 0xffffffff) continue;
          const parts = key === '7' ? [Buffer.from('abc'), Buffer.alloc(100_000, 9)] : undefined;
          s.write(tensorsFrameHead(key, parts));
          for (const p of parts ?? []) s.write(p);
        }
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies();
    try {
      const parts = await d.fetch(direct, '7', undefined, 100_003);
      expect(parts!.map((p) => p.byteLength)).toEqual([3, 100_000]);
      expect(parts![0]!.toString()).toBe('abc');
      expect(await d.fetch(direct, '8', undefined, 10)).toBeUndefined();
      expect(frames[0]!.toString()).toBe('tok');
      expect(frames[1]!.equals(fetchRequest('7'))).toBe(true);
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: a tensors frame larger than the fetch asked for closes the connection and fails the fetch; an unreachable gateway fails it at once', async () => {
    const server = createServer((s) => {
      s.on('data', () => {
        // 50 MB announced for a fetch of 10 bytes.
        const head = tensorsFrameHead('1', [Buffer.alloc(10)]);
        head.writeUInt32BE(50_000_000, 0);
        s.write(head);
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const d = new DirectReplies();
    try {
      await expect(d.fetch({ address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 't' }, '1', undefined, 10)).rejects.toThrow(/closed before it sent/);
      const closed = createServer();
      await new Promise<void>((res) => closed.listen(0, '127.0.0.1', () => res()));
      const port = (closed.address() as AddressInfo).port;
      closed.close();
      await expect(d.fetch({ address: `127.0.0.1:${port}`, token: 't' }, '1', undefined, 10)).rejects.toThrow();
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: a second fetch of a key the connection is fetching already (a replayed signed entry) is gone, and the first still gets its tensors (review: the second was refused, and the original request failed 503)', async () => {
    let fetches = 0;
    const server = createServer((s) => {
      const r = new FrameReader();
      s.on('data', (c: Buffer) => {
        for (const f of r.push(c)) {
          if (f.byteLength < 4 || f.readUInt32LE(0) !== 0xffffffff) continue;
          fetches++;
          // Answered a moment later: the replay's fetch comes while the first waits.
          setTimeout(() => {
            s.write(tensorsFrameHead('7', [Buffer.from('abc')]));
            s.write(Buffer.from('abc'));
          }, 100);
        }
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies();
    try {
      const first = d.fetch(direct, '7', undefined, 3);
      const replay = d.fetch(direct, '7', undefined, 3);
      await expect(replay).resolves.toBeUndefined();
      expect((await first)!.map((p) => p.toString())).toEqual(['abc']);
      expect(fetches).toBe(1);
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: a fetch of more tensor bytes than the limit (a forged header says 4e9) is refused at once, without connecting anywhere', async () => {
    let connections = 0;
    const server = createServer((s) => { connections++; s.on('data', () => undefined); });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies();
    try {
      await expect(d.fetch(direct, '1', undefined, 4e9)).rejects.toThrow(/over the limit of 67108864 bytes for a fetch/);
      await expect(d.fetch(direct, '1', undefined, 64 * 1024 * 1024 + 1)).rejects.toThrow(/over the limit/);
      // Refused without connecting: no connection was even opened (d.size: a connection is known
      // from the moment it is opened), so the refusal could not have waited on one. The sleep is
      // a negative check (a connection would reach the server by then); slowness only helps it pass.
      expect(d.size).toBe(0);
      await new Promise((r) => setTimeout(r, 100));
      expect(connections).toBe(0);
      expect(d.size).toBe(0);
      expect(MAX_FETCH_BYTES).toBe(64 * 1024 * 1024);
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: a gateway that sends part of a fetch\'s frame and stops is cut off at the fetch timeout, and the half frame is dropped (review: the connection kept it for good)', async () => {
    let peerClosed = false;
    const server = createServer((s) => {
      s.on('error', () => undefined);
      s.once('close', () => { peerClosed = true; });
      s.once('data', () => {
        // A frame of 1 MB announced for the fetch (as much as it asked for), 256 KB of it sent.
        const head = tensorsFrameHead('1', [Buffer.alloc(1_000_000)]);
        s.write(head);
        s.write(Buffer.alloc(256 * 1024));
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies({ fetchTimeoutMs: 300 });
    try {
      await expect(d.fetch(direct, '1', undefined, 1_000_000)).rejects.toThrow(/did not send the request's tensors within/);
      for (let i = 0; i < 50 && !peerClosed; i++) await new Promise((r) => setTimeout(r, 20));
      expect(peerClosed).toBe(true);
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: the unfinished frames of all gateways\' connections together are bounded: past the budget a connection is closed and its fetch fails (review: 4 tokens x 900 MB held)', async () => {
    // Every connection announces the 1 MB frame its fetch asked for and sends 600 KB of it.
    const server = createServer((s) => {
      s.on('error', () => undefined);
      s.on('data', (c: Buffer) => {
        if (c.byteLength < 8) return;
        s.write(tensorsFrameHead('1', [Buffer.alloc(1_000_000)]));
        s.write(Buffer.alloc(600 * 1024));
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    // The worker's shared budget (the `this` of its take()), to see when the first connection holds all it was sent.
    const take = vi.spyOn(FrameBudget.prototype, 'take');
    const d = new DirectReplies({ maxBufferedBytes: 1024 * 1024, fetchTimeoutMs: 30_000 });
    try {
      // Two gateways (tokens): the first holds 600 KB, the second would pass 1 MiB and is cut off.
      const first = d.fetch({ address, token: 'a' }, '1', undefined, 1_000_000);
      first.catch(() => undefined);
      const held = tensorsFrameHead('1', [Buffer.alloc(1_000_000)]).byteLength + 600 * 1024;
      await vi.waitFor(() => expect((take.mock.contexts.at(-1) as FrameBudget | undefined)?.used).toBe(held), { timeout: 30_000 });
      // Cut off as its bytes arrive, not at the fetch timeout (30 s, and another error).
      const t0 = Date.now();
      await expect(d.fetch({ address, token: 'b' }, '1', undefined, 1_000_000)).rejects.toThrow(/closed before it sent/);
      expect(Date.now() - t0).toBeLessThan(10_000);
    } finally {
      take.mockRestore();
      d.close();
      server.close();
    }
  });

  it('an unreachable address falls back (false) and is not retried during its pause', async () => {
    const d = new DirectReplies();
    const probe = createServer();
    await new Promise<void>((res) => probe.listen(0, '127.0.0.1', () => res()));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((res) => probe.close(() => res()));
    const direct = { address: `127.0.0.1:${port}`, token: 't' };
    expect(d.send(direct, Buffer.from('a'), undefined, ignore)).toBe(false);
    await new Promise((r) => setTimeout(r, 100));
    expect(d.send(direct, Buffer.from('b'), undefined, ignore)).toBe(false);
    expect(d.size).toBe(1);
    expect(d.send({ address: 'no-port', token: 't' }, Buffer.from('c'), undefined, ignore)).toBe(false);
    d.close();
  });

  it('with a cluster secret, over TLS: authenticates with the token\'s MAC (not the token) and signs each reply', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'triode-direct-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const cert = readFileSync(join(dir, 'cert.pem'));
    const got: Buffer[] = [];
    const server = createTlsServer({ cert, key: readFileSync(join(dir, 'key.pem')) }, (s) => {
      const r = new FrameReader();
      s.on('data', (c: Buffer) => { got.push(...r.push(c)); });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const auth = new ClusterAuth('s3cret');
    const d = new DirectReplies({ auth, tlsCa: cert });
    const direct = { address: `tls://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    try {
      const body = Buffer.from('reply');
      expect(d.send(direct, body, auth.mac('reply', ['g', body]), ignore)).toBe(false);
      // Open (TLS handshake done) once the gateway has the auth frame.
      await vi.waitFor(() => expect(got).toHaveLength(1), { timeout: 30_000 });
      expect(d.send(direct, body, auth.mac('reply', ['g', body]), ignore)).toBe(true);
      await vi.waitFor(() => expect(got).toHaveLength(2), { timeout: 30_000 });
      expect(got[0]!.equals(auth.mac('direct-auth', ['tok'])!)).toBe(true);
      expect(got[1]!.subarray(MAC_BYTES).toString()).toBe('reply');
      expect(auth.verify('reply', ['g', got[1]!.subarray(MAC_BYTES)], got[1]!.subarray(0, MAC_BYTES))).toBe(true);
    } finally {
      d.close();
      server.close();
    }
  });

  it('a reply counts as delivered when the gateway confirms it; unconfirmed ones are handed back when the connection fails', async () => {
    let peer: import('node:net').Socket | undefined;
    const got: string[] = [];
    const server = createServer((s) => {
      peer = s;
      const r = new FrameReader();
      s.on('data', (c: Buffer) => { for (const f of r.push(c)) got.push(f.toString()); });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies();
    const seen: string[] = [];
    const outcome = (name: string): ReplyOutcome => ({ confirmed: () => seen.push(`${name} confirmed`), lost: () => seen.push(`${name} lost`) });
    try {
      expect(d.send(direct, Buffer.from('opening'), undefined, outcome('opening'))).toBe(false);
      await vi.waitFor(() => expect(got).toEqual(['tok']), { timeout: 30_000 });
      for (const n of ['a', 'b', 'c']) expect(d.send(direct, Buffer.from(n), undefined, outcome(n))).toBe(true);
      await vi.waitFor(() => expect(got).toEqual(['tok', 'a', 'b', 'c']), { timeout: 30_000 });
      expect(d.unconfirmed).toBe(3);
      // The gateway has taken two: a running count, split across writes as TCP may deliver it.
      const two = confirmFrame(2);
      peer!.write(two.subarray(0, 1));
      await new Promise((r) => setTimeout(r, 20));
      peer!.write(two.subarray(1));
      await vi.waitFor(() => expect(seen).toEqual(['a confirmed', 'b confirmed']), { timeout: 30_000 });
      expect(d.unconfirmed).toBe(1);
      peer!.destroy();
      await vi.waitFor(() => expect(seen).toEqual(['a confirmed', 'b confirmed', 'c lost']), { timeout: 30_000 });
      expect(d.unconfirmed).toBe(0);
    } finally {
      d.close();
      server.close();
    }
  });

  it('a reply the gateway does not confirm in time counts as lost; counts confirm the right replies', async () => {
    let peer: import('node:net').Socket | undefined;
    let received = 0;
    const server = createServer((sock) => { peer = sock; sock.on('data', (c: Buffer) => { received += c.byteLength; }); });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    // Long enough that a loaded machine confirms a and b in time; c is never confirmed.
    const d = new DirectReplies({ confirmTimeoutMs: 1000 });
    const seen: string[] = [];
    const outcome = (name: string): ReplyOutcome => ({ confirmed: () => seen.push(`${name} confirmed`), lost: () => seen.push(`${name} lost`) });
    const count = (n: number) => { peer!.write(confirmFrame(n)); };
    try {
      d.send(direct, Buffer.from('x'), undefined, outcome('opening'));
      // Open once the gateway has the token (the connection is marked open as it is written).
      await vi.waitFor(() => expect(received).toBeGreaterThan(0), { timeout: 30_000 });
      expect(d.send(direct, Buffer.from('a'), undefined, outcome('a'))).toBe(true);
      expect(d.send(direct, Buffer.from('b'), undefined, outcome('b'))).toBe(true);
      expect(d.send(direct, Buffer.from('c'), undefined, outcome('c'))).toBe(true);
      // The gateway's running count covers a and b (2), not c.
      count(2);
      await vi.waitFor(() => expect(seen).toEqual(['a confirmed', 'b confirmed']), { timeout: 30_000 });
      // Then it stays silent: c is handed back after the timeout, and the connection, which no
      // longer confirms, is closed and rests: later replies go through Redis (false).
      await vi.waitFor(() => expect(seen).toEqual(['a confirmed', 'b confirmed', 'c lost']), { timeout: 30_000 });
      expect(d.unconfirmed).toBe(0);
      expect(d.send(direct, Buffer.from('d'), undefined, outcome('d'))).toBe(false);
      expect(seen).toEqual(['a confirmed', 'b confirmed', 'c lost']);
    } finally {
      d.close();
      server.close();
    }
  });

  it('a reply sent while the gateway is still sending a fetch\'s tensors waits for the confirmation behind them: the connection and the fetch go on (before: cut at the confirm timeout, the fetch failed with it)', async () => {
    // The gateway's frames do not interleave: a confirmation goes out after the tensors frame it
    // is writing (a large fetch on a slow link, or several queued). Here they take ~3 s to arrive.
    const tensors = Buffer.alloc(300_000, 5);
    const server = createServer((s) => {
      const r = new FrameReader();
      let replies = 0;
      s.on('error', () => undefined);
      s.on('data', (c: Buffer) => {
        for (const f of r.push(c)) {
          if (f.byteLength >= 4 && f.readUInt32LE(0) === 0xffffffff) {
            const wire = Buffer.concat([tensorsFrameHead('7', [tensors]), tensors]);
            let at = 0;
            const drip = setInterval(() => {
              if (s.destroyed) return clearInterval(drip);
              s.write(wire.subarray(at, at + 5_000));
              at += 5_000;
              if (at >= wire.byteLength) {
                clearInterval(drip);
                s.write(confirmFrame(replies));
              }
            }, 50);
          } else if (f.toString() !== 'tok') replies++;
        }
      });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies({ confirmTimeoutMs: 1000 });
    const seen: string[] = [];
    try {
      const fetched = d.fetch(direct, '7', undefined, tensors.byteLength);
      await vi.waitFor(() => expect(d.send(direct, Buffer.from('reply'), undefined, { confirmed: () => seen.push('confirmed'), lost: () => seen.push('lost') })).toBe(true), { timeout: 30_000 });
      const parts = await fetched;
      expect(parts!.map((p) => p.byteLength)).toEqual([tensors.byteLength]);
      await vi.waitFor(() => expect(seen).toEqual(['confirmed']), { timeout: 30_000 });
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: a gateway that stops reading does not make the worker buffer every reply', async () => {
    // Accepts, reads the auth frame, then never reads again (a frozen gateway).
    let authed = false;
    const server = createServer((sock) => { sock.once('data', () => { authed = true; sock.pause(); }); sock.on('error', () => undefined); });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies();
    const reply = Buffer.alloc(1024 * 1024);
    try {
      d.send(direct, reply, undefined, ignore);
      // Open once the gateway has read the token (and stopped reading).
      await vi.waitFor(() => expect(authed).toBe(true), { timeout: 30_000 });
      let taken = 0;
      for (let i = 0; i < 96; i++) {
        if (d.send(direct, reply, undefined, ignore)) taken++;
        await new Promise((r) => setImmediate(r));
      }
      // What the kernel's socket buffers take, plus MAX_UNSENT_BYTES in the process; not 96 MiB.
      expect(taken).toBeLessThan(64);
      expect(d.send(direct, reply, undefined, ignore)).toBe(false);
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: an idle connection is closed and its address forgotten (review: a peer that never closed kept its place for good)', async () => {
    // Accepts and reads, never answers or closes.
    let authed = false;
    const server = createServer((sock) => { sock.on('data', () => { authed = true; }); sock.on('error', () => undefined); });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies({ idleTimeoutMs: 200 });
    try {
      const t0 = Date.now();
      d.send(direct, Buffer.from('x'), undefined, ignore);
      expect(d.size).toBe(1);
      // Opened (the gateway got the auth frame), then closed and forgotten once idle: not at once
      // (timers may round by a millisecond or so).
      await vi.waitFor(() => expect(authed).toBe(true), { timeout: 30_000 });
      await vi.waitFor(() => expect(d.size).toBe(0), { timeout: 30_000 });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(190);
    } finally {
      d.close();
      server.close();
    }
  });

  it('attack: envelopes with junk direct addresses are not remembered', () => {
    const d = new DirectReplies();
    for (let i = 0; i < 5000; i++) expect(d.send({ address: `nohost${i}`, token: 't' }, Buffer.from('r'), undefined, ignore)).toBe(false);
    for (const address of ['', ':', ':80', 'host:', 'host:0', 'host:65536', 'host:8o', 'tls://', 'tls://:1', 'host:1e3']) {
      expect(d.send({ address, token: 't' }, Buffer.from('r'), undefined, ignore)).toBe(false);
    }
    expect(d.size).toBe(0);
    d.close();
  });

  it('parses gateway addresses: host:port, [v6]:port, tls://', () => {
    expect(parseDirectAddress('10.0.0.2:8010')).toEqual({ tls: false, host: '10.0.0.2', port: 8010 });
    expect(parseDirectAddress('[::1]:9')).toEqual({ tls: false, host: '::1', port: 9 });
    expect(parseDirectAddress('tls://gw.example:443')).toEqual({ tls: true, host: 'gw.example', port: 443 });
    expect(parseDirectAddress('gw.example')).toBeUndefined();
  });
});
