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

