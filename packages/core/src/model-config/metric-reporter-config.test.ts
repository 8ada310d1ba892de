import { describe, expect, it } from 'vitest';
import { METRIC_CONFIG_LIMITS, checkMetricReporterConfig, modelMetricSettings } from './metric-reporter-config.js';
import { parsePbtxt } from './pbtxt-parser.js';

const FAMILY = 'nv_inference_first_response_histogram_ms';
const config = (text: string) => parsePbtxt(`name: "m"\n${text}`);
const check = (text: string) => checkMetricReporterConfig(config(text));
const invalid = (message: string) => expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringContaining(message) });

describe('metric_tags', () => {
  it('each tag is a label named "_" + key, in key order', () => {
    const c = config('metric_tags [ { key: "team" value: "search" }, { key: "Tier_2" value: "gold \\"1\\"" }, { key: "1x" value: "" } ]');
    expect(check('metric_tags [ { key: "team" value: "search" }, { key: "Tier_2" value: "gold" }, { key: "1x" value: "" } ]')).toEqual([]);
    expect(modelMetricSettings(c).labels).toEqual({ _1x: '', _Tier_2: 'gold "1"', _team: 'search' });
    expect(Object.keys(modelMetricSettings(c).labels)).toEqual(['_1x', '_Tier_2', '_team']);
    // Computed once per config object.
    expect(modelMetricSettings(c)).toBe(modelMetricSettings(c));
  });

  it('a config without tags or model_metrics has no labels and no buckets', () => {
    expect(check('')).toEqual([]);
    expect(modelMetricSettings(config(''))).toEqual({ labels: {}, histogramBuckets: {}, decoupled: false, responseCache: false });
  });

  it('decoupled and response cache: what decides which of Triton\'s per-model families a model has', () => {
    expect(modelMetricSettings(config('model_transaction_policy { decoupled: true }')).decoupled).toBe(true);
    expect(modelMetricSettings(config('response_cache { enable: true }')).responseCache).toBe(true);
    expect(modelMetricSettings(config('response_cache { enable: false }')).responseCache).toBe(false);
    // Where Triode does not apply the cache (the load warns), the model is not cache-enabled.
    expect(modelMetricSettings(config('response_cache { enable: true }\nmodel_transaction_policy { decoupled: true }')).responseCache).toBe(false);
    expect(modelMetricSettings(config('response_cache { enable: true }\nsequence_batching { }')).responseCache).toBe(false);
    expect(modelMetricSettings(config('platform: "ensemble"\nresponse_cache { enable: true }\nensemble_scheduling { step [ ] }')).responseCache).toBe(false);
  });

  it.each([
    ['team-a', "metric_tags key 'team-a' does not make a valid Prometheus label name '_team-a'"],
    ['team a', "metric_tags key 'team a' does not make a valid Prometheus label name"],
    ['équipe', "metric_tags key 'équipe' does not make a valid Prometheus label name"],
    // "_" + "_x" would be "__x": Prometheus reserves labels that start with "__".
    ['_x', "metric_tags key '_x' does not make a valid Prometheus label name '__x': a key must be letters, digits and underscores, and must not start with an underscore (labels starting with \"__\" are reserved)"],
    ['a.b', "metric_tags key 'a.b' does not make a valid Prometheus label name"],
  ])('a key that does not make a valid label name fails the load with INVALID_ARG: %s', (key, message) => {
    expect(() => check(`metric_tags { key: "${key}" value: "v" }`)).toThrow(invalid(`model 'm': ${message}`));
  });

  it('bounds the count and the lengths of tags (configs are hostile input)', () => {
    const many = Array.from({ length: METRIC_CONFIG_LIMITS.tags + 1 }, (_, i) => `{ key: "k${i}" value: "v" }`).join(', ');
    expect(() => check(`metric_tags [ ${many} ]`)).toThrow(invalid(`metric_tags has 17 entries, more than the limit of ${METRIC_CONFIG_LIMITS.tags}`));
    expect(check(`metric_tags [ ${many.slice(0, many.lastIndexOf(', {'))} ]`)).toEqual([]);
    expect(() => check(`metric_tags { key: "${'k'.repeat(65)}" value: "v" }`)).toThrow(invalid('is longer than 64 characters'));
    expect(() => check(`metric_tags { key: "k" value: "${'v'.repeat(257)}" }`)).toThrow(invalid("metric_tags value of key 'k' is longer than 256 characters"));
    expect(check(`metric_tags { key: "${'k'.repeat(64)}" value: "${'v'.repeat(256)}" }`)).toEqual([]);
    expect(() => check('metric_tags { key: "k" value: "a\\nb" }')).toThrow(invalid("metric_tags value of key 'k' contains a control character"));
  });
});

