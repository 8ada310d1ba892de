/**
 * @module `triode serve` flags, with tritonserver's names and defaults, parsed into options.
 * Triton: server/src/command_line_parser.cc
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import type { GpuQueryOptions, RateLimitResource } from '@triode/core';
import { DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES, parseMetricsConfig, parseRestrictions, type MetricsConfig, type Restrictions } from '@triode/frontends';
import { addGrpcFlags, toGrpcFlags, type GrpcFlags } from './grpc-options.js';

/** Everything `triode serve` is told on its command line. */
export interface ServeOptions {
  modelRepositories: string[];
  allowHttp: boolean;
  /** `--allow-client-shm`: clients may register system shared memory regions and name them in infer requests. */
  allowClientShm: boolean;
  httpPort: number;
  httpAddress: string;
  httpMaxInputSize: number;
  /** `--http-restricted-api` flags. */
  httpRestrictedApi: string[];
  /** `--http-header-forward-pattern`. */
  httpHeaderForwardPattern?: string;
  /** `--max-decompressed-request-bytes`: what compressed requests in flight may hold decompressed, HTTP and gRPC together. */
  maxDecompressedRequestBytes: number;
  grpc: GrpcFlags;
  allowMetrics: boolean;
  metricsPort: number;
  /** `--metrics-address`: where the metrics server listens (Triton's default: `--http-address`). */
  metricsAddress: string;
  metricsConfig: MetricsConfig;
  /** `--allow-gpu-metrics` as given (undefined: not given; the gauges are on wherever a GPU is found). */
  allowGpuMetrics?: boolean;
  /** How GPUs are found: `nvidia-smi` (env TRIODE_NVIDIA_SMI) and CUDA_VISIBLE_DEVICES. */
  gpuQuery: GpuQueryOptions;
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
  /** `--max-instances-per-model`: most instances of one model version (undefined: the core's default, sized to the machine). */
  maxInstancesPerModel?: number;
  /** `--model-load-timeout-secs`: how long a model version may take to load. */
  modelLoadTimeoutSecs: number;
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
  /** `--rate-limit`. */
  rateLimit: 'off' | 'execution_count';
  /** `--rate-limit-resource` flags. */
  rateLimitResources: RateLimitResource[];
  /** Lines to log at start: tritonserver flags accepted with no effect here, deprecated spellings used (the gRPC ones: `grpc.notes`). */
  notes: FlagNote[];
}

/** A line `triode serve` logs at start about a flag it was given. */
export interface FlagNote {
  level: 'info' | 'warning';
  text: string;
}

export function parseBool(v: string): boolean {
  const s = v.trim().toLowerCase();
  if (['true', '1', 'on', 'yes'].includes(s)) return true;
  if (['false', '0', 'off', 'no'].includes(s)) return false;
  throw new InvalidArgumentError(`expected a boolean (true/false), got '${v}'`);
}

/**
 * An integer flag in [min, max], written in decimal digits: `Number()` alone took '' as 0 and
 * '0x10' as 16, so `--http-port ''` listened on a random port.
 */
export function parseInteger(min: number, max = Number.MAX_SAFE_INTEGER) {
  return (v: string): number => {
    const t = v.trim();
    const n = /^[+-]?\d{1,16}$/.test(t) ? Number(t) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) {
      throw new InvalidArgumentError(max === Number.MAX_SAFE_INTEGER ? `expected an integer >= ${min}, got '${v}'` : `expected an integer from ${min} to ${max}, got '${v}'`);
    }
    return n;
  };
}

/** A TCP port flag (0: any free one), refused before anything loads when out of range. */
export const parsePort = parseInteger(0, 65535);

/** The longest delay a Node timer holds (ms): past it, setTimeout fires after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A duration flag in `unit`: an integer >= `min`, clamped to what a timer holds (about 24.8 days;
 * longer is "never" in practice). Unclamped, `--repository-poll-secs 2147484` polled every
 * millisecond and `--model-load-timeout-secs 2147484` failed every load at once.
 */
