/**
 * @module The Prometheus endpoint (`--metrics-port`, default 8002, `GET /metrics`): Triton's
 * `nv_inference_*` families with its names, types and labels (`model`, `version`, one `_<key>`
 * per `metric_tags` entry; `reason` on failures), read from the server's statistics at each
 * scrape, plus CPU, memory and GPU gauges. A model's `model_metrics` sets its histogram buckets.
 * Triton: core/src/metrics.cc, metric_model_reporter.cc
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, Summary } from 'prom-client';
import type { GpuDevice, LatencyObservation, ModelMetricSettings, ModelStatistics, StreamBacklog } from '@triode/core';
import { timerMs } from '@triode/core';
import { DistributionFamily, SnapshotFamily, modelLabels, type FamilySample, type LiveSeries } from './model-metric-family.js';
import { keepServingOnError } from '../server-errors.js';
import { checkedServerOptions, connectionGuard, type HttpServerOptions } from '../http/listen.js';

/** One model version in `MetricsSource.metricsSnapshot()`. */
export interface ModelMetricsEntry extends Partial<ModelMetricSettings> {
  name: string;
  version: string;
  stats: ModelStatistics;
  failures: Record<string, number>;
  pending: number;
  /** How long the version took to load, seconds (0 for an ensemble, as Triton; none on a gateway). */
  loadSeconds?: number;
}

/** What the metrics are read from (an InferenceServer has it). */
export interface MetricsSource {
  /**
   * Per model version: statistics, queue depth, and (workers, `triode serve`) the labels and
   * histogram buckets its config gives its metrics. A gateway's entries have neither.
   */
  metricsSnapshot(): ModelMetricsEntry[];
  /** Per-request latencies, for histograms and summaries, with the version's metric settings. */
  observeLatencies?(listener: (model: string, version: string, o: LatencyObservation, settings?: ModelMetricSettings) => void): void;
  /** The response cache's counters, when the server has a cache. */
  responseCacheStats?(): { entries: number; bytes: number; capacity: number; hits: number; misses: number; evictions: number; lookupNs: number; insertNs: number } | undefined;
  /** Cluster mode: messages dropped for a missing or wrong cluster-secret signature, per kind. */
  clusterRejected?(): ReadonlyMap<string, number>;
  /** Cluster mode (gateways): each model's request stream backlog, read at each scrape. */
  clusterBacklog?(): Promise<StreamBacklog[]>;
  /** Cluster mode (gateways): async jobs kept in Redis, by BullMQ state. */
  asyncJobCounts?(): Promise<Record<string, number>>;
  /**
   * `triode serve` and workers: the GPUs' readings (`queryGpus`), sampled every interval for the
   * `nv_gpu_*` gauges. Gateways have none: their GPUs are the workers'.
   */
  gpuStatus?(): Promise<readonly GpuDevice[]>;
}

/** `--metrics-config` and `--metrics-interval-ms`, with Triton's keys and defaults. */
export interface MetricsConfig {
  /** `counter_latencies`: the cumulative `*_duration_us` counters. @default true */
  counterLatencies?: boolean;
  /** `summary_latencies`: `nv_inference_{request,queue,compute_*}_summary_us`. @default false */
  summaryLatencies?: boolean;
  /** `summary_quantiles`: quantile:error pairs. @default 0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001,0.999:0.001 */
  summaryQuantiles?: [number, number][];
  /** `histogram_latencies`: `nv_inference_first_response_histogram_ms`. @default false */
  histogramLatencies?: boolean;
  /** Bucket bounds (ms) of the histogram for models whose `model_metrics` sets none. @default 100,500,2000,5000 */
  histogramBucketsMs?: number[];
  /** How often CPU and memory are sampled (`--metrics-interval-ms`). @default 2000 */
  intervalMs?: number;
  /** `--allow-cpu-metrics`: the `nv_cpu_*` gauges (false: neither reported nor sampled). @default true */
  cpuMetrics?: boolean;
  /** `--allow-gpu-metrics`: the `nv_gpu_*` gauges and `nv_energy_consumption`, when the source has `gpuStatus` (false: neither reported nor sampled). @default true */
  gpuMetrics?: boolean;
  /**
   * `--pinned-memory-pool-byte-size`: what `nv_pinned_memory_pool_total_bytes` reports (Triode has
   * no pinned pool: the gauge shows the size the flag configures, and the used gauge 0). A gateway
   * (`familyPrefix`) reports neither. @default 268435456 (Triton's default pool size)
   */
  pinnedMemoryPoolBytes?: number;
  /**
   * Family names start with this instead of `nv_inference_` / `nv_` (a gateway's are
   * `triode_gateway_*`: its view of requests it relayed is not counted again in a sum over the
   * workers' `nv_inference_*`). @default none: Triton's names
   */
  familyPrefix?: string;
}

