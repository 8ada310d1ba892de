/**
 * @module Repository agents (`model_repository_agents`): code that checks or changes a model's files
 * before it loads. Triode implements Triton's `checksum` agent; any other agent fails the load.
 * Triton: core/src/repo_agent.cc, checksum_repository_agent/src/checksum.cc
 */
import { createHash } from 'node:crypto';
import { constants, realpathSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { isAbsolute, relative, sep } from 'node:path';
import { Errors, TriodeError, echo } from '../errors.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { resolveInside } from './repository-fs.js';

/** The repository agents Triode has, by the name a config gives them. */
export const REPOSITORY_AGENTS: readonly string[] = ['checksum'];

/**
 * The most checksum entries (`<ALGORITHM>:<path>` parameters) one config may give, all its
 * checksum agents together. Triton has no such limit; here 100 spellings of one 16 MiB file hashed
 * it 100 times on the event loop and held every other request for 3 s (review).
 */
export const MAX_CHECKSUM_ENTRIES = 1000;

/** How much of a file one read hashes: other requests are served between reads. */
const CHUNK_BYTES = 1 << 20;

/**
 * Runs the config's repository agents on the model directory, in order, as Triton does before a
 * load (TRITONREPOAGENT_ACTION_LOAD).
 * @throws TriodeError INVALID_ARG for an unknown agent (Triton's "unable to find ... for repo
 *   agent" wording), or the agent's own error (a checksum that does not match).
 */
export async function runRepositoryAgents(config: ModelConfig, modelPath: string): Promise<void> {
  const agents = config.model_repository_agents?.agents ?? [];
  const entries = agents.reduce((n, a) => n + (a.name === 'checksum' ? Object.keys(a.parameters ?? {}).length : 0), 0);
  if (entries > MAX_CHECKSUM_ENTRIES) {
    throw Errors.invalidArg(`the checksum repository agent is given ${entries} files, over the limit of ${MAX_CHECKSUM_ENTRIES}`);
  }
  // One digest per file, however many keys (or agents) spell its path.
  const digests = new Map<string, Promise<string>>();
  for (const agent of agents) {
    const name = agent.name ?? '';
    if (name === 'checksum') {
      await checksumAgent(agent.parameters ?? {}, modelPath, digests);
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
 * @param digests the MD5 of each file hashed so far, by real path
 */
async function checksumAgent(parameters: Record<string, string>, modelPath: string, digests: Map<string, Promise<string>>): Promise<void> {
  for (const [key, expected] of Object.entries(parameters)) {
    const colon = key.indexOf(':');
    if (colon < 0) throw Errors.invalidArg(`failed to parse key: ${echo(key)}`);
    const algorithm = key.slice(0, colon);
    if (algorithm.toLowerCase() !== 'md5') throw Errors.unsupported(`Unsupported checksum algorithm: ${echo(algorithm)}`);
    const file = key.slice(colon + 1);
    const real = modelFilePath(modelPath, file);
    let digest = digests.get(real);
    if (!digest) {
      digest = md5File(real, file);
      digests.set(real, digest);
    }
    const got = await digest;
    if (got !== expected) {
      throw Errors.invalidArg(`Mismatched MD5 hash for file ${echo(file)}, expect: ${echo(expected)}, got: ${got}`);
    }
  }
}

const cannotOpen = (file: string, why: string) => Errors.invalidArg(`failed to open text file for read ${echo(file)}: ${why}`);

/**
 * The real path of a file a checksum names. It must be inside the model directory: no absolute
 * path, no `..` out of it, no symbolic link that leads out of it.
 */
function modelFilePath(modelPath: string, file: string): string {
  const cannot = (why: string) => cannotOpen(file, why);
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
  return real;
}

/**
 * The MD5 (hex) of a regular file, read a chunk at a time: the event loop serves other requests
 * between reads (review: the whole file was read and hashed synchronously).
 */
async function md5File(real: string, file: string): Promise<string> {
  // Non-blocking: opening a FIFO must not wait for a writer.
  const fh = await open(real, constants.O_RDONLY | constants.O_NONBLOCK).catch((err: NodeJS.ErrnoException) => {
    throw cannotOpen(file, err.code ?? err.message);
  });
  try {
    if (!(await fh.stat()).isFile()) throw cannotOpen(file, 'not a regular file');
    const hash = createHash('md5');
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    for (;;) {
      const { bytesRead } = await fh.read(chunk, 0, CHUNK_BYTES, null);
      if (bytesRead === 0) break;
      hash.update(chunk.subarray(0, bytesRead));
    }
    return hash.digest('hex');
  } finally {
    await fh.close();
  }
}
