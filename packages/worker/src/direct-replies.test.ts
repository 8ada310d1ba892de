import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { FrameReader } from '@triode/core';
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
});
