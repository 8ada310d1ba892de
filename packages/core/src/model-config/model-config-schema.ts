/**
 * @module The shape of `inference.ModelConfig`, as data: which fields exist, their types, which are
 * repeated, maps or oneofs. The text-format parser, the JSON reader (load overrides) and the JSON
 * writer (`/v2/models/{m}/config`) all walk this one table.
 * Triton: common/protobuf/model_config.proto
 */

/** A scalar protobuf type. 64-bit integers are JS numbers (exact up to 2^53). */
export type ScalarType = 'string' | 'bool' | 'int32' | 'int64' | 'uint32' | 'uint64' | 'float' | 'double' | 'bytes';

/** A field's value type: a scalar, an enum (by name) or a message (by name). */
export type ValueType = ScalarType | { enum: string } | { message: string };

/** One field of a message. */
export interface FieldSpec {
  type: ValueType;
  repeated?: boolean;
  /** A map field: `type` is the value type, `mapKey` the key type. */
  mapKey?: 'string' | 'uint64' | 'int64' | 'uint32';
  /** Name of the oneof this field belongs to. */
  oneof?: string;
}

const s = 'string' as const;
const msg = (message: string): { message: string } => ({ message });
const en = (name: string): { enum: string } => ({ enum: name });
const rep = (type: ValueType): FieldSpec => ({ type, repeated: true });
const map = (type: ValueType, mapKey: FieldSpec['mapKey'] = 'string'): FieldSpec => ({ type, mapKey });
const one = (type: ValueType, oneof: string): FieldSpec => ({ type, oneof });

/** Enum value names in number order (index = number). */
export const ENUMS: Record<string, readonly string[]> = {
  DataType: [
    'TYPE_INVALID', 'TYPE_BOOL', 'TYPE_UINT8', 'TYPE_UINT16', 'TYPE_UINT32', 'TYPE_UINT64', 'TYPE_INT8',
    'TYPE_INT16', 'TYPE_INT32', 'TYPE_INT64', 'TYPE_FP16', 'TYPE_FP32', 'TYPE_FP64', 'TYPE_STRING', 'TYPE_BF16',
  ],
  Format: ['FORMAT_NONE', 'FORMAT_NHWC', 'FORMAT_NCHW'],
  Kind: ['KIND_AUTO', 'KIND_GPU', 'KIND_CPU', 'KIND_MODEL'],
  SecondaryDeviceKind: ['KIND_NVDLA'],
  BatchInputKind: [
    'BATCH_ELEMENT_COUNT', 'BATCH_ACCUMULATED_ELEMENT_COUNT', 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO',
    'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', 'BATCH_ITEM_SHAPE', 'BATCH_ITEM_SHAPE_FLATTEN',
  ],
  BatchOutputKind: ['BATCH_SCATTER_WITH_INPUT_SHAPE'],
  ModelPriority: ['PRIORITY_DEFAULT', 'PRIORITY_MAX', 'PRIORITY_MIN'],
  TimeoutAction: ['REJECT', 'DELAY'],
  ControlKind: ['CONTROL_SEQUENCE_START', 'CONTROL_SEQUENCE_READY', 'CONTROL_SEQUENCE_END', 'CONTROL_SEQUENCE_CORRID'],
};

