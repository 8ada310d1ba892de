/**
 * @module The gRPC frontend: Triton's `inference.GRPCInferenceService` (every RPC) and
 * `grpc.health.v1.Health/Check`, over a Backplane, on @grpc/grpc-js.
 * Triton: server/src/grpc/grpc_server.cc, infer_handler.cc, stream_infer_handler.cc
 */
import { setMaxListeners, type EventEmitter } from 'node:events';
import type { Http2Session } from 'node:http2';
import {
  Metadata, Server, ServerCredentials, status,
  type ServerDuplexStream, type ServerUnaryCall, type ServiceError, type UntypedServiceImplementation,
  type sendUnaryData,
} from '@grpc/grpc-js';
import {
  Errors, FILE_OVERRIDE_PREFIX, TriodeError, echo, messageType, serviceDefinition, setOwn, silentLogger, toPlain,
  type Backplane, type GrpcMethodDefinition, type InferenceResponse, type LogSettings, type Logger,
} from '@triode/core';
import { loadOptionsFrom, type LoadParameter } from '../control/load-parameters.js';
import { refuseRepositoryName } from '../control/repository-name.js';
import { updateLogSettings } from '../control/log-settings-update.js';
import type { RestrictedGroup, Restrictions } from '../control/restricted.js';
import { TraceSettings, checkTraceModel } from '../control/trace-settings.js';
import type { Tracer } from '../control/tracer.js';
import { forwardHeaders } from '../control/header-forward.js';
import { requestedVersion, versionNotFound, versionNumber } from '../model-version.js';
import { inferRequestFromMessage, inferResponseToMessage, type ModelInferRequestMessage, type ModelInferResponseMessage } from './grpc-infer.js';
import { NO_REGIONS, RequestSharedMemory, clientShmDisabled, type SharedMemoryFactory, type SystemSharedMemory } from '../shared-memory/system-shared-memory.js';
import { grpcError } from './grpc-status.js';
import { CONTROL_MAX_BODY_SIZE } from '../http/body.js';
import { inferFastPath } from './infer-fast-path.js';
import { REFUSED, WIRE_BYTES, checkInferRequestWire, decodeInferRequest } from './infer-request-scan.js';
import { loadRequestProblem } from './load-request-scan.js';
import { inflatedMessages, installStreamFront, type InflatedMessage } from './transport-guard.js';
import { DEFAULT_GRPC_RESPONSE_STALL_TIMEOUT_MS } from './response-stall.js';
import { DEFAULT_GRPC_REQUEST_STALL_TIMEOUT_MS } from './request-stall.js';
import { DEFAULT_GRPC_HANDSHAKE_TIMEOUT_MS } from './handshake-timeout.js';
import { DecompressionBudget } from '../decompression-budget.js';

/** Keepalive settings, as Triton's `--grpc-keepalive-*` / `--grpc-http2-*` flags. */
export interface GrpcKeepalive {
  /** `--grpc-keepalive-time` (ms). @default 7200000 */
  timeMs?: number;
  /** `--grpc-keepalive-timeout` (ms). @default 20000 */
  timeoutMs?: number;
  /** `--grpc-keepalive-permit-without-calls`. @default false */
  permitWithoutCalls?: boolean;
  /** `--grpc-http2-max-pings-without-data`. @default 2 */
  maxPingsWithoutData?: number;
  /** `--grpc-http2-min-recv-ping-interval-without-data` (ms). @default 300000 */
  minRecvPingIntervalWithoutDataMs?: number;
  /** `--grpc-http2-max-ping-strikes`. @default 2 */
  maxPingStrikes?: number;
  /** `--grpc-max-connection-age` (ms): a connection is sent GOAWAY after this long. @default unlimited */
  maxConnectionAgeMs?: number;
  /** `--grpc-max-connection-age-grace` (ms): calls in flight at that point get this long. @default unlimited */
  maxConnectionAgeGraceMs?: number;
}

/** TLS settings (`--grpc-use-ssl`, `--grpc-server-cert`, `--grpc-server-key`, `--grpc-root-cert`, `--grpc-use-ssl-mutual`). */
export interface GrpcTls {
  cert: Buffer;
  key: Buffer;
  rootCert?: Buffer;
  /** Require and check client certificates (against `rootCert`). */
  mutual?: boolean;
}

/** Options of the gRPC frontend. */
export interface GrpcServerOptions {
  /** `host:port` to listen on (`--grpc-address`, `--grpc-port`); port 0 picks a free one. @default "0.0.0.0:8001" */
  address?: string;
  tls?: GrpcTls;
  keepalive?: GrpcKeepalive;
  /** Largest message received or sent. @default 2147483647 (Triton's INT32_MAX) */
  maxMessageBytes?: number;
  /** `--grpc-restricted-protocol`: groups that need a metadata key/value. */
  restrictions?: Restrictions;
  /** The process's log settings, for LogSettings; without them it answers UNIMPLEMENTED. */
  logSettings?: LogSettings;
  /** Trace settings, shared with the HTTP frontend. */
  traceSettings?: TraceSettings;
  logger?: Logger;
  /**
   * Serve plain unary ModelInfer calls on a direct path in front of grpc-js (same protocol, less
   * CPU per call); grpc-js serves everything else. @default true
   */
  inferFastPath?: boolean;
  /**
   * `--grpc-infer-response-compression-level`: gzip ModelInfer responses for clients that accept
   * it (low, medium, high = zlib levels 1, 6, 9). @default "none"
   */
  inferResponseCompression?: 'none' | 'low' | 'medium' | 'high';
  /** Emits traces of ModelInfer calls on the direct path, per the trace settings. */
  tracer?: Tracer;
  /** `--grpc-header-forward-pattern`: metadata whose keys match becomes request parameters. */
  headerForwardPattern?: RegExp;
  /**
   * Streams (calls) one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS);
   * a client opening more is refused them (REFUSED_STREAM; Node closes a connection that keeps
   * trying). Clients open one stream per call: this bounds one connection's calls in flight.
   * @default 1000
   */
  maxConcurrentStreams?: number;
  /**
   * HTTP/2 rapid-reset defence (CVE-2023-44487): the streams a client may reset (RST_STREAM
   * before their answer) on one connection at once. Each connection has a bucket of this many,
   * refilled at `maxStreamResetsPerSecond`; a connection that empties it is closed with GOAWAY
   * ENHANCE_YOUR_CALM and logged. Node's nghttp2 has a looser budget of its own behind it (1000 at
   * once, 33/s; GOAWAY INTERNAL_ERROR), so values above those change nothing.
   * @default 500
   */
  maxStreamResetBurst?: number;
  /** Client stream resets per second one connection may keep up (the bucket's refill rate). @default 30 */
  maxStreamResetsPerSecond?: number;
  /**
   * Bytes of tensors that all ModelStreamInfer streams together may hold in requests running and
   * answers waiting for their turn; past it, a stream holding any is not read until it holds less
   * (each stream also stops at MAX_STREAM_PENDING_BYTES). @default 1 GiB
   */
  maxStreamPendingBytes?: number;
  /**
   * The system shared memory regions clients may register and name in infer requests
   * (`--allow-client-shm=true`; shared with the HTTP frontend). Without them register and
   * unregister are refused as disabled, and a request naming a region is refused as naming an
   * unknown one.
   */
  sharedMemory?: SystemSharedMemory;
  /**
   * Where compressed messages (grpc-encoding gzip or deflate) count what they inflate to, until
   * their call ends (a ModelStreamInfer message's: until its request ends)
   * (`--max-decompressed-request-bytes`; shared with the HTTP frontend): past its limit a call is
   * refused UNAVAILABLE, a stream's message in-band. Uncompressed messages are not counted.
   * @default a budget of its own, of DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES (1 GiB)
   */
  decompressionBudget?: DecompressionBudget;
  /**
   * A call whose client takes none of its answer's unsent bytes for this long is reset
   * (RST_STREAM ENHANCE_YOUR_CALM), and its connection closed if it then answers no PING within
   * as long: a client that stops reading held its answers for good (HTTP's responseStallTimeoutMs).
   * @default 60000
   */
  responseStallTimeoutMs?: number;
  /**
   * A call whose request is unfinished (a unary call not yet half-closed, any call in the middle
   * of a message) and has received no byte for this long is answered CANCELLED and closed: a
   * client that stopped sending held what it had sent for good. @default 60000
   */
  requestStallTimeoutMs?: number;
  /**
   * A connection whose client has not sent its HTTP/2 SETTINGS frame (the end of the HTTP/2
   * handshake) this long after it connected (after its TLS handshake, on TLS) is closed, as gRPC
   * C++ does (GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS): a client that connects and sends nothing held
   * its connection for good. @default 120000
   */
  handshakeTimeoutMs?: number;
}

