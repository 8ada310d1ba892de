/**
 * @module `file:<version>/<name>` load overrides: a model's files given in the load request
 * instead of read from the repository. They are written to a private temporary directory (made
 * with mkdtemp) that then stands in for the model's directory, and removed, by the exact path that
 * was created and never a parent, when that model is unloaded or its load fails.
 * Triton: server docs/protocol/extension_model_repository.md ("file:" parameters),
 * core/src/model_repository_manager (temporary override directories, LocalizeRepoAgent)
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, posix } from 'node:path';
import { Errors, TriodeError, echo } from '../errors.js';
import { checkModelName } from './model-name.js';

/** The prefix of file override parameter names. */
export const FILE_OVERRIDE_PREFIX = 'file:';

/** The name prefix of every override directory (the only directories `removeOverride` removes). */
export const OVERRIDE_DIR_PREFIX = 'triode-override-';

/** The longest path component of an override file in UTF-8 bytes (Linux NAME_MAX). */
export const MAX_OVERRIDE_COMPONENT_BYTES = 255;

/**
 * The most override files one load may carry (a model with its weights in one file per tensor has
 * hundreds). Each is a file and maybe directories: 100,000 empty ones in a 2 MB request blocked
 * the server for seconds and used as many inodes.
 */
export const MAX_OVERRIDE_FILES = 10_000;
/** The most components of one override file path (`1/a/b/model.onnx` has 4). */
export const MAX_OVERRIDE_DEPTH = 16;
/**
 * The most directories the override files of one load may need, each directory counted once with
 * its parents (`1/a/b/model.onnx` needs `1`, `1/a` and `1/a/b`). The file and depth limits alone
 * let one ~500 KB request make 150,000 directories, whose removal took 15 s.
 */
export const MAX_OVERRIDE_DIRECTORIES = 1_000;

/** Where `writeOverrideFiles` put a model's files. */
export interface OverrideDirectory {
  /** The directory mkdtemp created: the one thing `removeOverride` removes. */
  root: string;
  /** `<root>/<model name>`: stands in for the model's directory in the repository. */
  modelDir: string;
}

/** Triton's answer when a model's files cannot be found or written. */
export function pollFailure(name: string, cause?: unknown): TriodeError {
  return new TriodeError('INTERNAL', `failed to load '${echo(name)}', failed to poll from model repository`, { cause });
}

/**
 * Why `rel` is not a usable override file path, or undefined when it is one: it must be relative,
 * normalized (no `.`/`..`/empty components, no trailing `/`), use `/` as separator, and hold no
 * control characters.
 */
export function overridePathProblem(rel: string): string | undefined {
  if (rel === '') return 'the path is empty';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(rel)) return 'the path contains a control character';
  if (rel.includes('\\')) return "the path contains '\\' (the separator is '/')";
  if (rel.startsWith('/')) return 'the path is absolute';
  const parts = rel.split('/');
  if (parts.some((p) => p === '' || p === '.' || p === '..') || posix.normalize(rel) !== rel) return 'the path is not normalized (it must stay inside the model directory)';
  return undefined;
}

/**
 * Writes the override files of model `name` (keys are paths relative to the model directory,
 * e.g. `1/model.onnx`) into a new directory made with mkdtemp under the temp directory.
 * @throws TriodeError INVALID_ARG for a bad model name or a path that is not a normalized relative
 *   path; INTERNAL ("failed to load '<m>', failed to poll from model repository", the detail in
 *   `cause`) for a path component over 255 bytes or files that cannot be written. Nothing is left
 *   behind on failure.
 */
export async function writeOverrideFiles(name: string, files: Readonly<Record<string, Uint8Array>>): Promise<OverrideDirectory> {
  checkModelName(name);
  const count = Object.keys(files).length;
  if (count > MAX_OVERRIDE_FILES) throw Errors.invalidArg(`failed to load '${echo(name)}': ${count} file overrides, more than the ${MAX_OVERRIDE_FILES} a load may carry`);
  const dirs = new Set<string>();
  for (const rel of Object.keys(files)) {
    if (rel.split('/').length > MAX_OVERRIDE_DEPTH) throw Errors.invalidArg(`failed to load '${echo(name)}': file override path '${echo(rel)}' is deeper than ${MAX_OVERRIDE_DEPTH} components`);
    const problem = overridePathProblem(rel);
    if (problem) throw Errors.invalidArg(`failed to load '${echo(name)}': invalid file override path '${echo(rel)}': ${problem}`);
    for (let i = rel.lastIndexOf('/'); i > 0 && !dirs.has(rel.slice(0, i)); i = rel.lastIndexOf('/', i - 1)) dirs.add(rel.slice(0, i));
    if (dirs.size > MAX_OVERRIDE_DIRECTORIES) throw Errors.invalidArg(`failed to load '${echo(name)}': the file overrides need more than the ${MAX_OVERRIDE_DIRECTORIES} directories a load may make`);
  }
  for (const rel of Object.keys(files)) {
    if (rel.split('/').some((p) => Buffer.byteLength(p, 'utf8') > MAX_OVERRIDE_COMPONENT_BYTES)) {
      throw pollFailure(name, new Error(`file override path '${echo(rel)}' has a component longer than ${MAX_OVERRIDE_COMPONENT_BYTES} bytes`));
    }
  }
  const root = await mkdtemp(join(tmpdir(), OVERRIDE_DIR_PREFIX));
  const modelDir = join(root, name);
  try {
    await mkdir(modelDir);
    // Every directory below is made here, in a directory only this process created: no symlink
    // can be on the way. 'wx' refuses to write through anything that already exists. Written
    // one by one without blocking the event loop (the server keeps serving meanwhile).
    const made = new Set<string>();
    for (const [rel, data] of Object.entries(files)) {
      const parts = rel.split('/');
      const dir = parts.slice(0, -1).join('/');
      if (dir && !made.has(dir)) {
        await mkdir(join(modelDir, ...parts.slice(0, -1)), { recursive: true });
        made.add(dir);
      }
      await writeFile(join(modelDir, ...parts), data, { flag: 'wx' });
    }
  } catch (err) {
    await removeOverride(root);
    throw pollFailure(name, err);
  }
  return { root, modelDir };
}

/**
 * Removes an override directory made by `writeOverrideFiles`, given its `root`, without blocking
 * the event loop. Anything not named like one (`triode-override-*`) is left alone: this never
 * removes a parent or a repository. Never rejects: a directory that cannot be removed is left
 * (the temp directory's own cleaning gets it).
 */
export async function removeOverride(root: string): Promise<void> {
  if (!basename(root).startsWith(OVERRIDE_DIR_PREFIX)) return;
  await rm(root, { recursive: true, force: true }).catch(() => undefined);
}

/** Override files as JSON-safe base64 strings (for control messages between processes). */
export function overrideFilesToJson(files: Readonly<Record<string, Uint8Array>>): Record<string, string> {
  return Object.fromEntries(Object.entries(files).map(([k, v]) => [k, Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64')]));
}

/** The inverse of `overrideFilesToJson`. */
export function overrideFilesFromJson(files: Readonly<Record<string, string>>): Record<string, Uint8Array> {
  return Object.fromEntries(Object.entries(files).map(([k, v]) => [k, new Uint8Array(Buffer.from(v, 'base64'))]));
}