/** Message fields in proto declaration order (the JSON writer prints them in this order). */
export const MESSAGES: Record<string, Record<string, FieldSpec>> = {
  ModelConfig: {
    name: { type: s },
    platform: { type: s },
    backend: { type: s },
    runtime: { type: s },
    version_policy: { type: msg('ModelVersionPolicy') },
    max_batch_size: { type: 'int32' },
    input: rep(msg('ModelInput')),
    output: rep(msg('ModelOutput')),
    batch_input: rep(msg('BatchInput')),
    batch_output: rep(msg('BatchOutput')),
    optimization: { type: msg('ModelOptimizationPolicy') },
    dynamic_batching: one(msg('ModelDynamicBatching'), 'scheduling_choice'),
    sequence_batching: one(msg('ModelSequenceBatching'), 'scheduling_choice'),
    ensemble_scheduling: one(msg('ModelEnsembling'), 'scheduling_choice'),
    instance_group: rep(msg('ModelInstanceGroup')),
    default_model_filename: { type: s },
    cc_model_filenames: map(s),
    metric_tags: map(s),
    parameters: map(msg('ModelParameter')),
    model_warmup: rep(msg('ModelWarmup')),
    model_operations: { type: msg('ModelOperations') },
    model_transaction_policy: { type: msg('ModelTransactionPolicy') },
    model_repository_agents: { type: msg('ModelRepositoryAgents') },
    response_cache: { type: msg('ModelResponseCache') },
    model_metrics: { type: msg('ModelMetrics') },
  },
  ModelVersionPolicy: {
    latest: one(msg('ModelVersionPolicy.Latest'), 'policy_choice'),
    all: one(msg('ModelVersionPolicy.All'), 'policy_choice'),
    specific: one(msg('ModelVersionPolicy.Specific'), 'policy_choice'),
  },
  'ModelVersionPolicy.Latest': { num_versions: { type: 'uint32' } },
  'ModelVersionPolicy.All': {},
  'ModelVersionPolicy.Specific': { versions: rep('int64') },
  ModelInput: {
    name: { type: s },
    data_type: { type: en('DataType') },
    format: { type: en('Format') },
    dims: rep('int64'),
    reshape: { type: msg('ModelTensorReshape') },
    is_shape_tensor: { type: 'bool' },
    allow_ragged_batch: { type: 'bool' },
    optional: { type: 'bool' },
    is_non_linear_format_io: { type: 'bool' },
  },
  ModelOutput: {
    name: { type: s },
    data_type: { type: en('DataType') },
    dims: rep('int64'),
    reshape: { type: msg('ModelTensorReshape') },
    label_filename: { type: s },
    is_shape_tensor: { type: 'bool' },
    is_non_linear_format_io: { type: 'bool' },
  },
  ModelTensorReshape: { shape: rep('int64') },
  BatchInput: {
    kind: { type: en('BatchInputKind') },
    target_name: rep(s),
    data_type: { type: en('DataType') },
    source_input: rep(s),
  },
  BatchOutput: {
    target_name: rep(s),
    kind: { type: en('BatchOutputKind') },
    source_input: rep(s),
  },
  ModelInstanceGroup: {
    name: { type: s },
    kind: { type: en('Kind') },
    count: { type: 'int32' },
    rate_limiter: { type: msg('ModelRateLimiter') },
    gpus: rep('int32'),
    secondary_devices: rep(msg('ModelInstanceGroup.SecondaryDevice')),
    profile: rep(s),
    passive: { type: 'bool' },
    host_policy: { type: s },
  },
  'ModelInstanceGroup.SecondaryDevice': {
    kind: { type: en('SecondaryDeviceKind') },
    device_id: { type: 'int64' },
  },
  ModelRateLimiter: {
    resources: rep(msg('ModelRateLimiter.Resource')),
    priority: { type: 'uint32' },
  },
  'ModelRateLimiter.Resource': { name: { type: s }, global: { type: 'bool' }, count: { type: 'uint32' } },
  ModelOptimizationPolicy: {
    graph: { type: msg('ModelOptimizationPolicy.Graph') },
    priority: { type: en('ModelPriority') },
    cuda: { type: msg('ModelOptimizationPolicy.Cuda') },
    execution_accelerators: { type: msg('ModelOptimizationPolicy.ExecutionAccelerators') },
    input_pinned_memory: { type: msg('ModelOptimizationPolicy.PinnedMemoryBuffer') },
    output_pinned_memory: { type: msg('ModelOptimizationPolicy.PinnedMemoryBuffer') },
    gather_kernel_buffer_threshold: { type: 'uint32' },
    eager_batching: { type: 'bool' },
  },
  'ModelOptimizationPolicy.Graph': { level: { type: 'int32' } },
  'ModelOptimizationPolicy.Cuda': {
    graphs: { type: 'bool' },
    busy_wait_events: { type: 'bool' },
    graph_spec: rep(msg('ModelOptimizationPolicy.Cuda.GraphSpec')),
    output_copy_stream: { type: 'bool' },
  },
  'ModelOptimizationPolicy.Cuda.GraphSpec': {
    batch_size: { type: 'int32' },
    input: map(msg('ModelOptimizationPolicy.Cuda.GraphSpec.Shape')),
    graph_lower_bound: { type: msg('ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound') },
  },
  'ModelOptimizationPolicy.Cuda.GraphSpec.Shape': { dim: rep('int64') },
  'ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound': {
    batch_size: { type: 'int32' },
    input: map(msg('ModelOptimizationPolicy.Cuda.GraphSpec.Shape')),
  },
  'ModelOptimizationPolicy.ExecutionAccelerators': {
    gpu_execution_accelerator: rep(msg('ModelOptimizationPolicy.ExecutionAccelerators.Accelerator')),
    cpu_execution_accelerator: rep(msg('ModelOptimizationPolicy.ExecutionAccelerators.Accelerator')),
  },
  'ModelOptimizationPolicy.ExecutionAccelerators.Accelerator': { name: { type: s }, parameters: map(s) },
  'ModelOptimizationPolicy.PinnedMemoryBuffer': { enable: { type: 'bool' } },
  ModelQueuePolicy: {
    timeout_action: { type: en('TimeoutAction') },
    default_timeout_microseconds: { type: 'uint64' },
    allow_timeout_override: { type: 'bool' },
    max_queue_size: { type: 'uint32' },
  },
  ModelDynamicBatching: {
    preferred_batch_size: rep('int32'),
    max_queue_delay_microseconds: { type: 'uint64' },
    preserve_ordering: { type: 'bool' },
    priority_levels: { type: 'uint64' },
    default_priority_level: { type: 'uint64' },
    default_queue_policy: { type: msg('ModelQueuePolicy') },
    priority_queue_policy: map(msg('ModelQueuePolicy'), 'uint64'),
  },
  ModelSequenceBatching: {
    direct: one(msg('ModelSequenceBatching.StrategyDirect'), 'strategy_choice'),
    oldest: one(msg('ModelSequenceBatching.StrategyOldest'), 'strategy_choice'),
    max_sequence_idle_microseconds: { type: 'uint64' },
    control_input: rep(msg('ModelSequenceBatching.ControlInput')),
    state: rep(msg('ModelSequenceBatching.State')),
    iterative_sequence: { type: 'bool' },
  },
  'ModelSequenceBatching.Control': {
    kind: { type: en('ControlKind') },
    int32_false_true: rep('int32'),
    fp32_false_true: rep('float'),
    bool_false_true: rep('bool'),
    data_type: { type: en('DataType') },
  },
  'ModelSequenceBatching.ControlInput': {
    name: { type: s },
    control: rep(msg('ModelSequenceBatching.Control')),
  },
  'ModelSequenceBatching.InitialState': {
    data_type: { type: en('DataType') },
    dims: rep('int64'),
    zero_data: one('bool', 'state_data'),
    data_file: one(s, 'state_data'),
    name: { type: s },
  },
  'ModelSequenceBatching.State': {
    input_name: { type: s },
    output_name: { type: s },
    data_type: { type: en('DataType') },
    dims: rep('int64'),
    initial_state: rep(msg('ModelSequenceBatching.InitialState')),
    use_same_buffer_for_input_output: { type: 'bool' },
    use_growable_memory: { type: 'bool' },
  },
  'ModelSequenceBatching.StrategyDirect': {
    max_queue_delay_microseconds: { type: 'uint64' },
    minimum_slot_utilization: { type: 'float' },
  },
  'ModelSequenceBatching.StrategyOldest': {
    max_candidate_sequences: { type: 'int32' },
    preferred_batch_size: rep('int32'),
    max_queue_delay_microseconds: { type: 'uint64' },
    preserve_ordering: { type: 'bool' },
  },
  ModelEnsembling: {
    step: rep(msg('ModelEnsembling.Step')),
    max_inflight_requests: { type: 'uint32' },
  },
  'ModelEnsembling.Step': {
    model_name: { type: s },
    model_version: { type: 'int64' },
    input_map: map(s),
    output_map: map(s),
    model_namespace: { type: s },
  },
  ModelParameter: { string_value: { type: s } },
  ModelWarmup: {
    name: { type: s },
    batch_size: { type: 'uint32' },
    inputs: map(msg('ModelWarmup.Input')),
    count: { type: 'uint32' },
  },
  'ModelWarmup.Input': {
    data_type: { type: en('DataType') },
    dims: rep('int64'),
    zero_data: one('bool', 'input_data_type'),
    random_data: one('bool', 'input_data_type'),
    input_data_file: one(s, 'input_data_type'),
  },
  ModelOperations: { op_library_filename: rep(s) },
  ModelTransactionPolicy: { decoupled: { type: 'bool' } },
  ModelRepositoryAgents: { agents: rep(msg('ModelRepositoryAgents.Agent')) },
  'ModelRepositoryAgents.Agent': { name: { type: s }, parameters: map(s) },
  ModelResponseCache: { enable: { type: 'bool' } },
  ModelMetrics: { metric_control: rep(msg('ModelMetrics.MetricControl')) },
  'ModelMetrics.MetricControl': {
    metric_identifier: { type: msg('ModelMetrics.MetricControl.MetricIdentifier') },
    histogram_options: { type: msg('ModelMetrics.MetricControl.HistogramOptions') },
  },
  'ModelMetrics.MetricControl.MetricIdentifier': { family: { type: s } },
  'ModelMetrics.MetricControl.HistogramOptions': { buckets: rep('double') },
};