/** A running gRPC server. */
export interface GrpcServerHandle {
  /** The port bound (useful with port 0). */
  readonly port: number;
  /** Stops accepting calls; waits up to `graceMs` for running calls, then cancels the rest. */
  close(graceMs?: number): Promise<void>;
}

/** The RPCs of each restricted group. */
const GROUP_OF: Record<string, RestrictedGroup> = {
  ServerLive: 'health', ServerReady: 'health', ModelReady: 'health', Check: 'health',
  ServerMetadata: 'metadata', ModelMetadata: 'metadata',
  ModelInfer: 'inference', ModelStreamInfer: 'inference',
  ModelConfig: 'model-config', ModelStatistics: 'statistics',
  RepositoryIndex: 'model-repository', RepositoryModelLoad: 'model-repository', RepositoryModelUnload: 'model-repository',
  SystemSharedMemoryStatus: 'shared-memory', SystemSharedMemoryRegister: 'shared-memory', SystemSharedMemoryUnregister: 'shared-memory',
  CudaSharedMemoryStatus: 'shared-memory', CudaSharedMemoryRegister: 'shared-memory', CudaSharedMemoryUnregister: 'shared-memory',
  TraceSetting: 'trace', LogSettings: 'logging',
};

type Plain = Record<string, unknown>;
type UnaryHandler = (request: Plain & object, call: ServerUnaryCall<object, object>) => Promise<object>;

const HEALTH_SERVING = 1;
const HEALTH_NOT_SERVING = 2;

/** String metadata as [key, value] pairs. */
function metadataEntries(md: Metadata): [string, string][] {
  return Object.entries(md.getMap()).filter((e): e is [string, string] => typeof e[1] === 'string');
}

/**
 * RepositoryModelLoad's parameters as Triton's handler takes them: `config` must be a
 * string_param, a `file:<path>` a bytes_param, and any other name is refused (INVALID_ARG), the
 * first wrong one in the order of the map answering. Triton: grpc_server.cc
 * (RegisterRepositoryModelLoad).
 */
function grpcLoadParameters(parameters: Readonly<Record<string, Plain>> | undefined): Record<string, LoadParameter> {
  const params: Record<string, LoadParameter> = {};
  for (const [k, p] of Object.entries(parameters ?? {})) {
    if (k === 'config') {
      const v = p?.['string_param'];
      if (typeof v !== 'string') throw Errors.invalidArg("invalid value type for load parameter 'config', expected string_param.");
      setOwn(params, k, v);
    } else if (k.startsWith(FILE_OVERRIDE_PREFIX)) {
      const v = p?.['bytes_param'];
      if (!(v instanceof Uint8Array)) throw Errors.invalidArg(`invalid value type for load parameter '${echo(k)}', expected bytes_param.`);
      setOwn(params, k, v);
    } else {
      throw Errors.invalidArg(`unrecognized load parameter '${echo(k)}'.`);
    }
  }
  return params;
}

/**
 * RepositoryModelUnload's `unload_dependents`, which must be a bool_param when given.
 * Triton: grpc_server.cc (RegisterRepositoryModelUnload).
 */
function grpcUnloadDependents(parameters: Readonly<Record<string, Plain>> | undefined): boolean {
  if (!parameters || !Object.hasOwn(parameters, 'unload_dependents')) return false;
  const v = parameters['unload_dependents']?.['bool_param'];
  if (typeof v !== 'boolean') throw Errors.invalidArg("invalid value type for 'unload_dependents' parameter, expected bool_param.");
  return v;
}

/** The value of a log setting's oneof, as a plain value. */
function oneofValue(p: Plain | undefined): LoadParameter | undefined {
  if (!p) return undefined;
  for (const k of ['bool_param', 'int64_param', 'uint32_param', 'string_param', 'bytes_param']) {
    if (p[k] !== undefined) return p[k] as LoadParameter;
  }
  return undefined;
}

/** A log setting value as LogSettingsResponse.SettingValue. */
function logValue(v: unknown): Plain {
  if (typeof v === 'boolean') return { bool_param: v };
  if (typeof v === 'number') return { uint32_param: v };
  return { string_param: String(v) };
}

/** Triton's default largest gRPC message (INT32_MAX). */
const DEFAULT_MAX_MESSAGE_BYTES = 2147483647;

/** A request's hold on the regions it names, its inputs up to the largest message; none without regions. */
function sharedMemoryFactory(options: GrpcServerOptions): SharedMemoryFactory | undefined {
  const regions = options.sharedMemory;
  const limit = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  return regions ? () => new RequestSharedMemory(regions, limit) : undefined;
}

/** A proto uint64 field as decoded (number, string or Long), exact: offsets and sizes past 2^53 stay what the client sent. */
function uint64Field(v: unknown): number | bigint {
  if (v === undefined || v === null) return 0;
  if (typeof v === 'number' || typeof v === 'bigint') return v;
  return BigInt(String(v));
}

