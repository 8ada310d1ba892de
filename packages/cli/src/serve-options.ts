/**
 * @module `triode serve` flags, with tritonserver's names and defaults, parsed into options.
 * Triton: server/src/command_line_parser.cc
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { parseMetricsConfig, parseRestrictions, type MetricsConfig, type Restrictions } from '@triode/gateway';
import { addGrpcFlags, toGrpcFlags, type GrpcFlags } from './grpc-options.js';

/** Everything `triode serve` is told on its command line. */
export interface ServeOptions {
  modelRepositories: string[];
  allowHttp: boolean;
  httpPort: number;
  httpAddress: string;
  httpMaxInputSize: number;
  /** `--http-restricted-api` flags. */
  httpRestrictedApi: string[];
  /** `--http-header-forward-pattern`. */
  httpHeaderForwardPattern?: string;
  grpc: GrpcFlags;
  allowMetrics: boolean;
  metricsPort: number;
  metricsConfig: MetricsConfig;
  id: string;
  strictReadiness: boolean;
  exitTimeoutSecs: number;
  exitOnError: boolean;
  autoCompleteConfig: boolean;
  modelConfigName?: string;
  modelControlMode: 'none' | 'explicit' | 'poll';
  loadModels: string[];
  repositoryPollSecs: number;
  modelLoadThreadCount: number;
  modelLoadRetryCount: number;
  backendConfig: Record<string, Record<string, string>>;
  logVerbose: number;
  logInfo: boolean;
  logWarning: boolean;
  logError: boolean;
  logFormat: 'default' | 'ISO8601';
  /** `--log-file`: log lines go to this file (appended) instead of stderr. */
  logFile?: string;
  /** `--trace-config`: initial trace settings (Triton's field names). */
  traceConfig: Record<string, string | string[]>;
  /** `--cache-config local,size=N` (or `--response-cache-byte-size`): response cache bytes, 0 for none. */
  responseCacheBytes: number;
}

export function parseBool(v: string): boolean {
  const s = v.trim().toLowerCase();
  if (['true', '1', 'on', 'yes'].includes(s)) return true;
  if (['false', '0', 'off', 'no'].includes(s)) return false;
  throw new InvalidArgumentError(`expected a boolean (true/false), got '${v}'`);
}

export function parseInteger(min: number) {
  return (v: string): number => {
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < min) throw new InvalidArgumentError(`expected an integer >= ${min}, got '${v}'`);
    return n;
  };
}

function collect(v: string, prev: string[] = []): string[] {
  return [...prev, v];
}