export function parseDuration(min: number, unit: 'ms' | 's') {
  const max = unit === 'ms' ? MAX_TIMER_MS : Math.floor(MAX_TIMER_MS / 1000);
  return (v: string): number => Math.min(parseInteger(min)(v), max);
}

/** `--log-verbose`: a level, or true (1) / false (0) as tritonserver reads it. */
export function parseLogVerbose(v: string): number {
  const s = v.trim().toLowerCase();
  return s === 'true' ? 1 : s === 'false' ? 0 : parseInteger(0)(v);
}

function collect(v: string, prev: string[] = []): string[] {
  return [...prev, v];
}

/** `--metrics-config` / `--metrics-interval-ms` (and `--pinned-memory-pool-byte-size`, the pinned pool gauge) into a MetricsConfig (errors name the flag). */
export function metricsConfigFrom(o: Record<string, unknown>): MetricsConfig {
  try {
    const cpu = o['allowCpuMetrics'] as boolean | undefined;
    const gpu = o['allowGpuMetrics'] as boolean | undefined;
    const pinned = o['pinnedMemoryPoolByteSize'] as number | undefined;
    return {
      ...parseMetricsConfig((o['metricsConfig'] as string[] | undefined) ?? []),
      intervalMs: (o['metricsIntervalMs'] as number | undefined) ?? 2000,
      ...(cpu === false ? { cpuMetrics: false } : {}),
      ...(gpu === false ? { gpuMetrics: false } : {}),
      ...(pinned !== undefined ? { pinnedMemoryPoolBytes: pinned } : {}),
    };
  } catch (err) {
    throw new InvalidArgumentError((err as Error).message);
  }
}

/**
 * How GPUs are found, from the environment: `TRIODE_NVIDIA_SMI` (the `nvidia-smi` to run, e.g. a
 * stand-in) and `CUDA_VISIBLE_DEVICES` (the GPUs this process may use).
 */
