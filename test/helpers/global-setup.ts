/**
 * vitest globalSetup: every temporary file the tests (and the servers they start) make goes under
 * one directory of this run (TMPDIR, which the test workers and their child processes inherit),
 * removed when the run ends, so a run leaves nothing behind in the system's temp directory.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const dir = mkdtempSync(join(tmpdir(), 'triode-vitest-'));
  const before = process.env['TMPDIR'];
  process.env['TMPDIR'] = dir;
  return () => {
    if (before === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = before;
    rmSync(dir, { recursive: true, force: true });
  };
}