/** `--metrics-config` / `--metrics-interval-ms` into a MetricsConfig (errors name the flag). */
export function metricsConfigFrom(o: Record<string, unknown>): MetricsConfig {
  try {
    return { ...parseMetricsConfig((o['metricsConfig'] as string[] | undefined) ?? []), intervalMs: (o['metricsIntervalMs'] as number | undefined) ?? 2000 };
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

/** `--cache-config local,size=<bytes>` (Triton's only cache is `local`) or the deprecated byte size flag. */
export function cacheBytesFrom(o: Record<string, unknown>): number {
  const cfg = o['cacheConfig'] as string | undefined;
  if (!cfg) return (o['responseCacheByteSize'] as number | undefined) ?? 0;
  const m = /^local,size=(\d+)$/.exec(cfg.trim());
  if (!m) throw new InvalidArgumentError(`--cache-config expects local,size=<bytes>, got '${cfg}'`);
  return Number(m[1]);
}

/** `--http-restricted-api` flags parsed (errors name the flag). */
export function httpRestrictionsFrom(flags: readonly string[]): Restrictions | undefined {
  if (flags.length === 0) return undefined;
  try {
    return parseRestrictions(flags);
  } catch (err) {
    throw new InvalidArgumentError(`--http-restricted-api: ${(err as Error).message}`);
  }
}

/** `--trace-config [triton,]<key>=<value>` flags into trace settings (Triton's field names). */
export function parseTraceConfig(flags: readonly string[]): Record<string, string | string[]> {
  const names: Record<string, string> = { file: 'trace_file', level: 'trace_level', rate: 'trace_rate', count: 'trace_count', log_frequency: 'log_frequency' };
  const out: Record<string, string | string[]> = {};
  for (const f of flags) {
    const m = /^(?:triton,)?([a-z_]+)=(.*)$/.exec(f);
    const key = m ? names[m[1]!] : undefined;
    if (!m || !key) throw new InvalidArgumentError(`--trace-config expects [triton,]<file|level|rate|count|log_frequency>=<value>, got '${f}'`);
    if (key === 'trace_level') out[key] = [...((out[key] as string[] | undefined) ?? []), m[2]!];
    else out[key] = m[2]!;
  }
  return out;
}

/** `<backend>,<key>=<value>` settings into a map per backend. */
export function parseBackendConfig(entries: readonly string[]): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const e of entries) {
    const m = /^([^,=]+),([^=]+)=(.*)$/.exec(e);
    if (!m) throw new InvalidArgumentError(`--backend-config must be <backend>,<setting>=<value>, got '${e}'`);
    (out[m[1]!] ??= {})[m[2]!] = m[3]!;
  }
  return out;
}

/** Adds the serve flags to a commander command. */
export function addServeFlags(cmd: Command): Command {
  return addGrpcFlags(cmd)
    .requiredOption('--model-repository <path>', 'model repository path (repeatable)', collect)
    .addOption(new Option('--model-store <path>', 'deprecated alias of --model-repository').argParser(collect).hideHelp())
    .option('--allow-http <bool>', 'serve the HTTP/REST API', parseBool, true)
    .option('--http-port <port>', 'HTTP port', parseInteger(0), 8000)
    .option('--http-address <addr>', 'HTTP address', '0.0.0.0')
    .option('--http-max-input-size <bytes>', 'largest request body, received or decompressed', parseInteger(1), 64 * 1024 * 1024)
    .option('--http-header-forward-pattern <regex>', 'request headers whose names match become request parameters')
    .option('--http-restricted-api <apis:key=value>', 'API groups (health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging) that answer 403 unless header <key> is <value> (repeatable)', collect, [])
    .option('--allow-metrics <bool>', 'serve Prometheus metrics on --metrics-port', parseBool, true)
    .option('--metrics-port <port>', 'metrics port (GET /metrics)', parseInteger(0), 8002)
    .option('--metrics-config <key=value>', 'summary_latencies, summary_quantiles, histogram_latencies, histogram_buckets, counter_latencies (repeatable)', collect, [])
    .option('--metrics-interval-ms <ms>', 'how often CPU and memory metrics are sampled', parseInteger(1), 2000)
    .option('--id <name>', 'server name in the server metadata', 'triton')
    .option('--strict-readiness <bool>', 'ready only when every model is ready', parseBool, true)
    .option('--exit-timeout-secs <n>', 'how long shutdown waits for in-flight requests', parseInteger(0), 30)
    .option('--exit-on-error <bool>', 'exit when a model fails to load at startup', parseBool, false)
    .option('--disable-auto-complete-config', 'require complete config.pbtxt files')
    .addOption(new Option('--strict-model-config <bool>', 'deprecated form of --disable-auto-complete-config').argParser(parseBool))
    .option('--model-config-name <name>', 'use <model>/configs/<name>.pbtxt when present')
    .addOption(new Option('--model-control-mode <mode>', 'none: load all at start; explicit: --load-model at start, then the repository API; poll: load all, then follow the repository').choices(['none', 'explicit', 'poll']).default('none'))
    .option('--load-model <name>', 'explicit mode: a model to load at start (repeatable; * for all)', collect, [])
    .option('--repository-poll-secs <n>', 'poll mode: how often the repositories are re-read', parseInteger(1), 15)
    .option('--model-load-thread-count <n>', 'model versions loading at once', parseInteger(1), 4)
    .option('--model-load-retry-count <n>', 'times a failed model load is tried again', parseInteger(0), 0)
    .option('--backend-config <backend,key=value>', 'backend setting (repeatable)', collect, [])
    .option('--log-verbose <level>', 'verbose log level', parseInteger(0), 0)
    .option('--log-info <bool>', 'log info messages', parseBool, true)
    .option('--log-warning <bool>', 'log warnings', parseBool, true)
    .option('--log-error <bool>', 'log errors', parseBool, true)
    .addOption(new Option('--log-format <format>', 'timestamps: default (UTC) or ISO8601 (local offset)').choices(['default', 'ISO8601']).default('default'))
    .option('--log-file <file>', 'write log lines to this file (appended) instead of stderr')
    .option('--cache-config <local,size=bytes>', 'the response cache (models opt in with response_cache { enable: true })')
    .addOption(new Option('--response-cache-byte-size <bytes>', 'deprecated form of --cache-config local,size=<bytes>').argParser(parseInteger(0)).hideHelp())
    .option('--trace-config <[triton,]key=value>', 'trace settings: file, level (OFF, TIMESTAMPS), rate, count, log_frequency (repeatable)', collect, []);
}