/** A family's name under `config.familyPrefix` (Triton's name without one). */
function familyName(config: MetricsConfig, name: string): string {
  return config.familyPrefix ? config.familyPrefix + name.replace(/^nv_(inference_)?/, '') : name;
}

/** Triton's default `--pinned-memory-pool-byte-size` (256 MiB). */
export const DEFAULT_PINNED_MEMORY_POOL_BYTES = 268435456;

/** Triton's default summary quantiles and their allowed errors. */
export const DEFAULT_SUMMARY_QUANTILES: [number, number][] = [[0.5, 0.05], [0.9, 0.01], [0.95, 0.001], [0.99, 0.001], [0.999, 0.001]];

/**
 * Parses `--metrics-config <key>=<value>` flags (Triton's keys, plus `histogram_buckets`).
 * @throws Error naming a bad key or value.
 */
export function parseMetricsConfig(flags: readonly string[]): MetricsConfig {
  const out: MetricsConfig = {};
  const bool = (k: string, v: string) => {
    if (v !== 'true' && v !== 'false') throw new Error(`--metrics-config ${k}: expected true or false, got '${v}'`);
    return v === 'true';
  };
  for (const f of flags) {
    const i = f.indexOf('=');
    if (i <= 0) throw new Error(`--metrics-config expects <key>=<value>, got '${f}'`);
    const k = f.slice(0, i).trim();
    const v = f.slice(i + 1).trim();
    switch (k) {
      case 'counter_latencies': out.counterLatencies = bool(k, v); break;
      case 'summary_latencies': out.summaryLatencies = bool(k, v); break;
      case 'histogram_latencies': out.histogramLatencies = bool(k, v); break;
      case 'summary_quantiles':
        out.summaryQuantiles = v.split(',').map((pair) => {
          const [q, e] = pair.split(':').map(Number);
          if (!(q! > 0 && q! < 1) || !(e! >= 0 && e! < 1)) throw new Error(`--metrics-config summary_quantiles: expected <quantile>:<error>,..., got '${v}'`);
          return [q!, e!] as [number, number];
        });
        break;
      case 'histogram_buckets': {
        const b = v.split(',').map(Number);
        if (b.length === 0 || b.some((x) => !Number.isFinite(x)) || b.some((x, j) => j > 0 && x <= b[j - 1]!)) {
          throw new Error(`--metrics-config histogram_buckets: expected increasing numbers, got '${v}'`);
        }
        out.histogramBucketsMs = b;
        break;
      }
      default:
        throw new Error(`--metrics-config: unknown key '${k}' (counter_latencies, summary_latencies, summary_quantiles, histogram_latencies, histogram_buckets)`);
    }
  }
  return out;
}

const US = 1e-3;

/** CPU utilization between two reads of /proc/stat (0..1), Linux only. Triton: metrics.cc (CPU metrics). */
function cpuSampler(): () => number {
  let last: { busy: number; total: number } | undefined;
  return () => {
    try {
      const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
      const idle = (line[3] ?? 0) + (line[4] ?? 0);
      const total = line.reduce((a, b) => a + b, 0);
      const now = { busy: total - idle, total };
      const prev = last;
      last = now;
      if (!prev || now.total === prev.total) return 0;
      return (now.busy - prev.busy) / (now.total - prev.total);
    } catch {
      return 0;
    }
  };
}

function memory(): { total: number; used: number } {
  try {
    const info = readFileSync('/proc/meminfo', 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(info)?.[1] ?? 0) * 1024;
    return { total: kb('MemTotal'), used: kb('MemTotal') - kb('MemAvailable') };
  } catch {
    return { total: 0, used: 0 };
  }
}

/**
 * `read()`'s value, read once per event-loop turn: a scrape renders its families one after another
 * in one turn, and each family reading the server's statistics anew would build them ~15 times.
 */
