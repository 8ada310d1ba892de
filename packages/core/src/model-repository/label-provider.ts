/**
 * @module The class labels of a model version's outputs (`label_filename`), read once per file.
 * Triton: core/src/label_provider.cc (LabelProvider)
 */
import { existsSync } from 'node:fs';
import { Errors } from '../errors.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { readRepositoryFile, resolveInside } from './repository-fs.js';

/**
 * The most bytes of label files one model version may hold, all its distinct files together.
 * Triton has no such limit.
 */
export const MAX_LABEL_BYTES = 64 << 20;
/**
 * The most labels (lines) one model version may hold, all its distinct files together. Triton has
 * no such limit; here a 40 MiB file of empty lines named by 12 outputs was split into 40M strings
 * per output and ran the heap out (review).
 */
export const MAX_LABELS = 1 << 20;

/** The labels of one output: label `i` is line `i` of its file. */
export interface Labels {
  /** How many labels there are. */
  readonly length: number;
  /** Label `index`, or undefined past the last. */
  at(index: number): string | undefined;
}

/** The lines of `bytes`, counting at most `stopAfter` + 1 of them. */
function countLines(bytes: Buffer, stopAfter: number): number {
  let count = 0;
  for (let at = 0; at < bytes.length && count <= stopAfter; count++) {
    const nl = bytes.indexOf(10, at);
    at = nl < 0 ? bytes.length : nl + 1;
  }
  return count;
}

/**
 * One label file, kept as its bytes and the offset of each line (not a string per line): a
 * label is decoded only when a classification names it.
 */
export class LabelList implements Labels {
  readonly #bytes: Buffer;
  /** Line i spans [starts[i], starts[i + 1] - 1) of the bytes (the - 1 drops its '\n'). */
  readonly #starts: Uint32Array;

  constructor(bytes: Buffer) {
    const count = countLines(bytes, Infinity);
    const starts = new Uint32Array(count + 1);
    let at = 0;
    for (let i = 0; i < count; i++) {
      starts[i] = at;
      const nl = bytes.indexOf(10, at);
      at = nl < 0 ? bytes.length : nl + 1;
    }
    // A last line without '\n' ends one byte past the end, as if it had one.
    starts[count] = bytes.length > 0 && bytes[bytes.length - 1] !== 10 ? bytes.length + 1 : bytes.length;
    this.#bytes = bytes;
    this.#starts = starts;
  }

  get length(): number {
    return this.#starts.length - 1;
  }

  /** The size of the file. */
  get byteLength(): number {
    return this.#bytes.length;
  }

  at(index: number): string | undefined {
    if (!Number.isInteger(index) || index < 0 || index >= this.length) return undefined;
    const start = this.#starts[index]!;
    let end = this.#starts[index + 1]! - 1;
    if (end > start && this.#bytes[end - 1] === 13) end--; // "\r\n" line ends
    return this.#bytes.toString('utf8', start, end);
  }
}

/**
 * Reads a label file: one label per line (the index is the line number). Refuses (INVALID_ARG)
 * a file over {@link MAX_LABEL_BYTES} bytes or of more than `maxLabels` lines, before it keeps any.
 */
export function readLabels(modelPath: string, filename: string, maxLabels = MAX_LABELS): LabelList {
  const path = resolveInside(modelPath, filename);
  if (!existsSync(path)) throw Errors.invalidArg(`label file '${filename}' not found in ${modelPath}`);
  const bytes = readRepositoryFile(path, `label file '${filename}'`, MAX_LABEL_BYTES);
  if (countLines(bytes, maxLabels) > maxLabels) throw tooMany(filename, 'labels', MAX_LABELS);
  return new LabelList(bytes);
}

function tooMany(filename: string, what: string, limit: number) {
  return Errors.invalidArg(`failed to read label file '${filename}': the label files of the model hold more than ${limit} ${what}, over the limit of ${limit} ${what} per model`);
}

/**
 * The labels of every output of `config` that names a `label_filename`, each distinct file read
 * once and shared by the outputs that name it. Refuses (INVALID_ARG) files that together hold
 * more than {@link MAX_LABEL_BYTES} bytes or {@link MAX_LABELS} labels.
 */
export function readModelLabels(modelPath: string, config: ModelConfig): Map<string, Labels> {
  const byFile = new Map<string, LabelList>();
  const out = new Map<string, Labels>();
  let bytes = 0;
  let count = 0;
  for (const o of config.output ?? []) {
    if (!o.label_filename) continue;
    const path = resolveInside(modelPath, o.label_filename);
    let list = byFile.get(path);
    if (!list) {
      list = readLabels(modelPath, o.label_filename, MAX_LABELS - count);
      byFile.set(path, list);
      count += list.length;
      bytes += list.byteLength;
      if (bytes > MAX_LABEL_BYTES) throw tooMany(o.label_filename, 'bytes', MAX_LABEL_BYTES);
    }
    out.set(o.name, list);
  }
  return out;
}