/** Commander's parsed values into ServeOptions. */
export function toServeOptions(o: Record<string, unknown>): ServeOptions {
  const repos = [...((o['modelRepository'] as string[]) ?? []), ...((o['modelStore'] as string[]) ?? [])];
  const strict = o['strictModelConfig'] as boolean | undefined;
  return {
    modelRepositories: repos,
    allowHttp: o['allowHttp'] as boolean,
    httpPort: o['httpPort'] as number,
    httpAddress: o['httpAddress'] as string,
    httpMaxInputSize: o['httpMaxInputSize'] as number,
    httpRestrictedApi: (o['httpRestrictedApi'] as string[] | undefined) ?? [],
    ...(o['httpHeaderForwardPattern'] ? { httpHeaderForwardPattern: o['httpHeaderForwardPattern'] as string } : {}),
    grpc: toGrpcFlags(o),
    allowMetrics: o['allowMetrics'] as boolean,
    metricsPort: o['metricsPort'] as number,
    metricsConfig: metricsConfigFrom(o),
    id: o['id'] as string,
    strictReadiness: o['strictReadiness'] as boolean,
    exitTimeoutSecs: o['exitTimeoutSecs'] as number,
    exitOnError: o['exitOnError'] as boolean,
    autoCompleteConfig: !(o['disableAutoCompleteConfig'] === true || strict === true),
    ...(o['modelConfigName'] ? { modelConfigName: o['modelConfigName'] as string } : {}),
    modelControlMode: o['modelControlMode'] as ServeOptions['modelControlMode'],
    loadModels: (o['loadModel'] as string[]) ?? [],
    repositoryPollSecs: (o['repositoryPollSecs'] as number) ?? 15,
    modelLoadThreadCount: (o['modelLoadThreadCount'] as number) ?? 4,
    modelLoadRetryCount: (o['modelLoadRetryCount'] as number) ?? 0,
    backendConfig: parseBackendConfig(o['backendConfig'] as string[]),
    logVerbose: o['logVerbose'] as number,
    logInfo: o['logInfo'] as boolean,
    logWarning: o['logWarning'] as boolean,
    logError: o['logError'] as boolean,
    logFormat: o['logFormat'] as ServeOptions['logFormat'],
    ...(o['logFile'] ? { logFile: o['logFile'] as string } : {}),
    traceConfig: parseTraceConfig((o['traceConfig'] as string[] | undefined) ?? []),
    responseCacheBytes: cacheBytesFrom(o),
  };
}