/** The RPC implementations over a backplane. */
function inferenceService(backplane: Backplane, options: GrpcServerOptions, guard: (rpc: string, md: Metadata) => void): UntypedServiceImplementation {
  const traces = options.traceSettings ?? new TraceSettings();
  const streamBudget = new StreamBudget(options.maxStreamPendingBytes ?? 1 << 30);
  const logger = options.logger ?? silentLogger;
  const plainOf = (name: string) => {
    const t = messageType(name);
    return (m: object): Plain => toPlain(t, m as Parameters<typeof toPlain>[1]);
  };

  const unary = (rpc: string, requestType: string | undefined, f: UnaryHandler) => {
    const plain = requestType ? plainOf(requestType) : undefined;
    return (call: ServerUnaryCall<object, object>, callback: sendUnaryData<object>): void => {
      try {
        guard(rpc, call.metadata);
      } catch (err) {
        callback(grpcError(err, logger) as ServiceError);
        return;
      }
      if (isOversized(call.request)) {
        callback({ code: status.RESOURCE_EXHAUSTED, details: `a ${rpc} message of ${call.request[OVERSIZED]} bytes is over the limit of ${GRPC_CONTROL_MAX_MESSAGE_BYTES} bytes for control calls` } as ServiceError);
        return;
      }
      if (isNotALoad(call.request)) {
        callback({ code: status.INVALID_ARGUMENT, details: call.request[NOT_A_LOAD] } as ServiceError);
        return;
      }
      const req = plain ? plain(call.request) : (call.request as Plain);
      f(req, call).then((r) => callback(null, r), (err: unknown) => callback(grpcError(err, logger) as ServiceError));
    };
  };
  const versionOf = (req: Plain) => requestedVersion(String(req['name'] ?? ''), String(req['version'] ?? ''), backplane);
  const regions = options.sharedMemory;
  const shmFactory = sharedMemoryFactory(options);
  const cudaUnsupported = async (): Promise<object> => {
    throw Errors.unsupported('CUDA shared memory is not supported by Triode: use system shared memory, or send tensors in the request (raw_input_contents)');
  };
  const enabled = (): SystemSharedMemory => {
    if (!regions) throw clientShmDisabled();
    return regions;
  };
  const configType = messageType('ModelConfig');

  return {
    ServerLive: unary('ServerLive', undefined, async () => ({ live: await backplane.isLive() })),
    ServerReady: unary('ServerReady', undefined, async () => ({ ready: await backplane.isReady() })),
    ModelReady: unary('ModelReady', 'ModelReadyRequest', async (req) => ({ ready: await backplane.modelReady(String(req['name'] ?? ''), versionNumber(String(req['version'] ?? ''))) })),
    ServerMetadata: unary('ServerMetadata', undefined, async () => backplane.serverMetadata()),
    ModelMetadata: unary('ModelMetadata', 'ModelMetadataRequest', async (req) => {
      const m = await backplane.modelMetadata(String(req['name'] ?? ''), await versionOf(req));
      return { name: m.name, versions: m.versions, platform: m.platform, inputs: m.inputs, outputs: m.outputs };
    }),
    ModelConfig: unary('ModelConfig', 'ModelConfigRequest', async (req) => {
      const json = await backplane.modelConfig(String(req['name'] ?? ''), await versionOf(req));
      return { config: configType.fromObject(json) };
    }),
    ModelStatistics: unary('ModelStatistics', 'ModelStatisticsRequest', async (req) => {
      const name = String(req['name'] ?? '');
      // Read whatever the name (one Triton cannot read is refused), ignored for every model's.
      const version = versionNumber(String(req['version'] ?? ''));
      return { model_stats: await backplane.modelStatistics(name || undefined, name ? version : undefined) };
    }),
    RepositoryIndex: unary('RepositoryIndex', 'RepositoryIndexRequest', async (req) => {
      refuseRepositoryName(req['repository_name'] as string | undefined);
      return { models: (await backplane.repositoryIndex(req['ready'] === true)).map((e) => ({ name: e.name, version: e.version ?? '', state: e.state ?? '', reason: e.reason ?? '' })) };
    }),
    RepositoryModelLoad: unary('RepositoryModelLoad', 'RepositoryModelLoadRequest', async (req) => {
      refuseRepositoryName(req['repository_name'] as string | undefined);
      const name = String(req['model_name'] ?? '');
      await backplane.loadModel(name, loadOptionsFrom(name, grpcLoadParameters(req['parameters'] as Record<string, Plain> | undefined)));
      return {};
    }),
    RepositoryModelUnload: unary('RepositoryModelUnload', 'RepositoryModelUnloadRequest', async (req, call) => {
      refuseRepositoryName(req['repository_name'] as string | undefined);
      // A client that leaves gives up an unload still waiting for its turn (a cluster gateway's).
      const left = new AbortController();
      const leave = () => left.abort();
      call.once('cancelled', leave);
      try {
        await backplane.unloadModel(String(req['model_name'] ?? ''), { unloadDependents: grpcUnloadDependents(req['parameters'] as Record<string, Plain> | undefined), signal: left.signal });
      } finally {
        call.off('cancelled', leave);
      }
      return {};
    }),
    // Triton's CommonHandler: the same manager calls as HTTP's; an empty name is all regions
    // (status, unregister) and a name like any other to register.
    SystemSharedMemoryStatus: unary('SystemSharedMemoryStatus', 'SystemSharedMemoryStatusRequest', async (req) => {
      const name = String(req['name'] ?? '');
      const list = (regions ?? NO_REGIONS).status(name === '' ? undefined : name);
      return { regions: Object.fromEntries(list.map((r) => [r.name, r])) };
    }),
    SystemSharedMemoryRegister: unary('SystemSharedMemoryRegister', 'SystemSharedMemoryRegisterRequest', async (req) => {
      enabled().register(String(req['name'] ?? ''), String(req['key'] ?? ''), uint64Field(req['offset']), uint64Field(req['byte_size']));
      return {};
    }),
    SystemSharedMemoryUnregister: unary('SystemSharedMemoryUnregister', 'SystemSharedMemoryUnregisterRequest', async (req) => {
      const name = String(req['name'] ?? '');
      enabled().unregister(name === '' ? undefined : name);
      return {};
    }),
    CudaSharedMemoryStatus: unary('CudaSharedMemoryStatus', undefined, cudaUnsupported),
    CudaSharedMemoryRegister: unary('CudaSharedMemoryRegister', undefined, cudaUnsupported),
    CudaSharedMemoryUnregister: unary('CudaSharedMemoryUnregister', undefined, cudaUnsupported),
    TraceSetting: unary('TraceSetting', 'TraceSettingRequest', async (req) => {
      const model = String(req['model_name'] ?? '') || undefined;
      if (model) await checkTraceModel(backplane, model);
      // Each setting's list of values, read as Triton's RegisterTrace reads them (TraceSettings.update).
      const update: Record<string, string[]> = {};
      for (const [k, v] of Object.entries((req['settings'] ?? {}) as Record<string, { value?: string[] }>)) setOwn(update, k, v.value ?? []);
      const now = Object.keys(update).length ? traces.update(update, model, 'grpc') : traces.get(model);
      return { settings: Object.fromEntries(Object.entries(now).map(([k, v]) => [k, { value: Array.isArray(v) ? v : [v] }])) };
    }),
    LogSettings: unary('LogSettings', 'LogSettingsRequest', async (req) => {
      const settings = options.logSettings;
      if (!settings) throw Errors.unsupported('log settings are not available here');
      const update: Record<string, unknown> = {};
      for (const [k, v] of Object.entries((req['settings'] ?? {}) as Record<string, Plain>)) setOwn(update, k, oneofValue(v));
      if (Object.keys(update).length) updateLogSettings(settings, update, 'grpc');
      return { settings: Object.fromEntries(Object.entries(settings.toJson()).map(([k, v]) => [k, logValue(v)])) };
    }),
    ModelInfer: (call: ServerUnaryCall<ModelInferRequestMessage, ModelInferResponseMessage>, callback: sendUnaryData<ModelInferResponseMessage>) => {
      const abort = new AbortController();
      let answered = false;
      // grpc-js also reports 'cancelled' when a finished call's stream closes: only an
      // unanswered call is a real cancellation.
      call.once('cancelled', () => {
        if (!answered) abort.abort();
      });
      void (async () => {
        guard('ModelInfer', call.metadata);
        const read = inferRequestFromMessage(call.request, shmFactory);
        if ('unknownVersion' in read) return versionNotFound(call.request.model_name, read.unknownVersion, backplane);
        const { request, sharedMemory: shm } = read;
        try {
          // Large inputs in shared memory are read now, off the event loop.
          if (shm) await shm.load();
          request.signal = abort.signal;
          if (options.headerForwardPattern) forwardHeaders(request, metadataEntries(call.metadata), options.headerForwardPattern);
          return inferResponseToMessage(await backplane.infer(request), undefined, shm);
        } finally {
          // The regions it names are held until it is answered or failed.
          shm?.release();
        }
      })().then((r) => {
        answered = true;
        callback(null, r);
      }, (err: unknown) => {
        answered = true;
        if (!abort.signal.aborted) callback(grpcError(err, logger) as ServiceError);
      });
    },
    ModelStreamInfer: (call: ServerDuplexStream<ModelInferRequestMessage, object>) => {
      try {
        guard('ModelStreamInfer', call.metadata);
      } catch (err) {
        call.emit('error', grpcError(err, logger));
        return;
      }
      new StreamInferSession(backplane, call, logger, streamBudget, options.headerForwardPattern, shmFactory).start();
    },
  };
}

