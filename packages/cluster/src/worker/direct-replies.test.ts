import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { ClusterAuth, MAC_BYTES } from '../cluster-auth.js';
import { FrameReader } from '../reply-frames.js';
import { DirectReplies, type ReplyOutcome } from './direct-replies.js';

const ignore: ReplyOutcome = { confirmed: () => undefined, lost: () => undefined };

describe('DirectReplies', () => {
  it('opens a connection on first use (that reply goes elsewhere), sends the token first, then frames', async () => {
    const got: string[] = [];
    const server = createServer((s) => {
      const r = new FrameReader();
      s.on('data', (c: Buffer) => { for (const f of r.push(c)) got.push(f.toString()); });
    });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const d = new DirectReplies();
    try {
      expect(d.send({ address, token: 'tok' }, Buffer.from('first'), undefined, ignore)).toBe(false);
      await new Promise((r) => setTimeout(r, 100));
      expect(d.send({ address, token: 'tok' }, Buffer.from('second'), undefined, ignore)).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual(['tok', 'second']);
    } finally {
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
      await new Promise((r) => setTimeout(r, 300));
      expect(d.send(direct, body, auth.mac('reply', ['g', body]), ignore)).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toHaveLength(2);
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
      await new Promise((r) => setTimeout(r, 100));
      for (const n of ['a', 'b', 'c']) expect(d.send(direct, Buffer.from(n), undefined, outcome(n))).toBe(true);
      await new Promise((r) => setTimeout(r, 100));
      expect(got).toEqual(['tok', 'a', 'b', 'c']);
      expect(d.unconfirmed).toBe(3);
      // The gateway has taken two: a running count, split across writes as TCP may deliver it.
      const two = Buffer.alloc(4);
      two.writeUInt32BE(2, 0);
      peer!.write(two.subarray(0, 1));
      await new Promise((r) => setTimeout(r, 20));
      peer!.write(two.subarray(1));
      await new Promise((r) => setTimeout(r, 50));
      expect(seen).toEqual(['a confirmed', 'b confirmed']);
      expect(d.unconfirmed).toBe(1);
      peer!.destroy();
      await new Promise((r) => setTimeout(r, 50));
      expect(seen).toEqual(['a confirmed', 'b confirmed', 'c lost']);
      expect(d.unconfirmed).toBe(0);
    } finally {
      d.close();
      server.close();
    }
  });

  it('a reply the gateway does not confirm in time counts as lost; later counts still confirm the right replies', async () => {
    let peer: import('node:net').Socket | undefined;
    const server = createServer((sock) => { peer = sock; sock.on('data', () => undefined); });
    await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
    const direct = { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'tok' };
    const d = new DirectReplies({ confirmTimeoutMs: 200 });
    const seen: string[] = [];
    const outcome = (name: string): ReplyOutcome => ({ confirmed: () => seen.push(`${name} confirmed`), lost: () => seen.push(`${name} lost`) });
    const count = (n: number) => { const b = Buffer.alloc(4); b.writeUInt32BE(n, 0); peer!.write(b); };
    try {
      d.send(direct, Buffer.from('x'), undefined, outcome('opening'));
      await new Promise((r) => setTimeout(r, 100));
      expect(d.send(direct, Buffer.from('a'), undefined, outcome('a'))).toBe(true);
      expect(d.send(direct, Buffer.from('b'), undefined, outcome('b'))).toBe(true);
      // The gateway stays silent: both are handed back after the timeout.
      await new Promise((r) => setTimeout(r, 450));
      expect(seen).toEqual(['a lost', 'b lost']);
      expect(d.unconfirmed).toBe(0);
      // Two more; the gateway's running count now covers a, b and c (3), not d.
      d.send(direct, Buffer.from('c'), undefined, outcome('c'));
      d.send(direct, Buffer.from('d'), undefined, outcome('d'));
      count(3);
      await new Promise((r) => setTimeout(r, 50));
      expect(seen).toEqual(['a lost', 'b lost', 'c confirmed']);
      count(4);
      await new Promise((r) => setTimeout(r, 50));
      expect(seen).toEqual(['a lost', 'b lost', 'c confirmed', 'd confirmed']);
    } finally {
      d.close();
      server.close();
    }
  });
});
