/**
 * @module The gRPC frontend's HTTP/2 front door (issue #14): every stream and session of the
 * server, fast path and grpc-js alike, passes here first. Transport errors (RST_STREAM, GOAWAY,
 * destroyed sessions and sockets) are handled and logged, never thrown; a connection whose client
 * resets streams faster than a token bucket allows is closed with GOAWAY ENHANCE_YOUR_CALM (the
 * HTTP/2 rapid-reset defence of nghttp2, Go and Envoy after CVE-2023-44487); restricted protocols
 * are refused from the request headers alone, before a byte of the message is read; a connection
 * whose client never completes the HTTP/2 handshake is closed (handshake-timeout.ts). Compressed
 * messages (grpc-encoding gzip or deflate) are inflated here, each to at most its RPC's limit, and
 * handed to grpc-js uncompressed: grpc-js inflated them itself up to the server's receive limit
 * (2 GiB), so 2 MB of gzip to a control call held 4 GB before its 64 KiB limit was checked (review).
 * What they inflate to counts against the server's DecompressionBudget until their call ends (a
 * ModelStreamInfer message's: until its request ends, see inflatedMessages).
 */
import type { EventEmitter } from 'node:events';
import { constants, type Http2Session, type IncomingHttpHeaders, type ServerHttp2Stream } from 'node:http2';
import { constants as bufferConstants } from 'node:buffer';
import { TriodeError, type Logger } from '@triode/core';
import { inflateCounted, type DecompressionBudget, type DecompressionHold } from '../decompression-budget.js';
import { GRPC_STATUS, clientMessage, encodeGrpcMessage } from './grpc-status.js';
import { responseStallGuard, type ResponseStallGuard } from './response-stall.js';
import { requestStallGuard, type RequestStallGuard } from './request-stall.js';
import { handshakeGuard } from './handshake-timeout.js';
import { grpcJsTimeout, grpcTimeoutMs } from './grpc-timeout.js';

/** The stall guards of a server's calls, for the fast path to track its calls with. */
export interface StallGuards {
  request: RequestStallGuard;
  response: ResponseStallGuard;
}

/** Client stream resets a connection may make: a burst, refilled at a steady rate. */
export interface ResetBudget {
  // nghttp2 (1.57+, in Node) has a budget of its own, 1000 at once and 33/s, past which it ends the
  // connection with GOAWAY INTERNAL_ERROR: this one is meant to be tighter, so a client is told why.
  /** Resets allowed at once (the bucket's size). */
  burst: number;
  /** Resets per second the bucket refills with. */
  perSecond: number;
}

/** What the front door needs from the server. */
export interface StreamFrontOptions {
  resets: ResetBudget;
  logger: Logger;
  /** Throws (UNAVAILABLE) when `rpc` is restricted and the headers lack its key/value. */
  guard: (rpc: string, headers: IncomingHttpHeaders) => void;
  /** Takes the stream (and answers it) when the fast path serves it: returns true then. */
  fastPath?: (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, stalls: StallGuards) => boolean;
  /** The most bytes a message of `rpc` ('' for an unknown path) may inflate to. */
  inflateLimit: (rpc: string) => InflateLimit;
  /** Where compressed messages count what they inflate to, until their call (or request) ends. */
  decompression: DecompressionBudget;
  /**
   * Bytes a compressed message of `rpc`, inflated, will take once decoded beyond its own (a
   * ModelInfer request's typed contents: a byte on the wire each, up to 8 as a tensor); counted
   * with them. @default none
   */
  decodedBytes?: (rpc: string, message: Buffer) => number;
  /** A stream whose answer sends nothing for this long is reset (response-stall.ts). */
  responseStallTimeoutMs: number;
  /** A call whose unfinished request receives nothing for this long is cancelled (request-stall.ts). */
  requestStallTimeoutMs: number;
  /** A connection whose client sends no HTTP/2 SETTINGS for this long is closed (handshake-timeout.ts). */
  handshakeTimeoutMs: number;
  /**
   * The most bytes of a call's request headers (headerListBytes): a call over it is refused
   * RESOURCE_EXHAUSTED. node:http2 enforces the server's SETTINGS_MAX_HEADER_LIST_SIZE only once
   * the client has acknowledged it, and a client that never does was held to 64 KiB (review).
   */
  maxMetadataBytes: number;
}

