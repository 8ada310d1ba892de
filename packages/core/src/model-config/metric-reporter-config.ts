/**
 * @module A model's metric settings from its config: `metric_tags` (one extra label per tag on
 * every per-model metric, named "_" + key) and `model_metrics` (per-model histogram buckets).
 * Checked when the model loads; configs are hostile input, so names, counts and lengths are
 * bounded, and what Triton would crash on (an invalid label name, unsorted buckets) fails the
 * load with INVALID_ARG.
 * Triton: core/src/metric_model_reporter.cc (MetricReporterConfig::ParseConfig, GetMetricLabels)
 */
import { Errors, echo } from '../errors.js';
import type { ModelConfig } from './model-config.js';

/** `model_metrics` (ModelConfig field 26), as `model_config.proto` defines it. */
export interface ModelMetrics {
  metric_control?: {
    metric_identifier?: { family?: string };
    histogram_options?: { buckets?: number[] };
  }[];
}

/** What the metrics endpoint needs of a model's config. */
export interface ModelMetricSettings {
  /** One label per `metric_tags` entry: "_" + key → value, in key order (empty without tags). */
  readonly labels: Readonly<Record<string, string>>;
  /**
   * Per histogram family (Triton's name, e.g. `nv_inference_first_response_histogram_ms`): the
   * model's bucket bounds from `model_metrics`. A family not here uses the server-wide buckets.
   */
  readonly histogramBuckets: Readonly<Record<string, readonly number[]>>;
  /**
   * `model_transaction_policy { decoupled: true }`: Triton gives only decoupled models the
   * first-response histogram ("Only create response metrics if decoupled model").
   */
  readonly decoupled: boolean;
  /**
   * `response_cache { enable: true }` on a model Triode caches (not an ensemble, decoupled or
   * sequence model). With a server cache, such a model has the per-model cache metrics and no
   * request summary, as a Triton model whose cache is enabled.
   */
  readonly responseCache: boolean;
}

/** The histogram families whose buckets `model_metrics` may set (Triton: `metric_map_`). */
export const CUSTOMIZABLE_HISTOGRAM_FAMILIES: readonly string[] = ['nv_inference_first_response_histogram_ms'];

/** Bounds on what a config may ask of the metrics endpoint. */
export const METRIC_CONFIG_LIMITS = {
  /** `metric_tags` entries per model. */
  tags: 16,
  /** Characters in a tag key (the label name is one more, the "_"). */
  keyLength: 64,
  /** Characters in a tag value. */
  valueLength: 256,
  /** `model_metrics.metric_control` entries per model. */
  metricControls: 16,
  /** Bucket bounds per histogram. */
  buckets: 64,
} as const;

/** Prometheus: `[a-zA-Z_][a-zA-Z0-9_]*`; "_" + key starts well, and must not start "__" (reserved). */
const TAG_KEY = /^[a-zA-Z0-9][a-zA-Z0-9_]*$|^$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

const settingsOf = new WeakMap<ModelConfig, ModelMetricSettings>();

function checkTags(config: ModelConfig, model: string): void {
  const tags = config.metric_tags;
  if (tags === undefined) return;
  if (typeof tags !== 'object' || tags === null || Array.isArray(tags)) throw Errors.invalidArg(`model '${model}': metric_tags must be a map of strings`);
  const entries = Object.entries(tags);
  if (entries.length > METRIC_CONFIG_LIMITS.tags) {
    throw Errors.invalidArg(`model '${model}': metric_tags has ${entries.length} entries, more than the limit of ${METRIC_CONFIG_LIMITS.tags}`);
  }
  for (const [key, value] of entries) {
    if (key.length > METRIC_CONFIG_LIMITS.keyLength) {
      throw Errors.invalidArg(`model '${model}': metric_tags key '${echo(key, METRIC_CONFIG_LIMITS.keyLength)}' is longer than ${METRIC_CONFIG_LIMITS.keyLength} characters`);
    }
    if (!TAG_KEY.test(key)) {
      throw Errors.invalidArg(
        `model '${model}': metric_tags key '${echo(key)}' does not make a valid Prometheus label name '_${echo(key)}': ` +
        'a key must be letters, digits and underscores, and must not start with an underscore (labels starting with "__" are reserved)',
      );
    }
    if (typeof value !== 'string') throw Errors.invalidArg(`model '${model}': metric_tags value of key '${key}' must be a string`);
    if (value.length > METRIC_CONFIG_LIMITS.valueLength) {
      throw Errors.invalidArg(`model '${model}': metric_tags value of key '${key}' is longer than ${METRIC_CONFIG_LIMITS.valueLength} characters`);
    }
    if (CONTROL.test(value)) throw Errors.invalidArg(`model '${model}': metric_tags value of key '${key}' contains a control character`);
  }
}

