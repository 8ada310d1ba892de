/** @module What a worker publishes about itself, and how gateways merge it. */
import type { ModelIndexEntry, ModelMetadata } from '../server.js';
import type { ModelStatistics } from '../stats/infer-stats.js';

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
}

/** A live worker as `GET /v2/cluster/workers` lists it (snake_case, as Triton's JSON). */
export interface ClusterWorkerInfo {
  id: string;
  host: string;
  pid: number | null;
  device: string;
  inflight: number;
  started_ms: number | null;
  heartbeat_ms: number;
  models: { name: string; version?: string; state: string }[];
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

/** A model's request stream as the backlog metrics report it (what an autoscaler reads). */
export interface StreamBacklog {
  model: string;
  /** Entries in the stream (waiting, read and not acknowledged). */
  entries: number;
  /** Entries not yet read by any worker. */
  waiting: number;
  /** Entries read by a worker and not acknowledged (running, or held by a dead worker). */
  pending: number;
  /** Age of the oldest pending entry, in seconds (0 when none). */
  oldestPendingAgeSeconds: number;
}