/**
 * Requests of one stream running or waiting to be written, past which the stream is not read
 * until some are answered: a client that sends without reading holds at most this many (plus
 * what HTTP/2 flow control lets it have in flight), not every request it sends. As many as the
 * streams one connection may hold (DEFAULT_MAX_CONCURRENT_STREAMS): a stream that multiplexes
 * sequences must not stop being read while some wait in the sequence backlog behind others.
 */
export const MAX_STREAM_PENDING = 1024;

/**
 * Bytes of one stream's pending requests and of its responses waiting for their turn, past which
 * the stream is not read until some are answered or written. Counting requests alone let one
 * stream hold 1,024 whole 2 MB requests and their answers behind one that waited (1.9 GB, review).
 * A request larger than this is still read (reading pauses after it).
 */
export const MAX_STREAM_PENDING_BYTES = 64 << 20;

/**
 * The bytes all streams of a server hold (StreamInferSession's #heldBytes, together), against one
 * limit: one stream's own limit times the streams a connection may open (1,000) times the
 * connections was no bound. A stream that holds nothing is always read, so every stream can go on.
 */
class StreamBudget {
  used = 0;
  /** Streams paused by this budget: told when it has room again. */
  readonly #waiting = new Set<() => void>();
  constructor(readonly limit: number) {}

  get full(): boolean {
    return this.used >= this.limit;
  }

  add(n: number): void {
    this.used += n;
  }

  release(n: number): void {
    this.used -= n;
    if (this.used < this.limit && this.#waiting.size > 0) for (const w of [...this.#waiting]) w();
  }

  wait(w: () => void): void {
    this.#waiting.add(w);
  }

  unwait(w: () => void): void {
    this.#waiting.delete(w);
  }
}

/**
 * Bytes an element of a request's typed contents takes once decoded: a slot of an array, then of
 * the tensor made of it (up to 8 bytes: INT64, FP64), where the wire may have spent one byte (a
 * packed varint 0). 16M `int_contents` zeros gzipped to 16 KB inflate to 16 MB and decode to a
 * 64 MB tensor: counting only the 16 MB let 40 such calls take 4 GB under a 1 GiB budget.
 */
const DECODED_ELEMENT_BYTES = 8;

/**
 * What an inflated ModelInfer or ModelStreamInfer message takes once decoded beyond its own bytes
 * (its typed contents), for the decompression budget; 0 for other RPCs, and for a message the
 * deserializer will refuse before decoding it.
 */
function inferDecodedBytes(rpc: string, message: Buffer): number {
  if (rpc !== 'ModelInfer' && rpc !== 'ModelStreamInfer') return 0;
  try {
    return DECODED_ELEMENT_BYTES * checkInferRequestWire(message);
  } catch {
    return 0;
  }
}

/** Codes of errors Triton gives before a request runs (building or validating it, finding its model). */
const EARLY_CODES: ReadonlySet<string> = new Set(['INVALID_ARG', 'NOT_FOUND', 'UNSUPPORTED']);

/**
 * About what a request message holds: its raw tensors and its typed contents at 8 bytes an element,
 * or its wire size when that is more (a long id, string parameters).
 */
function requestBytes(m: ModelInferRequestMessage): number {
  let n = 0;
  for (const b of m.raw_input_contents ?? []) n += b.byteLength;
  for (const input of m.inputs ?? []) {
    const c = input.contents as Record<string, unknown> | null | undefined;
    if (!c) continue;
    for (const v of Object.values(c)) {
      if (!Array.isArray(v)) continue;
      for (const e of v) n += e instanceof Uint8Array ? e.byteLength : 8;
    }
  }
  return Math.max(n, (m as { [WIRE_BYTES]?: number })[WIRE_BYTES] ?? 0);
}

/** The tensor bytes of a response message. */
function responseBytes(msg: { infer_response?: { raw_output_contents?: Uint8Array[] } }): number {
  let n = 0;
  for (const b of msg.infer_response?.raw_output_contents ?? []) n += b.byteLength;
  return n;
}

/** One request of a stream: where its responses wait their turn (regular models answer in order). */
interface StreamSlot {
  queued: object[];
  /** Bytes of `queued` (counted in the session's #heldBytes until written). */
  queuedBytes: number;
  done: boolean;
  /**
   * A decoupled request (it sent a response marked final or not): its responses go out as they
   * come and it holds no place in the order of regular responses (Triton enqueues only
   * non-decoupled requests for in-order replies).
   */
  streaming?: boolean;
}

/**
 * One ModelStreamInfer call. Requests run concurrently; a regular model's response is written in
 * request order, a decoupled model's responses as they come, each marked `triton_final_response`.
 * Errors go in-band (`error_message`) and the stream stays open, unless the client opened it with
 * the `triton_grpc_error: true` header: then the first error ends the call with its status.
 */
class StreamInferSession {
  readonly #backplane: Backplane;
  readonly #call: ServerDuplexStream<ModelInferRequestMessage, object>;
  readonly #logger: Logger;
  readonly #slots: StreamSlot[] = [];
  readonly #abort = new AbortController();
  readonly #grpcErrors: boolean;
  #inflight = 0;
  /** Bytes of running requests and of responses waiting for their turn (MAX_STREAM_PENDING_BYTES). */
  #heldBytes = 0;
  #readEnded = false;
  #closed = false;
  /** Reading paused: too many requests pending, or the client is not reading its responses. */
  #paused = false;
  #needDrain = false;
  /**
   * While the client is not reading (writes wait for 'drain'): settles on 'drain' or when the call
   * ends. A decoupled model's sender waits on it before its next response (ResponseHandler).
   */
  #drained: Promise<void> | undefined;
  #onDrained: (() => void) | undefined;

