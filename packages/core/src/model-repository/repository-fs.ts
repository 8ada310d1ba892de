/**
 * @module The model repository on a local filesystem: models, version folders, config files, labels.
 * Triton: core/src/model_repository_manager/model_repository_manager.cc (Poll), filesystem/api.cc
 */
import { closeSync, constants, existsSync, fstatSync, opendirSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, join, resolve, sep } from 'node:path';
import { Errors, TriodeError } from '../errors.js';
import type { ModelConfig, ModelVersionPolicy } from '../model-config/model-config.js';
import { parsePbtxt } from '../model-config/pbtxt-parser.js';
import { modelNameProblem } from './model-name.js';

/** A model directory found in a repository, or the reason it cannot be used. */
export interface RepositoryModel {
  name: string;
  /** Absolute path of the model directory. */
  path: string;
  /** Set when the model cannot be loaded from the repositories (e.g. found twice). */
  error?: TriodeError;
}

/** Options of `scanRepositories`. */
export interface ScanOptions {
  /**
   * Told of each directory left out because its name is not a usable model name (`modelNameProblem`:
   * a control character, a backslash), with why. @default nothing is told
   */
  onSkip?: (name: string, repository: string, problem: string) => void;
}

/**
 * Lists the models of several repositories. A model name found in more than one repository is
 * returned once, with an error: Triton refuses such a model unless model namespacing is on. A
 * directory whose name the API would refuse as a model name is left out (`onSkip` is told): the
 * name rule keeps control characters out of logs and metric labels, and a model loaded under such
 * a name could never be unloaded.
 */
export function scanRepositories(repositories: readonly string[], options: ScanOptions = {}): Map<string, RepositoryModel> {
  const found = new Map<string, RepositoryModel>();
  for (const repo of repositories) {
    const root = resolve(repo);
    let entries: string[];
    try {
      entries = readdirSync(root);
    } catch (err) {
      throw repositoryUnreadable(repo, err);
    }
    for (const name of entries.sort()) addEntry(found, repo, root, name, options);
  }
  return found;
}

/** How many entries of a repository `scanRepositoriesAsync` looks at between turns of the event loop. */
const SCAN_BATCH = 1000;

/**
 * `scanRepositories`, serving the event loop while it runs (a poll's scan): the repositories are
 * listed off the main thread, and their entries looked at SCAN_BATCH at a time (each is a stat:
 * 100,000 entries held the event loop 330 ms on every poll, review).
 */
export async function scanRepositoriesAsync(repositories: readonly string[], options: ScanOptions = {}): Promise<Map<string, RepositoryModel>> {
  const found = new Map<string, RepositoryModel>();
  for (const repo of repositories) {
    const root = resolve(repo);
    let entries: string[];
    try {
      entries = await readdir(root);
    } catch (err) {
      throw repositoryUnreadable(repo, err);
    }
    entries.sort();
    for (let i = 0; i < entries.length; i++) {
      if (i > 0 && i % SCAN_BATCH === 0) await new Promise((r) => setImmediate(r));
      addEntry(found, repo, root, entries[i]!, options);
    }
  }
  return found;
}

/** Adds the repository entry `name` to `found` when it is a model directory with a usable name (else `onSkip` is told). */
function addEntry(found: Map<string, RepositoryModel>, repo: string, root: string, name: string, options: ScanOptions): void {
  if (name.startsWith('.')) return;
  const path = join(root, name);
  if (!isDir(path)) return;
  const problem = modelNameProblem(name);
  if (problem === undefined) addFound(found, name, root, path);
  else options.onSkip?.(name, repo, problem);
}

/**
 * What `scanRepositories(repositories).get(name)` returns, found with one stat per repository
 * instead of a listing of each: a load looks for one model, and a repository may hold thousands.
 */
export function findInRepositories(repositories: readonly string[], name: string): RepositoryModel | undefined {
  const found = new Map<string, RepositoryModel>();
  for (const repo of repositories) {
    const root = resolve(repo);
    try {
      if (!statSync(root).isDirectory()) throw new Error(`ENOTDIR: not a directory, scandir '${root}'`);
    } catch (err) {
      throw repositoryUnreadable(repo, err);
    }
    if (name.startsWith('.') || modelNameProblem(name) !== undefined) continue;
    const path = join(root, name);
    if (isDir(path)) addFound(found, name, root, path);
  }
  return found.get(name);
}

function repositoryUnreadable(repo: string, err: unknown): TriodeError {
  return Errors.internal(`failed to stat file ${repo}: ${(err as Error).message}`, err);
}

/** Adds a model directory; one already found in another repository gets Triton's refusal. */
function addFound(found: Map<string, RepositoryModel>, name: string, root: string, path: string): void {
  const prev = found.get(name);
  if (prev) {
    prev.error = Errors.invalidArg(
      `model '${name}' is found in multiple model repositories: '${prev.path.slice(0, -name.length - 1)}' and '${root}'`,
    );
  } else {
    found.set(name, { name, path });
  }
}

