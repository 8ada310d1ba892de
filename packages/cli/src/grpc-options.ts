/**
 * @module The gRPC flags of `triode serve` and `triode gateway`, with tritonserver's names and
 * defaults. Triton: server/src/command_line_parser.cc (GRPC options)
 */
import { isIP } from 'node:net';
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Backplane, LogSettings, Logger } from '@triode/core';
import {
  headerPattern, parseRestrictions, startGrpcServer,
  type DecompressionBudget, type GrpcServerHandle, type GrpcServerOptions, type SystemSharedMemory, type TraceSettings, type Tracer,
} from '@triode/frontends';
import { noEffectNotes, oneOf, parseBool, parseDuration, parseInteger, parsePort, type FlagNote } from './serve-options.js';

/** Parsed gRPC flags. */
export interface GrpcFlags {
  allow: boolean;
  /** Options for startGrpcServer (address, TLS, keepalive, restrictions). */
  server: GrpcServerOptions;
  /** `--grpc-infer-response-compression-level` (ModelInfer responses; streams stay uncompressed). */
  responseCompression: 'none' | 'low' | 'medium' | 'high';
  /** tritonserver gRPC flags given that have no effect here: logged when the frontend starts. */
  notes: FlagNote[];
}

/** tritonserver's gRPC flags that have no effect in Triode, and why. */
const GRPC_NO_EFFECT_FLAGS = [
  { flag: '--grpc-infer-thread-count', key: 'grpcInferThreadCount', because: 'gRPC is served on the event loop (model instances have their own threads: instance_group count)' },
  { flag: '--grpc-infer-allocation-pool-size', key: 'grpcInferAllocationPoolSize', because: 'Node allocates request and response objects per call; there is no pool to size' },
  { flag: '--grpc-max-response-pool-size', key: 'grpcMaxResponsePoolSize', because: 'Node allocates response objects per call; there is no pool to size' },
  { flag: '--reuse-grpc-port', key: 'reuseGrpcPort', because: 'grpc-js on Node 20 does not set SO_REUSEPORT: run one server per port (or triode gateway and workers to scale out)', same: [false], warn: true },
];

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Adds the gRPC flags to a command. */
export function addGrpcFlags(cmd: Command): Command {
  return cmd
    .option('--allow-grpc <bool>', 'serve the gRPC API (inference.GRPCInferenceService)', parseBool, true)
    .option('--grpc-port <port>', 'gRPC port', parsePort, 8001)
    .option('--grpc-address <addr>', 'gRPC address', '0.0.0.0')
    .option('--grpc-use-ssl <bool>', 'serve gRPC over TLS (needs --grpc-server-cert and --grpc-server-key)', parseBool, false)
    .option('--grpc-use-ssl-mutual <bool>', 'TLS with client certificates checked against --grpc-root-cert', parseBool, false)
    .option('--grpc-server-cert <file>', 'PEM certificate chain of the server')
    .option('--grpc-server-key <file>', 'PEM private key of the server')
    .option('--grpc-root-cert <file>', 'PEM root certificate(s) for client certificates')
    .option('--grpc-keepalive-time <ms>', 'keepalive ping interval', parseDuration(1, 'ms'), 7200000)
    .option('--grpc-keepalive-timeout <ms>', 'how long to wait for a keepalive ping answer', parseDuration(1, 'ms'), 20000)
    .option('--grpc-keepalive-permit-without-calls <bool>', 'allow keepalive pings with no call active', parseBool, false)
    .option('--grpc-http2-max-pings-without-data <n>', 'pings allowed without data', parseInteger(0), 2)
    .option('--grpc-http2-min-recv-ping-interval-without-data <ms>', 'shortest ping interval accepted without data', parseDuration(0, 'ms'), 300000)
    .option('--grpc-http2-max-ping-strikes <n>', 'bad pings tolerated before closing the connection', parseInteger(0), 2)
    .option('--grpc-header-forward-pattern <regex>', 'metadata whose keys match becomes request parameters')
    .option('--grpc-restricted-protocol <protocols:key=value>', 'protocols (health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging) that need metadata triton-grpc-protocol-<key>=<value> (repeatable)', collect, [])
    .addOption(new Option('--grpc-infer-response-compression-level <level>', 'none, or gzip ModelInfer responses: low, medium, high').argParser(oneOf(['none', 'low', 'medium', 'high'])).default('none'))
    .option('--grpc-max-message-size <bytes>', 'largest gRPC message received or sent, checked from its length prefix before it is buffered (Triton: 2 GiB - 1)', parseInteger(1), 2147483647)
    .option('--grpc-max-concurrent-streams <n>', 'calls one HTTP/2 connection may have open at once', parseInteger(1), 1000)
    .option('--grpc-max-stream-resets-per-second <n>', 'streams a client may reset per second (after a burst of 500) before its connection is closed with GOAWAY ENHANCE_YOUR_CALM (rapid-reset defence)', parseInteger(1), 30)
    .option('--grpc-max-connection-age <ms>', 'a connection is closed (GOAWAY) after this long (default: never)', parseDuration(1, 'ms'))
    .option('--grpc-max-connection-age-grace <ms>', 'how long calls in flight may finish after --grpc-max-connection-age (default: no limit)', parseDuration(0, 'ms'))
    .addOption(new Option('--grpc-infer-allocation-pool-size <n>', 'accepted for compatibility; no effect').argParser(parseInteger(0)).hideHelp())
    .addOption(new Option('--grpc-infer-thread-count <n>', 'accepted for compatibility; no effect').argParser(parseInteger(1)).hideHelp())
    .addOption(new Option('--grpc-max-response-pool-size <n>', 'accepted for compatibility; no effect').argParser(parseInteger(1)).hideHelp())
    .addOption(new Option('--reuse-grpc-port <bool>', 'accepted for compatibility; no effect (no SO_REUSEPORT)').argParser(parseBool).hideHelp());
}

