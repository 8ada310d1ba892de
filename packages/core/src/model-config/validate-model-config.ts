/**
 * @module Config validation with Triton's messages.
 * Triton: core/src/model_config_utils.cc ValidateModelConfig, ValidateModelIOConfig, ValidateIOShape,
 * ValidateBatchIO
 */
import { Errors, echo } from '../errors.js';
import { configTypeToDataType, dataTypeByteSize } from '../tensor/data-type.js';
import type { ModelConfig, ModelInput, ModelOutput } from './model-config.js';
import { PLATFORMS } from './normalize-model-config.js';

const WILDCARD_DIM = -1;

/**
 * The most priority levels a dynamic batcher may have. The queue keeps one queue per level and
 * looks through them for each batch: 50 million levels took the process down at load.
 */
export const MAX_PRIORITY_LEVELS = 10_000;

/**
 * The most bytes the implicit states of one sequence may start with, all its states together (their
 * zeros are made per sequence). A variable dim counts as 1, as a state without an initial state
 * starts with it: skipping such states let `[-1, 100000000]` through (400 MB a sequence), and a
 * limit per state let five states of 240 MB each through (review).
 */
export const MAX_STATE_BYTES = 256 * 1024 * 1024;

function count(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) {
    if (d === WILDCARD_DIM) return -1;
    n *= d;
  }
  return n;
}

/** Element counts of the runs between wildcard dims: [2,4,-1,6] -> [8,6]. */
function runs(dims: readonly number[]): number[] {
  const out: number[] = [];
  let cur = 1;
  for (const d of dims) {
    if (d === WILDCARD_DIM) { out.push(cur); cur = 1; } else cur *= d;
  }
  out.push(cur);
  return out;
}

function validateIOShape(io: ModelInput | ModelOutput, maxBatchSize: number, prefix: string): void {
  if (!io.name) throw Errors.invalidArg(`${prefix}must specify 'name'`);
  if (!io.data_type || io.data_type === 'TYPE_INVALID') throw Errors.invalidArg(`${prefix}'${echo(io.name)}' must specify 'data_type'`);
  if (!configTypeToDataType(io.data_type)) throw Errors.invalidArg(`${prefix}'${echo(io.name)}' has unknown data_type '${echo(io.data_type)}'`);
  const dims = io.dims ?? [];
  if (dims.length === 0 && !io.reshape) throw Errors.invalidArg(`${prefix}'${echo(io.name)}' must specify 'dims'`);
  if (io.reshape && (io.reshape.shape ?? []).length === 0 && maxBatchSize === 0) {
    throw Errors.invalidArg(`${prefix}'${echo(io.name)}' cannot have empty reshape for non-batching model`);
  }
  for (const d of dims) {
    if (d < 1 && d !== WILDCARD_DIM) {
      throw Errors.invalidArg(`${prefix}'${echo(io.name)}' dimension must be integer >= 1, or ${WILDCARD_DIM} to indicate a variable-size dimension`);
    }
  }
  if (io.reshape) {
    const shape = io.reshape.shape ?? [];
    for (const d of shape) {
      if (d < 1 && d !== WILDCARD_DIM) {
        throw Errors.invalidArg(`${prefix}'${echo(io.name)}' reshape dimensions must be integer >= 1, or ${WILDCARD_DIM} to indicate a variable-size dimension`);
      }
    }
    const a = count(dims);
    const b = shape.length === 0 ? 0 : count(shape);
    if (a !== b && (b !== 0 || a !== 1)) throw Errors.invalidArg(`${prefix}'${echo(io.name)}' has different size for dims and reshape`);
    if (a === -1) {
      const ra = runs(dims);
      const rb = runs(shape);
      if (ra.length !== rb.length) {
        throw Errors.invalidArg(`${prefix}'${echo(io.name)}' has different number of variable-size dimensions for dims and reshape`);
      }
      if (ra.some((x, i) => x !== rb[i])) throw Errors.invalidArg(`${prefix}'${echo(io.name)}' has different size for dims and reshape`);
    }
  }
}

const BATCH_INPUT_KINDS = new Set(['BATCH_ELEMENT_COUNT', 'BATCH_ACCUMULATED_ELEMENT_COUNT', 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO', 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', 'BATCH_ITEM_SHAPE', 'BATCH_ITEM_SHAPE_FLATTEN']);

/**
 * `batch_input` and `batch_output`: known kinds, one source input that the model has, INT32 or FP32
 * batch inputs, batch output targets that are outputs, each once. Triton's messages; Triton checks
 * neither `max_batch_size` nor `allow_ragged_batch` here (a non-batching model may have them).
 * Triton: model_config_utils.cc ValidateBatchIO
 */
