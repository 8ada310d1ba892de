/**
 * @module Where a backend's thread entry file is: beside the calling module when it runs from the
 * build, or the build's copy when it runs from its TypeScript source (tests).
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * The path of `name`, a file of the backend folder `folder` (e.g. 'onnxruntime'), for the module at
 * `moduleUrl` (its `import.meta.url`).
 */
export function threadFile(moduleUrl: string, folder: string, name: string): string {
  const beside = fileURLToPath(new URL(`./${name}`, moduleUrl));
  if (existsSync(beside)) return beside;
  const built = fileURLToPath(new URL(`../../dist/${folder}/${name}`, moduleUrl));
  return existsSync(built) ? built : beside;
}
