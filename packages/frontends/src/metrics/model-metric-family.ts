/**
 * @module Per-model metric families whose series carry different label sets (each model's
 * `metric_tags`, one "_"-prefixed label per tag) and, for histograms, different buckets (each
 * model's `model_metrics`). prom-client's Counter, Gauge, Summary and Histogram fix their label
 * names and buckets when they are made, so each family here is one small object that a prom-client
 * Registry renders like its own metrics: one HELP and TYPE, then every series. The text format
 * allows series with different label sets in one family.
 *
 * It relies on what prom-client 15.1.3's Registry (lib/registry.js) reads from a registered
 * metric: `name`, and `get()` resolving to `{ name, help, type, aggregator, values }`, each value
 * `{ labels, value, metricName? }`. The typings accept only prom-client's own classes, and this is
 * not documented, so prom-client is pinned exactly in package.json and
 * `model-metric-family.test.ts` fails if the rendering changes.
 * Triton: core/src/metric_model_reporter.cc (a reporter per model version with its own labels,
 * MetricReporterConfig::histogram_options_)
 */
import type { ModelMetricSettings } from '@triode/core';
import type { Histogram, Metric, Registry, Summary } from 'prom-client';

/** One sample: its labels, its value, and a suffixed name (`_sum`, `_bucket`) where not the family's. */
export interface FamilySample {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** A model version as the metrics see it: names, and its `metric_tags` labels. */
export interface ModelSeries {
  name: string;
  version: string;
  /** Extra labels, already named ("_" + tag key → value). @default none */
  labels?: Readonly<Record<string, string>>;
}

/** What a prom-client Registry reads from a metric it renders. */
interface RegistryMetric {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'summary' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: RegistryMetric['type']; aggregator: 'sum'; values: FamilySample[] }>;
}

/** A model version's labels: `model`, `version`, then its tags in key order (as Triton: "_" + key). */
export function modelLabels(m: ModelSeries): Record<string, string> {
  const base = { model: m.name, version: m.version };
  return m.labels ? { ...base, ...m.labels } : base;
}

function register(registry: Registry, metric: RegistryMetric): void {
  // Registry.registerMetric keys by `name` and renders with `get()`; see the module comment.
  registry.registerMetric(metric as unknown as Metric);
}

/** A counter or gauge family whose samples are read (from the server's statistics) at each scrape. */
export class SnapshotFamily implements RegistryMetric {
  name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge';
  readonly aggregator = 'sum' as const;
  readonly #read: () => FamilySample[];

  constructor(registry: Registry, options: { name: string; help: string; type: 'counter' | 'gauge'; read: () => FamilySample[] }) {
    this.name = options.name;
    this.help = options.help;
    this.type = options.type;
    this.#read = options.read;
    register(registry, this);
  }