/**
 * A message of a compressed ModelStreamInfer stream as the front door handed it to grpc-js, for
 * the stream's reader to take over, in order, as grpc-js hands it the decoded message.
 */
export interface InflatedMessage {
  /** What it holds of the budget (none: it came uncompressed): released when its request ends. */
  readonly hold?: DecompressionHold;
  /** The budget refused it: grpc-js was handed an empty message in its place, to be answered with this. */
  readonly refused?: TriodeError;
}

/** A message that came uncompressed: nothing held. */
const PLAIN: InflatedMessage = Object.freeze({});

/** Compressed ModelStreamInfer streams: their messages handed to grpc-js and not yet taken. */
const INFLATED = new WeakMap<object, InflatedMessage[]>();

/**
 * The messages of a compressed ModelStreamInfer stream (its HTTP/2 stream) handed to grpc-js and
 * not yet taken by its reader, oldest first: the reader shifts one per message grpc-js gives it,
 * and from then on releases its hold when the message's request ends. What is still here when
 * the stream closes is released by the front door. Undefined for a stream sent uncompressed.
 */
export function inflatedMessages(stream: object): InflatedMessage[] | undefined {
  return INFLATED.get(stream);
}

/** How far a compressed message of an RPC may inflate. */
export interface InflateLimit {
  bytes: number;
  /** A control call's limit (its refusal says so); otherwise the server's message limit. */
  control: boolean;
}

const GRPC_STATUS_DEADLINE_EXCEEDED = 4;

/** The RPC's method name from `:path` (`/package.Service/Method`); '' for anything else. */
export function rpcOf(path: unknown): string {
  if (typeof path !== 'string') return '';
  const m = /^\/(?:inference\.GRPCInferenceService|grpc\.health\.v1\.Health)\/([A-Za-z]+)$/.exec(path);
  return m ? m[1]! : '';
}

/**
 * Answers a stream with a status only (a "trailers-only" response) and stops reading it: the
 * stream is closed (RST_STREAM NO_ERROR once the answer is out), so a client still sending a
 * message is not read further. Safe on a stream that is already closed.
 */
export function refuse(stream: ServerHttp2Stream, code: number, message: string): void {
  try {
    if (!stream.destroyed && !stream.closed && !stream.headersSent) {
      stream.respond({
        ':status': 200, 'content-type': 'application/grpc+proto',
        'grpc-status': String(code), 'grpc-message': encodeGrpcMessage(message),
      }, { endStream: true });
    }
    if (!stream.closed) stream.close(constants.NGHTTP2_NO_ERROR);
  } catch {
    // the stream or its session went away meanwhile: nobody is left to answer
  }
}

/**
 * The size of a request's header list as HTTP/2 counts it (SETTINGS_MAX_HEADER_LIST_SIZE): each
 * field's name and value, plus 32, from the 'stream' event's raw headers (name, value, ...).
 */
export function headerListBytes(rawHeaders: readonly string[]): number {
  let n = 0;
  for (const field of rawHeaders) n += field.length;
  return n + 16 * rawHeaders.length;
}

/** The token bucket of one connection's client resets. */
class ResetBucket {
  #tokens: number;
  #at = Date.now();

  constructor(readonly budget: ResetBudget) {
    this.#tokens = budget.burst;
  }

  /** Counts one reset; false once the budget is spent. */
  take(): boolean {
    const now = Date.now();
    this.#tokens = Math.min(this.budget.burst, this.#tokens + ((now - this.#at) * this.budget.perSecond) / 1000);
    this.#at = now;
    this.#tokens -= 1;
    return this.#tokens >= 0;
  }
}

/**
 * Puts the front door on each of grpc-js's HTTP/2 servers: it sees every session and stream
 * first, then hands ModelInfer calls it may take to the fast path and everything else to grpc-js's
 * own 'stream' handlers, unchanged.
 */
