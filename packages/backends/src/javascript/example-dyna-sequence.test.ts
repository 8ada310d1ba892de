/** The example model simple_string_dyna_sequence keeps its accumulators bounded (review: unended sequences grew the server for good). */
import { describe, expect, it, vi } from 'vitest';

vi.mock('triode', () => ({
  strings: (t: { data: string[] }) => t.data,
  tensor: (name: string, datatype: string, shape: number[], data: number[]) => ({ name, datatype, shape, data }),
  TritonModelError: class extends Error {},
}));

// A plain .mjs file of the example repository (no types): imported by a path the compiler does not follow.
const file = '../../../../model_repository/simple_string_dyna_sequence/1/model.mjs';
const { default: Model } = await import(file) as { default: new () => { initialize(): void; execute(r: unknown[]): unknown[]; accumulators: Map<string, number> } };

/** A request of the sequence `id`, as the batcher gives it to the model. */
const request = (id: string, value: number, start: boolean, end = false) => {
  const inputs: Record<string, { data: unknown[] }> = { INPUT: { data: [value] }, START: { data: [start ? 1 : 0] }, END: { data: [end ? 1 : 0] }, READY: { data: [1] }, CORRID: { data: [id] } };
  return { input: (name: string) => inputs[name]! };
};

describe('simple_string_dyna_sequence (example model)', () => {
  it('keeps at most max_candidate_sequences accumulators, dropping the least recently used', () => {
    const m = new Model();
    m.initialize();
    m.execute([request('1', 5, true)]);
    for (let i = 2; i <= 1100; i++) m.execute([request(String(i), 1, true)]);
    expect(m.accumulators.size).toBe(1024);
    // Sequence 1 was the least recently used: dropped.
    expect(m.accumulators.has('1')).toBe(false);
    // A sequence in use stays: 1100 gets a request, then 1024 more starts.
    m.execute([request('1100', 2, false)]);
    for (let i = 2000; i < 3023; i++) m.execute([request(String(i), 1, true)]);
    expect(m.accumulators.get('1100')).toBe(3);
    expect(m.accumulators.size).toBe(1024);
  });

  it('keeps its ids to 1 MiB of characters in all, whatever their length (review: 40 ids of 5 MB held 500 MB for good)', () => {
    const m = new Model();
    m.initialize();
    const digits = '1'.repeat(400_000);
    for (let i = 0; i < 40; i++) m.execute([request(`${100 + i}${digits}`, 1, true)]);
    const chars = [...m.accumulators.keys()].reduce((a, k) => a + k.length, 0);
    expect(chars).toBeLessThanOrEqual(1 << 20);
    // The latest stays; a sequence that ends is forgotten.
    const last = `${139}${digits}`;
    expect(m.accumulators.get(last)).toBe(1);
    m.execute([request(last, 1, false, true)]);
    expect(m.accumulators.has(last)).toBe(false);
    // Short ids are kept by count as before.
    for (let i = 0; i < 10; i++) m.execute([request(String(i), 1, true)]);
    expect(m.accumulators.has('9')).toBe(true);
  });
});
