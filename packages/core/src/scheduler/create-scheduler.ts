/**
 * @module The one place a model's scheduler is chosen and made from its config: the sequence
 * batcher, the dynamic batcher, or the default scheduler (a dynamic batcher of batch size 1).
 * Triton: core/src/backend_model.cc (TritonModel::SetConfiguredScheduler)
 */
import type { Clock } from '../clock.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { DynamicBatchScheduler } from './dynamic-batch-scheduler.js';
import type { InstanceGate, RejectHandler, Schedulable, Scheduler } from './scheduler.js';
import { SequenceBatchScheduler, type SequenceInfo } from './sequence-batch-scheduler.js';

/** Creates the scheduler a config asks for. Triton: TritonModel::SetConfiguredScheduler */
export function createScheduler<T extends Schedulable & { sequence: SequenceInfo }>(
  config: ModelConfig,
  instanceCount: number,
  runner: (instance: number, batch: T[]) => Promise<void>,
  options: { clock: Clock; pipelineDepth: number; onReject: RejectHandler<T>; onSequenceEnd?: (key: string) => void; gates?: readonly InstanceGate[]; sequenceBatchKey?: (request: T) => string },
): Scheduler<T> {
  const mbs = config.max_batch_size ?? 0;
  if (config.sequence_batching) {
    return new SequenceBatchScheduler<T>(instanceCount, runner, {
      config: config.sequence_batching,
      modelName: config.name ?? '',
      maxBatchSize: mbs,
      clock: options.clock,
      onReject: options.onReject,
      ...(options.onSequenceEnd ? { onSequenceEnd: options.onSequenceEnd } : {}),
      ...(options.gates ? { gates: options.gates } : {}),
      ...(options.sequenceBatchKey ? { batchKey: options.sequenceBatchKey } : {}),
    });
  }
  const db = config.dynamic_batching;
  if (db) {
    // A model that does not batch (max_batch_size 0) keeps the queue's policies (priorities,
    // timeouts, max_queue_size) and runs one request at a time, as Triton's scheduler does.
    return new DynamicBatchScheduler<T>(instanceCount, runner, {
      maxBatchSize: Math.max(1, mbs),
      preferredBatchSizes: mbs > 0 ? db.preferred_batch_size ?? [] : [],
      maxQueueDelayUs: mbs > 0 ? db.max_queue_delay_microseconds ?? 0 : 0,
      queuePolicy: db,
      ...options,
    });
  }
  return new DynamicBatchScheduler<T>(instanceCount, runner, { maxBatchSize: 1, ...options });
}
