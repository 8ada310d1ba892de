/**
 * @module Which requests may share a batch by shape: every input's non-batch dims must be equal,
 * except those of an input with `allow_ragged_batch`, whose requests batch whatever their shapes
 * (the backend joins them: see `Backend.raggedBatching`).
 * Triton: core/src/backend_model.cc SetConfiguredScheduler (enforce_equal_shape_tensors),
 * scheduler_utils.cc CompareWithPendingShapes
 */
import type { ModelConfig } from '../model-config/model-config.js';
import type { Tensor } from '../tensor/tensor.js';

/** The names of the inputs a config marks `allow_ragged_batch: true`. */
export function raggedInputNames(config: ModelConfig): ReadonlySet<string> {
  return new Set((config.input ?? []).filter((io) => io.allow_ragged_batch === true).map((io) => io.name));
}

/**
 * A request's shape key (`Schedulable.shapeKey`): requests batch together only when their keys are
 * equal. It names every input (requests without the same optional inputs never batch) and holds
 * the non-batch dims of each one that is not ragged.
 * @example batchShapeKey([{ name: 'X', shape: [1, 3] }], new Set(['X'])) === batchShapeKey([{ name: 'X', shape: [1, 5] }], new Set(['X']))
 */
export function batchShapeKey(inputs: readonly Pick<Tensor, 'name' | 'shape'>[], ragged: ReadonlySet<string>): string {
  let key = '';
  for (const t of inputs) {
    if (ragged.size > 0 && ragged.has(t.name)) {
      key += `${t.name}:*;`;
      continue;
    }
    // `shape.slice(1).join(',')`, without the two arrays per input.
    key += `${t.name}:`;
    for (let i = 1; i < t.shape.length; i++) key += i === 1 ? `${t.shape[i] ?? ''}` : `,${t.shape[i] ?? ''}`;
    key += ';';
  }
  return key;
}
