/**
 * @module Repository agents (`model_repository_agents`): code that checks or changes a model's files
 * before it loads. Triode implements Triton's `checksum` agent; any other agent fails the load.
 * Triton: core/src/repo_agent.cc, checksum_repository_agent/src/checksum.cc
 */
import { createHash } from 'node:crypto';
import { readFileSync, realpathSync, statSync } from 'node:fs';
import { isAbsolute, relative, sep } from 'node:path';
import { Errors, TriodeError, echo } from '../errors.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { resolveInside } from './repository-fs.js';

/** The repository agents Triode has, by the name a config gives them. */
export const REPOSITORY_AGENTS: readonly string[] = ['checksum'];

/**
 * Runs the config's repository agents on the model directory, in order, as Triton does before a
 * load (TRITONREPOAGENT_ACTION_LOAD).
 * @throws TriodeError INVALID_ARG for an unknown agent (Triton's "unable to find ... for repo
 *   agent" wording), or the agent's own error (a checksum that does not match).
 */
export function runRepositoryAgents(config: ModelConfig, modelPath: string): void {
  for (const agent of config.model_repository_agents?.agents ?? []) {
    const name = agent.name ?? '';
    if (name === 'checksum') {
      checksumAgent(agent.parameters ?? {}, modelPath);
      continue;
    }
    throw Errors.invalidArg(
      `unable to find 'libtritonrepoagent_${echo(name)}.so' for repo agent '${echo(name)}': Triode implements only the repository agents ${REPOSITORY_AGENTS.map((a) => `'${a}'`).join(', ')}`,
    );
  }
}

/**
 * Triton's checksum agent: each parameter `<ALGORITHM>:<path relative to the model directory>`
 * names a file and its expected digest (hex). Only MD5 exists, as in Triton.
 */
function checksumAgent(parameters: Record<string, string>, modelPath: string): void {
  for (const [key, expected] of Object.entries(parameters)) {
    const colon = key.indexOf(':');
    if (colon < 0) throw Errors.invalidArg(`failed to parse key: ${echo(key)}`);
    const algorithm = key.slice(0, colon);
    if (algorithm.toLowerCase() !== 'md5') throw Errors.unsupported(`Unsupported checksum algorithm: ${echo(algorithm)}`);
    const file = key.slice(colon + 1);
    const data = readModelFile(modelPath, file);
    const got = createHash('md5').update(data).digest('hex');
    if (got !== expected) {
      throw Errors.invalidArg(`Mismatched MD5 hash for file ${echo(file)}, expect: ${echo(expected)}, got: ${got}`);
    }
  }
}

/**
 * Reads a file a checksum names. It must be a regular file inside the model directory: no absolute
 * path, no `..` out of it, no symbolic link that leads out of it.
 */
function readModelFile(modelPath: string, file: string): Buffer {
  const cannot = (why: string) => Errors.invalidArg(`failed to open text file for read ${echo(file)}: ${why}`);
  if (file === '' || isAbsolute(file) || file.split(/[\\/]/).includes('..')) throw cannot('the path must be relative to the model directory, without \'..\'');
  let path: string;
  let real: string;
  try {
    path = resolveInside(modelPath, file);
    real = realpathSync(path);
  } catch (err) {
    if (err instanceof TriodeError) throw cannot('the path is outside the model directory');
    throw cannot((err as NodeJS.ErrnoException).code === 'ENOENT' ? 'No such file or directory' : (err as Error).message);
  }
  const root = realpathSync(modelPath);
  const rel = relative(root, real);
  if (rel === '' || rel.startsWith(`..${sep}`) || rel === '..' || isAbsolute(rel)) throw cannot('the path leads outside the model directory');
  if (!statSync(real).isFile()) throw cannot('not a regular file');
  return readFileSync(real);
}
