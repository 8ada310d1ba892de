/**
 * @module The system shared memory extension's regions: a client puts a tensor in a POSIX shared
 * memory object (`shm_open` + `mmap` on its side), registers a window of it by name, and names the
 * window in its infer requests instead of sending the bytes; outputs may be written there too.
 * Node cannot map memory, so a region is an open descriptor of the object's file in /dev/shm, read
 * and written at the window's offset (pread/pwrite): the bytes come and go through one copy, as
 * Triton's backends copy out of its mapping. Shared by the HTTP and gRPC frontends of a process.
 *
 * Hostile input: a key names only an object in the shared memory directory (shm_open's rule: no
 * `/` past the leading ones, not `.` or `..`), opened without following a link and without blocking
 * (a FIFO there held the event loop), and only a regular file is kept. A window must lie inside the
 * object when registered, and every read checks it still does (a client that shrinks its object
 * gets an error where Triton's mapping would take SIGBUS). Regions are capped.
 * Triton: server/src/shared_memory_manager.cc (SharedMemoryManager)
 */
import { closeSync, constants, fstatSync, lstatSync, openSync, read, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { Errors, TriodeError, echo } from '@triode/core';

/** One registered region as the status APIs print it. */
export interface SystemSharedMemoryRegionStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

/** Options of a SystemSharedMemory. */
export interface SystemSharedMemoryOptions {
  /** Where shm_open's objects live. @default '/dev/shm' */
  directory?: string;
  /** The most regions registered at once (each may hold a descriptor). @default 1024 */
  maxRegions?: number;
  /**
   * The most bytes the requests in flight may hold copied out of regions, together: a request
   * naming a large window costs its client nothing (a sparse object), so without this bound a few
   * small requests could make the server allocate without limit. Past it a request is refused
   * (UNAVAILABLE), not queued. @default 1 GiB
   */
  maxInflightInputBytes?: number;
}

/** An open shared memory object, shared by the regions registered on its key. */
interface ObjectFile {
  key: string;
  fd: number;
  /** Regions using it, unregistered ones still held by a request included. */
  users: number;
  /** Closed by `close` (the server stopped): a request still holding a window of it is refused. */
  closed: boolean;
}

interface Region {
  name: string;
  key: string;
  offset: number;
  byteSize: number;
  file: ObjectFile;
  /** Requests holding it (an input read, an output to write when the inference ends). */
  holds: number;
  /** Unregistered while held: it goes when the last hold is released. */
  unregistered: boolean;
}

/** A window of a region a request holds until it has written its output there. */
export interface SharedMemoryLease {
  readonly region: string;
  readonly offset: number;
  readonly byteSize: number;
  /** The window's bytes, copied into a buffer of their own. @throws INTERNAL when the object no longer holds the window */
  read(): Buffer;
  /** The same, copied into `into` (the window's size) off the event loop (libuv's thread pool). */
  readAsync(into: Buffer): Promise<void>;
  /** Writes `data` at the window's start. @throws INTERNAL when the object no longer holds the window */
  write(data: Uint8Array): void;
  /** Gives the hold up (once; later calls do nothing). */
  release(): void;
}

const MAX_UINT64 = 2n ** 64n - 1n;

/** Keys Triton keeps for its Python backend's own regions (kTritonSharedMemoryRegionPrefix). */
export const RESERVED_KEY_PREFIX = 'triton_python_backend_shm_region_';

/** The page size mmap aligns a window's offset to (x86-64 and most arm64 Linux). */
export const PAGE_SIZE = 4096;

/** The default cap on registered regions (each may hold a descriptor). */
export const DEFAULT_MAX_SHARED_MEMORY_REGIONS = 1024;

/** Windows up to this size are read at once on the event loop; larger ones off it, in chunks of ASYNC_READ_CHUNK. */
export const SYNC_READ_MAX_BYTES = 1 << 20;

/** The default bound on bytes copied out of regions for the requests in flight. */
export const DEFAULT_MAX_INFLIGHT_INPUT_BYTES = 1 << 30;
const ASYNC_READ_CHUNK = 16 << 20;

/** What a shm_open key names in the directory, or undefined when shm_open would refuse it (EINVAL). */
export function objectName(key: string): string | undefined {
  const name = key.replace(/^\/+/, '');
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0') || Buffer.byteLength(name) > 255) return undefined;
  return name;
}

/** The system shared memory regions of a server (Triton's SharedMemoryManager, CPU kind). */
export class SystemSharedMemory {
  readonly #directory: string;
  readonly #maxRegions: number;
  readonly #maxInflight: number;
  #inflight = 0;
  readonly #regions = new Map<string, Region>();
  readonly #files = new Map<string, ObjectFile>();

  constructor(options: SystemSharedMemoryOptions = {}) {
    this.#directory = options.directory ?? '/dev/shm';
    this.#maxRegions = options.maxRegions ?? DEFAULT_MAX_SHARED_MEMORY_REGIONS;
    this.#maxInflight = options.maxInflightInputBytes ?? DEFAULT_MAX_INFLIGHT_INPUT_BYTES;
  }

  /** Regions registered now. */
  get size(): number {
    return this.#regions.size;
  }

  /** Bytes the requests in flight hold copied out of regions. */
  get inflightInputBytes(): number {
    return this.#inflight;
  }

  /**
   * Counts `n` more bytes copied out of regions for a request (negative: given back).
   * @throws UNAVAILABLE when that would pass maxInflightInputBytes (nothing counted)
   */
  charge(n: number): void {
    if (n > 0 && this.#inflight + n > this.#maxInflight) {
      throw Errors.unavailable(`shared memory inputs of the requests in flight would total more than ${this.#maxInflight} bytes: retry later, or send smaller requests`);
    }
    this.#inflight = Math.max(0, this.#inflight + n);
  }

  /**
   * Registers `byteSize` bytes at `offset` of the object `key` as region `name`, with Triton's
   * checks in its order: the reserved key prefix, the name, the object, the window, then what
   * mmap refuses (an offset not a multiple of the page size, an empty window).
   * @throws INVALID_ARG, ALREADY_EXISTS, INTERNAL (the object cannot be opened) with Triton's words
   */
  register(name: string, key: string, offset: number | bigint, byteSize: number | bigint): void {
    if (key.replace(/^\/+/, '').startsWith(RESERVED_KEY_PREFIX)) {
      throw Errors.invalidArg(`cannot register shared memory region '${echo(name)}' with key '${echo(key)}' as the key contains the reserved prefix '${RESERVED_KEY_PREFIX}'`);
    }
    if (this.#regions.has(name)) throw new TriodeError('ALREADY_EXISTS', `shared memory region '${echo(name)}' already in manager`);
    if (this.#regions.size >= this.#maxRegions) {
      throw Errors.unavailable(`failed to register shared memory region '${echo(name)}': ${this.#maxRegions} regions are registered, the most this server holds`);
    }
    const file = this.#openObject(key);
    let size: number;
    try {
      size = fstatSync(file.fd).size;
    } catch {
      this.#drop(file);
      throw new TriodeError('INTERNAL', `Invalid shared memory region: '${echo(key)}'`);
    }
    const o = BigInt(offset);
    const b = BigInt(byteSize);
    // Past 2^53 a window cannot be addressed here (file positions are doubles): refused as one past its object.
    if (o < 0n || b < 0n || o + b > BigInt(size) || o + b > BigInt(Number.MAX_SAFE_INTEGER)) {
      this.#drop(file);
      throw Errors.invalidArg(`failed to register shared memory region '${echo(name)}': invalid args`);
    }
    if (b === 0n || o % BigInt(PAGE_SIZE) !== 0n) {
      // Triton maps the window (mmap: EINVAL), and joins the two texts without a space.
      this.#drop(file);
      throw Errors.invalidArg(`failed to register shared memory region '${echo(name)}': unable to process address spaceInvalid argument`);
    }
    file.users++;
    this.#files.set(key, file);
    this.#regions.set(name, { name, key, offset: Number(o), byteSize: Number(b), file, holds: 0, unregistered: false });
  }

  /**
   * The open object `key` names: the one regions registered on the key share, unless the client
   * removed it and made another under the same name since (a descriptor would still read the
   * removed one): then the new one, opened.
   */
  #openObject(key: string): ObjectFile {
    const known = this.#files.get(key);
    if (!known) return this.#open(key);
    const name = objectName(key);
    try {
      const now = lstatSync(join(this.#directory, name!));
      const held = fstatSync(known.fd);
      if (now.dev === held.dev && now.ino === held.ino) return known;
    } catch {
      // Gone, or not the same: opened again below (which reports what is wrong with it).
    }
    return this.#open(key);
  }

  /** Opens the object `key` names (not yet counted as used). */
  #open(key: string): ObjectFile {
    const name = objectName(key);
    const fail = () => new TriodeError('INTERNAL', `Unable to open shared memory region: '${echo(key)}'`);
    if (name === undefined) throw fail();
    let fd: number;
    try {
      fd = openSync(join(this.#directory, name), constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      throw fail();
    }
    try {
      if (!fstatSync(fd).isFile()) throw fail();
    } catch (err) {
      closeSync(fd);
      throw err instanceof TriodeError ? err : fail();
    }
    return { key, fd, users: 0, closed: false };
  }

  /** Closes an object no region uses. */
  #drop(file: ObjectFile): void {
    if (file.users > 0 || file.closed) return;
    if (this.#files.get(file.key) === file) this.#files.delete(file.key);
    file.closed = true;
    try {
      closeSync(file.fd);
    } catch {
      // Already closed: nothing to give back.
    }
  }

  /** Status of one region (`name`) or of all; an unknown name is NOT_FOUND. */
  status(name?: string): SystemSharedMemoryRegionStatus[] {
    if (name === undefined) return [...this.#regions.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).map(regionStatus);
    const r = this.#regions.get(name);
    if (!r) throw new TriodeError('NOT_FOUND', `Unable to find system shared memory region: '${echo(name)}'`);
    return [regionStatus(r)];
  }

  /**
   * Unregisters one region (`name`; an unknown one is no error, as Triton) or all. One a request
   * holds stays, listed and usable, until the last request holding it is done, then goes by
   * itself (Triton's awaiting_unregister_).
   */
  unregister(name?: string): void {
    const names = name === undefined ? [...this.#regions.keys()] : [name];
    for (const n of names) {
      const r = this.#regions.get(n);
      if (!r) continue;
      if (r.holds > 0) {
        r.unregistered = true;
        continue;
      }
      this.#regions.delete(n);
      this.#forget(r);
    }
  }

  #forget(r: Region): void {
    r.file.users--;
    this.#drop(r.file);
  }

  /**
   * Triton's GetMemoryInfo checks of a window (`offset`, `byteSize`: uint64s as the client sent
   * them) of region `name`, in its order and words.
   */
  #window(name: string, offset: number | bigint, byteSize: number | bigint): { r: Region; offset: number; byteSize: number } {
    const r = this.#regions.get(name);
    if (!r) throw new TriodeError('NOT_FOUND', `Unable to find shared memory region: '${echo(name)}'`);
    const o = BigInt(offset);
    const b = BigInt(byteSize);
    if (o >= BigInt(r.byteSize)) throw Errors.invalidArg(`Invalid offset for shared memory region: '${echo(name)}'`);
    if (b > MAX_UINT64 - o) {
      throw Errors.invalidArg(`Integer overflow detected: byte_size (${b}) + offset (${o}) exceeds maximum value (${MAX_UINT64}) for region '${echo(name)}'`);
    }
    if (o + b > BigInt(r.byteSize)) throw Errors.invalidArg(`Invalid offset + byte size for shared memory region: '${echo(name)}'`);
    return { r, offset: Number(o), byteSize: Number(b) };
  }

  /**
   * Holds a window of region `name` for a request (its input read, its output written when the
   * inference ends): an unregister meanwhile waits for the request.
   * @throws NOT_FOUND for an unknown region, INVALID_ARG for a window outside it
   */
  hold(name: string, offset: number | bigint, byteSize: number | bigint): SharedMemoryLease {
    const { r, offset: o, byteSize: n } = this.#window(name, offset, byteSize);
    r.holds++;
    let held = true;
    const at = r.offset + o;
    const check = () => {
      if (!held) throw Errors.internal(`shared memory region '${echo(name)}' was used after its request released it`);
      // Closed with the server: its descriptor number may belong to another file by now.
      if (r.file.closed) throw Errors.unavailable(`shared memory region '${echo(name)}' is closed: the server is stopping`);
    };
    return {
      region: name,
      offset: o,
      byteSize: n,
      read: () => {
        check();
        // A buffer of its own (allocUnsafe gives a small one a slice of Node's shared pool): the
        // request owns it, and an owned buffer is transferred to an instance thread.
        const out = Buffer.allocUnsafeSlow(n);
        let done = 0;
        try {
          while (done < n) {
            const got = readSync(r.file.fd, out, done, n - done, at + done);
            if (got === 0) break;
            done += got;
          }
        } catch {
          done = -1;
        }
        if (done !== n) throw shrunk(name);
        return out;
      },
      readAsync: async (into) => {
        let done = 0;
        while (done < n) {
          check();
          let got: number;
          try {
            got = await new Promise<number>((resolve, reject) => {
              read(r.file.fd, into, done, Math.min(n - done, ASYNC_READ_CHUNK), at + done, (err, bytes) => (err ? reject(err) : resolve(bytes)));
            });
          } catch {
            throw shrunk(name);
          }
          if (got === 0) throw shrunk(name);
          done += got;
        }
      },
      write: (data) => {
        check();
        if (data.byteLength > n) throw Errors.internal(`output of ${data.byteLength} bytes does not fit shared memory region '${echo(name)}'`);
        // A write past the end would grow the client's object instead of failing: a window the
        // object no longer holds (it was truncated) is refused before anything is written.
        let size = -1;
        try {
          size = fstatSync(r.file.fd).size;
        } catch {
          // size stays -1: refused below.
        }
        if (size < at + data.byteLength) throw shrunk(name);
        let done = 0;
        try {
          while (done < data.byteLength) done += writeSync(r.file.fd, data, done, data.byteLength - done, at + done);
        } catch {
          throw shrunk(name);
        }
      },
      release: () => {
        if (!held) return;
        held = false;
        if (--r.holds > 0 || !r.unregistered) return;
        if (this.#regions.get(r.name) === r) this.#regions.delete(r.name);
        this.#forget(r);
      },
    };
  }

  /** Unregisters every region and closes every descriptor (the server stops). */
  close(): void {
    // Requests still holding windows keep their leases, which refuse from now on (`closed`).
    const files = new Set([...this.#files.values(), ...[...this.#regions.values()].map((r) => r.file)]);
    this.#regions.clear();
    this.#files.clear();
    for (const f of files) {
      f.users = 0;
      this.#drop(f);
    }
  }
}

function regionStatus(r: Region): SystemSharedMemoryRegionStatus {
  return { name: r.name, key: r.key, offset: r.offset, byte_size: r.byteSize };
}

/** The object behind a region no longer holds its window (the client shrank it). */
function shrunk(name: string): TriodeError {
  return Errors.internal(`shared memory region '${echo(name)}' no longer holds the requested bytes: its object was truncated`);
}

/**
 * Register or unregister on a server started without `--allow-client-shm=true` (Triton's default
 * since 26.04). Triton's own words for it are not in the sources Triode follows: these are Triode's.
 */
export function clientShmDisabled(): TriodeError {
  return Errors.unsupported('client shared memory is disabled: start the server with --allow-client-shm=true to register or unregister system shared memory regions');
}

/** The regions of a server that does not let clients use shared memory: none, and none can be added. */
export const NO_REGIONS: Pick<SystemSharedMemory, 'status'> = new SystemSharedMemory({ maxRegions: 0 });

/** A window of a region as a request names it (uint64s as the client sent them). */
export interface SharedMemoryWindow {
  region: string;
  offset: number | bigint;
  byteSize: number | bigint;
}

/**
 * The regions one infer request uses: the windows its inputs were read from and those its outputs
 * go to, held until `release` (after the response is written, or the request failed).
 */
export class RequestSharedMemory {
  readonly #manager: SystemSharedMemory | undefined;
  readonly #maxInputBytes: number;
  readonly #leases: SharedMemoryLease[] = [];
  #inputBytes = 0;
  /** Input windows to read (larger than SYNC_READ_MAX_BYTES), into their buffers. */
  readonly #pending: { lease: SharedMemoryLease; into: Buffer; verify: (bytes: Buffer) => void }[] = [];
  /** Output name -> the window it is written to. */
  readonly outputs = new Map<string, SharedMemoryLease>();

  /**
   * @param manager the server's regions; without it (client shared memory not allowed) every
   *   region is unknown
   * @param maxInputBytes the most bytes the request's inputs may read out of regions together (its
   *   frontend's request size limit: each read is a copy)
   */
  constructor(manager: SystemSharedMemory | undefined, maxInputBytes: number) {
    this.#manager = manager;
    this.#maxInputBytes = maxInputBytes;
  }

  #hold(w: SharedMemoryWindow): SharedMemoryLease {
    if (!this.#manager) throw new TriodeError('NOT_FOUND', `Unable to find shared memory region: '${echo(w.region)}'`);
    const lease = this.#manager.hold(w.region, w.offset, w.byteSize);
    this.#leases.push(lease);
    return lease;
  }

  /**
   * The buffer of input window `w`. `check` sees the window's size before anything is read (to
   * refuse a size the tensor cannot have without copying it), and `verify` the bytes once they are
   * in (a BYTES tensor's elements). A window up to SYNC_READ_MAX_BYTES is read now; a larger one
   * is read by `load`, off the event loop: the buffer is not filled (nor verified) until then.
   * @throws INVALID_ARG past the request's limit, UNAVAILABLE past the server's (maxInflightInputBytes)
   */
  readInput(w: SharedMemoryWindow, check: (byteSize: number) => void, verify: (bytes: Buffer) => void): Buffer {
    const lease = this.#hold(w);
    const n = lease.byteSize;
    check(n);
    if (this.#inputBytes + n > this.#maxInputBytes) {
      throw Errors.invalidArg(`inputs read from shared memory total more than ${this.#maxInputBytes} bytes, the request size limit of this frontend`);
    }
    this.#manager!.charge(n);
    this.#inputBytes += n;
    if (n <= SYNC_READ_MAX_BYTES) {
      const bytes = lease.read();
      verify(bytes);
      return bytes;
    }
    const into = Buffer.allocUnsafeSlow(n);
    this.#pending.push({ lease, into, verify });
    return into;
  }

  /** Bytes its inputs copied (or are copying) out of regions. */
  get inputBytes(): number {
    return this.#inputBytes;
  }

  /**
   * Reads the input windows `readInput` left for later, each then verified: to be awaited before
   * the request runs. Resolves at once when none is left.
   */
  async load(): Promise<void> {
    for (const { lease, into, verify } of this.#pending.splice(0)) {
      await lease.readAsync(into);
      verify(into);
    }
  }

  /** Output `name` is written to window `w` (checked now, as Triton checks it when parsing). */
  holdOutput(name: string, w: SharedMemoryWindow): void {
    this.outputs.set(name, this.#hold(w));
  }

  /** Whether it holds anything. */
  get used(): boolean {
    return this.#leases.length > 0;
  }

  /**
   * Writes each output that goes to a region (`outputs` of the response, by name).
   * @throws INTERNAL, in Triton's words, for an output larger than its window (the model ran)
   */
  writeOutputs(outputs: readonly { name: string; data: Uint8Array }[]): void {
    for (const o of outputs) {
      const lease = this.outputs.get(o.name);
      if (!lease) continue;
      if (o.data.byteLength > lease.byteSize) {
        throw Errors.internal(`shared memory size specified with the request for output '${echo(o.name)}' (${lease.byteSize} bytes) should be at least ${o.data.byteLength} bytes to hold the results`);
      }
    }
    for (const o of outputs) this.outputs.get(o.name)?.write(o.data);
  }

  /** Gives every window back, and the bytes its inputs were counted for (once). */
  release(): void {
    for (const l of this.#leases.splice(0)) l.release();
    this.#pending.length = 0;
    this.#manager?.charge(-this.#inputBytes);
    this.#inputBytes = 0;
  }
}

/** Makes a request's RequestSharedMemory (the frontend's regions and input limit). */
export type SharedMemoryFactory = () => RequestSharedMemory;

/**
 * The shared memory of one request being parsed, made when it first names a region (both
 * frontends' parsers). Without a factory (client shared memory not allowed) every region is unknown.
 */
export class LazySharedMemory {
  readonly #factory: SharedMemoryFactory | undefined;
  /** Made: the request named a region. */
  made: RequestSharedMemory | undefined;

  constructor(factory: SharedMemoryFactory | undefined) {
    this.#factory = factory;
  }

  use(): RequestSharedMemory {
    return (this.made ??= this.#factory ? this.#factory() : new RequestSharedMemory(undefined, 0));
  }
}