function oncePerTurn<T>(read: () => T): () => T {
  let cached: { value: T } | undefined;
  return () => {
    if (!cached) {
      cached = { value: read() };
      setImmediate(() => { cached = undefined; });
    }
    return cached.value;
  };
}

/** Builds the registry: counters read from `source` when scraped, latency distributions fed per request. */
export function createMetricsRegistry(source: MetricsSource, config: MetricsConfig = {}): Registry & { stopSampling(): void } {
  const registry = new Registry() as Registry & { stopSampling(): void };
  const named = (name: string) => familyName(config, name);
  const snapshot = oncePerTurn(() => source.metricsSnapshot());
  // Per model version, with its metric_tags labels: series of one family may differ in labels.
  const perModel = (name: string, help: string, value: (m: ModelMetricsEntry) => number, type: 'counter' | 'gauge' = 'counter', only?: (m: ModelMetricsEntry) => boolean) => new SnapshotFamily(registry, {
    name, help, type, read: () => (only ? snapshot().filter(only) : snapshot()).map((m) => ({ value: value(m), labels: modelLabels(m) })),
  });
  // Triton's reporter treats a model as cache-enabled when its config enables the cache and the server has one.
  const serverCache = source.responseCacheStats?.() !== undefined;
  const cached = (m: Partial<ModelMetricSettings>) => serverCache && m.responseCache === true;
  perModel(named('nv_inference_request_success'), 'Number of successful inference requests, all batch sizes', (m) => m.stats.inference_stats.success.count);
  new SnapshotFamily(registry, {
    name: named('nv_inference_request_failure'), help: 'Number of failed inference requests, all batch sizes', type: 'counter',
    read: () => snapshot().flatMap((m): FamilySample[] => {
      const labels = modelLabels(m);
      return ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER'].map((reason) => ({ value: m.failures[reason] ?? 0, labels: { ...labels, reason } }));
    }),
  });
  perModel(named('nv_inference_count'), 'Number of inferences performed (does not include cached requests)', (m) => m.stats.inference_count);
  perModel(named('nv_inference_exec_count'), 'Number of model executions performed (does not include cached requests)', (m) => m.stats.execution_count);
  perModel(named('nv_inference_pending_request_count'), 'Instantaneous number of pending requests awaiting execution per-model.', (m) => m.pending, 'gauge');
  new SnapshotFamily(registry, {
    name: named('nv_model_load_duration_secs'), help: 'Model load time in seconds', type: 'gauge',
    read: () => snapshot().flatMap((m): FamilySample[] => (m.loadSeconds === undefined ? [] : [{ value: m.loadSeconds, labels: modelLabels(m) }])),
  });
  const s = (m: ModelMetricsEntry) => m.stats.inference_stats;
  if (config.counterLatencies !== false) {
    perModel(named('nv_inference_request_duration_us'), 'Cumulative inference request duration in microseconds (includes cached requests)', (m) => Math.round(s(m).success.ns * US));
    perModel(named('nv_inference_queue_duration_us'), 'Cumulative inference queuing duration in microseconds (includes cached requests)', (m) => Math.round(s(m).queue.ns * US));
    perModel(named('nv_inference_compute_input_duration_us'), 'Cumulative compute input duration in microseconds (does not include cached requests)', (m) => Math.round(s(m).compute_input.ns * US));
    perModel(named('nv_inference_compute_infer_duration_us'), 'Cumulative compute inference duration in microseconds (does not include cached requests)', (m) => Math.round(s(m).compute_infer.ns * US));
    perModel(named('nv_inference_compute_output_duration_us'), 'Cumulative inference compute output duration in microseconds (does not include cached requests)', (m) => Math.round(s(m).compute_output.ns * US));
  }
  addLatencyDistributions(registry, source, config, snapshot, cached);
  // As Triton's reporter: per-model cache counters only for cache-enabled models, and only with
  // the latency counters (they are created among them).
  if (serverCache && config.counterLatencies !== false) {
    perModel(named('nv_cache_num_hits_per_model'), 'Number of cache hits per model', (m) => m.stats.inference_stats.cache_hit.count, 'counter', cached);
    perModel(named('nv_cache_num_misses_per_model'), 'Number of cache misses per model', (m) => m.stats.inference_stats.cache_miss.count, 'counter', cached);
    perModel(named('nv_cache_hit_duration_per_model'), 'Total cache hit duration per model, in microseconds', (m) => Math.round(m.stats.inference_stats.cache_hit.ns * US), 'counter', cached);
    perModel(named('nv_cache_miss_duration_per_model'), 'Total cache miss (insert+lookup) duration per model, in microseconds', (m) => Math.round(m.stats.inference_stats.cache_miss.ns * US), 'counter', cached);
  }
  if (serverCache) {
    const cache = () => source.responseCacheStats?.() ?? { entries: 0, bytes: 0, capacity: 1, hits: 0, misses: 0, evictions: 0, lookupNs: 0, insertNs: 0 };
    // The local cache's server-wide gauges (Triton: local_cache.cc InitMetrics).
    new Gauge({ name: named('nv_cache_num_entries'), help: 'Number of responses stored in response cache', registers: [registry], collect() { this.set(cache().entries); } });
    new Gauge({ name: named('nv_cache_num_lookups'), help: 'Number of cache lookups in response cache', registers: [registry], collect() { const c = cache(); this.set(c.hits + c.misses); } });
    new Gauge({ name: named('nv_cache_num_hits'), help: 'Number of cache hits in response cache', registers: [registry], collect() { this.set(cache().hits); } });
    new Gauge({ name: named('nv_cache_num_misses'), help: 'Number of cache misses in response cache', registers: [registry], collect() { this.set(cache().misses); } });
    new Gauge({ name: named('nv_cache_lookup_duration'), help: 'Total cache lookup duration (hit and miss), in microseconds', registers: [registry], collect() { this.set(Math.round(cache().lookupNs * US)); } });
    new Gauge({ name: named('nv_cache_insertion_duration'), help: 'Total cache insertion duration, in microseconds', registers: [registry], collect() { this.set(Math.round(cache().insertNs * US)); } });
    new Gauge({ name: named('nv_cache_util'), help: 'Cache utilization [0.0 - 1.0]', registers: [registry], collect() { const c = cache(); this.set(c.bytes / c.capacity); } });
    new Gauge({ name: named('nv_cache_num_evictions'), help: 'Number of cache evictions in response cache', registers: [registry], collect() { this.set(cache().evictions); } });
  }
  if (source.clusterRejected) {
    const rejected = source.clusterRejected.bind(source);
    new Counter({
      name: 'triode_cluster_rejected_messages_total', help: 'Messages from Redis dropped because they were not signed with the cluster secret, by kind',
      labelNames: ['kind'], registers: [registry],
      collect() { this.reset(); for (const [kind, n] of rejected()) this.inc({ kind }, n); },
    });
  }
  if (!config.familyPrefix) {
    // Triton (>= 24.01) reports its pinned memory pool; Triode has none, so these are the configured size and 0.
    const pinned = config.pinnedMemoryPoolBytes ?? DEFAULT_PINNED_MEMORY_POOL_BYTES;
    new Gauge({ name: 'nv_pinned_memory_pool_total_bytes', help: 'Pinned memory pool total memory size, in bytes', registers: [registry], collect() { this.set(pinned); } });
    new Gauge({ name: 'nv_pinned_memory_pool_used_bytes', help: 'Pinned memory pool used memory size, in bytes', registers: [registry], collect() { this.set(0); } });
  }
  // CPU, memory and GPUs are sampled every interval (as Triton's per-interval metrics), not per scrape.
  const stopGpus = addGpuMetrics(registry, source, config);
  registry.stopSampling = stopGpus;
  if (config.cpuMetrics === false) return registry;
  const cpu = cpuSampler();
  let sample = { cpu: cpu(), mem: memory() };
  const timer = setInterval(() => { sample = { cpu: cpu(), mem: memory() }; }, timerMs(Math.max(100, config.intervalMs ?? 2000)));
  timer.unref();
  registry.stopSampling = () => { clearInterval(timer); stopGpus(); };
  addBacklog(registry, source);
  new Gauge({ name: named('nv_cpu_utilization'), help: 'CPU utilization rate [0.0 - 1.0]', registers: [registry], collect() { this.set(sample.cpu); } });
  new Gauge({ name: named('nv_cpu_memory_total_bytes'), help: 'CPU total memory (RAM), in bytes', registers: [registry], collect() { this.set(sample.mem.total); } });
  new Gauge({ name: named('nv_cpu_memory_used_bytes'), help: 'CPU used memory (RAM), in bytes', registers: [registry], collect() { this.set(sample.mem.used); } });
  return registry;
}

