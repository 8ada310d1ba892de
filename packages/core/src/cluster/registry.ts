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
}