  readonly #forward: RegExp | undefined;
  readonly #budget: StreamBudget;
  /** Resumes reading when the server's budget has room again (registered while it paused this stream). */
  readonly #reflow = (): void => this.#flow();

  readonly #sharedMemory: SharedMemoryFactory | undefined;
  /**
   * Settles once the last request that had to wait (for its shared memory windows, or for one
   * before it) has reached the server; undefined when none is waiting. Requests reach the server
   * in the order sent.
   */
  #admission: Promise<void> | undefined;
  /** What the front door recorded of this stream's messages, when it came compressed (inflatedMessages). */
  readonly #inflated: InflatedMessage[] | undefined;

  constructor(backplane: Backplane, call: ServerDuplexStream<ModelInferRequestMessage, object>, logger: Logger, budget: StreamBudget, forward?: RegExp, sharedMemory?: SharedMemoryFactory) {
    this.#sharedMemory = sharedMemory;
    this.#forward = forward;
    this.#budget = budget;
    this.#backplane = backplane;
    this.#call = call;
    this.#logger = logger;
    this.#grpcErrors = String(call.metadata.get('triton_grpc_error')[0] ?? '').toLowerCase() === 'true';
    const h2 = http2StreamOf(call);
    this.#inflated = h2 ? inflatedMessages(h2) : undefined;
    // Every request of the stream listens on its signal, up to MAX_STREAM_PENDING at once: past
    // Node's default of 10 each stream printed a MaxListenersExceededWarning, a log line a client
    // could add at will (review).
    setMaxListeners(MAX_STREAM_PENDING + 16, this.#abort.signal);
  }

  start(): void {
    this.#call.on('data', (m: ModelInferRequestMessage) => this.#onRequest(m));
    this.#call.on('end', () => {
      this.#readEnded = true;
      this.#maybeEnd();
    });
    this.#call.on('cancelled', () => {
      this.#writable();
      // Also reported after a normal end (grpc-js): then nothing is left to abort.
      if (this.#closed) return;
      this.#closed = true;
      this.#abort.abort();
    });
    this.#call.on('error', () => {
      this.#writable();
      this.#closed = true;
      this.#abort.abort();
    });
  }

  #onRequest(m: ModelInferRequestMessage): void {
    const slot: StreamSlot = { queued: [], queuedBytes: 0, done: false };
    this.#slots.push(slot);
    this.#inflight++;
    const bytes = requestBytes(m);
    // Its decompressed bytes (if it came compressed) are this request's from now on, until it ends.
    const inflated = this.#inflated?.shift();
    this.#hold(bytes);
    this.#flow();
    void this.#run(m, slot, inflated?.refused).finally(() => {
      inflated?.hold?.release();
      slot.done = true;
      this.#inflight--;
      this.#hold(-bytes);
      this.#flush();
      this.#flow();
      this.#maybeEnd();
    });
  }

  /** Counts `n` more bytes held (negative: fewer), here and in the server's budget. */
  #hold(n: number): void {
    if (n === 0) return;
    this.#heldBytes += n;
    if (n > 0) this.#budget.add(n);
    else this.#budget.release(-n);
  }

  /**
   * Pauses reading while MAX_STREAM_PENDING requests are pending, their tensors pass
   * MAX_STREAM_PENDING_BYTES (or the server's budget, for a stream that holds some), or writes
   * wait for 'drain'; resumes after.
   */
  #flow(): void {
    // Running requests count, decoupled ones too (they hold no place in #slots), and so do
    // answers waiting for their turn.
    const overBudget = this.#heldBytes > 0 && this.#budget.full;
    const hold = !this.#closed && (this.#needDrain || this.#inflight >= MAX_STREAM_PENDING || this.#slots.length >= MAX_STREAM_PENDING || this.#heldBytes >= MAX_STREAM_PENDING_BYTES || overBudget);
    if (hold && overBudget) this.#budget.wait(this.#reflow);
    else this.#budget.unwait(this.#reflow);
    if (hold === this.#paused) return;
    this.#paused = hold;
    if (hold) this.#call.pause();
    else this.#call.resume();
  }

  /** Runs one request; `refused`: the front door refused it (the budget), and it is answered with that. */
  async #run(m: ModelInferRequestMessage, slot: StreamSlot, refused?: TriodeError): Promise<void> {
    const id = m.id ?? '';
    // The regions the request names, held until its last response is written (each response of a
    // decoupled model writes its outputs to them, as Triton's).
    let shm: RequestSharedMemory | undefined;
    let shmBytes = 0;
    let admit: (() => void) | undefined;
    try {
      if (refused) throw refused;
      const read = inferRequestFromMessage(m, this.#sharedMemory);
      if ('unknownVersion' in read) return await versionNotFound(m.model_name, read.unknownVersion, this.#backplane);
      const { request, emptyFinal } = read;
      shm = read.sharedMemory;
      if (shm || this.#admission) {
        // It waits (for its windows, or for a request before it that waits): the requests after it
        // wait for it to reach the server, so that they reach it in the order sent, as Triton's
        // stream submits them (a sequence's next request overtook its START, refused "must
        // specify the START flag", while the START read a large window).
        const prior = this.#admission;
        const mine = new Promise<void>((resolve) => {
          admit = () => {
            if (this.#admission === mine) this.#admission = undefined;
            resolve();
          };
        });
        this.#admission = mine;
        if (shm) {
          // What it copies out of regions counts against the stream's and the server's budgets, as
          // tensors in the message do (it costs the message nothing).
          shmBytes = shm.inputBytes;
          this.#hold(shmBytes);
          this.#flow();
          await shm.load();
        }
        if (prior) await prior;
      }
      request.signal = this.#abort.signal;
      if (this.#forward) forwardHeaders(request, metadataEntries(this.#call.metadata), this.#forward);
      let sawFinal = false;
      // Out of the order of regular responses from the start: a decoupled request that is slow to
      // answer (or never does) must not hold back the regular responses behind it.
      const streaming = () => {
        if (slot.streaming) return;
        slot.streaming = true;
        this.#flush();
      };
      const running = this.#backplane.inferStream(request, (r: InferenceResponse) => {
        if (r.final === undefined) {
          // A regular model: one response, in request order, final (Triton marks every stream response).
          const msg = this.#responseMessage(m, r, true, shm);
          if (!msg) return;
          const n = responseBytes(msg);
          slot.queued.push(msg);
          slot.queuedBytes += n;
          this.#hold(n);
          return;
        }
        if (r.final) sawFinal = true;
        streaming();
        const msg = this.#responseMessage(m, r, r.final, shm);
        if (msg) this.#write(msg);
        // The client is not reading: the model's next response waits until it does.
        return this.#drained;
      }, { onDecoupled: streaming });
      // Queued by now (inferStream queues it before its first await): the next may go.
      admit?.();
      await running;
      if (emptyFinal && !sawFinal && slot.queued.length === 0) {
        // A decoupled request that ended without a final response: the empty final the client asked for.
        this.#write({ infer_response: { model_name: m.model_name, model_version: m.model_version, id, parameters: { triton_final_response: { bool_param: true } }, outputs: [], raw_output_contents: [] } });
      }
    } catch (err) {
      if (this.#grpcErrors) {
        this.#fail(err);
        return;
      }
      // As Triton: a request refused before it ran (not decoded, not valid, an unknown model) gets
      // only its id back (stream_infer_handler.cc clears the response and repopulates the id); one
      // that failed in its model gets its model and the final flag too. A client's 1 MB model name
      // came back whole (review).
      const early = REFUSED in m || err === refused || (err instanceof TriodeError && EARLY_CODES.has(err.code));
      const error = { error_message: grpcError(err, this.#logger).details, infer_response: early ? { id } : { model_name: m.model_name, model_version: m.model_version, id, parameters: { triton_final_response: { bool_param: true } } } };
      // A decoupled request no longer holds a place in the order: its error goes out at once.
      if (slot.streaming) this.#write(error);
      else slot.queued.push(error);
    } finally {
      admit?.();
      shm?.release();
      this.#hold(-shmBytes);
    }
  }

  /**
   * A response as the stream's message; an output its shared memory region cannot hold makes it
   * an error message instead (the model ran: its model and final flag come back, as for any
   * failure in the model), or, with `triton_grpc_error`, ends the call (undefined: nothing to send).
   */
  #responseMessage(m: ModelInferRequestMessage, r: InferenceResponse, final: boolean, shm: RequestSharedMemory | undefined): object | undefined {
    try {
      return { infer_response: inferResponseToMessage(r, { triton_final_response: final }, shm) };
    } catch (err) {
      // With `triton_grpc_error`, the first error ends the call with its status, as any other.
      if (this.#grpcErrors) {
        this.#fail(err);
        return undefined;
      }
      return { error_message: grpcError(err, this.#logger).details, infer_response: { model_name: m.model_name, model_version: m.model_version, id: m.id ?? '', parameters: { triton_final_response: { bool_param: final } } } };
    }
  }

  /** Writes the responses that are next in request order. */
  #flush(): void {
    while (this.#slots.length > 0) {
      const head = this.#slots[0]!;
      for (const msg of head.queued.splice(0)) this.#write(msg);
      this.#hold(-head.queuedBytes);
      head.queuedBytes = 0;
      if (!head.done && !head.streaming) return;
      this.#slots.shift();
    }
  }

  #write(msg: object): void {
    if (this.#closed) return;
    try {
      if (!this.#call.write(msg) && !this.#needDrain) {
        // The client is not reading: read no more requests until it does.
        this.#needDrain = true;
        this.#drained = new Promise((resolve) => { this.#onDrained = resolve; });
        this.#call.once('drain', () => {
          this.#needDrain = false;
          this.#writable();
          this.#flow();
        });
        this.#flow();
      }
    } catch (err) {
      this.#logger.warning(`gRPC stream write failed: ${(err as Error).message}`);
    }
  }

  /** Settles #drained: the client read, or the call is over (what waits on it goes on, or stops). */
  #writable(): void {
    this.#onDrained?.();
    this.#onDrained = undefined;
    this.#drained = undefined;
  }

  #fail(err: unknown): void {
    this.#writable();
    if (this.#closed) return;
    this.#closed = true;
    this.#abort.abort();
    this.#call.emit('error', grpcError(err, this.#logger));
  }

  #maybeEnd(): void {
    if (this.#readEnded && this.#inflight === 0 && !this.#closed) {
      this.#flush();
      this.#closed = true;
      this.#call.end();
    }
  }
}

