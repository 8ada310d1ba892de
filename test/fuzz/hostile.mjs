// Hostile values shared by the HTTP and gRPC case generators: names, paths, numbers, JSON nodes.
/* global structuredClone */

/** Marker put into names/paths that try to escape the repository; the runner looks for files named with it. */
export const ESCAPE_MARK = 'triode-fuzz-escape';

/** A model name meant to break a path join, a regex, a log line or a key (the escape target carries `tag`). */
export function hostileName(rng, tag) {
  const target = `${ESCAPE_MARK}-${tag}`;
  return rng.pick([
    '', '.', '..', '...', '*', '/', '\\', '%2e%2e', '..%2f..%2f' + target, `../${target}`, `../../${target}`,
    `../../../../../../tmp/${target}`, `/tmp/${target}`, `..\\..\\${target}`, `simple/../${target}`, 'simple/1',
    'simple\u0000', 'sim\u0000ple', 'simple\n', '\r\nX-Injected: 1', 'simple ', ' simple', 'SIMPLE', 'simple%00',
    'a'.repeat(rng.pick([255, 256, 1024, 5000])), '\u202e\u0000\uffff', '\ud800', 'con', 'nul', '__proto__', 'constructor',
    'toString', 'hasOwnProperty', '$(touch /tmp/x)', '`id`', '{{7*7}}', '%s%s%s%n', 'simple;rm', "simple'--", 'ü/ß', '😀',
    'simple', 'simple_string', 'victim', 'ppocr_cls', 'nope',
  ]);
}

/** A path for a `file:` override, a trace file or a log file, often pointing outside the repository. */
export function hostilePath(rng, tag) {
  const target = `${ESCAPE_MARK}-${tag}`;
  return rng.pick([
    `../${target}`, `../../${target}`, `1/../../${target}`, `1/../../../${target}`, `/tmp/${target}`, `//tmp/${target}`,
    `1/./../../${target}`, `1\\..\\..\\${target}`, `1/%2e%2e/%2e%2e/${target}`, `1/model.onnx\u0000/../../${target}`,
    `${'../'.repeat(30)}tmp/${target}`, `1/${'a/'.repeat(200)}x`, '1/model.onnx', '1/', '1', '', '.', '..', '/', '/dev/zero',
    '/proc/self/mem', '/etc/passwd', 'config.pbtxt', '../config.pbtxt', '1/model.onnx/..', `~/${target}`, `$HOME/${target}`,
  ]);
}

/** A number meant to break a size computation. */
export function hostileNumber(rng) {
  return rng.pick([
    -1, 0, 1, -2147483648, 2147483647, 2147483648, 4294967295, 4294967296, 2 ** 53, 2 ** 53 + 2, -(2 ** 63), 2 ** 64,
    1e308, -1e308, 1.5, 0.1, -0.0, 65536, 1e9, 1e12,
  ]);
}

/** A JSON value meant to break a type check (arrays and objects, deep nesting, big strings). */
export function hostileJson(rng) {
  switch (rng.int(0, 13)) {
    case 0: return null;
    case 1: return rng.chance(0.5);
    case 2: return hostileNumber(rng);
    case 3: return '';
    case 4: return 'x'.repeat(rng.pick([300, 5000, 70000]));
    case 5: return [];
    case 6: return {};
    case 7: return nested(rng.pick([50, 500, 1000]));
    case 8: return new Array(rng.pick([17, 1000, 100000])).fill(rng.pick([0, 'a', null, 1.5]));
    // JSON.parse makes "__proto__" an own key, as a server's parser sees it.
    case 9: return JSON.parse('{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}}}');
    case 10: return String(hostileNumber(rng));
    case 11: return '\u0000\u001b[31m\r\n\ud800';
    case 12: return [[1, 2], [3]];
    default: return { length: 1e9, 0: 1 };
  }
}

function nested(depth) {
  let v = [];
  for (let i = 0; i < depth; i++) v = [v];
  return v;
}

/** Every path to a node of a JSON document (arrays sampled), for structured mutations. */
export function jsonPaths(doc, prefix = [], out = []) {
  out.push(prefix);
  if (Array.isArray(doc)) {
    const n = Math.min(doc.length, 4);
    for (let i = 0; i < n; i++) jsonPaths(doc[i], [...prefix, i], out);
  } else if (doc && typeof doc === 'object') {
    for (const k of Object.keys(doc)) jsonPaths(doc[k], [...prefix, k], out);
  }
  return out;
}

/** Applies one structured mutation to (a deep copy of) `doc`. */
export function mutateJson(rng, doc) {
  const copy = structuredClone(doc);
  const paths = jsonPaths(copy).filter((p) => p.length > 0);
  if (paths.length === 0) return hostileJson(rng);
  const path = rng.pick(paths);
  const parent = path.slice(0, -1).reduce((o, k) => o[k], copy);
  const key = path[path.length - 1];
  const op = rng.int(0, 5);
  if (op === 0 && !Array.isArray(parent)) delete parent[key];
  else if (op === 1 && Array.isArray(parent)) parent.push(structuredClone(parent[key]));
  else if (op === 2 && !Array.isArray(parent)) parent[rng.pick(['parameters', 'shape', 'datatype', 'data', 'name', 'id', '__proto__', 'extra'])] = hostileJson(rng);
  else parent[key] = hostileJson(rng);
  return copy;
}

/** Byte-level edits of text (deletions, insertions of JSON punctuation, random bytes). */
export function mutateText(rng, text) {
  const chars = text.split('');
  const edits = rng.int(1, 4);
  for (let e = 0; e < edits; e++) {
    const i = rng.int(0, Math.max(0, chars.length - 1));
    const k = rng.next();
    if (k < 0.33) chars.splice(i, rng.int(1, 8));
    else if (k < 0.66) chars.splice(i, 0, rng.pick('{}[],:"-0123456789eE.x\\'.split('')));
    else chars[i] = String.fromCharCode(rng.int(0, 255));
  }
  return chars.join('');
}