export function installStreamFront(http2Servers: Iterable<EventEmitter>, opts: StreamFrontOptions): { close(): void } {
  const { logger } = opts;
  const stalls = responseStallGuard(opts.responseStallTimeoutMs, logger);
  const stalledRequests = requestStallGuard(opts.requestStallTimeoutMs, logger, refuse);
  const guards: StallGuards = { request: stalledRequests, response: stalls };
  const handshakes = handshakeGuard(opts.handshakeTimeoutMs, logger);
  const buckets = new WeakMap<Http2Session, ResetBucket>();
  /** Connections being closed for too many resets: streams still arriving on them are refused. */
  const calmed = new WeakSet<Http2Session>();
  const onSessionError = (err: Error) => logger.verbose(1, `gRPC connection error: ${err.message}`);
  const onStreamError = (err: Error) => logger.verbose(2, `gRPC stream error: ${err.message}`);

  /**
   * A stream aborted before its answer: when its client reset it (not a dying connection), it
   * spends budget. 'aborted' comes as nghttp2 reads the RST_STREAM, before the next frame of the
   * same read, so the budget is counted as fast as the client resets.
   */
  const onStreamAborted = (stream: ServerHttp2Stream): void => {
    const session = stream.session;
    if (stream.rstCode === undefined || stream.rstCode === constants.NGHTTP2_NO_ERROR || stalls.resetHere(stream)) return;
    if (!session || session.destroyed) return;
    const bucket = buckets.get(session);
    if (!bucket || bucket.take()) return;
    buckets.delete(session);
    calmed.add(session);
    const peer = `${session.socket?.remoteAddress ?? '?'}:${session.socket?.remotePort ?? '?'}`;
    logger.warning(`gRPC client ${peer} reset more than ${bucket.budget.burst} streams at once (${bucket.budget.perSecond}/s allowed): connection closed with GOAWAY ENHANCE_YOUR_CALM`);
    try {
      // (With no error given, Node's destroy() takes its default error, 0, as the code: NO_ERROR.)
      session.destroy(new Error('too many stream resets'), constants.NGHTTP2_ENHANCE_YOUR_CALM);
    } catch {
      // already going away
    }
  };

  for (const h2 of http2Servers) {
    const grpcHandlers = h2.listeners('stream') as ((stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number) => void)[];
    h2.removeAllListeners('stream');
    // First: it marks each socket as accepted, which the handshake guard reads (socketOf).
    stalls.watchServer(h2);
    h2.on('session', (session: Http2Session) => {
      session.on('error', onSessionError);
      buckets.set(session, new ResetBucket(opts.resets));
      handshakes.watch(session);
    });
    h2.on('stream', (stream: ServerHttp2Stream, headers: IncomingHttpHeaders, flags: number, rawHeaders: string[] | undefined) => {
      // Persistent: grpc-js listens with once('error') and the fast path has none of its own.
      stream.on('error', onStreamError);
      stream.once('aborted', () => onStreamAborted(stream));
      if (stream.session && calmed.has(stream.session)) {
        try {
          stream.close(constants.NGHTTP2_REFUSED_STREAM);
        } catch {
          // already gone with its connection
        }
        return;
      }
      // gRPC C++'s refusal, in its words: the stream closes, and what its headers held goes with it.
      // Counted only while the client has not acknowledged the SETTINGS: after that node:http2
      // enforces the limit itself, before the headers reach JavaScript.
      const metadataBytes = rawHeaders && stream.session?.pendingSettingsAck === true ? headerListBytes(rawHeaders) : 0;
      if (metadataBytes > opts.maxMetadataBytes) {
        refuse(stream, RESOURCE_EXHAUSTED, `received metadata size exceeds hard limit (${metadataBytes} vs. ${opts.maxMetadataBytes})`);
        return;
      }
      // A grpc-timeout of zero is a deadline that passed as the call arrived: gRPC C++ (Triton's
      // server) cancels the call before its handler can answer. grpc-js and the fast path set a
      // 0 ms timer, which a call answered without waiting (ServerLive) beat: OK (review).
      const timeout = grpcTimeoutMs(headers['grpc-timeout']);
      if (timeout === 0) {
        refuse(stream, GRPC_STATUS_DEADLINE_EXCEEDED, 'Deadline Exceeded');
        return;
      }
      const rpc = rpcOf(headers[':path']);
      if (rpc) {
        try {
          opts.guard(rpc, headers);
        } catch (err) {
          const e = TriodeError.from(err);
          refuse(stream, GRPC_STATUS[e.code], clientMessage(e));
          return;
        }
      }
      try {
        // The fast path tracks its calls' stalls itself (with no wrapper on the stream).
        if (opts.fastPath?.(stream, headers, guards)) return;
        stalls.watch(stream);
        // grpc-js gets the deadline gRPC C++ would set, in words it reads right (grpc-timeout.ts).
        // Malformed (undefined) is no deadline too, as on the fast path: grpc-js refused some such
        // values INTERNAL and found a deadline in others ("100mm", "x5S": its pattern is not anchored).
        if (timeout === undefined || timeout === Infinity) delete headers['grpc-timeout'];
        else headers['grpc-timeout'] = grpcJsTimeout(timeout);
        const encoding = headers['grpc-encoding'];
        const limit = opts.inflateLimit(rpc);
        if (encoding === 'gzip' || encoding === 'deflate') inflateInFront(stream, encoding, rpc, limit, opts);
        if (limit.control) refuseOversizedInFront(stream, rpc, limit.bytes, encoding === 'gzip' || encoding === 'deflate');
        if (!limit.control) sizeRefusalInGrpcWords(stream);
        // Outermost: it sees the bytes as they came, before the front door's other wrappers.
        stalledRequests.watch(stream, rpc);
        for (const handler of grpcHandlers) handler.call(h2, stream, headers, flags);
      } catch (err) {
        // A throw here would reach nghttp2's callback and end the process: this call alone fails.
        logger.warning(`gRPC call failed to start: ${err instanceof Error && err.stack ? err.stack : String(err)}`);
        refuse(stream, GRPC_STATUS.INTERNAL, 'internal error: the call could not be started');
      }
    });
  }
  return {
    close: () => {
      stalls.close();
      stalledRequests.close();
      handshakes.close();
    },
  };
}