export function gpuQueryFrom(env: NodeJS.ProcessEnv = process.env): GpuQueryOptions {
  return {
    ...(env['TRIODE_NVIDIA_SMI'] ? { nvidiaSmi: env['TRIODE_NVIDIA_SMI'] } : {}),
    ...(env['CUDA_VISIBLE_DEVICES'] !== undefined ? { cudaVisibleDevices: env['CUDA_VISIBLE_DEVICES'] } : {}),
  };
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

/**
 * A trace level as Triton's parser reads it (any case): false/off, true/on/min/max/timestamps,
 * tensors.
 */
export function traceLevel(v: string, flag = '--trace-config level'): 'OFF' | 'TIMESTAMPS' | 'TENSORS' {
  const s = v.trim().toLowerCase();
  if (s === 'false' || s === 'off') return 'OFF';
  if (['true', 'on', 'min', 'max', 'timestamps'].includes(s)) return 'TIMESTAMPS';
  if (s === 'tensors') return 'TENSORS';
  throw new InvalidArgumentError(`${flag}: invalid value for trace level: '${v}' (OFF, TIMESTAMPS or TENSORS)`);
}

/** Several levels are combined; an explicit OFF among them turns tracing off (as in Triton). */
function traceLevels(levels: readonly string[], flag?: string): string[] {
  const parsed = levels.map((l) => traceLevel(l, flag));
  return parsed.includes('OFF') ? ['OFF'] : [...new Set(parsed)];
}

/** `--trace-config [triton,]<key>=<value>` flags into trace settings (Triton's field names). */
export function parseTraceConfig(flags: readonly string[]): Record<string, string | string[]> {
  const names: Record<string, string> = {
    file: 'trace_file', level: 'trace_level', rate: 'trace_rate', count: 'trace_count', log_frequency: 'log_frequency', 'log-frequency': 'log_frequency', mode: 'mode',
  };
  const out: Record<string, string | string[]> = {};
  const levels: string[] = [];
  for (const f of flags) {
    const m = /^(?:(triton|opentelemetry),)?([a-z_-]+)=(.+)$/i.exec(f.trim());
    const key = m ? names[m[2]!.toLowerCase()] : undefined;
    if (m && (m[1]?.toLowerCase() === 'opentelemetry' || (key === 'mode' && m[3]!.toLowerCase() !== 'triton'))) {
      throw new InvalidArgumentError(`--trace-config expects Triton's trace mode: OpenTelemetry tracing is not supported by Triode, got '${f}'`);
    }
    if (!m || !key) throw new InvalidArgumentError(`--trace-config expects [triton,]<file|level|rate|count|log_frequency|mode>=<value>, got '${f}'`);
    if (key === 'mode') continue; // mode=triton: the only mode there is
    if (key === 'trace_level') levels.push(m[3]!);
    else if (key !== 'trace_file' && !/^-?\d+$/.test(m[3]!)) throw new InvalidArgumentError(`--trace-config ${m[2]}: expected an integer, got '${m[3]}'`);
    else out[key] = m[3]!;
  }
  if (levels.length) out['trace_level'] = traceLevels(levels);
  return out;
}

/**
 * The initial trace settings: the deprecated `--trace-file`, `--trace-level`, `--trace-rate`,
 * `--trace-count` and `--trace-log-frequency` first, `--trace-config` over them (as in Triton).
 * Each deprecated flag used adds a note.
 */
export function traceConfigFrom(o: Record<string, unknown>, notes: FlagNote[] = []): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  const old: [flag: string, key: string, config: string][] = [
    ['--trace-file', 'traceFile', 'triton,file'], ['--trace-rate', 'traceRate', 'rate'], ['--trace-count', 'traceCount', 'count'],
    ['--trace-log-frequency', 'traceLogFrequency', 'triton,log-frequency'], ['--trace-level', 'traceLevel', 'level'],
  ];
  const field: Record<string, string> = { traceFile: 'trace_file', traceRate: 'trace_rate', traceCount: 'trace_count', traceLogFrequency: 'log_frequency', traceLevel: 'trace_level' };
  for (const [flag, key, config] of old) {
    const v = o[key] as string | number | string[] | undefined;
    if (v === undefined || (Array.isArray(v) && v.length === 0)) continue;
    notes.push({ level: 'info', text: `${flag} is deprecated (in Triton too): it is read as --trace-config ${config}=<value>` });
    out[field[key]!] = Array.isArray(v) ? traceLevels(v, flag) : String(v);
  }
  return { ...out, ...parseTraceConfig((o['traceConfig'] as string[] | undefined) ?? []) };
}

/** The backends built into Triode (their names in `--backend-config` and `backend:`). */
export const BACKEND_NAMES = ['onnxruntime', 'javascript'] as const;

/**
 * `--backend-config` settings into a map per backend: `<backend>,<key>=<value>` for one backend,
 * `<key>=<value>` (Triton's global form, e.g. `default-max-batch-size=8`) for every backend; a
 * backend's own setting wins over a global one whatever their order.
 */
export function parseBackendConfig(entries: readonly string[]): Record<string, Record<string, string>> {
  const global: Record<string, string> = {};
  const own: Record<string, Record<string, string>> = {};
  for (const e of entries) {
    const m = /^(?:([^,=]+),)?([^,=]+)=(.+)$/.exec(e);
    if (!m) throw new InvalidArgumentError(`--backend-config must be <backend>,<setting>=<value> or <setting>=<value>, got '${e}'`);
    const [, backend, key, value] = m as unknown as [string, string | undefined, string, string];
    if (key === 'default-max-batch-size' && !/^\d+$/.test(value)) {
      throw new InvalidArgumentError(`--backend-config ${key}: expected an integer >= 0, got '${value}'`);
    }
    if (backend === undefined) global[key] = value;
    else (own[backend] ??= {})[key] = value;
  }
  const out: Record<string, Record<string, string>> = {};
  for (const b of new Set<string>([...BACKEND_NAMES, ...Object.keys(own)])) {
    const merged = { ...global, ...own[b] };
    if (Object.keys(merged).length) out[b] = merged;
  }
  return out;
}

/** One of `choices`, in any case (tritonserver lower-cases these values). */
export function oneOf<T extends string>(choices: readonly T[]) {
  return (v: string): T => {
    const c = choices.find((x) => x === v.trim().toLowerCase());
    if (!c) throw new InvalidArgumentError(`expected one of ${choices.join(', ')}, got '${v}'`);
    return c;
  };
}