/**
 * The HTTP/2 stream under a grpc-js call, where the front door recorded its compressed messages:
 * grpc-js keeps it private (the call's `call`, a BaseServerInterceptingCall behind any
 * interceptors' `nextCall`, holds it as `stream`). Should a grpc-js release move it, a compressed
 * stream's messages stay counted until the stream ends (still bounded: the budget refuses past
 * its limit), and grpc-decompression-budget.test.ts fails.
 */
function http2StreamOf(call: object): object | undefined {
  let c: unknown = (call as { call?: unknown }).call;
  for (let i = 0; i < 8 && typeof c === 'object' && c !== null; i++) {
    const s = (c as { stream?: unknown }).stream;
    if (typeof s === 'object' && s !== null) return s;
    c = (c as { nextCall?: unknown }).nextCall;
  }
  return undefined;
}

/** HTTP/2 flow-control window of each stream and connection (bytes in flight before the client waits). */
export const GRPC_FLOW_CONTROL_WINDOW = 8 * 1024 * 1024;

/**
 * grpc-js servers keep HTTP/2's default 64 KiB receive window, so a request of a few hundred KiB
 * (an image, a feature map) waits a round trip per 64 KiB for WINDOW_UPDATEs. grpc-js offers no
 * option for it; its http2 server settings object is set here before binding (if the private
 * field moves in a grpc-js release, nothing breaks: the window stays at the default).
 */