/** grpc-js's text for a received message over the limit, as it sends it (encodeURI'd grpc-message). */
const GRPC_JS_TOO_LARGE = /^(Received%20message%20larger%20than%20max%20\(\d+%20vs)(%20\d+\))$/;

/**
 * Words grpc-js's refusal of an uncompressed message over the limit as gRPC C++ (Triton, and
 * Triode's fast path) does: "Received message larger than max (5185 vs. 4096)"; grpc-js writes
 * "(5185 vs 4096)", and a client matching Triton's text missed it on ModelStreamInfer (review).
 * grpc-js sends its status in the response headers (trailers-only) or in trailers, each once per
 * call: both pass here, so the cost is two wrappers a call, not a look at each message.
 */
function sizeRefusalInGrpcWords(stream: ServerHttp2Stream): void {
  const reword = <H>(headers: H): H => {
    const m = (headers as Record<string, unknown> | undefined)?.['grpc-message'];
    if (typeof m === 'string' && m.startsWith('Received%20message%20larger')) {
      (headers as Record<string, unknown>)['grpc-message'] = m.replace(GRPC_JS_TOO_LARGE, '$1.$2');
    }
    return headers;
  };
  const respond = stream.respond;
  const sendTrailers = stream.sendTrailers;
  stream.respond = function (this: ServerHttp2Stream, headers, options) {
    return respond.call(this, reword(headers), options);
  } as ServerHttp2Stream['respond'];
  stream.sendTrailers = function (this: ServerHttp2Stream, headers) {
    return sendTrailers.call(this, reword(headers));
  } as ServerHttp2Stream['sendTrailers'];
}

/** gRPC's message prefix: a compressed flag byte and a 4-byte big-endian length. */
const PREFIX_BYTES = 5;
const RESOURCE_EXHAUSTED = 8;
/** An empty message (flag 0, length 0): what grpc-js is handed for a stream message the budget refused. */
const EMPTY_MESSAGE = Buffer.alloc(PREFIX_BYTES);

type Emit = (event: string | symbol, ...args: unknown[]) => boolean;

