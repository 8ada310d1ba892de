/** @module What a worker publishes about itself, and how gateways merge it. */
import type { ClusterWorkerInfo, ModelIndexEntry, ModelMetadata } from '@triode/core';
import type { ModelStatistics } from '@triode/core';

/** One model version as a worker has it. */
export interface RegistryModel extends ModelIndexEntry {
  metadata?: ModelMetadata;
  config?: Record<string, unknown>;
  stats?: ModelStatistics;
}

/** A worker's registry entry. */
export interface WorkerRecord {
  workerId: string;
  /** ms since the epoch of the last heartbeat. */
  heartbeatMs: number;
  models: RegistryModel[];
  /** The host it runs on (its hostname). */
  host?: string;
  pid?: number;
  /** What runs its instances: `cpu`, or `gpu:<index>` for a per-GPU worker. */
  device?: string;
  /** Requests it holds now (read from Redis and not answered yet). */
  inflight?: number;
  /** ms since the epoch when it started. */
  startedMs?: number;
  /** How long Redis keeps the entry after `heartbeatMs` (three heartbeats). */
  ttlMs?: number;
}

/** Lifetime assumed for an entry that does not state its own: three default heartbeats. */
const DEFAULT_TTL_MS = 3_000;

/** Difference between hosts' clocks tolerated when judging a heartbeat's age. */
export const REGISTRY_CLOCK_SKEW_MS = 30_000;

/**
 * Why an entry read from `workerId`'s key must not be used, or undefined when it may. A live
 * worker's entry is at most its `ttlMs` old (Redis expires it then) and sits under its own key:
 * one older than that (plus clock skew) is a replay of an old entry, which keeps a dead worker's
 * models looking ready; one under another worker's key is a copy. A signature alone cannot tell
 * either from the real thing.
 */
export function registryEntryProblem(record: WorkerRecord, workerId: string, nowMs: number): string | undefined {
  if (record.workerId !== workerId) return 'a registry entry copied from another worker\'s key';
  const age = nowMs - record.heartbeatMs;
  if (age > (record.ttlMs ?? DEFAULT_TTL_MS) + REGISTRY_CLOCK_SKEW_MS) return `a registry entry whose heartbeat is ${Math.round(age / 1000)} s old (replayed, or a clock far off)`;
  return undefined;
}

/** A registry entry as the workers endpoint shows it. */
export function clusterWorkerInfo(w: WorkerRecord): ClusterWorkerInfo {
  return {
    id: w.workerId,
    host: w.host ?? '',
    pid: w.pid ?? null,
    device: w.device ?? 'cpu',
    inflight: w.inflight ?? 0,
    started_ms: w.startedMs ?? null,
    heartbeat_ms: w.heartbeatMs,
    models: w.models.map((m) => ({ name: m.name, ...(m.version !== undefined ? { version: m.version } : {}), state: m.state })),
  };
}


const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const optional = (v: unknown, type: 'string' | 'number'): boolean => v === undefined || (type === 'number' ? Number.isFinite(v) : typeof v === type);

/**
 * A registry entry as read from Redis, if it has the shape a worker writes (undefined if not):
 * anyone who reaches Redis (without a cluster secret) can write one, and a single junk entry must
 * not break every gateway's routing, readiness and workers endpoint. A model's metadata, config or
 * statistics that are not objects are left out.
 */
export function checkWorkerRecord(v: unknown): WorkerRecord | undefined {
  if (!isObject(v) || typeof v['workerId'] !== 'string' || !Number.isFinite(v['heartbeatMs']) || !Array.isArray(v['models'])) return undefined;
  if (!optional(v['host'], 'string') || !optional(v['device'], 'string') || !optional(v['pid'], 'number')
    || !optional(v['inflight'], 'number') || !optional(v['startedMs'], 'number') || !optional(v['ttlMs'], 'number')) return undefined;
  const models: RegistryModel[] = [];
  for (const m of v['models'] as unknown[]) {
    if (!isObject(m) || typeof m['name'] !== 'string' || typeof m['state'] !== 'string' || !optional(m['version'], 'string') || !optional(m['reason'], 'string')) return undefined;
    const { metadata, config, stats, ...row } = m;
    models.push({
      ...(row as unknown as ModelIndexEntry),
      ...(isObject(metadata) ? { metadata: metadata as unknown as ModelMetadata } : {}),
      ...(isObject(config) ? { config } : {}),
      ...(isObject(stats) && isStatsShaped(stats) ? { stats: stats as unknown as ModelStatistics } : {}),
    });
  }
  return { ...(v as unknown as WorkerRecord), models };
}

/** The stage durations of a model's statistics (`inference_stats`), as gateways add them up. */
export const STAT_STAGES = ['success', 'fail', 'queue', 'compute_input', 'compute_infer', 'compute_output', 'cache_hit', 'cache_miss'] as const;

const isDuration = (d: unknown): boolean => isObject(d) && Number.isFinite(d['count']) && Number.isFinite(d['ns']);

/** Statistics as a worker writes them: what gateways add up (counters, stage and batch durations) has its type. */
function isStatsShaped(s: Record<string, unknown>): boolean {
  if (typeof s['name'] !== 'string' || typeof s['version'] !== 'string') return false;
  for (const k of ['last_inference', 'inference_count', 'execution_count']) if (!Number.isFinite(s[k])) return false;
  const stages = s['inference_stats'];
  if (!isObject(stages) || !STAT_STAGES.every((k) => isDuration(stages[k]))) return false;
  const batches = s['batch_stats'];
  return Array.isArray(batches) && batches.every((b) => isObject(b) && Number.isFinite(b['batch_size'])
    && isDuration(b['compute_input']) && isDuration(b['compute_infer']) && isDuration(b['compute_output']));
}