/** `--rate-limit-resource` values (`<name>:<count>[:<device>]`, already checked) as the core's resources. */
export function parseRateLimitResources(entries: readonly string[] = []): RateLimitResource[] {
  return entries.map((e) => {
    const [name, count, device] = e.split(':') as [string, string, string | undefined];
    return { name, count: Number(count), ...(device !== undefined ? { device: Number(device) } : {}) };
  });
}

/**
 * A `--rate-limit-resource` value: its form, and a count and device that fit the rate limiter's
 * uint32 (a count past 2^53 reached the core as another number, and its check's message was
 * printed as the CLI's; review).
 */
export function rateLimitResource(v: string, prev: string[] = []): string[] {
  const all = shaped(/^[^:]+:\d+(?::\d+)?$/, '<resource_name>:<count>[:<device>]')(v, prev);
  const [, count, device] = all[all.length - 1]!.split(':');
  if (Number(count) > 0xffffffff || (device !== undefined && Number(device) > 0xffffffff)) {
    throw new InvalidArgumentError(`expected <resource_name>:<count>[:<device>] with a count and device of at most 4294967295, got '${v}'`);
  }
  return all;
}

/** A repeatable flag whose values must have a form (checked as Triton's parser does). */
function shaped(re: RegExp, form: string) {
  return (v: string, prev: string[] = []): string[] => {
    if (!re.test(v.trim())) throw new InvalidArgumentError(`expected ${form}, got '${v}'`);
    return [...prev, v.trim()];
  };
}

/** One value of a given form. */
function shapedOne(re: RegExp, form: string) {
  return (v: string): string => shaped(re, form)(v)[0]!;
}

/**
 * `--max-decompressed-request-bytes`, as `triode serve` and `triode gateway` take it: one budget
 * for both frontends of the process (Triode's own; Triton has no such limit).
 */
export function maxDecompressedRequestBytesOption(): Option {
  return new Option('--max-decompressed-request-bytes <bytes>', 'most bytes compressed requests in flight (HTTP Content-Encoding, gRPC grpc-encoding) may hold decompressed, all together; past it a compressed request is refused (503 / UNAVAILABLE) until some finish; uncompressed requests are not counted')
    .argParser(parseInteger(1)).default(DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES);
}

/** `--allow-client-shm`'s help (serve and gateway). */
export const ALLOW_CLIENT_SHM_HELP = 'let clients register system shared memory regions (POSIX shm objects in /dev/shm) and name them in infer requests instead of sending tensors; CUDA shared memory is not supported';

const CPU_ONLY = 'Triode keeps no CUDA memory pools: GPU instances run through the onnxruntime execution providers, which allocate device memory themselves';
const NO_SAGEMAKER = 'Triode has no SageMaker frontend (--allow-sagemaker=true is refused)';
const NO_VERTEX = 'Triode has no Vertex AI frontend (--allow-vertex-ai=true is refused)';

/**
 * tritonserver flags accepted so Triton command lines start, with no effect here: each one given
 * is logged at start with the reason. `same`: values that ask for what Triode does anyway (not
 * logged). `warn`: logged as a warning (the flag asks for a behaviour Triode does not have).
 */