/**
 * Inflates the compressed messages of a stream grpc-js is about to read, each to at most
 * `limit.bytes` (zlib's maxOutputLength stops inflating there), and hands grpc-js the messages
 * uncompressed (flag 0: grpc-js then inflates nothing). A message past the limit, or announcing
 * more compressed bytes than could inflate to it, ends the call RESOURCE_EXHAUSTED; one that does
 * not inflate, INTERNAL (grpc-js's words). Uncompressed messages pass as they come.
 *
 * What a message inflates to counts against the budget as zlib produces it (and, once inflated,
 * what it will take decoded beyond that: `opts.decodedBytes`), and stays counted until
 * the stream closes, except on ModelStreamInfer, whose reader takes each message's hold over
 * (inflatedMessages) and releases it when its request ends. Past the budget a message is refused
 * before it inflates further (what it took goes back): the call ends UNAVAILABLE, or, on
 * ModelStreamInfer, grpc-js gets an empty message in its place, which the reader answers in-band
 * with the refusal (the stream goes on, as for any request that fails).
 *
 * It sits between the stream and grpc-js through the stream's own emit, pause and resume (set on
 * this stream only): 'data' and 'end' go through the message framing below, and while a message
 * inflates (in zlib's thread pool) the stream is paused, whatever grpc-js asked, so what the
 * client sends meanwhile waits in HTTP/2's flow-control window, not here.
 */