/**
 * Triton's per-GPU gauges, labelled `gpu_uuid`: utilization (0-1), memory total and used (bytes),
 * power usage and limit (W), and energy since start (J, the power readings integrated over the
 * sampling intervals; only for GPUs that report power). A reading a GPU does not report is left
 * out. Returns what stops the sampling.
 * Triton: core/src/metrics.cc (InitializeDcgmMetrics, UpdateDcgmMetrics)
 */
/** How long a scrape at start waits for the first GPU sample before it answers without GPU readings. */
const FIRST_GPU_SAMPLE_WAIT_MS = 2000;

function addGpuMetrics(registry: Registry, source: MetricsSource, config: MetricsConfig): () => void {
  const read = source.gpuStatus?.bind(source);
  if (!read || config.gpuMetrics === false) return () => undefined;
  const named = (name: string) => familyName(config, name);
  let gpus: readonly GpuDevice[] = [];
  const joules = new Map<string, number>();
  let lastMs: number | undefined;
  const sample = async () => {
    const next = await read().catch(() => gpus);
    const now = Date.now();
    for (const g of next) {
      if (g.powerDrawW === undefined) continue;
      joules.set(g.uuid, (joules.get(g.uuid) ?? 0) + (lastMs === undefined ? 0 : g.powerDrawW * (now - lastMs) / 1000));
    }
    lastMs = now;
    gpus = next;
  };
  // One sample at a time: a tick while one is under way (nvidia-smi slow or stuck) is skipped,
  // never queued behind it. A scrape reports the last readings; only at start does it wait for
  // the first sample, and not past FIRST_GPU_SAMPLE_WAIT_MS.
  let running: Promise<void> | undefined;
  const start = (): Promise<void> => (running ??= sample().finally(() => { running = undefined; }));
  const first = start();
  let waitTimer: NodeJS.Timeout | undefined;
  const ready = Promise.race([first, new Promise<void>((resolve) => { waitTimer = setTimeout(resolve, FIRST_GPU_SAMPLE_WAIT_MS); waitTimer.unref(); })])
    .finally(() => clearTimeout(waitTimer));
  const timer = setInterval(() => { void start(); }, Math.max(100, config.intervalMs ?? 2000));
  timer.unref();
  const gauge = (name: string, help: string, value: (g: GpuDevice) => number | undefined) => new Gauge({
    name: named(name), help, labelNames: ['gpu_uuid'], registers: [registry],
    async collect() {
      await ready;
      this.reset();
      for (const g of gpus) {
        const v = value(g);
        if (v !== undefined) this.set({ gpu_uuid: g.uuid }, v);
      }
    },
  });
  gauge('nv_gpu_utilization', 'GPU utilization rate [0.0 - 1.0)', (g) => g.utilization);
  gauge('nv_gpu_memory_total_bytes', 'GPU total memory, in bytes', (g) => g.memoryTotalBytes);
  gauge('nv_gpu_memory_used_bytes', 'GPU used memory, in bytes', (g) => g.memoryUsedBytes);
  gauge('nv_gpu_power_usage', 'GPU power usage in watts', (g) => g.powerDrawW);
  gauge('nv_gpu_power_limit', 'GPU power management limit in watts', (g) => g.powerLimitW);
  new Counter({
    name: named('nv_energy_consumption'), help: 'GPU energy consumption in joules since the Triton Server started', labelNames: ['gpu_uuid'], registers: [registry],
    async collect() {
      await ready;
      this.reset();
      for (const [uuid, j] of joules) this.inc({ gpu_uuid: uuid }, j);
    },
  });
  return () => clearInterval(timer);
}