  get(): ReturnType<RegistryMetric['get']> {
    // In the key order prom-client's Counter and Gauge use (getMetricsAsJSON shows it).
    return Promise.resolve({ help: this.help, name: this.name, type: this.type, values: this.#read(), aggregator: this.aggregator });
  }
}

/** A loaded model version as `DistributionFamily`'s `live` lists it: names, labels, and what its config says of its metrics. */
export type LiveSeries = ModelSeries & Omit<Partial<ModelMetricSettings>, 'labels'>;

/** Makes the prom-client metric behind one model version's series (not registered anywhere). */
export type SeriesFactory = (labelNames: string[], buckets: readonly number[] | undefined) => Summary<string> | Histogram<string>;

interface Series {
  /** The labels and buckets it was made with: a reload that changes them starts a new series. */
  key: string;
  labels: Record<string, string>;
  metric: Summary<string> | Histogram<string>;
}

const seriesId = (m: { name: string; version: string }): string => `${m.name}\u0000${m.version}`;

const keys = new WeakMap<ModelMetricSettings, string>();
function keyOf(settings: ModelMetricSettings | undefined): string {
  if (!settings) return '';
  let k = keys.get(settings);
  if (k === undefined) {
    k = JSON.stringify([settings.labels, settings.histogramBuckets]);
    keys.set(settings, k);
  }
  return k;
}

/**
 * Summaries or histograms fed per request: one prom-client metric per model version, made with
 * that version's label names and (histograms) buckets, rendered as one family. A version keeps
 * its series (as before tags existed) until it reports with other labels or buckets.
 */
export class DistributionFamily implements RegistryMetric {
  name: string;
  readonly help: string;
  readonly type: 'summary' | 'histogram';
  readonly aggregator = 'sum' as const;
  readonly #create: SeriesFactory;
  readonly #live: (() => Iterable<LiveSeries>) | undefined;
  readonly #applies: (settings: Partial<ModelMetricSettings>) => boolean;
  readonly #buckets: (settings: Partial<ModelMetricSettings>) => readonly number[] | undefined;
  readonly #empty: ((labels: Record<string, string>) => FamilySample[]) | undefined;
  readonly #series = new Map<string, Series>();

  /**
   * @param options.live the model versions loaded now: at each scrape the series of any other
   * version are dropped (as Triton removes a model's metrics when it unloads), so reloads and
   * unloads do not pile series up, and each of these versions the family applies to has a series
   * before its first request (Triton adds them when the version loads: a histogram's buckets at 0,
   * a summary's count and sum at 0). @default none: series are kept, and made by `observe`
   * @param options.buckets a histogram's bounds for a version with these settings (its
   * `model_metrics`), for a series made before its first request. @default the factory's
   * @param options.empty a summary's samples before any observation (prom-client renders none).
   * @default none
   * @param options.applies whether a model version with these settings has a series in this
   * family (Triton gives some families only to some models: the first-response histogram to
   * decoupled ones). A version with no settings (a gateway's) has `{}`. @default every version
   */
  constructor(registry: Registry, options: {
    name: string; help: string; type: 'summary' | 'histogram'; create: SeriesFactory;
    live?: () => Iterable<LiveSeries>; applies?: (settings: Partial<ModelMetricSettings>) => boolean;
    buckets?: (settings: Partial<ModelMetricSettings>) => readonly number[] | undefined; empty?: (labels: Record<string, string>) => FamilySample[];
  }) {
    this.name = options.name;
    this.help = options.help;
    this.type = options.type;
    this.#create = options.create;
    this.#live = options.live;
    this.#applies = options.applies ?? (() => true);
    this.#buckets = options.buckets ?? (() => undefined);
    this.#empty = options.empty;
    register(registry, this);
  }

  /**
   * Observes `value` for model version `m`. `settings` is what its config says (labels, buckets);
   * `buckets` the bounds of this family for it (histograms; undefined: the factory's default).
   */
  /** A series for loaded version `m` if it has none with its present labels and buckets (a reload may change them). */
  #ensure(id: string, m: LiveSeries): void {
    const key = m.labels === undefined && m.histogramBuckets === undefined ? '' : JSON.stringify([m.labels, m.histogramBuckets]);
    const s = this.#series.get(id);
    if (s && s.key === key) return;
    const labels = modelLabels(m);
    const metric = this.#create(Object.keys(labels), this.#buckets(m));
    if ('zero' in metric) metric.zero(labels);
    this.#series.set(id, { key, labels, metric });
  }

  observe(m: ModelSeries, value: number, settings?: ModelMetricSettings, buckets?: readonly number[]): void {
    if (!this.#applies(settings ?? {})) return;
    const id = seriesId(m);
    const key = keyOf(settings);
    let s = this.#series.get(id);
    if (!s || s.key !== key) {
      if (s) this.#series.delete(id);
      const labels = modelLabels(m);
      s = { key, labels, metric: this.#create(Object.keys(labels), buckets) };
      this.#series.set(id, s);
    }
    s.metric.observe(s.labels, value);
  }

  async get(): ReturnType<RegistryMetric['get']> {
    if (this.#live) {
      const live = new Set<string>();
      for (const m of this.#live()) {
        const id = seriesId(m);
        live.add(id);
        if (this.#applies(m)) this.#ensure(id, m);
      }
      for (const id of this.#series.keys()) if (!live.has(id)) this.#series.delete(id);
    }
    const values: FamilySample[] = [];
    for (const s of this.#series.values()) {
      const own = (await s.metric.get()).values as FamilySample[];
      values.push(...(own.length === 0 && this.#empty ? this.#empty(s.labels) : own));
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }
}