function inflateInFront(stream: ServerHttp2Stream, encoding: 'gzip' | 'deflate', rpc: string, limit: InflateLimit, opts: StreamFrontOptions): void {
  const budget = opts.decompression;
  const emit = stream.emit as Emit;
  const pass = (event: string, chunk?: Buffer): void => {
    if (chunk === undefined) emit.call(stream, event);
    else emit.call(stream, event, chunk);
  };
  const pause = stream.pause;
  const resume = stream.resume;
  // A deflate stream of stored blocks grows its input by 5 bytes per 16 KiB, the wrappers by 18.
  const maxCompressed = limit.bytes + Math.ceil(limit.bytes / 1024) + 1024;
  const what = rpc || 'gRPC';
  let mode: 'prefix' | 'plain' | 'compressed' = 'prefix';
  let prefix: Buffer = Buffer.alloc(0);
  /** Bytes of the current message still to come. */
  let remaining = 0;
  let compressed: Buffer[] = [];
  let failed = false;
  let busy = false;
  /** What grpc-js last asked for: paused or flowing. */
  let grpcPaused = false;
  /** Chunks (and null for the end) that came while a message inflated, in order. */
  const backlog: (Buffer | null)[] = [];
  /** A stream's refusal goes in-band: its other requests go on. */
  const inBand = rpc === 'ModelStreamInfer';
  /** Messages handed to grpc-js whose holds the front door still owns (a stream's reader takes them). */
  const handed: InflatedMessage[] = [];
  if (inBand) INFLATED.set(stream, handed);
  /** The hold of the message inflating now. */
  let inflating: DecompressionHold | undefined;
  // Reset, GOAWAY, answered: whatever the call's messages still hold goes back (exactly once:
  // a hold taken over by the stream's reader is no longer here, and release() does nothing twice).
  stream.once('close', () => {
    inflating?.release();
    for (const m of handed.splice(0)) m.hold?.release();
  });

  const fail = (code: number, message: string): void => {
    if (failed) return;
    failed = true;
    backlog.length = 0;
    compressed = [];
    if (!stream.headersSent) {
      refuse(stream, code, message);
      return;
    }
    // A stream that has answered already: its status can no longer lead. ENHANCE_YOUR_CALM is
    // RESOURCE_EXHAUSTED to gRPC clients.
    try {
      if (!stream.closed) stream.close(code === RESOURCE_EXHAUSTED ? constants.NGHTTP2_ENHANCE_YOUR_CALM : constants.NGHTTP2_INTERNAL_ERROR);
    } catch {
      // already gone
    }
  };

  // Whatever the framing throws fails this call alone: it runs in the stream's read path, where a
  // throw would reach the process.
  const guarded = (f: () => void): void => {
    try {
      f();
    } catch {
      fail(GRPC_STATUS.INTERNAL, 'Failed to decompress message');
    }
  };

  const inflateMessage = (): void => {
    busy = true;
    pause.call(stream);
    const body = compressed.length === 1 ? compressed[0]! : Buffer.concat(compressed);
    compressed = [];
    mode = 'prefix';
    const hold = budget.hold();
    inflating = hold;
    const done = (err: Error | null, out: Buffer): void => {
      busy = false;
      inflating = undefined;
      if (failed || stream.destroyed || stream.closed) {
        backlog.length = 0;
        hold.release();
        return;
      }
      let refused = err instanceof TriodeError ? err : undefined;
      const decoded = err ? 0 : opts.decodedBytes?.(rpc, out) ?? 0;
      if (decoded > 0 && !hold.take(decoded)) {
        hold.release();
        refused = budget.refusal();
      }
      if (refused && inBand) {
        // Past the budget: the stream's reader answers it in-band, in its place among the others.
        handed.push({ refused });
        pass('data', EMPTY_MESSAGE);
      } else if (refused) {
        fail(GRPC_STATUS[refused.code], refused.message);
        return;
      } else if (err) {
        if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
          fail(RESOURCE_EXHAUSTED, limit.control
            ? `a ${what} message that decompresses to more than ${limit.bytes} bytes is over the limit of ${limit.bytes} bytes for control calls`
            : `Received message larger than max (over ${limit.bytes} bytes decompressed vs. ${limit.bytes})`);
        } else {
          fail(GRPC_STATUS.INTERNAL, 'Failed to decompress message');
        }
        return;
      } else {
        handed.push({ hold });
        const head = Buffer.alloc(PREFIX_BYTES);
        head.writeUInt32BE(out.byteLength, 1);
        pass('data', head);
        if (out.byteLength > 0) pass('data', out);
      }
      while (!busy && !failed && backlog.length > 0) {
        const next = backlog.shift()!;
        if (next === null) guarded(end);
        else guarded(() => take(next));
      }
      if (!busy && !failed && !grpcPaused) resume.call(stream);
    };
    // maxOutputLength: past it zlib stops and fails (ERR_BUFFER_TOO_LARGE), holding at most that much.
    // No more than a Buffer can hold: past it zlib throws at once (a --grpc-max-message-size over
    // 4 GiB on Node 20 made every compressed ModelInfer throw out of the stream's read path; review).
    // inflateCounted counts each chunk against the hold and settles in a later tick (never in
    // this one: done() reads the backlog this frame loop is still filling).
    // guarded: a throw in done() (grpc-js's handlers run under pass()) fails this call alone, not
    // as an unhandled rejection.
    inflateCounted(body, encoding, Math.max(1, Math.min(limit.bytes, bufferConstants.MAX_LENGTH)), hold).then(
      (out) => guarded(() => done(null, out)),
      (err: unknown) => guarded(() => done(err instanceof Error ? err : new Error(String(err)), EMPTY_MESSAGE)),
    );
  };

  /** Frames `chunk`: plain message bytes pass on, a compressed message is gathered, then inflated. */
  const take = (chunk: Buffer): void => {
    let at = 0;
    while (at < chunk.byteLength && !failed && !busy) {
      if (mode === 'prefix') {
        const part = chunk.subarray(at, at + PREFIX_BYTES - prefix.byteLength);
        at += part.byteLength;
        prefix = prefix.byteLength === 0 ? part : Buffer.concat([prefix, part]);
        if (prefix.byteLength < PREFIX_BYTES) break;
        remaining = prefix.readUInt32BE(1);
        if (prefix[0] === 0) {
          handed.push(PLAIN);
          pass('data', prefix);
          mode = 'plain';
        } else if (remaining > maxCompressed) {
          fail(RESOURCE_EXHAUSTED, limit.control
            ? `a ${what} message of ${remaining} compressed bytes is over the limit of ${limit.bytes} bytes for control calls`
            : `Received message larger than max (${remaining} vs. ${limit.bytes})`);
          return;
        } else if (budget.full && !inBand) {
          // Nothing more fits: refused from its prefix, the compressed bytes unread.
          const e = budget.refusal();
          fail(GRPC_STATUS[e.code], e.message);
          return;
        } else {
          mode = 'compressed';
          compressed = [];
        }
        prefix = Buffer.alloc(0);
      } else {
        const part = chunk.subarray(at, at + remaining);
        at += part.byteLength;
        remaining -= part.byteLength;
        if (mode === 'plain') pass('data', part);
        else compressed.push(part);
      }
      if (remaining === 0) {
        if (mode === 'compressed') inflateMessage();
        else mode = 'prefix';
      }
    }
    if (busy && at < chunk.byteLength) backlog.unshift(chunk.subarray(at));
  };

  /** The end: a message cut short is handed on as it came (grpc-js answers it as before). */
  const end = (): void => {
    if (mode === 'compressed') {
      const head = Buffer.alloc(PREFIX_BYTES);
      head[0] = 1;
      head.writeUInt32BE(remaining + compressed.reduce((n, c) => n + c.byteLength, 0), 1);
      pass('data', head);
      for (const c of compressed) pass('data', c);
      compressed = [];
    } else if (mode === 'prefix' && prefix.byteLength > 0) {
      pass('data', prefix);
    }
    pass('end');
  };

  stream.emit = function (this: ServerHttp2Stream, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'data') {
      if (!failed) {
        if (busy || backlog.length > 0) backlog.push(args[0] as Buffer);
        else guarded(() => take(args[0] as Buffer));
      }
      return true;
    }
    if (event === 'end') {
      if (!failed) {
        if (busy || backlog.length > 0) backlog.push(null);
        else guarded(end);
      }
      return true;
    }
    return emit.call(this, event, ...args);
  } as ServerHttp2Stream['emit'];
  stream.pause = function (this: ServerHttp2Stream) {
    grpcPaused = true;
    return pause.call(this);
  };
  stream.resume = function (this: ServerHttp2Stream) {
    grpcPaused = false;
    return busy ? this : resume.call(this);
  };
}