function validateBatchIO(config: ModelConfig): void {
  const inputs = new Set((config.input ?? []).map((io) => io.name));
  const outputs = new Set((config.output ?? []).map((io) => io.name));
  const fail = (message: string) => Errors.invalidArg(`${message} for ${config.name ?? ''}`);
  const checkSources = (sources: readonly string[]) => {
    for (const s of sources) if (!inputs.has(s)) throw fail(`unknown source input name '${echo(s)}'`);
  };
  for (const bi of config.batch_input ?? []) {
    const kind = bi.kind ?? 'BATCH_ELEMENT_COUNT';
    if (!BATCH_INPUT_KINDS.has(kind)) throw fail(`unknown batch input kind '${echo(kind)}'`);
    const sources = bi.source_input ?? [];
    if (sources.length !== 1) throw fail(`batch input kind '${echo(kind)}' expects 1 source input, got ${sources.length}`);
    if (bi.data_type !== 'TYPE_INT32' && bi.data_type !== 'TYPE_FP32') throw fail('batch input data type must be TYPE_INT32 or TYPE_FP32');
    checkSources(sources);
  }
  for (const bo of config.batch_output ?? []) {
    const kind = bo.kind ?? 'BATCH_SCATTER_WITH_INPUT_SHAPE';
    if (kind !== 'BATCH_SCATTER_WITH_INPUT_SHAPE') throw fail(`unknown batch output kind '${echo(String(kind))}'`);
    const sources = bo.source_input ?? [];
    if (sources.length !== 1) throw fail(`batch output kind '${echo(kind)}' expects 1 source input, got ${sources.length}`);
    checkSources(sources);
    const targets = new Set<string>();
    for (const t of bo.target_name ?? []) {
      if (!outputs.has(t)) throw fail(`unknown target output name '${echo(t)}'`);
      if (targets.has(t)) throw fail(`target output name '${echo(t)}' can only be specified once`);
      targets.add(t);
    }
  }
}

/**
 * Checks a normalized config. Throws INVALID_ARG with Triton's wording where Triton has one.
 * @param modelName the model's directory name, which `name` must equal
 */