function raiseFlowControlWindow(server: Server, maxBytes: number): void {
  const common = (server as unknown as { commonServerOptions?: { settings?: Record<string, unknown> } }).commonServerOptions;
  if (!common) return;
  // Larger DATA frames too: a 110 KB tensor then arrives in one or two reads, not seven.
  common.settings = { ...common.settings, initialWindowSize: Math.min(GRPC_FLOW_CONTROL_WINDOW, maxBytes, 2147483647), maxFrameSize: 1024 * 1024 };
}

/**
 * The most bytes of a call's request headers (its metadata, HTTP/2's header list size: each
 * name and value plus 32): gRPC C++'s hard limit (GRPC_ARG_ABSOLUTE_MAX_METADATA_SIZE, 16 KiB),
 * which Triton keeps, and the size of HTTP's header limit. Node's default is 64 KiB and HPACK lets
 * a client send it in a few bytes (copies of one indexed value): 1,000 idle ModelStreamInfer
 * streams, 150 KB on the wire, held 100 MB for as long as the connection stayed (review).
 */
export const GRPC_MAX_METADATA_BYTES = 16 * 1024;

/**
 * Caps request headers at GRPC_MAX_METADATA_BYTES: advertised as SETTINGS_MAX_HEADER_LIST_SIZE,
 * which node:http2 enforces once the client has acknowledged it (RST_STREAM ENHANCE_YOUR_CALM,
 * RESOURCE_EXHAUSTED to gRPC clients, before the headers reach JavaScript); the front door refuses
 * a call over it from a client that has not (transport-guard.ts). Set in grpc-js's settings
 * object, as raiseFlowControlWindow does.
 */
function capMetadata(server: Server): void {
  const common = (server as unknown as { commonServerOptions?: { settings?: Record<string, unknown> } }).commonServerOptions;
  if (!common) return;
  common.settings = { ...common.settings, maxHeaderListSize: GRPC_MAX_METADATA_BYTES };
}

/**
 * The connection-level window (shared by all streams of a client) is not a setting: it is raised
 * on each new session. Without this, concurrent calls carrying large tensors queue behind 64 KiB
 * of connection window (measured: ppocr_cls over gRPC at c=16 went from 0.52x to 0.98x of HTTP).
 */
function raiseSessionWindows(server: Server): void {
  const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  for (const h2 of servers?.keys() ?? []) {
    h2.on('connection', (socket: { setNoDelay?: (on?: boolean) => void }) => socket.setNoDelay?.(true));
    h2.on('session', (session: Http2Session) => {
      try {
        session.setLocalWindowSize(GRPC_FLOW_CONTROL_WINDOW);
      } catch {
        // a session that closed at once: nothing to tune
      }
    });
  }
}

/** Default of GrpcServerOptions.maxConcurrentStreams (gRPC servers commonly use 100 to 1000). */
export const DEFAULT_MAX_CONCURRENT_STREAMS = 1000;
/** Default of GrpcServerOptions.maxStreamResetBurst (half of nghttp2's own burst). */
export const DEFAULT_MAX_STREAM_RESET_BURST = 500;
/** Default of GrpcServerOptions.maxStreamResetsPerSecond (below nghttp2's own 33/s). */
export const DEFAULT_MAX_STREAM_RESETS_PER_SECOND = 30;

/**
 * The most bytes of a control call's message (every RPC but ModelInfer, ModelStreamInfer and
 * RepositoryModelLoad, which carry tensors or model files): HTTP's limit for its control routes.
 * Those messages were decoded whatever their size, up to --grpc-max-message-size (2 GiB): one
 * TraceSetting of 140 million empty strings (272 KB gzipped) ended the process (review).
 */
export const GRPC_CONTROL_MAX_MESSAGE_BYTES = CONTROL_MAX_BODY_SIZE;

/** The RPCs whose messages may be as large as the server's message limit: they carry tensors or model files. */
const LARGE_MESSAGE_RPCS = new Set(['ModelInfer', 'ModelStreamInfer', 'RepositoryModelLoad']);

/** What a control call's deserializer gives for a message over GRPC_CONTROL_MAX_MESSAGE_BYTES, instead of decoding it. */
const OVERSIZED = Symbol('oversized control message');
type Oversized = { [OVERSIZED]: number };
const isOversized = (m: unknown): m is Oversized => typeof m === 'object' && m !== null && OVERSIZED in m;

/** What RepositoryModelLoad's deserializer gives, instead of decoding it, for a message that cannot be a load request (`loadRequestProblem`): why. */
const NOT_A_LOAD = Symbol('not a load request');
type NotALoad = { [NOT_A_LOAD]: string };
const isNotALoad = (m: unknown): m is NotALoad => typeof m === 'object' && m !== null && NOT_A_LOAD in m;

/**
 * A service (inference or health) with its ModelInfer and ModelStreamInfer requests checked on
 * the wire before they are decoded (infer-request-scan.ts; the fast path checks its own),
 * RepositoryModelLoad's fields counted on the wire (load-request-scan.ts), and the messages of
 * control calls (health Check too) measured before they are decoded.
 */
function checkedDecoding(def: Record<string, GrpcMethodDefinition>): Record<string, GrpcMethodDefinition> {
  for (const [name, method] of Object.entries(def)) {
    const decode = method.requestDeserialize;
    if (name === 'ModelInfer' || name === 'ModelStreamInfer') {
      method.requestDeserialize = (b) => decodeInferRequest(b, decode) as ReturnType<typeof decode>;
    } else if (name === 'RepositoryModelLoad') {
      // Its fields counted on the wire first: decoding makes an object or a string for each.
      method.requestDeserialize = (b) => {
        const problem = loadRequestProblem(b);
        return (problem === undefined ? decode(b) : { [NOT_A_LOAD]: problem }) as ReturnType<typeof decode>;
      };
    } else if (!LARGE_MESSAGE_RPCS.has(name)) {
      method.requestDeserialize = (b) => (b.byteLength > GRPC_CONTROL_MAX_MESSAGE_BYTES ? { [OVERSIZED]: b.byteLength } : decode(b)) as ReturnType<typeof decode>;
    }
  }
  return def;
}