/**
 * Refuses a control call's message from its 5-byte prefix once that announces more than `limit`
 * bytes (RESOURCE_EXHAUSTED, in the words of the check after decoding in grpc-server.ts), and
 * stops reading the stream. grpc-js reads a message whole before anything can measure it, up to
 * --grpc-max-message-size (2 GiB): a prefix announcing 1 GiB to ServerMetadata had the server hold
 * all the client sent of it (review). Installed over inflateInFront, it sees the bytes as they came:
 * compressed messages of a gzip or deflate stream are left to inflateInFront (`inflating`), which
 * bounds them; every other message is measured here, a flagged one on any other stream too (grpc-js
 * reads it whole before it takes it as uncompressed or refuses its encoding).
 */
function refuseOversizedInFront(stream: ServerHttp2Stream, rpc: string, limit: number, inflating: boolean): void {
  const emit = stream.emit as Emit;
  let prefix: Buffer = Buffer.alloc(0);
  /** Bytes of the current message's body still to come (0: a prefix comes next). */
  let remaining = 0;
  let refused = false;

  /** Reads the framing of `chunk`; false once a message is refused. */
  const measure = (chunk: Buffer): boolean => {
    let at = 0;
    while (at < chunk.byteLength) {
      if (remaining > 0) {
        const n = Math.min(remaining, chunk.byteLength - at);
        at += n;
        remaining -= n;
        continue;
      }
      const part = chunk.subarray(at, at + PREFIX_BYTES - prefix.byteLength);
      at += part.byteLength;
      prefix = prefix.byteLength === 0 ? Buffer.from(part) : Buffer.concat([prefix, part]);
      if (prefix.byteLength < PREFIX_BYTES) break;
      const length = prefix.readUInt32BE(1);
      const compressed = prefix[0] !== 0;
      prefix = Buffer.alloc(0);
      if (length > limit && !(compressed && inflating)) {
        refused = true;
        refuse(stream, RESOURCE_EXHAUSTED, `a ${rpc || 'gRPC'} message of ${length} bytes is over the limit of ${limit} bytes for control calls`);
        return false;
      }
      remaining = length;
    }
    return true;
  };

  stream.emit = function (this: ServerHttp2Stream, event: string | symbol, ...args: unknown[]): boolean {
    if (event === 'data' || event === 'end') {
      // Refused: nothing more reaches grpc-js (the stream is closed; what was in flight is dropped).
      if (refused) return true;
      if (event === 'data' && !measure(args[0] as Buffer)) return true;
    }
    return emit.call(this, event, ...args);
  } as ServerHttp2Stream['emit'];
}