function isDir(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The most entries a model directory may hold (version folders, config, labels). Each numeric
 * one is looked at, on every load: a model of 100,000 version folders held the event loop 1.2 s
 * a load (review). A real model has a handful.
 */
export const MAX_MODEL_DIR_ENTRIES = 10_000;

/**
 * The names in a model directory, read one at a time and no more than MAX_MODEL_DIR_ENTRIES.
 * @throws TriodeError INVALID_ARG when it holds more
 */
function modelDirEntries(modelPath: string): string[] {
  const dir = opendirSync(modelPath);
  const names: string[] = [];
  try {
    for (let e = dir.readSync(); e !== null; e = dir.readSync()) {
      if (names.length >= MAX_MODEL_DIR_ENTRIES) throw Errors.invalidArg(`the model directory holds more than ${MAX_MODEL_DIR_ENTRIES} entries`);
      names.push(e.name);
    }
  } finally {
    dir.closeSync();
  }
  return names;
}

/**
 * Numeric version folders of a model; names that are not numbers or that start with 0 are ignored.
 * @throws TriodeError INVALID_ARG for a model directory of more than MAX_MODEL_DIR_ENTRIES entries
 */
export function listVersions(modelPath: string): number[] {
  const out: number[] = [];
  for (const name of modelDirEntries(modelPath)) {
    if (!/^[1-9]\d*$/.test(name) || !isDir(join(modelPath, name))) continue;
    const v = Number(name);
    if (Number.isSafeInteger(v)) out.push(v);
  }
  return out.sort((a, b) => a - b);
}

/** The model file names whose presence in a version folder tells a model's backend. */
const BACKEND_FILES = ['model.onnx', 'model.js', 'model.mjs'];

/**
 * Which of BACKEND_FILES are in any version folder (for backend detection). Looked up by name: a
 * version folder is never listed (300,000 files in one took 330 ms of the event loop a load).
 */
export function listVersionFiles(modelPath: string): string[] {
  const names = new Set<string>();
  for (const v of listVersions(modelPath)) {
    for (const f of BACKEND_FILES) if (!names.has(f) && existsSync(join(modelPath, String(v), f))) names.add(f);
    if (names.size === BACKEND_FILES.length) break;
  }
  return [...names];
}

/**
 * The versions a policy selects from those present, ascending: as Triton's VersionsToLoad,
 * `specific` its versions present, `latest` the newest `num_versions` (0, or none given, selects
 * none), anything else (`all`, or a policy naming no kind) every version. No policy: the newest.
 * Triton: core src/model_repository_manager.cc VersionsToLoad
 */
export function selectVersions(available: readonly number[], policy: ModelVersionPolicy | undefined): number[] {
  if (!policy) return available.slice(-1);
  if (policy.specific) {
    const wanted = new Set(policy.specific.versions ?? []);
    return available.filter((v) => wanted.has(v));
  }
  if (policy.latest) {
    const n = policy.latest.num_versions ?? 0;
    return n > 0 ? available.slice(-n) : [];
  }
  return [...available];
}

/** Where a model's config file is: `configs/<name>.pbtxt` when that exists, else `config.pbtxt`. */
export function configPath(modelPath: string, configName?: string): string {
  if (configName) {
    const custom = join(modelPath, 'configs', `${configName}.pbtxt`);
    if (existsSync(custom)) return custom;
  }
  return join(modelPath, 'config.pbtxt');
}

/**
 * Reads and parses a model's config file. Returns `{}` for a missing file when auto-complete
 * may fill it, as Triton does.
 */
export function readModelConfig(modelPath: string, options: { configName?: string; autoComplete: boolean }): ModelConfig {
  const path = configPath(modelPath, options.configName);
  if (!existsSync(path)) {
    if (options.autoComplete) return {};
    throw Errors.invalidArg(`failed to read text proto from ${path}: file does not exist (auto-complete is disabled)`);
  }
  const text = readRepositoryFile(path, `config file '${basename(path)}'`, MAX_CONFIG_BYTES).toString('utf8');
  try {
    return parsePbtxt(text);
  } catch (err) {
    throw Errors.invalidArg(`failed to read text proto from ${path}: ${(err as Error).message}`, );
  }
}

/**
 * Resolves a path given by a config (label file, model file) inside the model directory and
 * refuses anything that would leave it.
 */
export function resolveInside(modelPath: string, relative: string): string {
  const p = resolve(modelPath, relative);
  if (p !== modelPath && !p.startsWith(modelPath + sep)) {
    throw Errors.invalidArg(`path '${relative}' is outside the model directory`);
  }
  return p;
}

/**
 * The largest config a model may have: a file, or a config sent with a load request. Parsing
 * takes tens of times the text's size (a 20 MB config.pbtxt held 1.35 GB; an 80 MB one, or 300 MB
 * sent over gRPC, ended the server out of memory); real configs are a few KB.
 */
export const MAX_CONFIG_BYTES = 1 << 20;

/**
 * Reads a file of a model directory that must be a regular file of at most `maxBytes`: a FIFO
 * (which blocked the event loop in open() for good), a device such as /dev/zero (read until the
 * process aborted out of memory) or an outsized file is refused (INVALID_ARG), before any read.
 */
export function readRepositoryFile(path: string, what: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    // Non-blocking: opening a FIFO must not wait for a writer.
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    throw Errors.invalidArg(`failed to read ${what}: ${(err as NodeJS.ErrnoException).code ?? 'cannot open'}`);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw Errors.invalidArg(`failed to read ${what}: not a regular file`);
    if (st.size > maxBytes) throw Errors.invalidArg(`failed to read ${what}: ${st.size} bytes, over the limit of ${maxBytes}`);
    const buf = Buffer.allocUnsafe(st.size);
    let at = 0;
    // A file that grows while read is read to the size it had (and one that shrinks, to its end).
    while (at < buf.length) {
      const n = readSync(fd, buf, at, buf.length - at, at);
      if (n === 0) break;
      at += n;
    }
    return at === buf.length ? buf : buf.subarray(0, at);
  } finally {
    closeSync(fd);
  }
}