/**
 * The cluster's backlog, for autoscaling (KEDA, an HPA on an external metric): per model, the
 * request stream's entries, those no worker has read, those read and not acknowledged, and the
 * age of the oldest of those; async jobs by state. The same on every gateway: aggregate with max.
 */
function addBacklog(registry: Registry, source: MetricsSource): void {
  const backlog = source.clusterBacklog?.bind(source);
  if (backlog) {
    let last: Promise<StreamBacklog[]> | undefined;
    // One Redis round trip per scrape, shared by the four gauges.
    const read = () => {
      last ??= backlog().catch(() => []).finally(() => { setImmediate(() => { last = undefined; }); });
      return last;
    };
    const gauge = (name: string, help: string, value: (b: StreamBacklog) => number) => new Gauge({
      name, help, labelNames: ['model'], registers: [registry],
      async collect() {
        this.reset();
        for (const b of await read()) this.set({ model: b.model }, value(b));
      },
    });
    gauge('triode_cluster_stream_entries', 'Entries in the model\'s request stream (waiting, and read but not acknowledged)', (b) => b.entries);
    gauge('triode_cluster_waiting_requests', 'Requests in the model\'s stream that no worker has read yet', (b) => b.waiting);
    gauge('triode_cluster_pending_requests', 'Requests a worker has read and not acknowledged (running, or held by a worker that died)', (b) => b.pending);
    gauge('triode_cluster_oldest_pending_age_seconds', 'Age of the oldest request read and not acknowledged, in seconds', (b) => b.oldestPendingAgeSeconds);
  }
  const jobs = source.asyncJobCounts?.bind(source);
  if (jobs) {
    new Gauge({
      name: 'triode_async_jobs', help: 'Async jobs kept in Redis, by state', labelNames: ['state'], registers: [registry],
      async collect() {
        this.reset();
        for (const [state, n] of Object.entries(await jobs().catch(() => ({})))) this.set({ state }, n);
      },
    });
  }
}

