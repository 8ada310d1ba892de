/**
 * @module `file:<version>/<name>` load overrides: a model's files given in the load request
 * instead of read from the repository. They are written to a private temporary directory that
 * then stands in for the model's directory, and removed when that model is unloaded.
 * Triton: server docs/protocol/extension_model_repository.md ("file:" parameters),
 * core/src/model_repository_manager (temporary override directories)
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize, sep } from 'node:path';
import { Errors, TriodeError } from '../errors.js';

/** The prefix of file override parameter names. */
export const FILE_OVERRIDE_PREFIX = 'file:';

/**
 * Writes the override files of model `name` (keys are paths relative to the model directory,
 * e.g. `1/model.onnx`) and returns the directory that stands in for the model's directory.
 * @throws TriodeError INVALID_ARG for a path that leaves the model directory; INTERNAL
 *   ("failed to poll from model repository") when the files cannot be written.
 */
export function writeOverrideFiles(name: string, files: Readonly<Record<string, Uint8Array>>): string {
  for (const rel of Object.keys(files)) {
    const clean = normalize(rel);
    if (rel === '' || clean.startsWith('..') || clean.startsWith(sep) || clean.split(sep).includes('..')) {
      throw Errors.invalidArg(`failed to load '${name}': invalid file override path '${rel}' (must stay inside the model directory)`);
    }
  }
  const root = mkdtempSync(join(tmpdir(), 'triode-override-'));
  const modelDir = join(root, name);
  try {
    mkdirSync(modelDir);
    for (const [rel, data] of Object.entries(files)) {
      const path = join(modelDir, normalize(rel));
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, data);
    }
  } catch (err) {
    removeOverride(modelDir);
    throw new TriodeError('INTERNAL', `failed to load '${name}': failed to poll from model repository: ${(err as Error).message}`, { cause: err });
  }
  return modelDir;
}

/** Removes an override directory made by `writeOverrideFiles` (given its model directory). */
export function removeOverride(modelDir: string): void {
  rmSync(dirname(modelDir), { recursive: true, force: true });
}

/** Override files as JSON-safe base64 strings (for control messages between processes). */
export function overrideFilesToJson(files: Readonly<Record<string, Uint8Array>>): Record<string, string> {
  return Object.fromEntries(Object.entries(files).map(([k, v]) => [k, Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64')]));
}

/** The inverse of `overrideFilesToJson`. */
export function overrideFilesFromJson(files: Readonly<Record<string, string>>): Record<string, Uint8Array> {
  return Object.fromEntries(Object.entries(files).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]));
}
