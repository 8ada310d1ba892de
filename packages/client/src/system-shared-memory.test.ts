/**
 * SystemSharedMemoryRegion on its own: shm_open's key rules, sizes, bounds, typed arrays and
 * BYTES in and out, links and other files refused, destroy. Objects live in a directory of the
 * test's own (a stand-in for /dev/shm).
 */
import { existsSync, mkdtempSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serializeBytesTensor } from '@triode/core';
import { SharedMemoryError, SystemSharedMemoryRegion, sharedMemoryObjectName } from './system-shared-memory.js';

let dir: string;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'triode-client-shm-unit-'));
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('SystemSharedMemoryRegion', () => {
  it('takes keys as shm_open does', () => {
    expect(sharedMemoryObjectName('/input0')).toBe('input0');
    expect(sharedMemoryObjectName('//input0')).toBe('input0');
    expect(sharedMemoryObjectName('input0')).toBe('input0');
    for (const bad of ['', '/', '/a/b', '/.', '/..', 'a\0b']) expect(() => sharedMemoryObjectName(bad)).toThrow(SharedMemoryError);
    expect(() => sharedMemoryObjectName(`/${'x'.repeat(256)}`)).toThrow('longer than 255 bytes');
  });

  it('creates, resizes, writes and reads within bounds, and destroys', () => {
    const r = SystemSharedMemoryRegion.create('/unit', 100, { directory: dir });
    try {
      expect(r.path).toBe(join(dir, 'unit'));
      expect(statSync(r.path)).toMatchObject({ size: 100, mode: expect.any(Number) });
      expect(statSync(r.path).mode & 0o777).toBe(0o600);
      expect(() => SystemSharedMemoryRegion.create('/unit', 100, { directory: dir, createOnly: true })).toThrow("unable to create the shared memory region '/unit'");
      expect(r.write(Float64Array.of(1.5, -2), 3)).toBe(16);
      expect(r.read('FP64', [2], 3)).toEqual(Float64Array.of(1.5, -2));
      expect(r.write(BigInt64Array.of(-(2n ** 63n)), 80)).toBe(8);
      expect(r.read('INT64', [], 80)).toEqual(BigInt64Array.of(-(2n ** 63n)));
      expect(() => r.write(new Uint8Array(8), 93)).toThrow('writing 8 bytes at offset 93 does not fit');
      expect(() => r.read('FP32', [26])).toThrow('reading 104 bytes at offset 0 does not fit');
      expect(() => r.read('FP32', [1], -1)).toThrow('offset must be a non-negative integer');
      expect(r.readRaw(3, 2)).toEqual(Uint8Array.of(0, 0));
      // BYTES: length-prefixed elements; a count that runs past the object is refused.
      const n = r.write(['ab', Uint8Array.of(0, 255), ''], 20);
      expect(n).toBe(16);
      expect(r.read('BYTES', [3], 20)).toEqual(serializeBytesTensor(['ab', Uint8Array.of(0, 255), '']));
      r.write(Uint32Array.of(1000), 40);
      expect(() => r.read('BYTES', [1], 40)).toThrow('runs past the end');
      // An existing object is reused and resized (tritonclient's create_only=False).
      const again = SystemSharedMemoryRegion.create('/unit', 200, { directory: dir });
      expect(statSync(r.path).size).toBe(200);
      again.close();
      again.close();
      expect(() => again.read('UINT8', [1])).toThrow("shared memory region '/unit' is closed");
    } finally {
      r.destroy();
      r.destroy();
    }
    expect(existsSync(join(dir, 'unit'))).toBe(false);
  });

  it('follows no link and keeps no other kind of file', () => {
    const target = join(dir, 'target');
    writeFileSync(target, 'secret');
    symlinkSync(target, join(dir, 'link'));
    expect(() => SystemSharedMemoryRegion.create('/link', 64, { directory: dir })).toThrow("unable to create the shared memory region '/link'");
    expect(statSync(target).size).toBe(6);
    expect(() => SystemSharedMemoryRegion.create('/unit', -1, { directory: dir })).toThrow('byteSize must be a non-negative integer');
  });
});