export const NO_EFFECT_FLAGS: readonly { flag: string; key: string; because: string; same?: readonly unknown[]; warn?: boolean }[] = [
  { flag: '--pinned-memory-pool-byte-size', key: 'pinnedMemoryPoolByteSize', because: `${CPU_ONLY}; tensors stay in ordinary host memory` },
  { flag: '--cuda-memory-pool-byte-size', key: 'cudaMemoryPoolByteSize', because: CPU_ONLY },
  { flag: '--cuda-virtual-address-size', key: 'cudaVirtualAddressSize', because: CPU_ONLY },
  { flag: '--enable-peer-access', key: 'enablePeerAccess', because: CPU_ONLY },
  { flag: '--min-supported-compute-capability', key: 'minSupportedComputeCapability', because: CPU_ONLY },
  { flag: '--model-load-gpu-limit', key: 'modelLoadGpuLimit', because: CPU_ONLY },
  { flag: '--buffer-manager-thread-count', key: 'bufferManagerThreadCount', because: 'tensors are copied by the thread that handles them (no buffer manager threads)' },
  { flag: '--host-policy', key: 'hostPolicy', because: 'model instances are not pinned to NUMA nodes or CPU cores' },
  { flag: '--backend-directory', key: 'backendDirectory', because: 'the backends (onnxruntime, javascript) are built in; no backend libraries are loaded' },
  { flag: '--repoagent-directory', key: 'repoagentDirectory', because: 'repository agents are built in (checksum); no agent libraries are loaded' },
  { flag: '--cache-directory', key: 'cacheDirectory', because: 'the response cache is built in (--cache-config local,size=<bytes>); no cache libraries are loaded' },
  { flag: '--http-thread-count', key: 'httpThreadCount', because: 'HTTP is served on the event loop (model instances have their own threads: instance_group count)' },
  { flag: '--reuse-http-port', key: 'reuseHttpPort', because: 'Node 20 cannot set SO_REUSEPORT: run one server per port (or triode gateway and workers to scale out)', same: [false], warn: true },
  { flag: '--sagemaker-port', key: 'sagemakerPort', because: NO_SAGEMAKER },
  { flag: '--sagemaker-safe-port-range', key: 'sagemakerSafePortRange', because: NO_SAGEMAKER },
  { flag: '--sagemaker-thread-count', key: 'sagemakerThreadCount', because: NO_SAGEMAKER },
  { flag: '--vertex-ai-port', key: 'vertexAiPort', because: NO_VERTEX },
  { flag: '--vertex-ai-thread-count', key: 'vertexAiThreadCount', because: NO_VERTEX },
  { flag: '--vertex-ai-default-model', key: 'vertexAiDefaultModel', because: NO_VERTEX },
];

/** The notes for the no-effect flags given in `o` (see NO_EFFECT_FLAGS). */
export function noEffectNotes(o: Record<string, unknown>, table: typeof NO_EFFECT_FLAGS = NO_EFFECT_FLAGS): FlagNote[] {
  const notes: FlagNote[] = [];
  for (const f of table) {
    const v = o[f.key];
    if (v === undefined || (Array.isArray(v) && v.length === 0) || f.same?.includes(v)) continue;
    const shown = Array.isArray(v) ? v.map(String).join(` ${f.flag}=`) : String(v);
    notes.push({ level: f.warn ? 'warning' : 'info', text: `${f.flag}=${shown}: accepted, no effect here because ${f.because}` });
  }
  return notes;
}

