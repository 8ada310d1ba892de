import { describe, expect, it, vi } from 'vitest';
import { FrameBudget, FrameReader, frame, frameHead, framed } from './reply-frames.js';

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

  it('refuses a frame length over the limit', () => {
    expect(() => new FrameReader(10).push(frame(Buffer.alloc(11)))).toThrow(/over the limit/);
  });
});
