/**
 * @module `triode perf --shared-memory system`: the load generator's tensors in system shared
 * memory, as perf_analyzer's InferDataManagerShm does it. Before measuring, each input set is
 * written once into a POSIX shared memory object of its own and registered with the server, and
 * one object holds a window per output; every request then names windows instead of carrying data.
 * The input windows are only read by the server, so all requests share them. The output windows
 * are shared by all requests too, as perf_analyzer's: concurrent requests write the same output
 * window and race; the figures are unaffected, the bytes left there are some request's.
 * Triton: perf_analyzer src/infer_data_manager_shm.cc, docs/cli.md (--shared-memory,
 * --output-shared-memory-size)
 */
import { randomBytes } from 'node:crypto';
import { dataTypeByteSize, elementCount, type ModelMetadata } from '@triode/core';
import { SystemSharedMemoryRegion } from '../system-shared-memory.js';
import { inputBytes } from '../tensor-data.js';
import type { InferenceClient, InferInput, RequestedOutput } from '../types.js';

/** perf_analyzer's `--output-shared-memory-size` default: room per output (x batch size) when its size is not known. */
export const DEFAULT_OUTPUT_SHARED_MEMORY_SIZE = 102400;

/** Where a tensor starts in an object: 64-byte boundaries, as an allocator would give. */
const align = (n: number): number => Math.ceil(n / 64) * 64;

/** What the load generator sends when its tensors live in system shared memory. */
export interface PerfSharedMemoryLayout {
  /** The input sets, each input a window of its set's region. */
  sets: InferInput[][];
  /** Every output of the model, each into its window of the output region. */
  outputs: RequestedOutput[];
}

/**
 * The regions of one `triode perf` run: made and registered by `setUp`, unregistered and removed
 * by `release`, which undoes whatever part of `setUp` happened (call it in a `finally`).
 */
export class PerfSharedMemory {
  /** The names this run registers under (a prefix of its own: another run's regions are left alone). */
  readonly prefix: string;
  readonly #client: InferenceClient;
  readonly #directory: string | undefined;
  readonly #regions: SystemSharedMemoryRegion[] = [];
  readonly #registered: string[] = [];

  /** `directory`: where shm_open's objects live (the server's; a test's stand-in for /dev/shm). */
  constructor(client: InferenceClient, directory?: string) {
    this.#client = client;
    this.#directory = directory;
    this.prefix = `triode_perf_${process.pid}_${randomBytes(3).toString('hex')}`;
  }

  /** The names registered now (for a caller that reports them). */
  get registered(): readonly string[] {
    return this.#registered;
  }

  async #region(name: string, byteSize: number): Promise<SystemSharedMemoryRegion> {
    // createOnly: an object of that key that is not ours is never taken over (or removed after).
    const region = SystemSharedMemoryRegion.create(`/${name}`, byteSize, { createOnly: true, ...(this.#directory !== undefined ? { directory: this.#directory } : {}) });
    this.#regions.push(region);
    await this.#client.registerSystemSharedMemory(name, region.key, region.byteSize);
    this.#registered.push(name);
    return region;
  }

  /**
   * Writes the input sets into regions and sizes the output windows: an output of fixed shape and
   * a fixed-size datatype gets its exact size, any other `outputSize` bytes; both times the batch
   * size (perf_analyzer's rule).
   */
  async setUp(sets: readonly InferInput[][], meta: ModelMetadata, maxBatchSize: number, batchSize: number, outputSize: number): Promise<PerfSharedMemoryLayout> {
    if (!Number.isSafeInteger(outputSize) || outputSize <= 0) throw new Error(`--output-shared-memory-size must be a positive integer, not ${String(outputSize)}`);
    const shmSets: InferInput[][] = [];
    for (const [k, set] of sets.entries()) {
      const bytes = set.map((input) => inputBytes(input));
      const offsets: number[] = [];
      let size = 0;
      for (const b of bytes) {
        offsets.push(size);
        size = align(size + b.byteLength);
      }
      const name = `${this.prefix}_input${k}`;
      const region = await this.#region(name, Math.max(size, 64));
      shmSets.push(set.map((input, i) => {
        region.write(bytes[i]!, offsets[i]!);
        return { name: input.name, datatype: input.datatype, shape: input.shape, sharedMemory: { region: name, byteSize: bytes[i]!.byteLength, offset: offsets[i]! } };
      }));
    }
    const batch = maxBatchSize > 0 ? batchSize : 1;
    const windows = meta.outputs.map((o) => {
      const body = maxBatchSize > 0 ? o.shape.slice(1) : o.shape;
      const known = o.datatype !== 'BYTES' && body.every((d) => d >= 0);
      return { name: o.name, byteSize: (known ? elementCount(body) * dataTypeByteSize(o.datatype) : outputSize) * batch };
    });
    const outputs: RequestedOutput[] = [];
    if (windows.length > 0) {
      const name = `${this.prefix}_output`;
      let size = 0;
      const offsets = windows.map((w) => {
        const at = size;
        size = align(size + w.byteSize);
        return at;
      });
      await this.#region(name, Math.max(size, 64));
      windows.forEach((w, i) => outputs.push({ name: w.name, sharedMemory: { region: name, byteSize: w.byteSize, offset: offsets[i]! } }));
    }
    return { sets: shmSets, outputs };
  }

  /**
   * Unregisters this run's regions and removes their objects, each step tried whatever failed
   * before it (a server gone still leaves nothing in /dev/shm). Idempotent.
   * @returns what could not be undone, one line each (empty when all went)
   */
  async release(): Promise<string[]> {
    const problems: string[] = [];
    for (const name of this.#registered.splice(0)) {
      try {
        await this.#client.unregisterSystemSharedMemory(name);
      } catch (err) {
        problems.push(`unable to unregister shared memory region '${name}': ${(err as Error).message}`);
      }
    }
    for (const region of this.#regions.splice(0)) {
      try {
        region.destroy();
      } catch (err) {
        problems.push((err as Error).message);
      }
    }
    return problems;
  }
}