/** Adds the tritonserver flags that have no effect in Triode (see NO_EFFECT_FLAGS), and the refused frontends. */
function addCompatFlags(cmd: Command): Command {
  const hidden = <T>(flags: string, description: string, parse: (v: string, prev: T) => T) => new Option(flags, description).argParser(parse).hideHelp();
  return cmd
    .addOption(hidden('--pinned-memory-pool-byte-size <bytes>', 'no effect (CPU only)', parseInteger(0)))
    .addOption(hidden('--cuda-memory-pool-byte-size <gpu:bytes>', 'no effect (CPU only)', shaped(/^\d+:\d+$/, '<GPU device ID>:<pool byte size>')))
    .addOption(hidden('--cuda-virtual-address-size <gpu:bytes>', 'no effect (CPU only)', shaped(/^\d+:\d+$/, '<GPU device ID>:<CUDA virtual address size>')))
    .addOption(hidden('--enable-peer-access <bool>', 'no effect (CPU only)', parseBool))
    .addOption(hidden('--min-supported-compute-capability <n>', 'no effect (CPU only)', shapedOne(/^\d+(?:\.\d+)?$/, 'a compute capability such as 6.0')))
    .addOption(hidden('--model-load-gpu-limit <device:fraction>', 'no effect (CPU only)', shaped(/^\d+:(?:\d+\.?\d*|\.\d+)$/, '<device_id>:<fraction>')))
    .addOption(hidden('--buffer-manager-thread-count <n>', 'no effect', parseInteger(0)))
    .addOption(hidden('--host-policy <name,key=value>', 'no effect', shaped(/^[^,=]+,[^,=]+=.+$/, '<policy_name>,<setting>=<value>')))
    .addOption(hidden('--backend-directory <dir>', 'no effect (backends are built in)', String))
    .addOption(hidden('--repoagent-directory <dir>', 'no effect (repository agents are built in)', String))
    .addOption(hidden('--cache-directory <dir>', 'no effect (the response cache is built in)', String))
    .addOption(new Option('--rate-limit <mode>', 'off: instances execute as soon as they are free; execution_count: only while they hold the resources their rate_limiter lists, by priority').argParser(oneOf(['off', 'execution_count'])))
    .addOption(new Option('--rate-limit-resource <name:count[:device]>', 'available count of a rate limiter resource, on one device or all (repeatable; default: the largest count an instance needs)').argParser(rateLimitResource))
    .addOption(hidden('--http-thread-count <n>', 'no effect (one event loop)', parseInteger(1)))
    .addOption(hidden('--reuse-http-port <bool>', 'no effect (no SO_REUSEPORT on Node 20)', parseBool))
    .addOption(hidden('--allow-sagemaker <bool>', 'SageMaker frontend: not available (true is refused)', parseBool))
    .addOption(hidden('--sagemaker-port <port>', 'no effect (no SageMaker frontend)', parsePort))
    .addOption(hidden('--sagemaker-safe-port-range <from-to>', 'no effect (no SageMaker frontend)', shapedOne(/^\d+-\d+$/, '<integer>-<integer>')))
    .addOption(hidden('--sagemaker-thread-count <n>', 'no effect (no SageMaker frontend)', parseInteger(1)))
    .addOption(hidden('--allow-vertex-ai <bool>', 'Vertex AI frontend: not available (true is refused)', parseBool))
    .addOption(hidden('--vertex-ai-port <port>', 'no effect (no Vertex AI frontend)', parsePort))
    .addOption(hidden('--vertex-ai-thread-count <n>', 'no effect (no Vertex AI frontend)', parseInteger(1)))
    .addOption(hidden('--vertex-ai-default-model <name>', 'no effect (no Vertex AI frontend)', String))
    .addOption(hidden('--trace-file <file>', 'deprecated form of --trace-config triton,file=<file>', String))
    .addOption(hidden('--trace-level <level>', 'deprecated form of --trace-config level=<level> (repeatable)', collect))
    .addOption(hidden('--trace-rate <n>', 'deprecated form of --trace-config rate=<n>', parseInteger(0)))
    .addOption(hidden('--trace-count <n>', 'deprecated form of --trace-config count=<n>', parseInteger(-1)))
    .addOption(hidden('--trace-log-frequency <n>', 'deprecated form of --trace-config triton,log-frequency=<n>', parseInteger(0)));
}

/**
 * `--trace-config`, as `triode serve` and `triode gateway` take it (read with traceConfigFrom):
 * a gateway traces the requests it relays, with the core's timestamps from their workers.
 */
export function traceConfigOption(): Option {
  return new Option('--trace-config <[triton,]key=value>', 'trace settings: file, level (OFF, TIMESTAMPS, TENSORS), rate, count, log_frequency, mode=triton (repeatable)')
    .argParser(collect).default([]);
}

