import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { echoBackend } from '../echo-backend.case.js';
import type { Logger } from '../logger.js';
import { InferenceServer } from '../server.js';
import { MAX_SKIPPED_DIRS } from './model-repository-manager.js';
import { findInRepositories, scanRepositories } from './repository-fs.js';

const CONFIG = 'backend: "echo"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n';
const BAD = ['bad\u0001name', 'tab\tname', 'back\\slash', 'del\u007f'];

function repository(): string {
  const root = mkdtempSync(join(tmpdir(), 'triode-name-scan-'));
  for (const name of ['good', ...BAD]) {
    mkdirSync(join(root, name, '1'), { recursive: true });
    writeFileSync(join(root, name, 'config.pbtxt'), CONFIG);
  }
  return root;
}

describe('a repository directory whose name is not a usable model name', () => {
  it('is left out of the scan, and the caller is told why', () => {
    const root = repository();
    const skipped: string[] = [];
    const found = scanRepositories([root], { onSkip: (name, _repo, problem) => skipped.push(`${name}: ${problem}`) });
    expect([...found.keys()]).toEqual(['good']);
    expect(skipped.sort()).toEqual([
      'back\\slash: the name contains a path separator',
      'bad\u0001name: the name contains a control character',
      'del\u007f: the name contains a control character',
      'tab\tname: the name contains a control character',
    ]);
    for (const name of BAD) expect(findInRepositories([root], name)).toBeUndefined();
  });

  it('is never loaded (it could never be unloaded: load and unload refuse the name); a warning, once, names it escaped', async () => {
    const root = repository();
    const warnings: string[] = [];
    const logger: Logger = { error() {}, warning: (m: string) => { warnings.push(m); }, info() {}, verbose() {} };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echoBackend], modelControlMode: 'poll', repositoryPollMs: 60_000, logger });
    try {
      expect(s.repositoryIndex().map((r) => r.name)).toEqual(['good']);
      await s.pollRepository();
      const skips = warnings.filter((w) => w.startsWith('skipping directory '));
      expect(skips).toHaveLength(BAD.length);
      expect(skips).toContain(`skipping directory 'bad\\u0001name' of model repository '${root}': invalid model name: the name contains a control character`);
      // The names are escaped: no control character reaches the log.
      expect([...skips.join('')].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)).toBe(false);
    } finally {
      await s.stop();
    }
  });

  it(`poll mode remembers only the directories still there, at most ${MAX_SKIPPED_DIRS} (review: one entry per name ever seen, for good)`, async () => {
    const root = repository();
    const warnings: string[] = [];
    const logger: Logger = { error() {}, warning: (m: string) => { warnings.push(m); }, info() {}, verbose() {} };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echoBackend], modelControlMode: 'poll', repositoryPollMs: 3_600_000, logger });
    const skips = () => warnings.filter((w) => w.startsWith('skipping directory '));
    try {
      expect(skips()).toHaveLength(BAD.length);
      // One removed is forgotten: back, it is warned of again.
      rmSync(join(root, BAD[0]!), { recursive: true });
      await s.pollRepository();
      mkdirSync(join(root, BAD[0]!));
      await s.pollRepository();
      expect(skips()).toHaveLength(BAD.length + 1);
      // Past the bound, the others are skipped with one warning for them all.
      warnings.length = 0;
      for (let i = 0; i < MAX_SKIPPED_DIRS; i++) mkdirSync(join(root, `x\u0001${i}`));
      await s.pollRepository();
      await s.pollRepository();
      expect(skips()).toHaveLength(MAX_SKIPPED_DIRS - BAD.length);
      expect(warnings.filter((w) => w.includes(`more than ${MAX_SKIPPED_DIRS} directories`))).toEqual([
        `model repositories hold more than ${MAX_SKIPPED_DIRS} directories whose names are not usable model names: the others are skipped without a warning each`,
      ]);
      expect(s.repositoryIndex().map((r) => r.name)).toEqual(['good']);
    } finally {
      await s.stop();
    }
  });
});
