/**
 * @module The model repository on a local filesystem: models, version folders, config files, labels.
 * Triton: core/src/model_repository_manager/model_repository_manager.cc (Poll), filesystem/api.cc
 */
import { closeSync, constants, existsSync, fstatSync, opendirSync, openSync, readdirSync, readSync, statSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { basename, join, resolve, sep } from 'node:path';
import { Errors, TriodeError, echo } from '../errors.js';
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
 * The entries of a model directory that are directories (or links to one), read one at a time
 * and no more than MAX_MODEL_DIR_ENTRIES entries in all (files included): a file is told by its
 * entry, only a link is looked at.
 * @throws TriodeError INVALID_ARG when it holds more
 */
function modelSubdirs(modelPath: string): string[] {
  const dir = opendirSync(modelPath);
  const names: string[] = [];
  let entries = 0;
  try {
    for (let e = dir.readSync(); e !== null; e = dir.readSync()) {
      if (++entries > MAX_MODEL_DIR_ENTRIES) throw Errors.invalidArg(`the model directory holds more than ${MAX_MODEL_DIR_ENTRIES} entries`);
      if (e.isDirectory() || (!e.isFile() && isDir(join(modelPath, e.name)))) names.push(e.name);
    }
  } finally {
    dir.closeSync();
  }
  return names;
}

/** Folders of a model directory that are not version folders (Triton: kWarmupDataFolder, kInitialStateFolder, kModelConfigFolder). */
const NOT_VERSION_FOLDERS = new Set(['warmup', 'initial_state', 'configs']);

/** What std::stoll reads: leading white space (isspace), a sign, digits; what follows the digits is ignored. */
const STOLL_PREFIX = /^[ \t\n\v\f\r]*([+-]?)(\d+)/;

/**
 * The version a version folder's name gives, as Triton's VersionsToLoad reads it, or why it is
 * ignored (Triton's warning): a name of more than one character that starts with 0 is ignored;
 * any other is read as std::stoll reads it, leading white space, a sign and what follows the
 * digits taken (`" 3"` and `"+3"` are version 3, so are `"3.0"` and `"3e2"`, `"-1"` is version
 * -1), and one with no digits to read is ignored. The version's files are then read from the
 * folder its number names (`3/`), as Triton does. A version past 2^53 - 1 is ignored too (Triton
 * takes it up to 2^63 - 1, and past that std::stoll's out_of_range is not caught).
 */
export function versionOfFolder(name: string): { version: number } | { ignored: string } {
  if (name.length > 1 && name.startsWith('0')) return { ignored: `ignore version directory '${echo(name)}' which contains leading zeros in its directory name` };
  const m = STOLL_PREFIX.exec(name);
  if (!m) return { ignored: `ignore version directory '${echo(name)}' which fails to convert to integral number` };
  const digits = m[2]!.replace(/^0+(?=\d)/, '');
  const v = digits.length > 16 ? Number.POSITIVE_INFINITY : Number(digits);
  if (!Number.isSafeInteger(v)) return { ignored: `ignore version directory '${echo(name)}' whose number is past ${Number.MAX_SAFE_INTEGER}, the largest version Triode takes` };
  return { version: m[1] === '-' ? -v || 0 : v };
}

/**
 * A model's versions, ascending: each folder of the model directory read as Triton's
 * VersionsToLoad does (`versionOfFolder`), `warmup`, `initial_state` and `configs` left out.
 * `onIgnored` is told Triton's warning for each folder that gives no version.
 * @throws TriodeError INVALID_ARG for a model directory of more than MAX_MODEL_DIR_ENTRIES entries
 */
export function listVersions(modelPath: string, onIgnored?: (warning: string) => void): number[] {
  const out = new Set<number>();
  for (const name of modelSubdirs(modelPath)) {
    if (NOT_VERSION_FOLDERS.has(name)) continue;
    const read = versionOfFolder(name);
    if ('version' in read) out.add(read.version);
    else onIgnored?.(read.ignored);
  }
  return [...out].sort((a, b) => a - b);
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
