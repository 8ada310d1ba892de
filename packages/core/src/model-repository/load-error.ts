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
 * "load failed for model '<m>': <why>".
 */
export function loadFailed(name: string, why: string, code: TriodeError['code'] = 'INVALID_ARG'): TriodeError {
  return new TriodeError(code, `load failed for model '${echo(name)}': ${why}`);
}
