// Seeded randomness for the fuzz suite: mulberry32, and one independent stream per case, so
// case N of seed S is the same bytes whatever ran before it (replay needs only S and N).

/** mulberry32: a 32-bit state PRNG; returns floats in [0, 1). */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A 32-bit hash of a string (xmur3's finaliser), to derive per-case seeds. */
export function hash32(text) {
  let h = 1779033703 ^ text.length;
  for (let i = 0; i < text.length; i++) {
    h = Math.imul(h ^ text.charCodeAt(i), 3432918353);
    h = (h << 13) | (h >>> 19);
  }
  h = Math.imul(h ^ (h >>> 16), 2246822507);
  h = Math.imul(h ^ (h >>> 13), 3266489909);
  return (h ^ (h >>> 16)) >>> 0;
}

/** Helpers over one PRNG stream. */
export class Rng {
  constructor(seed) {
    this.next = mulberry32(seed);
  }

  /** The stream of case `index` of run `seed` (for `protocol`). */
  static forCase(seed, index, protocol) {
    return new Rng(hash32(`${seed}:${protocol}:${index}`));
  }

  /** An integer in [lo, hi]. */
  int(lo, hi) {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** True with probability p. */
  chance(p) {
    return this.next() < p;
  }

  pick(list) {
    return list[Math.floor(this.next() * list.length)];
  }

  /** One key of `weights` ({ name: weight }), chosen in proportion to its weight. */
  weighted(weights) {
    const entries = Object.entries(weights);
    let r = this.next() * entries.reduce((s, [, w]) => s + w, 0);
    for (const [k, w] of entries) {
      r -= w;
      if (r < 0) return k;
    }
    return entries[entries.length - 1][0];
  }

  bytes(n) {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = Math.floor(this.next() * 256);
    return b;
  }
}
