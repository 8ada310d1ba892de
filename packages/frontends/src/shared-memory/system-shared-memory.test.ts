import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, symlinkSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TriodeError } from '@triode/core';
import { PAGE_SIZE, RequestSharedMemory, SYNC_READ_MAX_BYTES, SystemSharedMemory, objectName } from './system-shared-memory.js';

/** A stand-in for /dev/shm: a directory of this test's own (the code opens only names inside it). */
let dir: string;
let shm: SystemSharedMemory;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'triode-shm-'));
  shm = new SystemSharedMemory({ directory: dir });
});

afterEach(() => {
  shm.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An object of `bytes` in the directory, as a client's shm_open + ftruncate + write makes it. */
const object = (name: string, bytes: Uint8Array | number): void => {
  writeFileSync(join(dir, name), typeof bytes === 'number' ? Buffer.alloc(bytes) : bytes);
};

const failure = (f: () => unknown): { code: string; message: string } => {
  try {
    f();
  } catch (err) {
    expect(err).toBeInstanceOf(TriodeError);
    return { code: (err as TriodeError).code, message: (err as TriodeError).message };
  }
  throw new Error('did not throw');
};

describe('SystemSharedMemory', () => {
  it('registers a window, lists it (sorted by name), reads and writes it in place, unregisters it', () => {
    object('obj', 3 * PAGE_SIZE);
    shm.register('b', '/obj', PAGE_SIZE, 64);
    shm.register('a', 'obj', 0, 2 * PAGE_SIZE);
    expect(shm.status()).toEqual([
      { name: 'a', key: 'obj', offset: 0, byte_size: 2 * PAGE_SIZE },
      { name: 'b', key: '/obj', offset: PAGE_SIZE, byte_size: 64 },
    ]);
    expect(shm.status('b')).toEqual([{ name: 'b', key: '/obj', offset: PAGE_SIZE, byte_size: 64 }]);
    const lease = shm.hold('b', 8, 8);
    lease.write(Buffer.from('abcdefgh'));
    // The object itself holds the bytes: at the region's offset plus the window's.
    expect(readFileSync(join(dir, 'obj')).subarray(PAGE_SIZE + 8, PAGE_SIZE + 16).toString()).toBe('abcdefgh');
    const other = shm.hold('a', PAGE_SIZE + 8, 8);
    expect(other.read().toString()).toBe('abcdefgh');
    other.release();
    shm.unregister('a');
    shm.unregister('nope');
    expect(shm.status().map((r) => r.name)).toEqual(['b']);
    lease.release();
    shm.unregister();
    expect(shm.status()).toEqual([]);
    expect(failure(() => shm.status('b'))).toEqual({ code: 'NOT_FOUND', message: "Unable to find system shared memory region: 'b'" });
  });

  it('register: the same name twice is ALREADY_EXISTS; an unknown object INTERNAL; a window past the object INVALID_ARG (Triton\'s words)', () => {
    object('obj', PAGE_SIZE);
    shm.register('r', 'obj', 0, 64);
    expect(failure(() => shm.register('r', 'obj', 0, 64))).toEqual({ code: 'ALREADY_EXISTS', message: "shared memory region 'r' already in manager" });
    expect(failure(() => shm.register('s', 'missing', 0, 64))).toEqual({ code: 'INTERNAL', message: "Unable to open shared memory region: 'missing'" });
    expect(failure(() => shm.register('s', 'obj', 0, PAGE_SIZE + 1))).toEqual({ code: 'INVALID_ARG', message: "failed to register shared memory region 's': invalid args" });
    expect(failure(() => shm.register('s', 'obj', 2n ** 64n - 1n, 2))).toEqual({ code: 'INVALID_ARG', message: "failed to register shared memory region 's': invalid args" });
    // What mmap refuses (Triton maps the window): an empty one, an offset off a page boundary.
    for (const [offset, size] of [[0, 0], [8, 64]] as const) {
      expect(failure(() => shm.register('s', 'obj', offset, size))).toEqual({ code: 'INVALID_ARG', message: "failed to register shared memory region 's': unable to process address spaceInvalid argument" });
    }
    expect(shm.status().map((r) => r.name)).toEqual(['r']);
  });

  it('register: the reserved key prefix is refused, leading slashes or not (Triton\'s words)', () => {
    object('triton_python_backend_shm_region_x', PAGE_SIZE);
    for (const key of ['triton_python_backend_shm_region_x', '///triton_python_backend_shm_region_x']) {
      expect(failure(() => shm.register('r', key, 0, 64))).toEqual({
        code: 'INVALID_ARG',
        message: `cannot register shared memory region 'r' with key '${key}' as the key contains the reserved prefix 'triton_python_backend_shm_region_'`,
      });
    }
  });

  it('attack: a key names only an object in the directory: no path, no parent, no link followed, no FIFO (it held the event loop), no directory', () => {
    object('obj', PAGE_SIZE);
    const outside = mkdtempSync(join(tmpdir(), 'triode-shm-outside-'));
    try {
      writeFileSync(join(outside, 'secret'), Buffer.alloc(PAGE_SIZE, 7));
      symlinkSync(join(outside, 'secret'), join(dir, 'link'));
      execFileSync('mkfifo', [join(dir, 'fifo')]);
      for (const key of [`../${outside.split('/').pop()}/secret`, join(outside, 'secret'), '..', '.', '', '/', 'a/b', 'link', 'fifo', 'x\0y', 'n'.repeat(256)]) {
        expect(failure(() => shm.register('r', key, 0, 64)), key).toMatchObject({ code: 'INTERNAL', message: expect.stringMatching(/^Unable to open shared memory region: '/) });
      }
      expect(objectName('///obj')).toBe('obj');
      expect(objectName('a/b')).toBeUndefined();
      // A directory is refused too (its descriptor is closed: nothing is left open).
      execFileSync('mkdir', [join(dir, 'sub')]);
      expect(failure(() => shm.register('r', 'sub', 0, 64)).code).toBe('INTERNAL');
      expect(shm.status()).toEqual([]);
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });

  it('a window of a request is checked as Triton\'s GetMemoryInfo checks it, in its order and words', () => {
    object('obj', PAGE_SIZE);
    shm.register('r', 'obj', 0, 64);
    expect(failure(() => shm.hold('x', 0, 4))).toEqual({ code: 'NOT_FOUND', message: "Unable to find shared memory region: 'x'" });
    expect(failure(() => shm.hold('r', 64, 0))).toEqual({ code: 'INVALID_ARG', message: "Invalid offset for shared memory region: 'r'" });
    expect(failure(() => shm.hold('r', 8, 2n ** 64n - 8n))).toEqual({
      code: 'INVALID_ARG', message: "Integer overflow detected: byte_size (18446744073709551608) + offset (8) exceeds maximum value (18446744073709551615) for region 'r'",
    });
    expect(failure(() => shm.hold('r', 8, 57))).toEqual({ code: 'INVALID_ARG', message: "Invalid offset + byte size for shared memory region: 'r'" });
    expect(shm.hold('r', 8, 56).byteSize).toBe(56);
  });

  it('unregister while a request holds the region: it stays listed and usable, and goes when the request is done (Triton\'s awaiting unregister)', () => {
    object('obj', PAGE_SIZE);
    shm.register('r', 'obj', 0, 64);
    const lease = shm.hold('r', 0, 4);
    shm.unregister('r');
    expect(shm.status().map((s) => s.name)).toEqual(['r']);
    expect(failure(() => shm.register('r', 'obj', 0, 64)).code).toBe('ALREADY_EXISTS');
    const second = shm.hold('r', 0, 4);
    lease.write(Uint8Array.of(1, 2, 3, 4));
    lease.release();
    lease.release();
    expect(shm.status().map((s) => s.name)).toEqual(['r']);
    expect([...second.read()]).toEqual([1, 2, 3, 4]);
    second.release();
    expect(shm.status()).toEqual([]);
    expect(() => second.read()).toThrow(/used after its request released it/);
  });

  it('attack: an object the client truncated after registering fails the read or write (INTERNAL) instead of short data or growing it', () => {
    object('obj', PAGE_SIZE);
    shm.register('r', 'obj', 0, 64);
    truncateSync(join(dir, 'obj'), 16);
    expect(failure(() => shm.hold('r', 0, 32).read())).toMatchObject({ code: 'INTERNAL', message: "shared memory region 'r' no longer holds the requested bytes: its object was truncated" });
    expect(failure(() => shm.hold('r', 0, 32).write(Buffer.alloc(32))).code).toBe('INTERNAL');
    expect(readFileSync(join(dir, 'obj')).byteLength).toBe(16);
  });

  it('a key whose object was removed and made again is the new object (review: the first registration\'s descriptor read the removed one)', () => {
    object('k', Buffer.alloc(PAGE_SIZE, 1));
    shm.register('old', 'k', 0, PAGE_SIZE);
    unlinkSync(join(dir, 'k'));
    object('k', Buffer.alloc(2 * PAGE_SIZE, 2));
    shm.register('new', 'k', 0, 2 * PAGE_SIZE);
    const lease = shm.hold('new', 0, 4);
    expect([...lease.read()]).toEqual([2, 2, 2, 2]);
    lease.write(Uint8Array.of(7));
    expect(readFileSync(join(dir, 'k'))[0]).toBe(7);
    lease.release();
    // The old region still reads its own (removed) object, as its mapping would.
    const old = shm.hold('old', 0, 4);
    expect([...old.read()]).toEqual([1, 1, 1, 1]);
    old.release();
  });

  it('attack: a window a request still holds when the server closes refuses to read or write (review: its descriptor number went to another file)', () => {
    object('k', PAGE_SIZE);
    shm.register('r', 'k', 0, PAGE_SIZE);
    const lease = shm.hold('r', 0, 4);
    shm.close();
    object('victim', PAGE_SIZE);
    const fd = openSync(join(dir, 'victim'), 'r+');
    try {
      expect(failure(() => lease.write(Uint8Array.of(9, 9, 9, 9)))).toEqual({ code: 'UNAVAILABLE', message: "shared memory region 'r' is closed: the server is stopping" });
      expect(failure(() => lease.read()).code).toBe('UNAVAILABLE');
      expect([...readFileSync(join(dir, 'victim')).subarray(0, 4)]).toEqual([0, 0, 0, 0]);
    } finally {
      closeSync(fd);
    }
    lease.release();
    expect(shm.status()).toEqual([]);
  });

  it('attack: a window past 2^53 bytes is refused at registration (review: kept as a rounded double, 1 byte past its end got through)', () => {
    // A sparse object of 2^60 bytes: tmpfs (/dev/shm) holds one, most disk file systems cannot.
    const name = `triode-test-huge-${process.pid}`;
    const real = new SystemSharedMemory();
    try {
      writeFileSync(`/dev/shm/${name}`, '');
      execFileSync('truncate', ['-s', String(2n ** 60n), `/dev/shm/${name}`]);
      expect(failure(() => real.register('r', name, 0, 2n ** 54n - 1n))).toEqual({ code: 'INVALID_ARG', message: "failed to register shared memory region 'r': invalid args" });
      real.register('r', name, 0, 2 ** 40);
      expect(real.status()).toEqual([{ name: 'r', key: name, offset: 0, byte_size: 2 ** 40 }]);
    } finally {
      real.close();
      rmSync(`/dev/shm/${name}`, { force: true });
    }
  });

  it('attack: regions are capped (each may hold a descriptor)', () => {
    const few = new SystemSharedMemory({ directory: dir, maxRegions: 2 });
    try {
      object('obj', PAGE_SIZE);
      few.register('a', 'obj', 0, 8);
      few.register('b', 'obj', 0, 8);
      expect(failure(() => few.register('c', 'obj', 0, 8))).toEqual({ code: 'UNAVAILABLE', message: "failed to register shared memory region 'c': 2 regions are registered, the most this server holds" });
      few.unregister('a');
      few.register('c', 'obj', 0, 8);
    } finally {
      few.close();
    }
  });
});

describe('RequestSharedMemory', () => {
  it('reads inputs (size checked before any copy, within the request limit), writes outputs that fit, and releases its holds', () => {
    object('obj', 2 * PAGE_SIZE);
    writeFileSync(join(dir, 'obj'), Buffer.from('0123456789abcdef'), { flag: 'r+' });
    shm.register('in', 'obj', 0, 16);
    shm.register('out', 'obj', PAGE_SIZE, 16);
    const use = new RequestSharedMemory(shm, 20);
    const sizes: number[] = [];
    const read = use.readInput({ region: 'in', offset: 4, byteSize: 8 }, (n) => sizes.push(n), () => undefined);
    expect(read.toString()).toBe('456789ab');
    // A buffer of its own (review: a slice of Node's shared pool was marked owned, and an owned
    // buffer is transferred to an instance thread: Node 21+ refuses to transfer the pool).
    expect([read.byteOffset, read.buffer.byteLength]).toEqual([0, 8]);
    expect(sizes).toEqual([8]);
    expect(() => use.readInput({ region: 'in', offset: 0, byteSize: 16 }, () => { throw new Error('size refused'); }, () => undefined)).toThrow('size refused');
    expect(failure(() => use.readInput({ region: 'in', offset: 0, byteSize: 16 }, () => undefined, () => undefined))).toEqual({
      code: 'INVALID_ARG', message: 'inputs read from shared memory total more than 20 bytes, the request size limit of this frontend',
    });
    use.holdOutput('y', { region: 'out', offset: 0, byteSize: 4 });
    expect(failure(() => use.writeOutputs([{ name: 'y', data: Buffer.from('12345') }]))).toEqual({
      code: 'INTERNAL', message: "shared memory size specified with the request for output 'y' (4 bytes) should be at least 5 bytes to hold the results",
    });
    use.writeOutputs([{ name: 'x', data: Buffer.from('zz') }, { name: 'y', data: Buffer.from('WXYZ') }]);
    expect(readFileSync(join(dir, 'obj')).subarray(PAGE_SIZE, PAGE_SIZE + 4).toString()).toBe('WXYZ');
    shm.unregister();
    expect(shm.status().map((r) => r.name)).toEqual(['in', 'out']);
    use.release();
    expect(shm.status()).toEqual([]);
  });

  it('a window larger than SYNC_READ_MAX_BYTES is read by load(), off the event loop, then verified', async () => {
    const big = SYNC_READ_MAX_BYTES + PAGE_SIZE;
    const bytes = Buffer.alloc(big);
    for (let i = 0; i < big; i += 4096) bytes[i] = (i / 4096) & 0xff;
    object('big', bytes);
    shm.register('big', 'big', 0, big);
    const use = new RequestSharedMemory(shm, 1 << 30);
    const verified: number[] = [];
    const buf = use.readInput({ region: 'big', offset: 0, byteSize: big }, () => undefined, (b) => verified.push(b.byteLength));
    expect(verified).toEqual([]);
    await use.load();
    expect(verified).toEqual([big]);
    expect(buf.equals(bytes)).toBe(true);
    // A verification that fails after the read fails load.
    const bad = new RequestSharedMemory(shm, 1 << 30);
    bad.readInput({ region: 'big', offset: 0, byteSize: big }, () => undefined, () => { throw new Error('unexpected number of string elements'); });
    await expect(bad.load()).rejects.toThrow('unexpected number of string elements');
    bad.release();
    use.release();
  });

  it('attack: what the requests in flight copy out of regions is bounded server-wide (review: tiny requests naming a sparse 2 GiB object each allocated 2 GiB)', () => {
    const small = new SystemSharedMemory({ directory: dir, maxInflightInputBytes: 100 });
    try {
      object('obj', PAGE_SIZE);
      small.register('r', 'obj', 0, PAGE_SIZE);
      const a = new RequestSharedMemory(small, 1 << 20);
      a.readInput({ region: 'r', offset: 0, byteSize: 60 }, () => undefined, () => undefined);
      const b = new RequestSharedMemory(small, 1 << 20);
      expect(failure(() => b.readInput({ region: 'r', offset: 0, byteSize: 60 }, () => undefined, () => undefined))).toEqual({
        code: 'UNAVAILABLE', message: 'shared memory inputs of the requests in flight would total more than 100 bytes: retry later, or send smaller requests',
      });
      b.release();
      expect(small.inflightInputBytes).toBe(60);
      a.release();
      expect(small.inflightInputBytes).toBe(0);
      const c = new RequestSharedMemory(small, 1 << 20);
      c.readInput({ region: 'r', offset: 0, byteSize: 60 }, () => undefined, () => undefined);
      c.release();
    } finally {
      small.close();
    }
  });

  it('without regions (client shared memory not allowed) every region is unknown', () => {
    expect(failure(() => new RequestSharedMemory(undefined, 0).holdOutput('y', { region: 'r', offset: 0, byteSize: 4 }))).toEqual({
      code: 'NOT_FOUND', message: "Unable to find shared memory region: 'r'",
    });
  });
});
