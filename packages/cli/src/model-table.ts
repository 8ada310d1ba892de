/** @module Triton's startup table of models and their state. Triton: core/src/server.cc (ModelStatusTable) */
import type { ModelIndexEntry } from '@triode/core';

/** Renders rows as Triton's `| Model | Version | Status |` table. */
export function modelTable(rows: readonly ModelIndexEntry[]): string {
  const data = rows.map((r) => [r.name, r.version ?? '-', r.state === 'READY' ? 'READY' : `${r.state}: ${r.reason}`]);
  const head = ['Model', 'Version', 'Status'];
  const widths = head.map((h, i) => Math.max(h.length, ...data.map((d) => d[i]!.length)));
  const line = '+' + widths.map((w) => '-'.repeat(w + 2)).join('+') + '+';
  const row = (cells: string[]) => '| ' + cells.map((c, i) => c.padEnd(widths[i]!)).join(' | ') + ' |';
  return [line, row(head), line, ...data.map(row), line].join('\n');
}
