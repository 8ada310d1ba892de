import { describe, expect, it, vi } from 'vitest';
import { FrameBudget, FrameReader, confirmFrame, fetchKeyOf, fetchRequest, frame, frameHead, framed, readGatewayMessage, tensorsFrameHead } from './reply-frames.js';

describe('reply frames', () => {
  it('reassembles frames split and joined anyhow', () => {
    const msgs = [Buffer.from('a'), Buffer.alloc(0), Buffer.alloc(70_000, 7), Buffer.from('last')];
    const wire = Buffer.concat(msgs.map(frame));
    for (const step of [1, 3, 4096, wire.byteLength]) {
      const r = new FrameReader();
      const got: Buffer[] = [];
      for (let i = 0; i < wire.byteLength; i += step) got.push(...r.push(wire.subarray(i, i + step)));
      expect(got.map((b) => b.toString('hex'))).toEqual(msgs.map((b) => b.toString('hex')));
    }
  });

  it('joins a frame\'s chunks once, when it is complete (a 1 MiB frame in 64 KiB chunks is not copied 16 times)', () => {
    const payload = Buffer.alloc(1 << 20, 3);
    const wire = frame(payload);
    const concat = vi.spyOn(Buffer, 'concat');
    try {
      const r = new FrameReader();
      const got: Buffer[] = [];
      for (let i = 0; i < wire.byteLength; i += 65_536) got.push(...r.push(wire.subarray(i, i + 65_536)));
      expect(got).toHaveLength(1);
      expect(got[0]!.equals(payload)).toBe(true);
      const copied = concat.mock.calls.reduce((n, [list]) => n + list.reduce((m, b) => m + b.byteLength, 0), 0);
      expect(copied).toBeLessThanOrEqual(wire.byteLength);
    } finally {
      concat.mockRestore();
    }
  });

  it('frameHead + payload is the same bytes as one framed buffer', () => {
    const mac = Buffer.alloc(32, 9);
    const body = Buffer.from('reply');
    expect(Buffer.concat([frameHead(body.byteLength, mac), body]).equals(framed([mac, body]))).toBe(true);
    expect(Buffer.concat([frameHead(body.byteLength), body]).equals(frame(body))).toBe(true);
  });

  it('readers sharing a budget hold at most its bytes of unfinished frames together, and give them back', () => {
    const budget = new FrameBudget(100);
    const a = new FrameReader(undefined, budget);
    const b = new FrameReader(undefined, budget);
    const wire = frame(Buffer.alloc(80, 1));
    expect(a.push(wire.subarray(0, 54))).toEqual([]);
    expect(budget.used).toBe(54);
    // 54 + 50 would pass 100: refused, nothing taken.
    expect(() => b.push(Buffer.alloc(50))).toThrow(/over the limit of 100 bytes/);
    expect(budget.used).toBe(54);
    expect(a.push(wire.subarray(54))).toHaveLength(1);
    expect(budget.used).toBe(0);
    expect(b.push(wire.subarray(0, 30))).toEqual([]);
    b.release();
    expect(budget.used).toBe(0);
  });

  it('attack: a frame sent a byte at a time is not held as a buffer per byte (review: a peer dribbling a 1 GiB frame grew a gateway by 35 bytes of memory per byte it sent, far past the budget\'s count)', () => {
    const payload = Buffer.alloc(200_000).map((_, i) => i % 251);
    const wire = frame(payload);
    const r = new FrameReader();
    let most = 0;
    const got: Buffer[] = [];
    for (let i = 0; i < wire.byteLength; i++) {
      got.push(...r.push(wire.subarray(i, i + 1)));
      most = Math.max(most, r.heldBuffers);
    }
    expect(got).toHaveLength(1);
    expect(got[0]!.equals(payload)).toBe(true);
    // A buffer per 4 KiB, and a run of at most 256 small ones (200,004 before).
    expect(most).toBeLessThanOrEqual(Math.ceil(wire.byteLength / 4096) + 256);
    expect(r.heldBuffers).toBe(0);
    // Small and large chunks alternating: the small ones are not each kept apart either.
    const r2 = new FrameReader();
    const big = Buffer.alloc(16_384, 1);
    r2.push(frame(Buffer.alloc(1 << 24)).subarray(0, 4));
    for (let i = 0; i < 100; i++) {
      for (let j = 0; j < 300; j++) r2.push(Buffer.alloc(1));
      r2.push(big);
    }
    expect(r2.heldBuffers).toBeLessThanOrEqual(100 * 2 + 256);
    r2.release();
    expect(r2.heldBuffers).toBe(0);
  });

  it('refuses a frame length over the limit', () => {
    expect(() => new FrameReader(10).push(frame(Buffer.alloc(11)))).toThrow(/over the limit/);
  });

  it('gateway frames: confirmations and tensors read back as written; fetches are told from replies', () => {
    const read = (head: Buffer, parts: Buffer[] = []) => readGatewayMessage(Buffer.concat([head, ...parts]).subarray(4));
    expect(read(confirmFrame(2 ** 32 - 1))).toEqual({ kind: 'confirm', count: 2 ** 32 - 1 });
    const parts = [Buffer.from('ab'), Buffer.alloc(0), Buffer.alloc(5, 1)];
    const m = read(tensorsFrameHead('42', parts), parts);
    expect(m.kind === 'tensors' && m.requestKey === '42' && m.parts!.map((p) => p.toString('hex'))).toEqual(parts.map((p) => p.toString('hex')));
    expect(read(tensorsFrameHead('42', undefined))).toEqual({ kind: 'tensors', requestKey: '42', parts: undefined });
    expect(fetchKeyOf(fetchRequest('17'))).toBe('17');
    // A reply starts with its header's length, never 2^32-1.
    const reply = Buffer.alloc(8);
    reply.writeUInt32LE(4, 0);
    expect(fetchKeyOf(reply)).toBeUndefined();
    expect(fetchKeyOf(fetchRequest('x'.repeat(65)))).toBe('');
  });

  it('attack: malformed gateway frames are refused, never read past their end', () => {
    const good = Buffer.concat([tensorsFrameHead('1', [Buffer.alloc(4)]), Buffer.alloc(4)]).subarray(4);
    for (const f of [
      Buffer.alloc(0), Buffer.from([9, 0, 0, 0, 0]), Buffer.from([0, 0, 0, 0]), Buffer.from([0, 0, 0, 0, 1, 2]),
      good.subarray(0, good.byteLength - 1), Buffer.concat([good, Buffer.alloc(1)]),
      (() => { const b = Buffer.from(good); b.writeUInt32BE(1000, 1); return b; })(),
      (() => { const b = Buffer.from(good); b.writeUInt32BE(2 ** 31, 6); return b; })(),
    ]) expect(() => readGatewayMessage(f), f.toString('hex')).toThrow('malformed frame from the gateway');
  });
});