describe('model_metrics', () => {
  it('sets the first-response histogram buckets of the model; a later entry for the family wins', () => {
    const c = config(`model_metrics { metric_control [ { metric_identifier { family: "${FAMILY}" } histogram_options { buckets: [ 9 ] } },
      { metric_identifier { family: "${FAMILY}" } histogram_options { buckets: [ 1, 2.5, 4 ] } } ] }`);
    expect(checkMetricReporterConfig(c)).toEqual([]);
    expect(modelMetricSettings(c).histogramBuckets).toEqual({ [FAMILY]: [1, 2.5, 4] });
  });

  it('an entry without buckets leaves only the +Inf bucket, as in Triton', () => {
    const c = config(`model_metrics { metric_control { metric_identifier { family: "${FAMILY}" } } }`);
    expect(checkMetricReporterConfig(c)).toEqual([]);
    expect(modelMetricSettings(c).histogramBuckets).toEqual({ [FAMILY]: [] });
  });

  it('a family whose buckets cannot be set is ignored with a warning (Triton logs one too)', () => {
    const c = config('model_metrics { metric_control { metric_identifier { family: "nv_inference_request_duration_us" } histogram_options { buckets: [ 1 ] } } }');
    expect(checkMetricReporterConfig(c)).toEqual([
      "model 'm': metric family 'nv_inference_request_duration_us' in 'metric_identifier' is not a customizable metric (customizable: nv_inference_first_response_histogram_ms); ignored",
    ]);
    expect(modelMetricSettings(c).histogramBuckets).toEqual({});
  });

  it.each([
    ['[ 5, 1 ]', '[5, 1]'],
    ['[ 1, 1 ]', '[1, 1]'],
    ['[ 1, inf ]', '[1, Infinity]'],
    ['[ nan ]', '[NaN]'],
  ])('buckets that are not finite and strictly increasing fail the load with INVALID_ARG: %s', (buckets, shown) => {
    expect(() => check(`model_metrics { metric_control { metric_identifier { family: "${FAMILY}" } histogram_options { buckets: ${buckets} } } }`))
      .toThrow(invalid(`model 'm': model_metrics buckets of '${FAMILY}' must be finite and strictly increasing, got ${shown}`));
  });

  it('bounds the bucket count and the metric_control entries', () => {
    const bounds = Array.from({ length: METRIC_CONFIG_LIMITS.buckets + 1 }, (_, i) => i + 1).join(', ');
    expect(() => check(`model_metrics { metric_control { metric_identifier { family: "${FAMILY}" } histogram_options { buckets: [ ${bounds} ] } } }`))
      .toThrow(invalid('65 bounds, more than the limit of 64'));
    const controls = Array.from({ length: METRIC_CONFIG_LIMITS.metricControls + 1 }, () => `{ metric_identifier { family: "${FAMILY}" } }`).join(', ');
    expect(() => check(`model_metrics { metric_control [ ${controls} ] }`)).toThrow(invalid('17 metric_control entries, more than the limit of 16'));
  });
});
