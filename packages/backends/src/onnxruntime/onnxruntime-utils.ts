/**
 * @module Data type maps and session settings for the onnxruntime backend.
 * Triton: onnxruntime_backend/src/onnxruntime_utils.cc, onnxruntime.cc (ModelState::LoadModel)
 */
import { Errors, type DataType, type ModelConfig } from '@triode/core';
import type { RaggedBatchConfig, SessionSettings } from './messages.js';

const ORT_TO_DT: Record<string, DataType> = {
  bool: 'BOOL', uint8: 'UINT8', uint16: 'UINT16', uint32: 'UINT32', uint64: 'UINT64',
  int8: 'INT8', int16: 'INT16', int32: 'INT32', int64: 'INT64',
  float16: 'FP16', float32: 'FP32', float64: 'FP64', string: 'BYTES',
};

const DT_TO_ORT: Partial<Record<DataType, string>> = Object.fromEntries(Object.entries(ORT_TO_DT).map(([k, v]) => [v, k]));

/** onnxruntime-node type name -> Triton data type. */
export function ortTypeToDataType(t: string): DataType | undefined {
  return ORT_TO_DT[t];
}

/** Triton data type -> onnxruntime-node type name (BF16 has none). */
export function dataTypeToOrtType(dt: DataType): string {
  const t = DT_TO_ORT[dt];
  if (!t) throw Errors.unsupported(`onnxruntime backend does not support data type ${dt}`);
  return t;
}

/**
 * Most threads a session's intra-op or inter-op pool may have. onnxruntime starts them all at load,
 * and `intra_op_thread_count: 100000` made the server spawn 18,600 threads and 20 GB before it
 * failed. A fixed bound rather than one from the machine's cores, so that a config that loads on
 * one machine loads on another; far above what any CPU gains from.
 */
export const MAX_THREAD_COUNT = 1024;

function intParam(config: ModelConfig, key: string, max?: number): number | undefined {
  const v = config.parameters?.[key]?.string_value;
  if (v === undefined || v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw Errors.invalidArg(`parameter '${key}' of model '${config.name ?? ''}' must be a non-negative integer, got '${v}'`);
  if (max !== undefined && n > max) throw Errors.invalidArg(`parameter '${key}' of model '${config.name ?? ''}' must be at most ${max}, got '${v}'`);
  return n;
}

/**
 * Session settings from the config, with Triton's onnxruntime parameter names:
 * `intra_op_thread_count`, `inter_op_thread_count`, `execution_mode` (0 sequential, 1 parallel),
 * `enable_mem_arena`, `enable_mem_pattern`, and ORT session config keys given as `session.*`;
 * `optimization { graph { level } }`: -1 basic, 1 extended, otherwise all.
 * Triode's default intra-op thread count is 1 (Triton's is ORT's default: all cores), because
 * one session per instance thread with one intra-op thread each is what scales on CPU.
 */
/**
 * Default of the `arena_reset_bytes` parameter: 1 GiB. A run that grows the process by more is an
 * outlier (the 22 MB ppocr_rec request grew it by 2 GB); normal batches stay well under (ppocr_det,
 * 4 x 3 x 960 x 960 on a cold arena: +270 MiB, then a few MiB), so no model remakes its session in
 * steady state.
 */
export const DEFAULT_ARENA_RESET_BYTES = 1024 * 1024 * 1024;

/**
 * Components a `session.*` key may not have: the key is split on '.' into the nested object ORT
 * takes, and `session.__proto__.error` would otherwise write onto Object.prototype (every object
 * of the process then has an `error`, and every request fails).
 */
const FORBIDDEN_KEY_PARTS = new Set(['__proto__', 'constructor', 'prototype', '']);

/**
 * `session.*` keys refused: ORT writes files for some session options (optimized_model_filepath
 * overwrote any file the server could write, enable_profiling / profile_file_prefix wrote profile
 * JSON to any path or the cwd, save_model_format, external initializer file names...), and a config
 * may write nothing outside the repository. Conservative: any key that names saving, profiling, a
 * file, a path, a prefix or a directory.
 */
const FILE_WRITING_KEY = /save|file|path|prefix|dir|profil/i;

/** ORT session config entries of the config: its `session.*` parameters, checked. */
function sessionConfigEntries(config: ModelConfig): Record<string, string> {
  const entries: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [k, v] of Object.entries(config.parameters ?? {})) {
    if (!k.startsWith('session.')) continue;
    if (k.split('.').some((p) => FORBIDDEN_KEY_PARTS.has(p))) {
      throw Errors.invalidArg(`parameter '${k}' of model '${config.name ?? ''}' is not a valid onnxruntime session config key: a component is empty, '__proto__', 'constructor' or 'prototype'`);
    }
    if (FILE_WRITING_KEY.test(k)) {
      throw Errors.invalidArg(`parameter '${k}' of model '${config.name ?? ''}' is refused: onnxruntime session options that save, profile or name a file or directory would let a config write files outside the repository`);
    }
    entries[k] = v.string_value ?? '';
  }
  // The keys become one nested object: with both `session.a` and `session.a.b`, `a` would have to
  // be a string and an object at once (the session build failed with an internal TypeError).
  for (const k of Object.keys(entries)) {
    const longer = Object.keys(entries).find((o) => o.startsWith(`${k}.`));
    if (longer !== undefined) {
      throw Errors.invalidArg(`parameters '${k}' and '${longer}' of model '${config.name ?? ''}' conflict: an onnxruntime session config key may not be a prefix of another`);
    }
  }
  return entries;
}

export function sessionSettings(config: ModelConfig): SessionSettings {
  const level = config.optimization?.graph?.level ?? 0;
  const configEntries = sessionConfigEntries(config);
  const bool = (key: string, dflt: boolean) => {
    const v = config.parameters?.[key]?.string_value;
    return v === undefined ? dflt : !['0', 'false', 'off', ''].includes(v.toLowerCase());
  };
  return {
    intraOpNumThreads: intParam(config, 'intra_op_thread_count', MAX_THREAD_COUNT) || 1,
    interOpNumThreads: intParam(config, 'inter_op_thread_count', MAX_THREAD_COUNT) || 1,
    executionMode: intParam(config, 'execution_mode') === 1 ? 'parallel' : 'sequential',
    graphOptimizationLevel: level === -1 ? 'basic' : level === 1 ? 'extended' : 'all',
    enableCpuMemArena: bool('enable_mem_arena', true),
    enableMemPattern: bool('enable_mem_pattern', true),
    configEntries,
    arenaResetBytes: intParam(config, 'arena_reset_bytes') ?? DEFAULT_ARENA_RESET_BYTES,
  };
}

/**
 * What a ragged batch of the model is joined and split by, or undefined for a model whose batches
 * are regular (no `allow_ragged_batch` input, no `batch_input`, no `batch_output`): those keep the
 * plain concatenation along the batch dim.
 */
export function raggedBatchConfig(config: ModelConfig): RaggedBatchConfig | undefined {
  const ragged = (config.input ?? []).some((io) => io.allow_ragged_batch === true);
  if (!ragged && !config.batch_input?.length && !config.batch_output?.length) return undefined;
  return structuredClone({
    input: config.input ?? [], output: config.output ?? [], batch_input: config.batch_input ?? [], batch_output: config.batch_output ?? [],
    max_batch_size: config.max_batch_size ?? 0,
  });
}
