/** @module Options of the HTTP frontend. Triton: server/src/http_server.h */
import type { Backplane, LogSettings, Logger } from '@triode/core';
import type { HttpLifecycle } from './lifecycle.js';
import type { AsyncInference } from '@triode/core';
import type { TraceSettings } from '../control/trace-settings.js';
import type { Tracer } from '../control/tracer.js';
import type { Restrictions } from '../control/restricted.js';
import type { SystemSharedMemory } from '../shared-memory/system-shared-memory.js';
import type { SharedMemoryFactory } from './infer-codec.js';
import type { DecompressionBudget } from '../decompression-budget.js';

/** Options of `createHttpApp`. */
export interface HttpOptions {
  /** Largest request body, received or decompressed (`--http-max-input-size`). @default 67108864 (64 MiB) */
  maxInputSize?: number;
  /**
   * Largest infer response whose outputs are written as JSON `data`, as an upper bound computed
   * from the outputs' element counts before anything is written. Over it the request is answered
   * 400, naming the size and asking for binary outputs (`"binary_data": true`), which have no
   * such limit. @default 67108864 (64 MiB)
   */
  maxJsonOutputSize?: number;
  /** Where unexpected errors (bugs, a library's exception) are logged in full; clients get a clean message. @default a logger to stderr */
  logger?: Logger;
  /** Tracks requests in flight for graceful shutdown. @default a new HttpLifecycle */
  lifecycle?: HttpLifecycle;
  /** Async inference jobs (cluster mode); without them the async endpoints answer 501. */
  asyncJobs?: AsyncInference;
  /** The process's log settings, for `/v2/logging`; without them it answers 501. */
  logSettings?: LogSettings;
  /** Trace settings, shared with the gRPC frontend. @default a new store */
  traceSettings?: TraceSettings;
  /** Emits traces per the trace settings (none when absent). */
  tracer?: Tracer;
  /** `--http-restricted-api`: endpoint groups that need a header. */
  restrictions?: Restrictions;
  /** `--http-header-forward-pattern`: request headers whose names match become request parameters. */
  headerForwardPattern?: RegExp;
  /**
   * How long a `generate_stream` client's connection may take no bytes at all before its response
   * is given up (destroyed, the responses still waiting dropped). @default 10000 (as the
   * JavaScript backend's wait for an untaken response)
   */
  sseStallMs?: number;
  /**
   * The system shared memory regions clients may register and name in infer requests
   * (`--allow-client-shm=true`; shared with the gRPC frontend). Without them no region can be
   * registered, and a request naming one is refused as naming an unknown region.
   */
  sharedMemory?: SystemSharedMemory;
  /**
   * Where compressed request bodies count what they inflate to, until their response closes
   * (`--max-decompressed-request-bytes`; shared with the gRPC frontend): past its limit a
   * compressed request is refused 503. Uncompressed bodies are not counted. A request served
   * in-process (`app.request()`, no Node response to wait for) counts only while it inflates.
   * @default a budget of its own, of DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES (1 GiB)
   */
  decompressionBudget?: DecompressionBudget;
}

/** What every route needs. */
export interface HttpDeps {
  backplane: Backplane;
  maxInputSize: number;
  maxJsonOutputSize: number;
  tracer?: Tracer;
  headerForwardPattern?: RegExp;
  /** See HttpOptions.sseStallMs. */
  sseStallMs?: number;
  /** Makes a request's hold on the regions it names (HttpOptions.sharedMemory, inputs up to maxInputSize). */
  sharedMemory?: SharedMemoryFactory;
  /** See HttpOptions.decompressionBudget. */
  decompressionBudget: DecompressionBudget;
}

/** Triton's default `--http-max-input-size`: 64 MiB. */
export const DEFAULT_HTTP_MAX_INPUT_SIZE = 64 * 1024 * 1024;
