/**
 * @module Load failures as clients see them: Triton's codes and wording, with no absolute paths
 * and no stack fragments (the full detail goes to the log).
 * Triton: core/src/model_repository_manager/model_repository_manager.cc (LoadUnloadModel)
 */
import { TriodeError, echo } from '../errors.js';

/**
 * An absolute path (or file URL) that starts a word or follows a colon: `/a/b/c.js`, `file:///a/b`,
 * `/a/b:12:5`, onnxruntime's `failed:/onnxruntime_src/...`; not a URL's `//` after its scheme.
 */
const ABSOLUTE_PATH = /(?<=^|[\s'"`(=[:])(?:file:\/\/)?\/(?!\/)(?:[^\s'"`:,;()<>[\]/]+\/)*([^\s'"`:,;()<>[\]/]*)/g;

/**
 * A load failure's message fit for a client: stack lines dropped, the given directories (the
 * repositories, an override directory) cut so paths read relative to them, and any other absolute
 * path reduced to its last component.
 */
export function clientLoadMessage(message: string, dirs: readonly string[] = []): string {
  let s = message.split('\n').filter((line) => !/^\s*at\s/.test(line)).join(' ').trim();
  for (const d of [...dirs].filter((x) => x.length > 1).sort((a, b) => b.length - a.length)) {
    s = s.split(`file://${d}/`).join('').split(`${d}/`).join('').split(d).join('.');
  }
  return s.replace(ABSOLUTE_PATH, (_m, last: string) => last || '/');
}

/**
 * Triton's answer to a load whose model failed to load (every version, or its config): INVALID_ARG
 * "load failed for model '<m>': <why>\n", the line ending included (LoadUnloadModels ends each
 * model's line with one). The reason alone is kept as `why` (an ensemble's failure names it).
 */
export function loadFailed(name: string, why: string, code: TriodeError['code'] = 'INVALID_ARG'): TriodeError {
  return Object.assign(new TriodeError(code, `load failed for model '${echo(name)}': ${why}\n`), { [LOAD_FAILURE_REASON]: why });
}

const LOAD_FAILURE_REASON = Symbol('load failure reason');

/**
 * Why a load failed, as Triton's lifecycle reports it to the model repository manager: the reason
 * of a `loadFailed` error without its "load failed for model" line, or the error's message.
 */
export function loadFailureReason(err: unknown): string {
  const why = (err as { [LOAD_FAILURE_REASON]?: unknown } | null)?.[LOAD_FAILURE_REASON];
  return typeof why === 'string' ? why : err instanceof Error ? err.message : String(err);
}

/**
 * The error a failed model shows (its index reason, its not-ready text): a `loadFailed` error's
 * reason alone, with its code (Triton's node status has no "load failed for model" line), or the
 * error as it is.
 */
export function failureOfModel(err: unknown): unknown {
  const why = (err as { [LOAD_FAILURE_REASON]?: unknown } | null)?.[LOAD_FAILURE_REASON];
  return typeof why === 'string' && err instanceof TriodeError ? new TriodeError(err.code, why) : err;
}

/** Triton's names of the error codes, as its Status::AsString writes them (common src/error.cc Error::CodeString). */
const CODE_STRINGS: Record<TriodeError['code'], string> = {
  UNKNOWN: 'Unknown', INTERNAL: 'Internal', NOT_FOUND: 'Not found', INVALID_ARG: 'Invalid argument',
  UNAVAILABLE: 'Unavailable', UNSUPPORTED: 'Unsupported', ALREADY_EXISTS: 'Already exists', CANCELLED: '<invalid code>',
};

/**
 * A failed version's reason as Triton keeps it (model_lifecycle.cc CreateModel: the status's
 * AsString): "<Code>: <message>", e.g. "Internal: onnx runtime error ...".
 */
export function statusString(code: TriodeError['code'], message: string): string {
  return `${CODE_STRINGS[code] ?? '<invalid code>'}: ${message}`;
}