export function validateModelConfig(config: ModelConfig, modelName: string): void {
  if (!config.name) throw Errors.invalidArg('model configuration must specify \'name\'');
  if (config.name !== modelName) {
    throw Errors.invalidArg(`unexpected model name '${echo(config.name)}' in configuration, expected '${modelName}' (the model directory name)`);
  }
  if (!config.platform && !config.backend) {
    throw Errors.invalidArg(`must specify 'platform' or 'backend' for '${echo(config.name)}'`);
  }
  const mbs = config.max_batch_size ?? 0;
  if (mbs < 0) throw Errors.invalidArg(`'max_batch_size' must be non-negative value for ${echo(config.name)}`);
  const isEnsemble = config.platform === PLATFORMS.ensemble;
  if (!isEnsemble && (config.input ?? []).length === 0 && config.backend === 'onnxruntime') {
    throw Errors.invalidArg(`model configuration for '${echo(config.name)}' must specify at least one input (or let auto-complete read them from the model)`);
  }
  const seen = new Set<string>();
  for (const io of config.input ?? []) {
    validateIOShape(io, mbs, 'model input ');
    if (seen.has(io.name)) throw Errors.invalidArg(`input '${echo(io.name)}' specified more than once for ${echo(config.name)}`);
    seen.add(io.name);
    if ((io.format === 'FORMAT_NHWC' || io.format === 'FORMAT_NCHW') && (io.dims ?? []).length !== 3) {
      throw Errors.invalidArg(`model input '${echo(io.name)}' NHWC/NCHW require 3 dims for ${echo(config.name)}`);
    }
  }
  seen.clear();
  for (const io of config.output ?? []) {
    validateIOShape(io, mbs, 'model output ');
    if (seen.has(io.name)) throw Errors.invalidArg(`output '${echo(io.name)}' specified more than once for ${echo(config.name)}`);
    seen.add(io.name);
  }
  validateBatchIO(config);
  const db = config.dynamic_batching;
  if (db) {
    for (const p of db.preferred_batch_size ?? []) {
      if (p < 1) throw Errors.invalidArg(`dynamic batching preferred size must be positive for ${echo(config.name)}`);
      if (p > mbs) throw Errors.invalidArg(`dynamic batching preferred size must be <= max batch size for ${echo(config.name)}`);
    }
    const levels = db.priority_levels ?? 0;
    if (levels > 0 && ((db.default_priority_level ?? 0) < 1 || (db.default_priority_level ?? 0) > levels)) {
      throw Errors.invalidArg(`default priority level must be in range [1, ${levels}] for ${echo(config.name)}`);
    }
    if (!Number.isSafeInteger(levels) || levels > MAX_PRIORITY_LEVELS) {
      throw Errors.invalidArg(`'priority_levels' of ${config.name} is ${levels}; Triode allows at most ${MAX_PRIORITY_LEVELS}`);
    }
    const named = new Set<number>();
    for (const k of Object.keys(db.priority_queue_policy ?? {})) {
      const level = /^\d+$/.test(k) ? Number(k) : NaN;
      if (!(level >= 1 && level <= levels)) {
        throw Errors.invalidArg(`priority queue policy must have priority level in range [1, ${levels}] for ${echo(config.name)}`);
      }
      // "1" and "01" are one level (Triton's keys are numbers): two policies for it cannot both apply.
      if (named.has(level)) throw Errors.invalidArg(`priority queue policy names priority level ${level} twice for ${echo(config.name)}`);
      named.add(level);
    }
  }
  for (const g of config.instance_group ?? []) {
    if ((g.count ?? 1) < 1) throw Errors.invalidArg(`instance group ${g.name ?? ''} of model ${config.name} must have count >= 1`);
    // Whether a KIND_GPU group can be placed (GPUs, an execution provider) is the backend's to say.
    for (const id of g.gpus ?? []) {
      if (!Number.isInteger(id) || id < 0) throw Errors.invalidArg(`instance group ${g.name ?? ''} of model ${config.name} has an invalid GPU id ${id}`);
    }
    if ((g.gpus ?? []).length > 0 && g.kind !== 'KIND_GPU' && g.kind !== 'KIND_AUTO' && g.kind !== undefined) {
      throw Errors.invalidArg(`instance group ${g.name ?? ''} of model ${config.name} has kind ${g.kind} but specifies one or more GPUs`);
    }
  }
  const sb = config.sequence_batching;
  // Triton's ValidateModelConfig: an Oldest preferred size of 0 made an empty batch that was
  // dispatched for ever (a core spun, the request hung).
  for (const p of sb?.oldest?.preferred_batch_size ?? []) {
    if (p <= 0) throw Errors.invalidArg(`sequence batching preferred batch size must be positive for ${echo(config.name)}`);
    if (p > mbs) throw Errors.invalidArg(`sequence batching preferred batch size must be <= max batch size for ${echo(config.name)}`);
  }
  // Triton's check and text: 0 passes (it means "off"), despite the message's open bound.
  const utilization = sb?.direct?.minimum_slot_utilization ?? 0;
  if (!(utilization >= 0 && utilization <= 1)) {
    throw Errors.invalidArg(`sequence batching minimum slot utilization must be in range (0.0, 1.0] for ${echo(config.name)}`);
  }
  let stateBytes = 0;
  for (const s of sb?.state ?? []) {
    // What each new sequence starts with: the initial state's dims, or the state's own with each
    // variable dim as 1 (sequence-state.ts, initialState).
    const init = s.initial_state?.[0];
    const dims = (init?.dims ?? s.dims ?? []).map((d) => (d === WILDCARD_DIM ? 1 : d));
    const dt = configTypeToDataType(init?.data_type ?? s.data_type ?? '');
    if (!dt) continue;
    const n = count(dims);
    stateBytes += n * (dt === 'BYTES' ? 4 : dataTypeByteSize(dt));
    if (!Number.isSafeInteger(n) || stateBytes > MAX_STATE_BYTES) {
      throw Errors.invalidArg(`implicit state '${echo(s.input_name ?? '')}' of ${config.name} starts with [${dims.join(',')}] ${dt} elements: its states would start with over the limit of ${MAX_STATE_BYTES} bytes a sequence`);
    }
  }
  if (isEnsemble && !config.ensemble_scheduling) {
    throw Errors.invalidArg(`ensemble scheduling must be set for ensemble ${config.name} whose platform is ensemble`);
  }
  // Triton's ValidateEnsembleSchedulingConfig, its first checks and words (the steps are checked
  // at load, against the models they name). review: these loaded, and a model that is not an
  // ensemble was taken for one of its steps (an unload of a step unloaded it).
  if (config.ensemble_scheduling) {
    if (!isEnsemble) throw Errors.invalidArg(`ensemble scheduling cannot be set for model '${echo(config.name)}' whose platform is not ${PLATFORMS.ensemble}`);
    if ((config.instance_group ?? []).length > 0) throw Errors.invalidArg(`instance group should not be specified for ensemble '${echo(config.name)}'`);
    if (config.optimization) throw Errors.invalidArg(`optimization should not be specified for ensemble '${echo(config.name)}'`);
    if ((config.model_warmup ?? []).length > 0) throw Errors.invalidArg(`model_warmup can not be specified for ensemble '${echo(config.name)}'`);
  }
}
