/**
 * @module System shared memory for Node clients, as tritonclient.utils.shared_memory offers it
 * for Python: create a POSIX shared memory object, put tensors in it, read outputs back, destroy
 * it. Node cannot map memory, so the object is its file in /dev/shm (what `shm_open` opens on
 * Linux), opened once and read and written at an offset (pread/pwrite, synchronous: /dev/shm is
 * memory). Register it with the server (`registerSystemSharedMemory(name, region.key,
 * region.byteSize)`) and name windows of it in infer requests (`sharedMemory: { region: name,
 * byteSize, offset }`).
 * Triton: client/src/python/library/tritonclient/utils/shared_memory
 */
import { closeSync, constants, fstatSync, ftruncateSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { dataBytes, dataTypeByteSize, elementCount, serializeBytesTensor, viewBytesAs, type DataType, type TensorData } from '@triode/core';

/** A failure of a SystemSharedMemoryRegion (tritonclient's SharedMemoryException). */
export class SharedMemoryError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SharedMemoryError';
  }
}

/** Options of SystemSharedMemoryRegion.create. */
export interface SystemSharedMemoryRegionOptions {
  /** Where shm_open's objects live (the server's `SystemSharedMemory` directory). @default '/dev/shm' */
  directory?: string;
  /** Fail when the object exists (O_EXCL), tritonclient's `create_only`; else an existing one is reused and resized. @default false */
  createOnly?: boolean;
}

/** The longest name of a file (NAME_MAX): shm_open answers ENAMETOOLONG past it. */
const NAME_MAX = 255;

/**
 * The file name shm_open gives `key` (glibc: the leading `/`s dropped; then no `/` at all, and
 * not empty, `.` or `..`).
 * @throws SharedMemoryError when shm_open would refuse the key
 */
export function sharedMemoryObjectName(key: string): string {
  const name = key.replace(/^\/+/, '');
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new SharedMemoryError(`'${key}' is not a shared memory key: a name with at most a leading '/', such as '/input0'`);
  }
  if (Buffer.byteLength(name) > NAME_MAX) throw new SharedMemoryError(`shared memory key '${key}' is longer than ${NAME_MAX} bytes`);
  return name;
}

const isCount = (n: number): boolean => Number.isSafeInteger(n) && n >= 0;

/**
 * A POSIX shared memory object this process created, open for reading and writing.
 * @example
 * const region = SystemSharedMemoryRegion.create('/simple_io', 4096);
 * const n = region.write(Int32Array.from({ length: 16 }, (_, i) => i), 0);    // 64 bytes at 0
 * await client.registerSystemSharedMemory('io', region.key, region.byteSize);
 * const r = await client.infer('simple', {
 *   inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], sharedMemory: { region: 'io', byteSize: n } }, ...],
 *   outputs: [{ name: 'OUTPUT0', sharedMemory: { region: 'io', byteSize: 64, offset: 128 } }],
 * });
 * region.read('INT32', r.output('OUTPUT0').shape, 128);                        // Int32Array(16)
 * await client.unregisterSystemSharedMemory('io');
 * region.destroy();
 */
export class SystemSharedMemoryRegion {
  /** The key it was created with (what the server registers). */
  readonly key: string;
  /** Its size in bytes. */
  readonly byteSize: number;
  /** Its file. */
  readonly path: string;
  #fd: number | undefined;

  private constructor(key: string, byteSize: number, path: string, fd: number) {
    this.key = key;
    this.byteSize = byteSize;
    this.path = path;
    this.#fd = fd;
  }

