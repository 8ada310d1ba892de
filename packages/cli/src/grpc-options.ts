/**
 * @module The gRPC flags of `triode serve` and `triode gateway`, with tritonserver's names and
 * defaults. Triton: server/src/command_line_parser.cc (GRPC options)
 */
import { readFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import type { Backplane, LogSettings, Logger } from '@triode/core';
import { headerPattern, parseRestrictions, startGrpcServer, type GrpcServerHandle, type GrpcServerOptions, type TraceSettings, type Tracer } from '@triode/gateway';
import { parseBool, parseInteger } from './serve-options.js';

/** Parsed gRPC flags. */
export interface GrpcFlags {
  allow: boolean;
  /** Options for startGrpcServer (address, TLS, keepalive, restrictions). */
  server: GrpcServerOptions;
  /** `--grpc-infer-response-compression-level` (ModelInfer responses; streams stay uncompressed). */
  responseCompression: 'none' | 'low' | 'medium' | 'high';
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Adds the gRPC flags to a command. */
export function addGrpcFlags(cmd: Command): Command {
  return cmd
    .option('--allow-grpc <bool>', 'serve the gRPC API (inference.GRPCInferenceService)', parseBool, true)
    .option('--grpc-port <port>', 'gRPC port', parseInteger(0), 8001)
    .option('--grpc-address <addr>', 'gRPC address', '0.0.0.0')
    .option('--grpc-use-ssl <bool>', 'serve gRPC over TLS (needs --grpc-server-cert and --grpc-server-key)', parseBool, false)
    .option('--grpc-use-ssl-mutual <bool>', 'TLS with client certificates checked against --grpc-root-cert', parseBool, false)
    .option('--grpc-server-cert <file>', 'PEM certificate chain of the server')
    .option('--grpc-server-key <file>', 'PEM private key of the server')
    .option('--grpc-root-cert <file>', 'PEM root certificate(s) for client certificates')
    .option('--grpc-keepalive-time <ms>', 'keepalive ping interval', parseInteger(1), 7200000)
    .option('--grpc-keepalive-timeout <ms>', 'how long to wait for a keepalive ping answer', parseInteger(1), 20000)
    .option('--grpc-keepalive-permit-without-calls <bool>', 'allow keepalive pings with no call active', parseBool, false)
    .option('--grpc-http2-max-pings-without-data <n>', 'pings allowed without data', parseInteger(0), 2)
    .option('--grpc-http2-min-recv-ping-interval-without-data <ms>', 'shortest ping interval accepted without data', parseInteger(0), 300000)
    .option('--grpc-http2-max-ping-strikes <n>', 'bad pings tolerated before closing the connection', parseInteger(0), 2)
    .option('--grpc-header-forward-pattern <regex>', 'metadata whose keys match becomes request parameters')
    .option('--grpc-restricted-protocol <protocols:key=value>', 'protocols (health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging) that need metadata triton-grpc-protocol-<key>=<value> (repeatable)', collect, [])
    .addOption(new Option('--grpc-infer-response-compression-level <level>', 'gzip ModelInfer responses (low, medium, high)').choices(['none', 'low', 'medium', 'high']).default('none'))
    .addOption(new Option('--grpc-infer-allocation-pool-size <n>', 'accepted for compatibility; no effect').argParser(parseInteger(0)).hideHelp())
    .addOption(new Option('--grpc-infer-thread-count <n>', 'accepted for compatibility; no effect').argParser(parseInteger(1)).hideHelp());
}

/** Commander's parsed values into GrpcFlags; reads the TLS files. */
export function toGrpcFlags(o: Record<string, unknown>): GrpcFlags {
  const server: GrpcServerOptions = {
    address: `${o['grpcAddress'] as string}:${o['grpcPort'] as number}`,
    keepalive: {
      timeMs: o['grpcKeepaliveTime'] as number,
      timeoutMs: o['grpcKeepaliveTimeout'] as number,
      permitWithoutCalls: o['grpcKeepalivePermitWithoutCalls'] as boolean,
      maxPingsWithoutData: o['grpcHttp2MaxPingsWithoutData'] as number,
      minRecvPingIntervalWithoutDataMs: o['grpcHttp2MinRecvPingIntervalWithoutData'] as number,
      maxPingStrikes: o['grpcHttp2MaxPingStrikes'] as number,
    },
  };
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
  return { allow: o['allowGrpc'] as boolean, server, responseCompression: o['grpcInferResponseCompressionLevel'] as GrpcFlags['responseCompression'] };
}

/** Starts the gRPC frontend when allowed; logs where it listens. */
export async function startGrpc(
  backplane: Backplane, flags: GrpcFlags, logSettings: LogSettings, traceSettings: TraceSettings, logger: Logger, tracer?: Tracer,
): Promise<GrpcServerHandle | undefined> {
  if (!flags.allow) return undefined;
  if (flags.responseCompression !== 'none') {
    logger.info(`gRPC ModelInfer responses are gzip-compressed (level ${flags.responseCompression}) for clients that accept it; ModelStreamInfer responses are not (grpc-js cannot compress)`);
  }
  const grpc = await startGrpcServer(backplane, { ...flags.server, logSettings, traceSettings, logger, inferResponseCompression: flags.responseCompression, ...(tracer ? { tracer } : {}) });
  logger.info(`Started GRPCInferenceService at ${flags.server.address?.replace(/:\d+$/, '')}:${grpc.port}`);
  return grpc;
}
