/** @module `--log-file`: log lines appended to a file instead of stderr. Triton: --log-file */
import { createWriteStream } from 'node:fs';
import type { LoggerOptions } from '@triode/core';

/** Logger options writing to `file` (JSON lines, appended), or stderr when no file is given. */
export function logStream(file: string | undefined): LoggerOptions {
  if (!file) return {};
  const stream = createWriteStream(file, { flags: 'a' });
  stream.on('error', (err) => process.stderr.write(`--log-file ${file}: ${err.message}\n`));
  return { stream, json: true };
}