/** The first-response histogram's name, as `model_metrics` names it (Triton's, whatever the prefix). */
const FIRST_RESPONSE_HISTOGRAM = 'nv_inference_first_response_histogram_ms';

/**
 * Summaries (µs) and the first-response histogram (ms), fed with each request's latencies; a
 * model's series carry its tags, and its `model_metrics` buckets replace the server-wide ones.
 */
function addLatencyDistributions(
  registry: Registry, source: MetricsSource, config: MetricsConfig, live: () => Iterable<LiveSeries>, cached: (m: Partial<ModelMetricSettings>) => boolean,
): void {
  if (!config.summaryLatencies && !config.histogramLatencies) return;
  const named = (name: string) => familyName(config, name);
  if (!source.observeLatencies) return;
  const quantiles = config.summaryQuantiles ?? DEFAULT_SUMMARY_QUANTILES;
  // prometheus-cpp's summary (Triton's) keeps a sliding window of 60 s in 5 age buckets.
  // Series of versions that are no longer loaded go at the next scrape (Triton drops them at unload).
  const summary = (name: string, help: string, applies?: (m: Partial<ModelMetricSettings>) => boolean) => new DistributionFamily(registry, {
    name, help, type: 'summary', live, ...(applies ? { applies } : {}),
    create: (labelNames) => new Summary({ name, help, labelNames, registers: [], percentiles: quantiles.map(([q]) => q), maxAgeSeconds: 60, ageBuckets: 5 }),
    // Before its first observation, as prometheus-cpp shows a summary: NaN quantiles, count and sum 0 (in prom-client's order).
    empty: (labels) => [
      ...quantiles.map(([q]) => ({ labels: { quantile: q, ...labels }, value: NaN })),
      { metricName: `${name}_sum`, labels, value: 0 },
      { metricName: `${name}_count`, labels, value: 0 },
    ],
  });
  const summaries = config.summaryLatencies ? {
    // Triton leaves the request summary out for cache-enabled models (cache management time would skew it).
    request: summary(named('nv_inference_request_summary_us'), 'Summary of inference request duration in microseconds (includes cached requests)', (m) => !cached(m)),
    queue: summary(named('nv_inference_queue_summary_us'), 'Summary of inference queuing duration in microseconds (includes cached requests)'),
    // Triton registers these three with the help texts of the matching counters ("Cumulative ..."); scrapes show them so.
    input: summary(named('nv_inference_compute_input_summary_us'), 'Cumulative compute input duration in microseconds (does not include cached requests)'),
    infer: summary(named('nv_inference_compute_infer_summary_us'), 'Cumulative compute inference duration in microseconds (does not include cached requests)'),
    output: summary(named('nv_inference_compute_output_summary_us'), 'Cumulative inference compute output duration in microseconds (does not include cached requests)'),
    // Triton's per-model cache summaries, for cache-enabled models.
    cacheHit: summary(named('nv_cache_hit_summary_per_model'), 'Summary of cache hit duration per model, in microseconds', cached),
    cacheMiss: summary(named('nv_cache_miss_summary_per_model'), 'Summary of cache miss (insert+lookup) duration per model, in microseconds', cached),
  } : undefined;
  const serverBuckets = config.histogramBucketsMs ?? [100, 500, 2000, 5000];
  const firstResponseName = named(FIRST_RESPONSE_HISTOGRAM);
  const firstResponseHelp = 'Duration from request to first response in milliseconds';
  const firstResponse = config.histogramLatencies ? new DistributionFamily(registry, {
    name: firstResponseName, help: firstResponseHelp, type: 'histogram', live,
    // Triton: "Only create response metrics if decoupled model". A gateway does not know (no settings): it keeps them.
    applies: (m) => m.decoupled !== false,
    buckets: (m) => m.histogramBuckets?.[FIRST_RESPONSE_HISTOGRAM],
    create: (labelNames, buckets) => new Histogram({ name: firstResponseName, help: firstResponseHelp, labelNames, registers: [], buckets: [...(buckets ?? serverBuckets)] }),
  }) : undefined;
  source.observeLatencies((model, version, o, settings) => {
    const m = { name: model, version, labels: settings?.labels };
    if ('cacheMissNs' in o) {
      summaries?.cacheMiss.observe(m, o.cacheMissNs * US, settings);
      return;
    }
    if (summaries) {
      if (o.cacheHitNs !== undefined) summaries.cacheHit.observe(m, o.cacheHitNs * US, settings);
      summaries.request.observe(m, o.requestNs * US, settings);
      summaries.queue.observe(m, o.queueNs * US, settings);
      summaries.input.observe(m, o.computeInputNs * US, settings);
      summaries.infer.observe(m, o.computeInferNs * US, settings);
      summaries.output.observe(m, o.computeOutputNs * US, settings);
    }
    firstResponse?.observe(m, o.firstResponseNs * 1e-6, settings, settings?.histogramBuckets[FIRST_RESPONSE_HISTOGRAM]);
  });
}

