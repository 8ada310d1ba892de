/** @module `triode perf` output: a readable table, and CSV / JSON files. */
import type { PerfResult } from './perf-runner.js';

const f1 = (x: number) => x.toFixed(1);

/** A readable summary table (latencies in ms, server breakdown in µs). */
export function perfTable(results: readonly PerfResult[]): string {
  const rate = results.some((r) => r.requestRate !== undefined);
  const head = [rate ? 'Request rate' : 'Concurrency', 'Infer/s', 'p50 ms', 'p90 ms', 'p95 ms', 'p99 ms', 'Avg ms', 'Errors', 'Server request µs', 'Server overhead µs', 'Server queue µs', 'Compute in µs', 'Compute infer µs', 'Compute out µs', 'Client CPU', 'Stable'];
  const rows = results.map((r) => [
    String(rate ? r.requestRate : r.concurrency), f1(r.throughput),
    ...[r.latencyUs.p50, r.latencyUs.p90, r.latencyUs.p95, r.latencyUs.p99, r.latencyUs.avg].map((x) => (x / 1000).toFixed(3)),
    String(r.errors),
    ...(r.server ? [r.server.requestUs, r.server.overheadUs, r.server.queueUs, r.server.computeInputUs, r.server.computeInferUs, r.server.computeOutputUs].map(f1) : ['-', '-', '-', '-', '-', '-']),
    `${(r.clientCpu * 100).toFixed(0)}%`, r.stable ? 'yes' : 'no',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padStart(widths[i]!)).join(' | ')} |`;
  return [line(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}

/** CSV with perf_analyzer's column names where it has them (latencies in µs). */
export function perfCsv(results: readonly PerfResult[]): string {
  const rate = results.some((r) => r.requestRate !== undefined);
  const head = [rate ? 'Request Rate' : 'Concurrency', 'Inferences/Second', 'Server Queue', 'Server Compute Input', 'Server Compute Infer', 'Server Compute Output', 'p50 latency', 'p90 latency', 'p95 latency', 'p99 latency', 'Avg latency', 'Errors', 'Client CPU', 'Server Overhead'];
  const rows = results.map((r) => [
    rate ? r.requestRate : r.concurrency, r.throughput.toFixed(2),
    ...(r.server ? [r.server.queueUs, r.server.computeInputUs, r.server.computeInferUs, r.server.computeOutputUs].map((x) => x.toFixed(1)) : ['', '', '', '']),
    ...[r.latencyUs.p50, r.latencyUs.p90, r.latencyUs.p95, r.latencyUs.p99, r.latencyUs.avg].map((x) => x.toFixed(0)),
    r.errors, r.clientCpu.toFixed(3), r.server ? r.server.overheadUs.toFixed(1) : '',
  ].join(','));
  return [head.join(','), ...rows].join('\n') + '\n';
}
