import { describe, expect, it } from 'vitest';
import type { Tensor } from './tensor.js';
import { claimOwnership, copyTensorData, give, isOwned, isTransferable, lend, markTransferable, releaseOwnedBuffers, transferList } from './transferable.js';

const t = (data: Tensor['data'], owned?: boolean): Tensor => ({ name: 'x', datatype: 'INT32', shape: [data.length], data, ...(owned !== undefined ? { owned } : {}) });

describe('tensor ownership', () => {
  it('is declared, never guessed from the size or offset of the buffer', () => {
    // A typed array that covers its whole buffer is not owned for that alone (the old guess).
    expect(isOwned(t(new Int32Array(4)))).toBe(false);
    expect(isTransferable(new Int32Array(4))).toBe(false);
    expect(isOwned(t(new Int32Array(4), true))).toBe(true);
    // A request body its reader declared: views of it are owned; lent ones are not.
    const body = new Uint8Array(64);
    markTransferable(body.buffer);
    const view = new Int32Array(body.buffer, 8, 4);
    expect(isOwned(t(view))).toBe(true);
    expect(isOwned(lend(t(view)))).toBe(false);
    expect(isOwned(give(t(new Int32Array(2))))).toBe(true);
    // Shared memory never moves.
    expect(isOwned(t(new Int32Array(new SharedArrayBuffer(16)), true))).toBe(false);
  });

  it('marks a buffer without changing what it shows: twice is the same as once', () => {
    const body = new Uint8Array(16);
    markTransferable(body.buffer);
    markTransferable(body.buffer);
    expect(isTransferable(body)).toBe(true);
    expect(Reflect.ownKeys(body.buffer)).toEqual([]);
    expect(body.buffer).toStrictEqual(new Uint8Array(16).buffer);
  });

  it('transferList: the owned buffers, each once', () => {
    const a = new Int32Array(4);
    const body = new Uint8Array(32);
    markTransferable(body.buffer);
    const list = transferList([t(a, true), t(new Int32Array(body.buffer, 0, 2)), t(new Int32Array(body.buffer, 8, 2)), t(new Int32Array(4))]);
    expect(list).toEqual([a.buffer, body.buffer]);
  });

  it('claimOwnership: a response owns what no other response views', () => {
    const shared = new Int32Array(8);
    const own = new Int32Array(4);
    const both = new Int32Array(4);
    const groups = claimOwnership([
      [t(shared.subarray(0, 4)), t(own), t(both), t(both.subarray(2))],
      [t(shared.subarray(4), true)],
    ]);
    expect(groups.map((g) => g.map((x) => x.owned))).toEqual([[false, true, true, true], [false]]);
  });

  it('claimOwnership: a lone response owns its buffers, even two views of one, but never shared memory', () => {
    const one = new Int32Array(8);
    const sab = new Int32Array(new SharedArrayBuffer(16));
    const [g] = claimOwnership([[t(one.subarray(0, 4)), t(one.subarray(4)), t(sab, true)]]);
    expect(g!.map((x) => x.owned)).toEqual([true, true, false]);
  });

  it('copyTensorData: a copy in a buffer of its own, also of a Node Buffer (whose slice() is a view)', () => {
    const buf = Buffer.from([1, 2, 3, 4, 5]);
    const c = copyTensorData(buf.subarray(1));
    expect(c.constructor).toBe(Uint8Array);
    expect(Array.from(c)).toEqual([2, 3, 4, 5]);
    buf[1] = 99;
    expect(c[0]).toBe(2);
    const f = Float64Array.of(1.5, 2.5);
    const fc = copyTensorData(f.subarray(1));
    expect(fc).toBeInstanceOf(Float64Array);
    expect(fc.buffer).not.toBe(f.buffer);
    expect(Array.from(fc)).toEqual([2.5]);
  });
});

describe('releaseOwnedBuffers()', () => {
  const MiB = 1024 * 1024;
  it('detaches the large buffers a tensor owns whole, and nothing it only lends, shares or views in part', () => {
    const owned = { data: new Float32Array(MiB / 2), owned: true };
    const lent = { data: new Float32Array(MiB / 2), owned: false };
    const unknown = { data: new Float32Array(MiB / 2) };
    const batch = new Float32Array(MiB);
    const part = { data: batch.subarray(0, MiB / 2), owned: true };
    const small = { data: new Float32Array(16), owned: true };
    expect(releaseOwnedBuffers([owned, lent, unknown, part, small])).toBe(2 * MiB);
    expect(owned.data.byteLength).toBe(0);
    for (const kept of [lent, unknown, small]) expect(kept.data.byteLength).toBeGreaterThan(0);
    expect(part.data.byteLength).toBe(2 * MiB);
    expect(batch.byteLength).toBe(4 * MiB);
    expect(releaseOwnedBuffers([])).toBe(0);
  });
});