/** A listening metrics endpoint. */
export interface MetricsServerHandle {
  port: number;
  close(): Promise<void>;
}

/**
 * Serves `GET /metrics` (and `GET /metrics/`, as Triton) on `address:port` (port 0 picks a free one), with the HTTP port's limits on
 * slow clients and header sizes (`options`; before, Node's defaults held a slow body for 300 s).
 */
export function startMetricsServer(source: MetricsSource, port: number, address = '0.0.0.0', config: MetricsConfig = {}, options: HttpServerOptions = {}): Promise<MetricsServerHandle> {
  const registry = createMetricsRegistry(source, config);
  const o = checkedServerOptions(options);
  const serverOptions = {
    headersTimeout: o.headersTimeoutMs, requestTimeout: o.requestTimeoutMs, keepAliveTimeout: o.keepAliveTimeoutMs,
    maxHeaderSize: o.maxHeaderSize, connectionsCheckingInterval: o.connectionsCheckingIntervalMs,
  };
  // One request at a time a connection, as the HTTP port (review: 30,000 pipelined scrapes held 88 MiB).
  const guard = connectionGuard(o.responseStallTimeoutMs);
  const server: Server = createServer(serverOptions, guard.wrap((req, res) => {
    // As Triton's metrics server: the method is checked first (405 for anything but GET).
    if (req.method !== 'GET') {
      res.writeHead(405, { 'Content-Type': 'application/json' }).end('{"error":"Method Not Allowed"}');
      return;
    }
    // Triton's metrics server matches the path against `/metrics/?`: a trailing slash is served too.
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/metrics' && path !== '/metrics/') {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"Not Found"}');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
      // What failed stays in the process (a scrape gets no internals).
      () => res.writeHead(500, { 'Content-Type': 'application/json' }).end('{"error":"the metrics could not be collected"}'),
    );
  })).on('clientError', guard.clientError);
  return new Promise((resolve, reject) => {
    server.once('error', (err) => {
      guard.close();
      reject(err);
    });
    server.listen(port, address, () => {
      keepServingOnError(server, 'metrics server');
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () => new Promise<void>((r) => { registry.stopSampling(); server.close(() => { guard.close(); r(); }); server.closeIdleConnections(); }),
      });
    });
  });
}
