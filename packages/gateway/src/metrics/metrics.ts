/**
 * @module The Prometheus endpoint (`--metrics-port`, default 8002, `GET /metrics`): Triton's
 * `nv_inference_*` families with its names, types and labels (`model`, `version`; `reason` on
 * failures), read from the server's statistics at each scrape, plus CPU and memory gauges.
 * Triton: core/src/metrics.cc, metric_model_reporter.cc
 */
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry } from 'prom-client';
import type { ModelStatistics } from '@triode/core';

/** What the metrics are read from (an InferenceServer has it). */
export interface MetricsSource {
  metricsSnapshot(): { name: string; version: string; stats: ModelStatistics; failures: Record<string, number>; pending: number }[];
}

const US = 1e-3;

/** CPU utilization between two reads of /proc/stat (0..1), Linux only. */
function cpuSampler(): () => number {
  let last: { busy: number; total: number } | undefined;
  return () => {
    try {
      const line = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
      const idle = (line[3] ?? 0) + (line[4] ?? 0);
      const total = line.reduce((a, b) => a + b, 0);
      const now = { busy: total - idle, total };
      const prev = last;
      last = now;
      if (!prev || now.total === prev.total) return 0;
      return (now.busy - prev.busy) / (now.total - prev.total);
    } catch {
      return 0;
    }
  };
}

function memory(): { total: number; used: number } {
  try {
    const info = readFileSync('/proc/meminfo', 'utf8');
    const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+)`, 'm').exec(info)?.[1] ?? 0) * 1024;
    return { total: kb('MemTotal'), used: kb('MemTotal') - kb('MemAvailable') };
  } catch {
    return { total: 0, used: 0 };
  }
}

/** Builds the registry; every value is read from `source` when scraped. */
export function createMetricsRegistry(source: MetricsSource): Registry {
  const registry = new Registry();
  const labels = ['model', 'version'] as const;
  const perModel = (name: string, help: string, value: (s: ReturnType<MetricsSource['metricsSnapshot']>[number]) => number, type: 'counter' | 'gauge' = 'counter') => {
    const collect = function (this: Counter<'model' | 'version'> | Gauge<'model' | 'version'>) {
      this.reset();
      for (const m of source.metricsSnapshot()) {
        const l = { model: m.name, version: m.version };
        if (this instanceof Counter) this.inc(l, value(m));
        else this.set(l, value(m));
      }
    };
    if (type === 'counter') new Counter({ name, help, labelNames: labels, registers: [registry], collect });
    else new Gauge({ name, help, labelNames: labels, registers: [registry], collect });
  };
  perModel('nv_inference_request_success', 'Number of successful inference requests, all batch sizes', (m) => m.stats.inference_stats.success.count);
  new Counter({
    name: 'nv_inference_request_failure',
    help: 'Number of failed inference requests, all batch sizes',
    labelNames: ['model', 'version', 'reason'],
    registers: [registry],
    collect() {
      this.reset();
      for (const m of source.metricsSnapshot()) {
        for (const reason of ['REJECTED', 'CANCELED', 'BACKEND', 'OTHER']) this.inc({ model: m.name, version: m.version, reason }, m.failures[reason] ?? 0);
      }
    },
  });
  perModel('nv_inference_count', 'Number of inferences performed (does not include cached requests)', (m) => m.stats.inference_count);
  perModel('nv_inference_exec_count', 'Number of model executions performed (does not include cached requests)', (m) => m.stats.execution_count);
  perModel('nv_inference_pending_request_count', 'Instantaneous number of pending requests awaiting execution per-model.', (m) => m.pending, 'gauge');
  const s = (m: ReturnType<MetricsSource['metricsSnapshot']>[number]) => m.stats.inference_stats;
  perModel('nv_inference_request_duration_us', 'Cumulative inference request duration in microseconds (includes cached requests)', (m) => Math.round((s(m).success.ns + s(m).fail.ns) * US));
  perModel('nv_inference_queue_duration_us', 'Cumulative inference queuing duration in microseconds (includes cached requests)', (m) => Math.round(s(m).queue.ns * US));
  perModel('nv_inference_compute_input_duration_us', 'Cumulative compute input duration in microseconds (does not include cached requests)', (m) => Math.round(s(m).compute_input.ns * US));
  perModel('nv_inference_compute_infer_duration_us', 'Cumulative compute inference duration in microseconds (does not include cached requests)', (m) => Math.round(s(m).compute_infer.ns * US));
  perModel('nv_inference_compute_output_duration_us', 'Cumulative inference compute output duration in microseconds (does not include cached requests)', (m) => Math.round(s(m).compute_output.ns * US));
  const cpu = cpuSampler();
  new Gauge({ name: 'nv_cpu_utilization', help: 'CPU utilization rate [0.0 - 1.0]', registers: [registry], collect() { this.set(cpu()); } });
  new Gauge({ name: 'nv_cpu_memory_total_bytes', help: 'CPU total memory (RAM), in bytes', registers: [registry], collect() { this.set(memory().total); } });
  new Gauge({ name: 'nv_cpu_memory_used_bytes', help: 'CPU used memory (RAM), in bytes', registers: [registry], collect() { this.set(memory().used); } });
  return registry;
}

/** A listening metrics endpoint. */
export interface MetricsServerHandle {
  port: number;
  close(): Promise<void>;
}

/** Serves `GET /metrics` on `address:port` (port 0 picks a free one). */
export function startMetricsServer(source: MetricsSource, port: number, address = '0.0.0.0'): Promise<MetricsServerHandle> {
  const registry = createMetricsRegistry(source);
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'Content-Type': 'application/json' }).end('{"error":"Not Found"}');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
      (err: unknown) => res.writeHead(500, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: String(err) })),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, address, () => {
      resolve({
        port: (server.address() as AddressInfo).port,
        close: () => new Promise<void>((r) => { server.close(() => r()); server.closeIdleConnections(); }),
      });
    });
  });
}