/** Adds the serve flags to a commander command. */
export function addServeFlags(cmd: Command): Command {
  return addCompatFlags(addGrpcFlags(cmd))
    .option('--model-repository <path>', 'model repository path (repeatable; required)', collect)
    .addOption(new Option('--model-store <path>', 'deprecated alias of --model-repository').argParser(collect).hideHelp())
    .option('--allow-http <bool>', 'serve the HTTP/REST API', parseBool, true)
    .option('--allow-client-shm <bool>', ALLOW_CLIENT_SHM_HELP, parseBool, false)
    .option('--http-port <port>', 'HTTP port', parsePort, 8000)
    .option('--http-address <addr>', 'HTTP address', '0.0.0.0')
    .option('--http-max-input-size <bytes>', 'largest request body, received or decompressed', parseInteger(1), 64 * 1024 * 1024)
    .addOption(maxDecompressedRequestBytesOption())
    .option('--http-header-forward-pattern <regex>', 'request headers whose names match become request parameters')
    .option('--http-restricted-api <apis:key=value>', 'API groups (health, metadata, inference, shared-memory, model-config, model-repository, statistics, trace, logging) that answer 403 unless header <key> is <value> (repeatable)', collect, [])
    .option('--allow-metrics <bool>', 'serve Prometheus metrics on --metrics-port', parseBool, true)
    .option('--metrics-port <port>', 'metrics port (GET /metrics)', parsePort, 8002)
    .option('--metrics-address <addr>', 'metrics address (default: --http-address)')
    .option('--allow-cpu-metrics <bool>', 'report the nv_cpu_* utilization and memory gauges', parseBool, true)
    .option('--allow-gpu-metrics <bool>', 'report the nv_gpu_* gauges of the GPUs nvidia-smi lists (default: true; env TRIODE_NVIDIA_SMI names another nvidia-smi)', parseBool)
    .option('--metrics-config <key=value>', 'summary_latencies, summary_quantiles, histogram_latencies, histogram_buckets, counter_latencies (repeatable)', collect, [])
    .option('--metrics-interval-ms <ms>', 'how often CPU and memory metrics are sampled', parseDuration(1, 'ms'), 2000)
    .option('--id <name>', 'server name in the server metadata', 'triton')
    .option('--strict-readiness <bool>', 'ready only when every model is ready', parseBool, true)
    .option('--exit-timeout-secs <n>', 'how long shutdown waits for in-flight requests', parseDuration(0, 's'), 30)
    .option('--exit-on-error <bool>', 'exit when a model fails to load at startup', parseBool, false)
    .option('--disable-auto-complete-config', 'require complete config.pbtxt files')
    .addOption(new Option('--strict-model-config <bool>', 'deprecated form of --disable-auto-complete-config').argParser(parseBool))
    .option('--model-config-name <name>', 'use <model>/configs/<name>.pbtxt when present')
    .addOption(new Option('--model-control-mode <mode>', 'none: load all at start; explicit: --load-model at start, then the repository API; poll: load all, then follow the repository').argParser(oneOf(['none', 'explicit', 'poll'])).default('none'))
    .option('--load-model <name>', 'explicit mode: a model to load at start (repeatable; * for all)', collect, [])
    .option('--repository-poll-secs <n>', 'poll mode: how often the repositories are re-read', parseDuration(1, 's'), 15)
    .option('--model-load-thread-count <n>', 'model versions loading at once', parseInteger(1), 4)
    .option('--model-load-retry-count <n>', 'times a failed model load is tried again', parseInteger(0), 0)
    .option('--max-instances-per-model <n>', 'most instances of one model version, over all its instance groups (default: max(16, 4 x CPUs))', parseInteger(1))
    .option('--model-load-timeout-secs <n>', 'a model version still loading after this fails UNAVAILABLE', parseDuration(1, 's'), 300)
    .option('--model-namespacing <bool>', 'false only: a model name must be unique across the repositories', parseBool, false)
    .option('--backend-config <[backend,]key=value>', 'backend setting, for one backend or (without <backend>,) all, e.g. default-max-batch-size=8 (repeatable)', collect, [])
    .option('--log-verbose <level>', 'verbose log level (true is 1, false 0)', parseLogVerbose, 0)
    .option('--log-info <bool>', 'log info messages', parseBool, true)
    .option('--log-warning <bool>', 'log warnings', parseBool, true)
    .option('--log-error <bool>', 'log errors', parseBool, true)
    .addOption(new Option('--log-format <format>', 'timestamps: default (UTC) or ISO8601 (local offset)').choices(['default', 'ISO8601']).default('default'))
    .option('--log-file <file>', 'write log lines to this file (appended) instead of stderr')
    .option('--cache-config <local,size=bytes>', 'the response cache (models opt in with response_cache { enable: true })')
    .addOption(new Option('--response-cache-byte-size <bytes>', 'deprecated form of --cache-config local,size=<bytes>').argParser(parseInteger(0)).hideHelp())
    .addOption(traceConfigOption());
}

