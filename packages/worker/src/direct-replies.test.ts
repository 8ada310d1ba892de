import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createTlsServer } from 'node:tls';
import { describe, expect, it } from 'vitest';
import { ClusterAuth, FrameReader, MAC_BYTES } from '@triode/core';
import { DirectReplies } from './direct-replies.js';

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
      expect(d.send({ address, token: 'tok' }, Buffer.from('first'))).toBe(false);
      await new Promise((r) => setTimeout(r, 100));
      expect(d.send({ address, token: 'tok' }, Buffer.from('second'))).toBe(true);
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
    expect(d.send(direct, Buffer.from('a'))).toBe(false);
    await new Promise((r) => setTimeout(r, 100));
    expect(d.send(direct, Buffer.from('b'))).toBe(false);
    expect(d.size).toBe(1);
    expect(d.send({ address: 'no-port', token: 't' }, Buffer.from('c'))).toBe(false);
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
      expect(d.send(direct, body, auth.mac('reply', ['g', body]))).toBe(false);
      await new Promise((r) => setTimeout(r, 300));
      expect(d.send(direct, body, auth.mac('reply', ['g', body]))).toBe(true);
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
});
