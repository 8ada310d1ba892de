import { describe, expect, it, vi } from 'vitest';
import { parseIntegerRange, parseRange } from './perf.js';

describe('triode perf ranges', () => {
  it('reads start:end:step', () => {
    expect(parseIntegerRange('1:8:2')).toEqual([1, 3, 5, 7]);
    expect(parseRange('0.5:1.5:0.5')).toEqual([0.5, 1, 1.5]);
  });

  it('refuses a concurrency that is not a whole number (before, 1.5 ran 2 workers and reported "1.5")', () => {
    expect(() => parseIntegerRange('1.5')).toThrow("expected <start>[:<end>[:<step>]] of positive integers, got '1.5'");
    expect(() => parseIntegerRange('1:4:0.5')).toThrow(/positive integers/);
    expect(() => parseRange('0:4')).toThrow(/positive numbers/);
  });
});

describe('triode perf --shared-memory', () => {
  it('refuses cuda in words that say why, before connecting to anything', async () => {
    const { main } = await import('./main.js');
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    try {
      expect(await main(['perf', '-m', 'simple', '-u', '127.0.0.1:1', '--shared-memory', 'cuda'])).toBe(1);
      expect(err.mock.calls.map((c) => String(c[0])).join('')).toContain('--shared-memory cuda is not supported: Triode has no CUDA shared memory');
    } finally {
      err.mockRestore();
    }
  });

  it('takes none and system only (and cuda, to refuse it), and a positive --output-shared-memory-size', async () => {
    const { main } = await import('./main.js');
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const exit = vi.spyOn(process, 'exit').mockImplementation((code) => { throw new Error(`exit ${String(code)}`); });
    try {
      await expect(main(['perf', '-m', 'simple', '--shared-memory', 'posix'])).rejects.toThrow('exit 1');
      expect(err.mock.calls.map((c) => String(c[0])).join('')).toMatch(/Allowed choices are none, system, cuda/);
      await expect(main(['perf', '-m', 'simple', '--shared-memory', 'system', '--output-shared-memory-size', '0'])).rejects.toThrow('exit 1');
    } finally {
      exit.mockRestore();
      err.mockRestore();
    }
  });
});
