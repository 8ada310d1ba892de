/**
 * @module `inference.ModelConfig` as TypeScript types, with the proto field names (snake_case).
 * Enums are their value names (`"TYPE_FP32"`), 64-bit integers are numbers. Every field is optional
 * as parsed; `normalizeModelConfig` fills what Triton fills.
 * Triton: common/protobuf/model_config.proto
 */

/** A config data type enum name such as `TYPE_FP32` or `TYPE_STRING`. */
export type ConfigDataType = string;

export interface ModelTensorReshape { shape?: number[] }

export interface ModelInput {
  name: string;
  data_type?: ConfigDataType;
  format?: 'FORMAT_NONE' | 'FORMAT_NHWC' | 'FORMAT_NCHW';
  dims?: number[];
  reshape?: ModelTensorReshape;
  is_shape_tensor?: boolean;
  allow_ragged_batch?: boolean;
  optional?: boolean;
  is_non_linear_format_io?: boolean;
}

export interface ModelOutput {
  name: string;
  data_type?: ConfigDataType;
  dims?: number[];
  reshape?: ModelTensorReshape;
  label_filename?: string;
  is_shape_tensor?: boolean;
  is_non_linear_format_io?: boolean;
}

/** A batch input kind (`BatchInput.Kind`); absent means BATCH_ELEMENT_COUNT (the proto's 0). */
export type BatchInputKind =
  | 'BATCH_ELEMENT_COUNT' | 'BATCH_ACCUMULATED_ELEMENT_COUNT' | 'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO'
  | 'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE' | 'BATCH_ITEM_SHAPE' | 'BATCH_ITEM_SHAPE_FLATTEN';

/** `inference.BatchInput`: a tensor the backend makes from the whole batch (ragged batching). */
export interface BatchInput {
  kind?: BatchInputKind;
  /** The model inputs that get the tensor (each gets the same values). */
  target_name?: string[];
  /** TYPE_INT32 or TYPE_FP32. */
  data_type?: ConfigDataType;
  /** The request input the values are computed from (exactly one). */
  source_input?: string[];
}

/** `inference.BatchOutput`: an output the backend splits among the requests in its own way. */
export interface BatchOutput {
  /** The model outputs split this way. */
  target_name?: string[];
  /** Absent means BATCH_SCATTER_WITH_INPUT_SHAPE (the proto's 0). */
  kind?: 'BATCH_SCATTER_WITH_INPUT_SHAPE';
  /** The request input whose shape each request's part takes (exactly one). */
  source_input?: string[];
}

export interface ModelVersionPolicy {
  latest?: { num_versions?: number };
  all?: Record<string, never>;
  specific?: { versions?: number[] };
}

export type InstanceKind = 'KIND_AUTO' | 'KIND_GPU' | 'KIND_CPU' | 'KIND_MODEL';

export interface ModelInstanceGroup {
  name?: string;
  kind?: InstanceKind;
  count?: number;
  rate_limiter?: { resources?: { name?: string; global?: boolean; count?: number }[]; priority?: number };
  gpus?: number[];
  secondary_devices?: { kind?: string; device_id?: number }[];
  profile?: string[];
  passive?: boolean;
  host_policy?: string;
}

export interface ModelQueuePolicy {
  timeout_action?: 'REJECT' | 'DELAY';
  default_timeout_microseconds?: number;
  allow_timeout_override?: boolean;
  max_queue_size?: number;
}

export interface ModelDynamicBatching {
  preferred_batch_size?: number[];
  max_queue_delay_microseconds?: number;
  preserve_ordering?: boolean;
  priority_levels?: number;
  default_priority_level?: number;
  default_queue_policy?: ModelQueuePolicy;
  priority_queue_policy?: Record<string, ModelQueuePolicy>;
}

export interface SequenceControl {
  kind?: 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_READY' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_CORRID';
  int32_false_true?: number[];
  fp32_false_true?: number[];
  bool_false_true?: boolean[];
  data_type?: ConfigDataType;
}

export interface SequenceState {
  input_name?: string;
  output_name?: string;
  data_type?: ConfigDataType;
  dims?: number[];
  initial_state?: { data_type?: ConfigDataType; dims?: number[]; zero_data?: boolean; data_file?: string; name?: string }[];
  use_same_buffer_for_input_output?: boolean;
  use_growable_memory?: boolean;
}

export interface ModelSequenceBatching {
  direct?: { max_queue_delay_microseconds?: number; minimum_slot_utilization?: number };
  oldest?: { max_candidate_sequences?: number; preferred_batch_size?: number[]; max_queue_delay_microseconds?: number; preserve_ordering?: boolean };
  max_sequence_idle_microseconds?: number;
  control_input?: { name?: string; control?: SequenceControl[] }[];
  state?: SequenceState[];
  iterative_sequence?: boolean;
}

export interface EnsembleStep {
  model_name?: string;
  model_version?: number;
  input_map?: Record<string, string>;
  output_map?: Record<string, string>;
  model_namespace?: string;
}

export interface ModelEnsembling {
  step?: EnsembleStep[];
  max_inflight_requests?: number;
}

export interface ModelWarmup {
  name?: string;
  batch_size?: number;
  inputs?: Record<string, { data_type?: ConfigDataType; dims?: number[]; zero_data?: boolean; random_data?: boolean; input_data_file?: string }>;
  count?: number;
}

export interface ModelOptimizationPolicy {
  graph?: { level?: number };
  priority?: 'PRIORITY_DEFAULT' | 'PRIORITY_MAX' | 'PRIORITY_MIN';
  cuda?: Record<string, unknown>;
  execution_accelerators?: {
    gpu_execution_accelerator?: { name?: string; parameters?: Record<string, string> }[];
    cpu_execution_accelerator?: { name?: string; parameters?: Record<string, string> }[];
  };
  input_pinned_memory?: { enable?: boolean };
  output_pinned_memory?: { enable?: boolean };
  gather_kernel_buffer_threshold?: number;
  eager_batching?: boolean;
}

/** `inference.ModelConfig`. */
export interface ModelConfig {
  name?: string;
  platform?: string;
  backend?: string;
  runtime?: string;
  version_policy?: ModelVersionPolicy;
  max_batch_size?: number;
  input?: ModelInput[];
  output?: ModelOutput[];
  batch_input?: BatchInput[];
  batch_output?: BatchOutput[];
  optimization?: ModelOptimizationPolicy;
  dynamic_batching?: ModelDynamicBatching;
  sequence_batching?: ModelSequenceBatching;
  ensemble_scheduling?: ModelEnsembling;
  instance_group?: ModelInstanceGroup[];
  default_model_filename?: string;
  cc_model_filenames?: Record<string, string>;
  metric_tags?: Record<string, string>;
  parameters?: Record<string, { string_value?: string }>;
  model_warmup?: ModelWarmup[];
  model_operations?: { op_library_filename?: string[] };
  model_transaction_policy?: { decoupled?: boolean };
  model_repository_agents?: { agents?: { name?: string; parameters?: Record<string, string> }[] };
  response_cache?: { enable?: boolean };
  model_metrics?: Record<string, unknown>;
}