/** Starts the gRPC frontend over a backplane. */
export async function startGrpcServer(backplane: Backplane, options: GrpcServerOptions = {}): Promise<GrpcServerHandle> {
  const ka = options.keepalive ?? {};
  const stallMs = options.responseStallTimeoutMs ?? DEFAULT_GRPC_RESPONSE_STALL_TIMEOUT_MS;
  if (!Number.isSafeInteger(stallMs) || stallMs <= 0) throw new RangeError('options.responseStallTimeoutMs must be a positive integer');
  const requestStallMs = options.requestStallTimeoutMs ?? DEFAULT_GRPC_REQUEST_STALL_TIMEOUT_MS;
  if (!Number.isSafeInteger(requestStallMs) || requestStallMs <= 0) throw new RangeError('options.requestStallTimeoutMs must be a positive integer');
  const handshakeMs = options.handshakeTimeoutMs ?? DEFAULT_GRPC_HANDSHAKE_TIMEOUT_MS;
  if (!Number.isSafeInteger(handshakeMs) || handshakeMs <= 0) throw new RangeError('options.handshakeTimeoutMs must be a positive integer');
  const maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
  const server = new Server({
    'grpc.max_receive_message_length': maxBytes,
    'grpc.max_send_message_length': maxBytes,
    'grpc.keepalive_time_ms': ka.timeMs ?? 7200000,
    'grpc.keepalive_timeout_ms': ka.timeoutMs ?? 20000,
    'grpc.keepalive_permit_without_calls': ka.permitWithoutCalls ? 1 : 0,
    'grpc.http2.max_pings_without_data': ka.maxPingsWithoutData ?? 2,
    'grpc.http2.min_ping_interval_without_data_ms': ka.minRecvPingIntervalWithoutDataMs ?? 300000,
    'grpc.http2.max_ping_strikes': ka.maxPingStrikes ?? 2,
    ...(ka.maxConnectionAgeMs !== undefined ? { 'grpc.max_connection_age_ms': ka.maxConnectionAgeMs } : {}),
    ...(ka.maxConnectionAgeGraceMs !== undefined ? { 'grpc.max_connection_age_grace_ms': ka.maxConnectionAgeGraceMs } : {}),
    // Channelz (grpc's introspection service) is not served; its per-call bookkeeping costs CPU.
    'grpc.enable_channelz': 0,
    'grpc.max_concurrent_streams': options.maxConcurrentStreams ?? DEFAULT_MAX_CONCURRENT_STREAMS,
  });
  raiseFlowControlWindow(server, maxBytes);
  capMetadata(server);
  const restrictions = options.restrictions ?? new Map();
  const logger = options.logger ?? silentLogger;
  // `value` reads one metadata key: grpc-js Metadata and the raw HTTP/2 headers alike.
  const guardHeaders = (rpc: string, value: (key: string) => unknown): void => {
    const group = GROUP_OF[rpc];
    const need = group ? restrictions.get(group) : undefined;
    if (!need) return;
    const header = `triton-grpc-protocol-${need.key}`;
    if (String(value(header) ?? '') !== need.value) {
      throw new TriodeError('UNAVAILABLE', `This protocol is restricted, expecting header '${header}'`);
    }
  };
  const guard = (rpc: string, md: Metadata): void => guardHeaders(rpc, (k) => md.get(k)[0]);
  server.addService(checkedDecoding(serviceDefinition('inference.GRPCInferenceService')), inferenceService(backplane, options, guard));
  server.addService(checkedDecoding(serviceDefinition('grpc.health.v1.Health')), {
    Check: (call: ServerUnaryCall<{ service?: string }, object>, callback: sendUnaryData<object>) => {
      try {
        guard('Check', call.metadata);
      } catch (err) {
        callback(grpcError(err, logger) as ServiceError);
        return;
      }
      if (isOversized(call.request)) {
        callback({ code: status.RESOURCE_EXHAUSTED, details: `a Check message of ${call.request[OVERSIZED]} bytes is over the limit of ${GRPC_CONTROL_MAX_MESSAGE_BYTES} bytes for control calls` } as ServiceError);
        return;
      }
      const service = call.request.service ?? '';
      if (service !== '' && service !== 'inference.GRPCInferenceService') {
        callback({ code: status.NOT_FOUND, details: `unknown service '${echo(service)}'` } as ServiceError);
        return;
      }
      backplane.isReady().then(
        (ready) => callback(null, { status: ready ? HEALTH_SERVING : HEALTH_NOT_SERVING }),
        () => callback(null, { status: HEALTH_NOT_SERVING }),
      );
    },
  });
  const tls = options.tls;
  const credentials = tls
    ? ServerCredentials.createSsl(tls.rootCert ?? null, [{ private_key: tls.key, cert_chain: tls.cert }], tls.mutual === true)
    : ServerCredentials.createInsecure();
  const address = options.address ?? '0.0.0.0:8001';
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, credentials, (err, p) => (err ? reject(err) : resolve(p)));
  });
  raiseSessionWindows(server);
  const servers = (server as unknown as { http2Servers?: Map<EventEmitter, unknown> }).http2Servers;
  const levels: Record<string, number> = { low: 1, medium: 6, high: 9 };
  const level = levels[options.inferResponseCompression ?? 'none'];
  const fast = options.inferFastPath !== false || level !== undefined;
  const front = installStreamFront(servers?.keys() ?? [], {
    logger,
    responseStallTimeoutMs: stallMs,
    requestStallTimeoutMs: requestStallMs,
    handshakeTimeoutMs: handshakeMs,
    maxMetadataBytes: GRPC_MAX_METADATA_BYTES,
    resets: {
      burst: options.maxStreamResetBurst ?? DEFAULT_MAX_STREAM_RESET_BURST,
      perSecond: options.maxStreamResetsPerSecond ?? DEFAULT_MAX_STREAM_RESETS_PER_SECOND,
    },
    guard: (rpc, headers) => guardHeaders(rpc, (k) => headers[k]),
    // Compressed messages inflate to no more than an uncompressed one may be (control calls and
    // health Check: GRPC_CONTROL_MAX_MESSAGE_BYTES), before grpc-js sees them.
    inflateLimit: (rpc) => (LARGE_MESSAGE_RPCS.has(rpc) ? { bytes: maxBytes, control: false } : { bytes: GRPC_CONTROL_MAX_MESSAGE_BYTES, control: true }),
    decompression: options.decompressionBudget ?? new DecompressionBudget(),
    decodedBytes: inferDecodedBytes,
    ...(fast ? {
      fastPath: inferFastPath({
        backplane,
        maxMessageBytes: maxBytes,
        logger,
        ...(level !== undefined ? { compressionLevel: level } : {}),
        ...(options.tracer ? { tracer: options.tracer } : {}),
        ...(options.headerForwardPattern ? { headerForwardPattern: options.headerForwardPattern } : {}),
        ...(options.sharedMemory ? { sharedMemory: sharedMemoryFactory(options)! } : {}),
      }),
    } : {}),
  });
  return {
    port,
    close: (graceMs = 5000) => new Promise<void>((resolve) => {
      const done = (): void => {
        front.close();
        resolve();
      };
      const timer = setTimeout(() => {
        server.forceShutdown();
        done();
      }, graceMs);
      server.tryShutdown(() => {
        clearTimeout(timer);
        done();
      });
    }),
  };
}
