// What counts as a failure in a fuzz outcome: a 5xx (or gRPC INTERNAL/UNKNOWN) without a cause, a
// leak (JS internals, stack lines, the server's own absolute paths, long echoes), a hang, a drop.

/** Messages that only a bug produces: JS engine errors and stack fragments. */
const JS_INTERNALS = [
  /Cannot read propert/, /Cannot set propert/, /is not a function/, /is not defined/, /is not iterable/, /Invalid string length/,
  /Maximum call stack/, /Invalid array length/, /Invalid typed array length/, /Array buffer allocation failed/, /ERR_[A-Z_]{4,}/,
  /\n\s*at \S/, /^\s*at \S+ \(/m, /node:internal/, /file:\/\//, /node_modules/, /\.m?[jt]s:\d+:\d+/,
];

/** Absolute paths of this machine that a client did not send (the server's repository, code, temp files). */
const ABS_PATH = /(?:^|[\s'"`(:=[])(\/(?:work|tmp|home|root|usr|opt|var|srv|mnt|proc|etc)\/[^\s'"`)\]]*)/g;

/** Most characters an error may repeat from the request (two echo() cuts of 256 plus wording). */
export const MAX_ECHO = 600;
/** Longest error message tolerated at all. */
export const MAX_MESSAGE = 4096;

const GRPC_NAMES = ['OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS', 'UNAUTHENTICATED'];

/** The tally key of one outcome ("http 400", "grpc INVALID_ARGUMENT", "closed", "hang", ...). */
export function statusKey(protocol, o) {
  if (o.hang) return `${protocol} hang`;
  if (o.aborted) return `${protocol} client-aborted`;
  if (o.grpc !== undefined) return `grpc ${GRPC_NAMES[o.grpc] ?? o.grpc}`;
  if (o.status !== undefined) return `${protocol} ${o.status}${o.truncated ? ' (cut)' : ''}`;
  if (o.clientError) return `${protocol} client-error`;
  return `${protocol} closed`;
}

/** The error message of an outcome: the JSON body's "error", the raw body, or grpc-message. */
export function messageOf(o) {
  if (o.message !== undefined) return o.message;
  if (typeof o.body !== 'string') return '';
  try {
    const doc = JSON.parse(o.body);
    return typeof doc?.error === 'string' ? doc.error : o.body;
  } catch {
    return o.body;
  }
}

/** Characters of `message` covered by 48-char windows that occur verbatim in `request`. */
function echoedChars(message, request) {
  let covered = 0;
  let until = 0;
  for (let i = 0; i + 48 <= message.length; i += 8) {
    if (request.includes(message.slice(i, i + 48))) {
      covered += Math.min(48, i + 48 - Math.max(until, i));
      until = i + 48;
    }
  }
  return covered;
}

/** Why `message` leaks, or undefined. `secrets` are server paths no client knows (repository, code). */
export function leakOf(message, request, secrets) {
  for (const re of JS_INTERNALS) if (re.test(message) && !re.test(request)) return `JS internals (${re.source})`;
  for (const s of secrets) if (s && message.includes(s) && !request.includes(s)) return `a server path (${s})`;
  for (const m of message.matchAll(ABS_PATH)) if (!request.includes(m[1])) return `an absolute path (${m[1].slice(0, 80)})`;
  if (message.length > MAX_MESSAGE) return `a ${message.length}-char message`;
  if (message.length > MAX_ECHO) {
    const echoed = echoedChars(message, request);
    if (echoed > MAX_ECHO) return `${echoed} chars echoed from the request`;
  }
  return undefined;
}

/** A 5xx (or gRPC 5xx-like status) is explained only by a deliberate Triton status. */
function causeOf5xx(httpStatus, message) {
  if (httpStatus === 503 || httpStatus === 501) return true;
  // A model that fails to load, or whose execution rejects the input ("onnx runtime error",
  // Triton's onnxruntime backend wording), is a deliberate 500 in Triton.
  return httpStatus === 500 && /failed to load|failed to poll|^onnx runtime error/i.test(message);
}

/**
 * Findings for one outcome of case `c`: { type: 'unexplained-5xx' | 'explained-5xx' | 'leak' | 'hang' | 'drop', detail }
 * (an explained 5xx is not a failure; the summary lists them so a reader can judge the causes).
 * `request` is the request's text (for echo checks).
 */
export function classify(c, o, request, secrets) {
  const out = [];
  if (o.hang) return [{ type: 'hang', detail: `no answer or close within the bound${o.partial ? `; got ${JSON.stringify(o.partial.slice(0, 120))}` : ''}` }];
  if (o.aborted) return out;
  const message = messageOf(o);
  if (o.grpc !== undefined) {
    const code = o.grpc;
    // INTERNAL is Triton's (gRPC C++'s) answer to bytes that do not parse; anything else 5xx-like needs a cause.
    if (code === 2 || code === 13 || code === 15) {
      const explained = (code === 13 && c.badBytes) || causeOf5xx(500, message);
      out.push({ type: explained ? 'explained-5xx' : 'unexplained-5xx', detail: `grpc ${GRPC_NAMES[code]}: ${JSON.stringify(message.slice(0, 300))}` });
    }
  } else if (o.status !== undefined && o.status >= 500) {
    out.push({ type: causeOf5xx(o.status, message) ? 'explained-5xx' : 'unexplained-5xx', detail: `HTTP ${o.status}: ${JSON.stringify(message.slice(0, 300))}` });
  }
  const failed = (o.grpc !== undefined && o.grpc !== 0) || (o.status !== undefined && o.status >= 400);
  for (const m of [...(failed ? [message] : []), ...(o.streamErrors ?? [])]) {
    const leak = leakOf(m, request, secrets);
    if (leak) out.push({ type: 'leak', detail: `${leak}: ${JSON.stringify(m.slice(0, 300))}` });
  }
  if (o.grpc === 0 && c.expectResponses !== undefined && (o.streamResponses ?? 0) < c.expectResponses) {
    out.push({ type: 'drop', detail: `ModelStreamInfer ended OK but answered ${o.streamResponses ?? 0} of ${c.expectResponses} requests` });
  }
  if (o.closed && !c.mayClose && !c.badBytes && c.kind !== 'raw') out.push({ type: 'drop', detail: `connection or stream closed without an answer${o.rst !== undefined ? ` (RST_STREAM ${o.rst})` : ''}` });
  return out;
}
