/**
 * @module The system shared memory extension on the request side of both clients: the windows
 * inputs and outputs name, checked before they are sent, and the outputs an answer leaves in
 * their regions (they carry no data), as tritonclient's `set_shared_memory` has them.
 * Triton: server docs/protocol/extension_shared_memory.md
 */
import { isDataType, viewBytesAs } from '@triode/core';
import { InferenceServerError } from './errors.js';
import { outputShape } from './tensor-data.js';
import type { InferInput, OutputTensor, RequestedOutput, SharedMemoryWindow, SystemSharedMemoryRegionStatus } from './types.js';

/** A window with its offset filled in. */
export type SharedMemoryPlacement = Required<SharedMemoryWindow>;

/** Outputs asked for in shared memory, by name. */
export type SharedMemoryOutputs = ReadonlyMap<string, SharedMemoryPlacement>;

const isCount = (n: unknown): n is number => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;

/**
 * `w` checked: a region name, a byte size and an offset that are non-negative integers.
 * @throws InferenceServerError otherwise (nothing is sent)
 */
export function checkWindow(what: string, w: SharedMemoryWindow): SharedMemoryPlacement {
  const offset = w.offset ?? 0;
  if (typeof w.region !== 'string') throw new InferenceServerError(`${what}: sharedMemory.region must be a region name`);
  if (!isCount(w.byteSize)) throw new InferenceServerError(`${what}: sharedMemory.byteSize must be a non-negative integer, not ${String(w.byteSize)}`);
  if (!isCount(offset)) throw new InferenceServerError(`${what}: sharedMemory.offset must be a non-negative integer, not ${String(offset)}`);
  return { region: w.region, byteSize: w.byteSize, offset };
}

/**
 * The arguments of a registration checked before they are sent (gRPC would wrap a negative or
 * fractional uint64 into another number).
 * @throws InferenceServerError when one is not of its kind
 */
export function checkRegistration(name: string, key: string, byteSize: number, offset: number): void {
  const what = `system shared memory region '${String(name)}'`;
  if (typeof name !== 'string' || typeof key !== 'string') throw new InferenceServerError(`${what}: the name and the key must be strings`);
  if (!isCount(byteSize)) throw new InferenceServerError(`${what}: byteSize must be a non-negative integer, not ${String(byteSize)}`);
  if (!isCount(offset)) throw new InferenceServerError(`${what}: offset must be a non-negative integer, not ${String(offset)}`);
}

/**
 * The window an input names, or undefined when it carries data.
 * @throws InferenceServerError when it has both or neither
 */
export function inputWindow(input: InferInput): SharedMemoryPlacement | undefined {
  const what = `input '${input.name}'`;
  if (input.sharedMemory === undefined) {
    if (input.data === undefined) throw new InferenceServerError(`${what} has neither data nor sharedMemory`);
    return undefined;
  }
  if (input.data !== undefined) throw new InferenceServerError(`${what}: give either data or sharedMemory, not both`);
  return checkWindow(what, input.sharedMemory);
}

/**
 * The window an output is asked for in, or undefined.
 * @throws InferenceServerError for a classification output (tritonclient refuses it too)
 */
export function outputWindow(o: RequestedOutput): SharedMemoryPlacement | undefined {
  if (o.sharedMemory === undefined) return undefined;
  const what = `output '${o.name}'`;
  if (o.classCount) throw new InferenceServerError(`${what}: shared memory can't be set on a classification output (classCount)`);
  return checkWindow(what, o.sharedMemory);
}

/** The outputs of a request asked for in shared memory, or undefined when none is. */
export function sharedMemoryOutputs(outputs: readonly RequestedOutput[] | undefined): SharedMemoryOutputs | undefined {
  let map: Map<string, SharedMemoryPlacement> | undefined;
  for (const o of outputs ?? []) {
    const w = outputWindow(o);
    if (w) (map ??= new Map()).set(o.name, w);
  }
  return map;
}

/**
 * The extension's parameters for a window (tritonclient's: the offset only when it is not 0), as
 * plain values; the gRPC client wraps them in InferParameters.
 */
export function windowParameters(w: SharedMemoryPlacement): { shared_memory_region: string; shared_memory_byte_size: number; shared_memory_offset?: number } {
  return { shared_memory_region: w.region, shared_memory_byte_size: w.byteSize, ...(w.offset ? { shared_memory_offset: w.offset } : {}) };
}

/**
 * An output the server wrote to its window (the answer carries no data for it): its datatype and
 * shape checked as any output's, an empty typed array of the datatype's kind, and where it is.
 * @throws InferenceServerError when the datatype or shape is not one
 */
export function sharedMemoryOutput(name: string, datatype: unknown, shape: unknown, w: SharedMemoryPlacement): OutputTensor {
  if (!isDataType(datatype)) throw new InferenceServerError(`malformed response: output '${name}' has an unknown datatype '${String(datatype)}'`);
  return { name, datatype, shape: outputShape(name, shape), data: viewBytesAs(datatype, new Uint8Array(0)), sharedMemory: { ...w } };
}

/**
 * A status answer's regions (`{name, key, offset, byte_size}` each, as both protocols have them),
 * checked, in name order.
 * @throws InferenceServerError when the answer is not such a list
 */
export function regionStatuses(call: string, rows: unknown): SystemSharedMemoryRegionStatus[] {
  const bad = () => new InferenceServerError(`malformed response to ${call}: not a list of regions with name, key, offset and byte_size`);
  if (!Array.isArray(rows)) throw bad();
  return rows.map((r: unknown) => {
    if (typeof r !== 'object' || r === null) throw bad();
    const { name, key, offset, byte_size: byteSize } = r as Record<string, unknown>;
    if (typeof name !== 'string' || typeof key !== 'string' || !isCount(offset) || !isCount(byteSize)) throw bad();
    return { name, key, offset, byteSize };
  }).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
