/** @module `--log-file`: log lines appended to a file instead of stderr. Triton: --log-file */
import { createWriteStream, openSync } from 'node:fs';
import type { LoggerOptions } from '@triode/core';

/**
 * Logger options writing to `file` (JSON lines, appended), or stderr when no file is given. A file
 * that cannot be opened (no such directory, no permission, a directory) stops the start with the
 * reason, as tritonserver does: a server logging into the void is worse than one that does not start.
 */
export function logStream(file: string | undefined): LoggerOptions {
  if (!file) return {};
  let fd: number;
  try {
    fd = openSync(file, 'a');
  } catch (err) {
    throw new Error(`--log-file ${file}: cannot open it for writing: ${(err as Error).message}`);
  }
  const stream = createWriteStream(file, { fd, flags: 'a' });
  stream.on('error', (err) => process.stderr.write(`--log-file ${file}: ${err.message}\n`));
  return { stream, json: true };
}
