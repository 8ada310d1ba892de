/**
 * DecompressionBudget and inflateCounted alone: holds take and give back exactly once, inflating
 * stops at the limit, at the budget and when its request ends, and a failure gives back what it took.
 */
import { deflateSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { TriodeError } from '@triode/core';
import { DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES, DecompressionBudget, inflateCounted } from './decompression-budget.js';

const MiB = 1024 * 1024;

describe('DecompressionBudget', () => {
  it('holds take up to the limit and give back everything once; a released hold takes nothing more', () => {
    const budget = new DecompressionBudget(100);
    expect(new DecompressionBudget().limit).toBe(DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES);
    const a = budget.hold();
    const b = budget.hold();
    expect(a.take(60)).toBe(true);
    expect(b.take(41)).toBe(false);
    expect(b.take(40)).toBe(true);
    expect([budget.used, budget.full, a.bytes, b.bytes]).toEqual([100, true, 60, 40]);
    a.release();
    a.release();
    expect([budget.used, budget.full, a.bytes]).toEqual([40, false, 0]);
    expect(a.take(1)).toBe(false);
    b.release();
    expect(budget.used).toBe(0);
  });

  it('refuses UNAVAILABLE in words that say what to do; a limit that is not a positive integer is a RangeError', () => {
    const e = new DecompressionBudget(1234).refusal();
    expect(e).toBeInstanceOf(TriodeError);
    expect(e.code).toBe('UNAVAILABLE');
    expect(e.message).toBe('the server holds too many decompressed request bytes (the requests in flight would hold more than 1234): retry later, or send the request uncompressed');
    for (const bad of [0, -1, 1.5, Number.NaN]) expect(() => new DecompressionBudget(bad)).toThrow(RangeError);
  });
});

describe('inflateCounted', () => {
  const data = Buffer.alloc(4 * MiB, 7);

  it('inflates gzip and deflate, holding what it made until released', async () => {
    const budget = new DecompressionBudget(16 * MiB);
    for (const [encoding, z] of [['gzip', gzipSync(data)], ['deflate', deflateSync(data)]] as const) {
      const hold = budget.hold();
      expect((await inflateCounted(z, encoding, 8 * MiB, hold)).equals(data)).toBe(true);
      expect(hold.bytes).toBe(data.byteLength);
      hold.release();
    }
    expect(budget.used).toBe(0);
    expect((await inflateCounted(gzipSync(data), 'gzip', 8 * MiB)).byteLength).toBe(data.byteLength);
  });

  it('past the budget: refused, what it took given back; with the budget full: refused before zlib starts', async () => {
    const budget = new DecompressionBudget(3 * MiB);
    const hold = budget.hold();
    await expect(inflateCounted(gzipSync(data), 'gzip', 8 * MiB, hold)).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(budget.used).toBe(0);
    const other = budget.hold();
    expect(other.take(3 * MiB)).toBe(true);
    await expect(inflateCounted(gzipSync(Buffer.alloc(10)), 'gzip', 8 * MiB, budget.hold())).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    other.release();
    expect(budget.used).toBe(0);
  });

  it('past maxOutputLength: ERR_BUFFER_TOO_LARGE; not gzip: zlib\'s error; the hold released either way', async () => {
    const budget = new DecompressionBudget(16 * MiB);
    await expect(inflateCounted(gzipSync(data), 'gzip', MiB, budget.hold())).rejects.toMatchObject({ code: 'ERR_BUFFER_TOO_LARGE' });
    await expect(inflateCounted(Buffer.from('not gzip'), 'gzip', MiB, budget.hold())).rejects.toMatchObject({ code: 'Z_DATA_ERROR' });
    const cut = gzipSync(data);
    await expect(inflateCounted(cut.subarray(0, cut.byteLength >> 1), 'gzip', 8 * MiB, budget.hold())).rejects.toThrow();
    expect(budget.used).toBe(0);
  });

  it('a hold released while it inflates (its request ended) stops it', async () => {
    const budget = new DecompressionBudget(64 * MiB);
    const hold = budget.hold();
    const big = gzipSync(Buffer.alloc(32 * MiB));
    const inflating = inflateCounted(big, 'gzip', 64 * MiB, hold);
    hold.release();
    await expect(inflating).rejects.toMatchObject({ code: 'UNAVAILABLE' });
    expect(budget.used).toBe(0);
  });
});