/** `host:port` for grpc-js; a bare IPv6 address (`::1`) in brackets, as its target syntax needs. */
export function hostPort(host: string, port: number): string {
  return isIP(host) === 6 ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Commander's parsed values into GrpcFlags; reads the TLS files. */
export function toGrpcFlags(o: Record<string, unknown>): GrpcFlags {
  const server: GrpcServerOptions = {
    address: hostPort(o['grpcAddress'] as string, o['grpcPort'] as number),
    keepalive: {
      timeMs: o['grpcKeepaliveTime'] as number,
      timeoutMs: o['grpcKeepaliveTimeout'] as number,
      permitWithoutCalls: o['grpcKeepalivePermitWithoutCalls'] as boolean,
      maxPingsWithoutData: o['grpcHttp2MaxPingsWithoutData'] as number,
      minRecvPingIntervalWithoutDataMs: o['grpcHttp2MinRecvPingIntervalWithoutData'] as number,
      maxPingStrikes: o['grpcHttp2MaxPingStrikes'] as number,
      ...(o['grpcMaxConnectionAge'] !== undefined ? { maxConnectionAgeMs: o['grpcMaxConnectionAge'] as number } : {}),
      ...(o['grpcMaxConnectionAgeGrace'] !== undefined ? { maxConnectionAgeGraceMs: o['grpcMaxConnectionAgeGrace'] as number } : {}),
    },
  };
  if (o['grpcMaxMessageSize'] !== undefined) server.maxMessageBytes = o['grpcMaxMessageSize'] as number;
  if (o['grpcMaxConcurrentStreams'] !== undefined) server.maxConcurrentStreams = o['grpcMaxConcurrentStreams'] as number;
  if (o['grpcMaxStreamResetsPerSecond'] !== undefined) server.maxStreamResetsPerSecond = o['grpcMaxStreamResetsPerSecond'] as number;
  if (o['grpcHeaderForwardPattern']) server.headerForwardPattern = headerPattern(o['grpcHeaderForwardPattern'] as string)!;
  const restricted = (o['grpcRestrictedProtocol'] as string[]) ?? [];
  if (restricted.length) {
    try {
      server.restrictions = parseRestrictions(restricted);
    } catch (err) {
      throw new InvalidArgumentError(`--grpc-restricted-protocol: ${(err as Error).message}`);
    }
  }
  const mutual = o['grpcUseSslMutual'] === true;
  if (o['grpcUseSsl'] === true || mutual) {
    const cert = o['grpcServerCert'] as string | undefined;
    const key = o['grpcServerKey'] as string | undefined;
    if (!cert || !key) throw new InvalidArgumentError('--grpc-use-ssl needs --grpc-server-cert and --grpc-server-key');
    const root = o['grpcRootCert'] as string | undefined;
    if (mutual && !root) throw new InvalidArgumentError('--grpc-use-ssl-mutual needs --grpc-root-cert');
    server.tls = { cert: readFileSync(cert), key: readFileSync(key), mutual, ...(root ? { rootCert: readFileSync(root) } : {}) };
  }
  return {
    allow: o['allowGrpc'] as boolean, server, responseCompression: o['grpcInferResponseCompressionLevel'] as GrpcFlags['responseCompression'],
    notes: noEffectNotes(o, GRPC_NO_EFFECT_FLAGS),
  };
}

/** What the gRPC frontend shares with the HTTP one of the same process. */
export interface SharedWithHttp {
  tracer?: Tracer;
  /** `--allow-client-shm=true`: the regions clients register. */
  sharedMemory?: SystemSharedMemory;
  /** `--max-decompressed-request-bytes`: one budget for both frontends. */
  decompressionBudget?: DecompressionBudget;
}

/** Starts the gRPC frontend when allowed; logs where it listens. */
export async function startGrpc(
  backplane: Backplane, flags: GrpcFlags, logSettings: LogSettings, traceSettings: TraceSettings, logger: Logger, shared: SharedWithHttp = {},
): Promise<GrpcServerHandle | undefined> {
  const { tracer, sharedMemory, decompressionBudget } = shared;
  for (const n of flags.notes) logger[n.level](n.text);
  if (!flags.allow) return undefined;
  if (flags.responseCompression !== 'none') {
    logger.info(`gRPC ModelInfer responses are gzip-compressed (level ${flags.responseCompression}) for clients that accept it; ModelStreamInfer responses are not (grpc-js cannot compress)`);
  }
  const grpc = await startGrpcServer(backplane, { ...flags.server, logSettings, traceSettings, logger, inferResponseCompression: flags.responseCompression,
    ...(tracer ? { tracer } : {}), ...(sharedMemory ? { sharedMemory } : {}), ...(decompressionBudget ? { decompressionBudget } : {}),
  });
  logger.info(`Started GRPCInferenceService at ${flags.server.address?.replace(/:\d+$/, '')}:${grpc.port}`);
  return grpc;
}
