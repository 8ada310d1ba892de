/**
 * @module Model names. A model name is a directory name in the repository (Triton: a model is
 * `<repo>/<name>/`), so every API that takes one for a load, an unload or a queued job checks it
 * here first: it must never act as a path.
 * Triton: core/src/model_repository_manager.cc (models are repository subdirectories)
 */
import { TriodeError, echo } from '../errors.js';

/** The longest model name in UTF-8 bytes (a directory name on Linux: NAME_MAX). */
export const MAX_MODEL_NAME_BYTES = 255;

/** Why `name` is not a usable model name, or undefined when it is one. */
export function modelNameProblem(name: string): string | undefined {
  if (name.length === 0) return 'the name is empty';
  if (name === '.' || name === '..') return 'the name is a relative directory';
  if (/[/\\]/.test(name)) return 'the name contains a path separator';
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(name)) return 'the name contains a control character';
  if (Buffer.byteLength(name, 'utf8') > MAX_MODEL_NAME_BYTES) return `the name is longer than ${MAX_MODEL_NAME_BYTES} bytes`;
  return undefined;
}

/**
 * Throws INVALID_ARG (HTTP 400, gRPC INVALID_ARGUMENT) unless `name` is a usable model name:
 * not empty, not `.` or `..`, no `/` or `\`, no NUL or control characters, at most 255 UTF-8 bytes.
 * An empty name, and one that is `..` or holds a `/`, get the words Triton's load gives them
 * (core model_repository_manager.cc ValidateModelName); the others Triode's own.
 */
export function checkModelName(name: string): void {
  const problem = modelNameProblem(name);
  if (!problem) return;
  if (name === '') throw new TriodeError('INVALID_ARG', 'model name must not be empty');
  if (name === '..' || name.includes('/')) throw traversal(name);
  throw new TriodeError('INVALID_ARG', `invalid model name '${echo(name)}': ${problem}`);
}

const traversal = (name: string) => new TriodeError('INVALID_ARG', `invalid model name '${echo(name)}', model name must not contain path traversal characters`);

/**
 * What Triton's explicit load refuses beyond `checkModelName` (ValidateModelName, checked after the
 * model control mode): a name of only whitespace, and one holding `..` anywhere (`a..b`). A
 * repository directory so named still loads at start, as in Triton.
 */
export function checkLoadModelName(name: string): void {
  checkModelName(name);
  if (!/[^ \t\n\v\f\r]/.test(name)) throw new TriodeError('INVALID_ARG', 'model name must not contain only whitespace characters');
  if (name.includes('..')) throw traversal(name);
}

/**
 * Orders model names as Triton lists them (a std::set of std::string: by UTF-8 bytes, so 'B'
 * comes before 'a'), for the repository index and statistics. localeCompare put 'a' first.
 */
export function compareModelNames(a: string, b: string): number {
  return a === b ? 0 : Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
