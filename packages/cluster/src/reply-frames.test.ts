import { describe, expect, it } from 'vitest';
import { FrameReader, frame } from './reply-frames.js';

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

  it('refuses a frame length over the limit', () => {
    expect(() => new FrameReader(10).push(frame(Buffer.alloc(11)))).toThrow(/over the limit/);
  });
});
