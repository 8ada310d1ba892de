// Runs gRPC cases over plain HTTP/2 (node:http2), so the fuzzer controls every frame: it can send
// broken framing, reset streams and end sessions mid-call, which a typed client never does.
import { connect as h2connect, constants } from 'node:http2';
import { connect } from 'node:net';
import { streamResponses } from './grpc-cases.mjs';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** `grpc-message` percent-decoding. */
function decodeMessage(v) {
  try {
    return decodeURIComponent(String(v ?? ''));
  } catch {
    return String(v ?? '');
  }
}

/** One call on `session`: resolves with { grpc, message } from the trailers, or how it ended otherwise. */
function oneCall(session, c, hangMs) {
  return new Promise((resolve) => {
    let done = false;
    let timer;
    let headers = {};
    const finish = (outcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const streaming = c.path.endsWith('/ModelStreamInfer');
    let stream;
    try {
      stream = session.request({
        ':method': 'POST', ':path': c.path, 'content-type': 'application/grpc', te: 'trailers',
        ...(c.timeout ? { 'grpc-timeout': c.timeout } : {}), ...c.headers,
      });
    } catch (err) {
      finish({ clientError: String(err.message) });
      return;
    }
    stream.on('response', (h) => { headers = h; });
    stream.on('trailers', (t) => { headers = { ...headers, ...t }; });
    const chunks = [];
    stream.on('data', (d) => { if (streaming) chunks.push(d); });
    stream.on('error', () => {});
    stream.on('close', () => {
      const code = headers['grpc-status'];
      // Errors of a ModelStreamInfer call travel inside response messages (status stays OK).
      const got = streaming ? streamResponses(Buffer.concat(chunks)) : undefined;
      const inStream = got ? { streamErrors: got.errors, streamResponses: got.count } : {};
      if (code !== undefined) finish({ grpc: Number(code), message: decodeMessage(headers['grpc-message']), httpStatus: headers[':status'], ...inStream });
      else if (headers[':status'] !== undefined && headers[':status'] !== 200) finish({ status: Number(headers[':status']) });
      else finish({ closed: true, rst: stream.rstCode });
    });
    timer = setTimeout(() => {
      finish({ hang: true });
      stream.close(constants.NGHTTP2_CANCEL);
    }, hangMs);
    const abort = c.abort;
    void (async () => {
      if (c.body.byteLength) stream.write(c.body);
      if (!abort) {
        stream.end();
        if (c.cancelAfterMs !== undefined) {
          // Cancel as a client library does: RST_STREAM CANCEL.
          if (c.cancelAfterMs > 0) await sleep(c.cancelAfterMs);
          if (!done) { stream.close(constants.NGHTTP2_CANCEL); finish({ aborted: 'cancel' }); }
        }
        return;
      }
      if (abort.afterMs) await sleep(abort.afterMs);
      if (abort.how === 'rst') stream.close(abort.code);
      else if (abort.how === 'goaway') session.goaway(abort.code);
      else if (abort.how === 'goaway-then-destroy') { session.goaway(abort.code); session.destroy(); }
      else if (abort.how === 'destroy') session.destroy();
      else if (abort.how === 'socket') session[RAW_SOCKET]?.destroy();
      // The client went away: nothing to classify, the server only has to survive it.
      finish({ aborted: abort.how });
    })().catch((err) => finish({ clientError: String(err?.message ?? err) }));
  });
}

/** The TCP socket under a session (http2 forbids touching `session.socket`; the fuzzer keeps its own). */
const RAW_SOCKET = Symbol('raw socket');

function open(port) {
  let raw;
  const session = h2connect(`http://127.0.0.1:${port}`, { createConnection: () => (raw = connect(port, '127.0.0.1')) });
  session[RAW_SOCKET] = raw;
  session.on('error', () => {});
  return session;
}

/** Runs one gRPC case against `port`; resolves with the list of outcomes (one per call). */
export async function grpcExchange(port, c, hangMs) {
  const started = Date.now();
  if (c.kind === 'raw') {
    const s = connect(port, '127.0.0.1');
    await new Promise((resolve) => {
      // A plain timer (socket timeouts do not keep the process alive): the server may just wait.
      const t = setTimeout(() => { s.destroy(); resolve(); }, 500);
      const done = () => { clearTimeout(t); resolve(); };
      s.on('error', done);
      s.on('close', done);
      s.on('connect', () => s.write(c.bytes));
    });
    return { outcomes: [{ closed: true }], ms: Date.now() - started };
  }
  const session = open(port);
  try {
    if (c.kind === 'storm') {
      const outcomes = await Promise.all(c.calls.map((k) => oneCall(session, { path: c.path, body: k.body, headers: {}, timeout: k.timeout, cancelAfterMs: k.cancelAfterMs }, hangMs)));
      return { outcomes, ms: Date.now() - started };
    }
    return { outcomes: [await oneCall(session, c, hangMs)], ms: Date.now() - started };
  } finally {
    if (!session.destroyed) session.close();
    setTimeout(() => session.destroy(), 1000).unref();
  }
}
