/** @module Triton's startup tables: models and their state, and the GPUs found. Triton: core/src/server.cc (ModelStatusTable) */
import { echo, type GpuDevice, type ModelIndexEntry } from '@triode/core';

/** A `+---+` bordered table. */
function table(head: string[], rawData: string[][]): string {
  // A model name or a reason may hold control characters: escaped, one row stays one line.
  const data = rawData.map((r) => r.map((c) => echo(c, Infinity)));
  const widths = head.map((h, i) => Math.max(h.length, ...data.map((d) => d[i]!.length)));
  const line = '+' + widths.map((w) => '-'.repeat(w + 2)).join('+') + '+';
  const row = (cells: string[]) => '| ' + cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
  return [line, row(head), line, ...data.map(row), line].join('\n');
}

/** Renders rows as Triton's `| Model | Version | Status |` table. */
export function modelTable(rows: readonly ModelIndexEntry[]): string {
  return table(['Model', 'Version', 'Status'], rows.map((r) => [r.name, r.version ?? '-', r.state === 'READY' ? 'READY' : `${r.state}: ${r.reason}`]));
}

/** The GPUs found (`nvidia-smi` index, CUDA id, name, total memory), as `| GPU | CUDA id | Name | Memory |`. */
export function gpuTable(gpus: readonly GpuDevice[]): string {
  const mib = (b: number) => `${Math.round(b / (1024 * 1024))} MiB`;
  return table(['GPU', 'CUDA id', 'Name', 'Memory'], gpus.map((g) => [String(g.index), String(g.cudaId), g.name, mib(g.memoryTotalBytes)]));
}