/** Returns a warning per metric_control that names a family whose buckets cannot be set. */
function checkModelMetrics(config: ModelConfig, model: string): string[] {
  const mm = config.model_metrics as ModelMetrics | null | undefined;
  if (mm === undefined || mm === null) return [];
  if (typeof mm !== 'object') throw Errors.invalidArg(`model '${model}': model_metrics must be a message`);
  const controls = mm.metric_control ?? [];
  if (!Array.isArray(controls)) throw Errors.invalidArg(`model '${model}': model_metrics.metric_control must be a list`);
  if (controls.length > METRIC_CONFIG_LIMITS.metricControls) {
    throw Errors.invalidArg(`model '${model}': model_metrics has ${controls.length} metric_control entries, more than the limit of ${METRIC_CONFIG_LIMITS.metricControls}`);
  }
  const warnings: string[] = [];
  for (const c of controls) {
    const family = c?.metric_identifier?.family ?? '';
    if (typeof family !== 'string' || !CUSTOMIZABLE_HISTOGRAM_FAMILIES.includes(family)) {
      // Triton logs a warning and ignores the entry (metric_control may name backend metrics one day).
      warnings.push(`model '${model}': metric family '${echo(family, 128)}' in 'metric_identifier' is not a customizable metric (customizable: ${CUSTOMIZABLE_HISTOGRAM_FAMILIES.join(', ')}); ignored`);
      continue;
    }
    const buckets = c.histogram_options?.buckets ?? [];
    const where = `model '${model}': model_metrics buckets of '${family}'`;
    if (!Array.isArray(buckets)) throw Errors.invalidArg(`${where} must be a list of numbers`);
    if (buckets.length > METRIC_CONFIG_LIMITS.buckets) {
      throw Errors.invalidArg(`${where}: ${buckets.length} bounds, more than the limit of ${METRIC_CONFIG_LIMITS.buckets}`);
    }
    if (buckets.some((b, i) => typeof b !== 'number' || !Number.isFinite(b) || (i > 0 && b <= buckets[i - 1]!))) {
      throw Errors.invalidArg(`${where} must be finite and strictly increasing, got [${echo(buckets.join(', '))}]`);
    }
  }
  return warnings;
}

/**
 * Checks a config's `metric_tags` and `model_metrics` at load.
 * @returns one warning per `metric_control` entry whose family has no settable buckets (ignored, as in Triton).
 * @throws TriodeError INVALID_ARG for a tag key that does not make a valid Prometheus label name,
 * a value or count over `METRIC_CONFIG_LIMITS`, or buckets that are not finite and strictly
 * increasing.
 */
export function checkMetricReporterConfig(config: ModelConfig, model: string = config.name ?? ''): string[] {
  checkTags(config, model);
  return checkModelMetrics(config, model);
}

/**
 * The labels and histogram buckets a (checked) config gives its model's metrics; computed once
 * per config object.
 * @example
 * modelMetricSettings(parsePbtxt('metric_tags { key: "team" value: "search" }')).labels // { _team: 'search' }
 */
export function modelMetricSettings(config: ModelConfig): ModelMetricSettings {
  let s = settingsOf.get(config);
  if (s) return s;
  const labels: Record<string, string> = {};
  for (const key of Object.keys(config.metric_tags ?? {}).sort()) labels[`_${key}`] = config.metric_tags![key]!;
  const histogramBuckets: Record<string, number[]> = {};
  for (const c of (config.model_metrics as ModelMetrics | null | undefined)?.metric_control ?? []) {
    const family = c?.metric_identifier?.family ?? '';
    // A later entry for the same family wins, as in Triton (a map assignment).
    if (CUSTOMIZABLE_HISTOGRAM_FAMILIES.includes(family)) histogramBuckets[family] = [...(c.histogram_options?.buckets ?? [])];
  }
  const decoupled = config.model_transaction_policy?.decoupled === true;
  // As the load applies it (unimplemented-config.ts warns where it does not).
  const responseCache = config.response_cache?.enable === true && !config.ensemble_scheduling && !decoupled && !config.sequence_batching;
  s = Object.freeze({ labels: Object.freeze(labels), histogramBuckets: Object.freeze(histogramBuckets), decoupled, responseCache });
  settingsOf.set(config, s);
  return s;
}
