/**
 * @module Config normalization: the defaults Triton fills in after auto-complete.
 * Triton: core/src/model_config_utils.cc AutoCompleteBackendFields, NormalizeModelConfig,
 * NormalizeInstanceGroup
 */
import { Errors, echo } from '../errors.js';
import type { ModelConfig, ModelInstanceGroup } from './model-config.js';

/** Platform and backend names Triode knows. */
export const PLATFORMS = {
  onnx: 'onnxruntime_onnx',
  ensemble: 'ensemble',
} as const;

/** The file each backend loads from a version folder when `default_model_filename` is empty. */
export const DEFAULT_MODEL_FILENAMES: Record<string, string> = {
  onnxruntime: 'model.onnx',
  javascript: 'model.js',
};

/**
 * Fills `platform`/`backend`/`default_model_filename` from each other, or from the files found in
 * the version folders when neither is set (`model.onnx` -> onnxruntime, `model.js` -> javascript).
 * With nothing to go by, Triton's custom-backend rule: a model named `<x>.<backend>` gets that
 * backend and `model.<backend>`; any other name is refused.
 * Triton: core src/model_config_utils.cc AutoCompleteBackendFields
 * @param versionFiles names of the files and folders inside the model's version folders
 * @throws TriodeError INVALID_ARG when no backend can be told, with Triton's text
 */
export function autoCompleteBackendFields(config: ModelConfig, versionFiles: readonly string[]): void {
  if (!config.backend && !config.platform) {
    const fname = config.default_model_filename;
    // Triton takes onnxruntime from the exact name model.onnx only (kOnnxRuntimeOnnxFilename);
    // model.js / *.mjs are Triode's own (the javascript backend).
    if (fname === 'model.onnx' || (!fname && versionFiles.includes('model.onnx'))) {
      config.backend = 'onnxruntime';
    } else if (fname?.endsWith('.js') || fname?.endsWith('.mjs') || versionFiles.includes('model.js') || versionFiles.includes('model.mjs')) {
      config.backend = 'javascript';
    } else if (!fname) {
      const name = config.name ?? '';
      const dot = name.indexOf('.');
      if (dot < 0) {
        throw Errors.invalidArg(`Invalid model name: Could not determine backend for model '${echo(name)}' with no backend in model configuration. Expected model name of the form 'model.<backend_name>'.`);
      }
      config.backend = name.slice(dot + 1);
      config.default_model_filename = `model.${config.backend}`;
    }
  }
  if (!config.backend && config.platform === PLATFORMS.onnx) config.backend = 'onnxruntime';
  if (config.backend === 'onnxruntime' && !config.platform) config.platform = PLATFORMS.onnx;
  if (!config.default_model_filename && config.backend) {
    if (config.backend === 'javascript' && !versionFiles.includes('model.js') && versionFiles.includes('model.mjs')) {
      config.default_model_filename = 'model.mjs';
    } else {
      config.default_model_filename = DEFAULT_MODEL_FILENAMES[config.backend] ?? '';
    }
  }
}

/** Default instance count for a group: 2 on CPU for the onnxruntime backend (Triton's ORT rule), else 1. */
function defaultCount(config: ModelConfig, kind: string): number {
  return kind === 'KIND_CPU' && config.backend === 'onnxruntime' ? 2 : 1;
}

/**
 * Fills Triton's defaults in place: version policy `latest {1}`, preferred batch size
 * `[max_batch_size]`, sequence idle time 1 s, pinned-memory flags, and instance groups (name,
 * kind, count). Triode has no GPU support yet, so KIND_AUTO resolves to KIND_CPU.
 */
export function normalizeModelConfig(config: ModelConfig, options: { gpuCount?: number } = {}): ModelConfig {
  config.max_batch_size ??= 0;
  config.input ??= [];
  config.output ??= [];
  config.version_policy ??= { latest: { num_versions: 1 } };
  // `latest {}` is num_versions 0 (proto3), which loads no version, as in Triton.
  if (config.version_policy.latest) config.version_policy.latest.num_versions ??= 0;

  const db = config.dynamic_batching;
  if (db) {
    if (!db.preferred_batch_size?.length) db.preferred_batch_size = config.max_batch_size > 0 ? [config.max_batch_size] : [];
    db.max_queue_delay_microseconds ??= 0;
    db.priority_levels ??= 0;
    db.default_priority_level ??= 0;
  }
  const sb = config.sequence_batching;
  if (sb) {
    if (!sb.max_sequence_idle_microseconds) sb.max_sequence_idle_microseconds = 1_000_000;
    // No strategy given is the Direct strategy; Triton leaves the field unset (so does its config JSON).
    if (sb.oldest && !sb.oldest.preferred_batch_size?.length) sb.oldest.preferred_batch_size = config.max_batch_size > 0 ? [config.max_batch_size] : [];
  }

  if (config.platform !== PLATFORMS.ensemble) {
    config.optimization ??= {};
    config.optimization.input_pinned_memory ??= { enable: true };
    config.optimization.output_pinned_memory ??= { enable: true };
    normalizeInstanceGroups(config, options.gpuCount ?? 0);
  }
  return config;
}

function normalizeInstanceGroups(config: ModelConfig, gpuCount: number): void {
  // Triton's NormalizeInstanceGroup: the group it adds is named after the model; a group the
  // config gives without a name is named <model>_<index>.
  if (!config.instance_group?.length) config.instance_group = [{ name: config.name ?? '' }];
  config.instance_group.forEach((g: ModelInstanceGroup, i) => {
    if (!g.name) g.name = `${config.name ?? ''}_${i}`;
    if (!g.kind || g.kind === 'KIND_AUTO') g.kind = gpuCount > 0 && g.gpus?.length !== 0 ? 'KIND_GPU' : 'KIND_CPU';
    if (g.count === undefined || g.count < 1) g.count = defaultCount(config, g.kind);
  });
}