/** The default value proto3 gives a scalar or enum field. */
export function defaultScalar(type: ValueType): string | number | boolean {
  if (typeof type === 'object') {
    if ('enum' in type) return ENUMS[type.enum]?.[0] ?? '';
    throw new TypeError('messages have no scalar default');
  }
  switch (type) {
    case 'string':
    case 'bytes':
      return '';
    case 'bool':
      return false;
    default:
      return 0;
  }
}

/**
 * Why a 64-bit config integer Triton would read is refused: Triode reads them as JavaScript
 * numbers, exact up to 2^53-1 (README, Differences). Undefined for other types and for text that is
 * out of the type's own range.
 */
export function wideIntegerNote(type: ScalarType, text: string): string | undefined {
  if (type !== 'int64' && type !== 'uint64') return undefined;
  let v: bigint;
  try {
    v = BigInt(text.trim());
  } catch {
    return undefined;
  }
  const [lo, hi] = type === 'int64' ? [-(2n ** 63n), 2n ** 63n - 1n] : [0n, 2n ** 64n - 1n];
  return v >= lo && v <= hi ? `Triode reads ${type} config values up to 2^53-1 (9007199254740991) in magnitude` : undefined;
}

/** Range of each integer type, for the readers' checks. */
export const INT_RANGES: Partial<Record<ScalarType, readonly [number, number]>> = {
  int32: [-2147483648, 2147483647],
  uint32: [0, 4294967295],
  int64: [Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
  uint64: [0, Number.MAX_SAFE_INTEGER],
};