  /**
   * Creates (or, unless `createOnly`, opens) the object `key` with room for `byteSize` bytes (new
   * bytes are zero), as tritonclient's `create_shared_memory_region`: mode 0600, no link followed.
   * @throws SharedMemoryError when the key is not one shm_open takes, or the object cannot be made
   */
  static create(key: string, byteSize: number, options: SystemSharedMemoryRegionOptions = {}): SystemSharedMemoryRegion {
    if (!isCount(byteSize)) throw new SharedMemoryError(`byteSize must be a non-negative integer, not ${String(byteSize)}`);
    const path = join(options.directory ?? '/dev/shm', sharedMemoryObjectName(key));
    let fd: number;
    try {
      // Not blocking: a FIFO planted under the name would hold the open.
      fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK | (options.createOnly ? constants.O_EXCL : 0), 0o600);
    } catch (err) {
      throw new SharedMemoryError(`unable to create the shared memory region '${key}': ${(err as Error).message}`, { cause: err });
    }
    try {
      if (!fstatSync(fd).isFile()) throw new SharedMemoryError(`unable to create the shared memory region '${key}': ${path} is not a regular file`);
      ftruncateSync(fd, byteSize);
    } catch (err) {
      closeSync(fd);
      if (err instanceof SharedMemoryError) throw err;
      throw new SharedMemoryError(`unable to size the shared memory region '${key}' to ${byteSize} bytes: ${(err as Error).message}`, { cause: err });
    }
    return new SystemSharedMemoryRegion(key, byteSize, path, fd);
  }

  #open(): number {
    if (this.#fd === undefined) throw new SharedMemoryError(`shared memory region '${this.key}' is closed`);
    return this.#fd;
  }

  #check(offset: number, n: number, what: string): void {
    if (!isCount(offset)) throw new SharedMemoryError(`offset must be a non-negative integer, not ${String(offset)}`);
    if (offset + n > this.byteSize) {
      throw new SharedMemoryError(`${what} ${n} bytes at offset ${offset} does not fit shared memory region '${this.key}' of ${this.byteSize} bytes`);
    }
  }

  /**
   * Writes one tensor at `offset` (tritonclient's `set_shared_memory_region`): a typed array as
   * its bytes (its datatype's own kind, as `data` of an input), or BYTES elements (strings, UTF-8,
   * and/or byte arrays) serialized as Triton reads them (each a 4-byte little-endian length, then
   * its bytes). A BYTES tensor already serialized is a Uint8Array: written as it is.
   * @returns the bytes written: the `byteSize` of the input's window
   * @throws SharedMemoryError when it does not fit
   */
  write(data: TensorData | readonly (string | Uint8Array)[], offset = 0): number {
    const bytes = ArrayBuffer.isView(data) ? dataBytes(data) : serializeBytesTensor(data);
    this.#check(offset, bytes.byteLength, 'writing');
    const fd = this.#open();
    let done = 0;
    while (done < bytes.byteLength) done += writeSync(fd, bytes, done, bytes.byteLength - done, offset + done);
    return bytes.byteLength;
  }

  /**
   * `byteSize` bytes at `offset`, copied.
   * @throws SharedMemoryError when they are not all in the object
   */
  readRaw(offset: number, byteSize: number): Uint8Array {
    if (!isCount(byteSize)) throw new SharedMemoryError(`byteSize must be a non-negative integer, not ${String(byteSize)}`);
    this.#check(offset, byteSize, 'reading');
    const out = new Uint8Array(byteSize);
    const fd = this.#open();
    let done = 0;
    while (done < byteSize) {
      const got = readSync(fd, out, done, byteSize - done, offset + done);
      if (got === 0) throw new SharedMemoryError(`shared memory region '${this.key}' ends before byte ${offset + byteSize}: it was truncated`);
      done += got;
    }
    return out;
  }

  /**
   * A tensor of `datatype` and `shape` at `offset` (tritonclient's `get_contents_as_numpy`), as a
   * typed array of the datatype's kind, copied; BYTES: the serialization of `shape`'s elements
   * (read it with `splitBytes`). The offset is in the object: a window's offset plus the offset
   * the region was registered at.
   * @throws SharedMemoryError when the tensor is not all in the object
   */
  read(datatype: DataType, shape: readonly number[], offset = 0): TensorData {
    if (!shape.every(isCount)) throw new SharedMemoryError(`shape [${shape.join(',')}] is not a list of non-negative integers`);
    const count = elementCount(shape);
    if (datatype !== 'BYTES') return viewBytesAs(datatype, this.readRaw(offset, count * dataTypeByteSize(datatype)));
    this.#check(offset, 0, 'reading');
    // Element by element through the length prefixes, reading more of the object as they need.
    const limit = this.byteSize - offset;
    let buf = this.readRaw(offset, Math.min(limit, 64 * 1024));
    const need = (n: number) => {
      if (n > limit) throw new SharedMemoryError(`BYTES tensor of ${count} elements at offset ${offset} runs past the end of shared memory region '${this.key}'`);
      if (n <= buf.byteLength) return;
      const size = Math.min(limit, Math.max(n, 2 * buf.byteLength));
      const grown = new Uint8Array(size);
      grown.set(buf);
      grown.set(this.readRaw(offset + buf.byteLength, size - buf.byteLength), buf.byteLength);
      buf = grown;
    };
    let at = 0;
    for (let i = 0; i < count; i++) {
      need(at + 4);
      const len = new DataView(buf.buffer, buf.byteOffset, buf.byteLength).getUint32(at, true);
      at += 4;
      need(at + len);
      at += len;
    }
    return buf.subarray(0, at);
  }

  /** Closes its descriptor and leaves the object (another process may still use it). Idempotent. */
  close(): void {
    if (this.#fd === undefined) return;
    const fd = this.#fd;
    this.#fd = undefined;
    closeSync(fd);
  }

  /**
   * Closes it and removes the object (tritonclient's `destroy_shared_memory_region`, shm_unlink):
   * a server that registered it keeps reading its own open copy until it unregisters it. Idempotent.
   */
  destroy(): void {
    this.close();
    try {
      unlinkSync(this.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw new SharedMemoryError(`unable to remove shared memory region '${this.key}': ${(err as Error).message}`, { cause: err });
    }
  }
}