/** Commander's parsed values into ServeOptions. */
export function toServeOptions(o: Record<string, unknown>): ServeOptions {
  const repos = [...((o['modelRepository'] as string[]) ?? []), ...((o['modelStore'] as string[]) ?? [])];
  if (repos.length === 0) throw new InvalidArgumentError('--model-repository (or --model-store) is required');
  if (o['modelNamespacing'] === true) {
    throw new InvalidArgumentError('--model-namespacing=true is not supported: Triode needs model names unique across the repositories (a name found in two is unavailable); use --model-namespacing=false');
  }
  if (o['allowSagemaker'] === true) throw new InvalidArgumentError('--allow-sagemaker=true is not supported: Triode has no SageMaker frontend (/ping, /invocations)');
  if (o['allowVertexAi'] === true) throw new InvalidArgumentError('--allow-vertex-ai=true is not supported: Triode has no Vertex AI frontend');
  const strict = o['strictModelConfig'] as boolean | undefined;
  const notes = noEffectNotes(o);
  if (strict !== undefined) notes.push({ level: 'info', text: '--strict-model-config is deprecated (in Triton too): --strict-model-config=true is --disable-auto-complete-config' });
  if (o['responseCacheByteSize'] !== undefined) {
    notes.push(o['cacheConfig'] !== undefined
      ? { level: 'warning', text: '--response-cache-byte-size is ignored: --cache-config is given (tritonserver refuses the two together)' }
      : { level: 'info', text: '--response-cache-byte-size is deprecated (in Triton too): it is read as --cache-config local,size=<value>' });
  }
  const traceConfig = traceConfigFrom(o, notes);
  const grpc = toGrpcFlags(o);
  return {
    modelRepositories: repos,
    allowHttp: o['allowHttp'] as boolean,
    allowClientShm: o['allowClientShm'] === true,
    httpPort: o['httpPort'] as number,
    httpAddress: o['httpAddress'] as string,
    httpMaxInputSize: o['httpMaxInputSize'] as number,
    httpRestrictedApi: (o['httpRestrictedApi'] as string[] | undefined) ?? [],
    ...(o['httpHeaderForwardPattern'] ? { httpHeaderForwardPattern: o['httpHeaderForwardPattern'] as string } : {}),
    maxDecompressedRequestBytes: (o['maxDecompressedRequestBytes'] as number | undefined) ?? DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES,
    grpc,
    allowMetrics: o['allowMetrics'] as boolean,
    metricsPort: o['metricsPort'] as number,
    metricsAddress: (o['metricsAddress'] as string | undefined) ?? (o['httpAddress'] as string),
    metricsConfig: metricsConfigFrom(o),
    ...(o['allowGpuMetrics'] !== undefined ? { allowGpuMetrics: o['allowGpuMetrics'] as boolean } : {}),
    gpuQuery: gpuQueryFrom(),
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
    ...(o['maxInstancesPerModel'] !== undefined ? { maxInstancesPerModel: o['maxInstancesPerModel'] as number } : {}),
    modelLoadTimeoutSecs: (o['modelLoadTimeoutSecs'] as number | undefined) ?? 300,
    backendConfig: parseBackendConfig(o['backendConfig'] as string[]),
    logVerbose: o['logVerbose'] as number,
    logInfo: o['logInfo'] as boolean,
    logWarning: o['logWarning'] as boolean,
    logError: o['logError'] as boolean,
    logFormat: o['logFormat'] as ServeOptions['logFormat'],
    ...(o['logFile'] ? { logFile: o['logFile'] as string } : {}),
    traceConfig,
    responseCacheBytes: cacheBytesFrom(o),
    rateLimit: (o['rateLimit'] as ServeOptions['rateLimit'] | undefined) ?? 'off',
    rateLimitResources: parseRateLimitResources(o['rateLimitResource'] as string[] | undefined),
    notes,
  };
}
