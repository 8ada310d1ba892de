import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Backend } from '../backend-api.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { InferenceServer } from '../server.js';
import { MAX_CHECKSUM_ENTRIES, runRepositoryAgents } from './repository-agent.js';

// Counts the opens of each file (the agent reads through node:fs/promises), passing them through.
const opened = vi.hoisted(() => new Map<string, number>());
vi.mock('node:fs/promises', async (importOriginal) => {
  const fs = await importOriginal<typeof import('node:fs/promises')>();
  const open: typeof fs.open = (path, ...rest) => {
    opened.set(String(path), (opened.get(String(path)) ?? 0) + 1);
    return fs.open(path, ...rest);
  };
  return { ...fs, open, default: { ...fs, open } };
});

const WEIGHTS = 'pretend these are weights\n';
const MD5 = createHash('md5').update(WEIGHTS).digest('hex');

/** A model directory `<root>/m` with `1/model.bin`, and a file outside it (`<root>/secret`). */
function modelDir(): string {
  const root = mkdtempSync(join(tmpdir(), 'triode-agent-'));
  mkdirSync(join(root, 'm', '1'), { recursive: true });
  writeFileSync(join(root, 'm', '1', 'model.bin'), WEIGHTS);
  writeFileSync(join(root, 'secret'), WEIGHTS);
  return join(root, 'm');
}

const checksum = (parameters: Record<string, string>): ModelConfig => ({ name: 'm', model_repository_agents: { agents: [{ name: 'checksum', parameters }] } });

describe('runRepositoryAgents: Triton\'s checksum agent', () => {
  it('passes when every listed file has its MD5 (key "MD5:<path relative to the model directory>")', async () => {
    await expect(runRepositoryAgents(checksum({ 'MD5:1/model.bin': MD5 }), modelDir())).resolves.toBeUndefined();
    await expect(runRepositoryAgents(checksum({ 'md5:1/model.bin': MD5 }), modelDir())).resolves.toBeUndefined();
  });

  it('fails a wrong MD5 with Triton\'s message (INVALID_ARG)', async () => {
    await expect(runRepositoryAgents(checksum({ 'MD5:1/model.bin': '0'.repeat(32) }), modelDir())).rejects.toThrow(expect.objectContaining({
      code: 'INVALID_ARG',
      message: `Mismatched MD5 hash for file 1/model.bin, expect: ${'0'.repeat(32)}, got: ${MD5}`,
    }));
  });

  it('refuses keys Triton refuses: no algorithm, an algorithm other than MD5', async () => {
    await expect(runRepositoryAgents(checksum({ '1/model.bin': MD5 }), modelDir())).rejects.toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: 'failed to parse key: 1/model.bin' }));
    await expect(runRepositoryAgents(checksum({ 'SHA256:1/model.bin': MD5 }), modelDir())).rejects.toThrow(expect.objectContaining({ code: 'UNSUPPORTED', message: 'Unsupported checksum algorithm: SHA256' }));
  });

  it('a missing file fails the load', async () => {
    await expect(runRepositoryAgents(checksum({ 'MD5:1/nothing.bin': MD5 }), modelDir())).rejects.toThrow('failed to open text file for read 1/nothing.bin: No such file or directory');
  });

  it('reads no file outside the model directory: "..", absolute paths, symbolic links out', async () => {
    const dir = modelDir();
    symlinkSync(join(dir, '..', 'secret'), join(dir, '1', 'link.bin'));
    for (const file of ['../secret', '1/../../secret', join(dir, '..', 'secret'), '1/link.bin']) {
      await expect(runRepositoryAgents(checksum({ [`MD5:${file}`]: MD5 }), dir), file).rejects.toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringMatching(/^failed to open text file for read .*: the path (must be relative|leads outside)/) }));
    }
    // A link that stays inside is followed.
    symlinkSync(join(dir, '1', 'model.bin'), join(dir, 'inside.bin'));
    await expect(runRepositoryAgents(checksum({ 'MD5:inside.bin': MD5 }), dir)).resolves.toBeUndefined();
  });

  it('hashes each file once, however many keys spell its path (review: 100 spellings hashed a 16 MiB file 100 times)', async () => {
    const dir = modelDir();
    const spellings = ['1/model.bin', './1/model.bin', '1//model.bin', './/1/./model.bin', '1/model.bin/'.slice(0, -1)];
    await expect(runRepositoryAgents(checksum(Object.fromEntries(spellings.map((f, i) => [`${i % 2 ? 'md5' : 'MD5'}:${f}`, MD5]))), dir)).resolves.toBeUndefined();
    expect([...opened].filter(([p]) => p.startsWith(join(dir, '..')))).toEqual([[realpathSync(join(dir, '1', 'model.bin')), 1]]);
    // Each key is still checked against the one digest.
    await expect(runRepositoryAgents(checksum({ 'MD5:1/model.bin': MD5, 'MD5:./1/model.bin': '0'.repeat(32) }), dir)).rejects.toThrow(`Mismatched MD5 hash for file ./1/model.bin, expect: ${'0'.repeat(32)}, got: ${MD5}`);
  });

  it(`refuses more than ${MAX_CHECKSUM_ENTRIES} checksum entries before it hashes anything (INVALID_ARG)`, async () => {
    const dir = modelDir();
    const params = Object.fromEntries(Array.from({ length: MAX_CHECKSUM_ENTRIES + 1 }, (_, i) => [`MD5:${'./'.repeat(i)}1/model.bin`, MD5]));
    opened.clear();
    await expect(runRepositoryAgents(checksum(params), dir)).rejects.toThrow(expect.objectContaining({
      code: 'INVALID_ARG',
      message: `the checksum repository agent is given ${MAX_CHECKSUM_ENTRIES + 1} files, over the limit of ${MAX_CHECKSUM_ENTRIES}`,
    }));
    expect(opened.size).toBe(0);
  });

  it('hashes a file a chunk at a time, serving the event loop between reads (review: /v2/health/live waited 3 s)', async () => {
    const dir = modelDir();
    const data = Buffer.alloc(16 << 20, 7);
    writeFileSync(join(dir, '1', 'big.bin'), data);
    let turns = 0;
    let stop = false;
    const spin = () => { turns++; if (!stop) setImmediate(spin); };
    setImmediate(spin);
    await runRepositoryAgents(checksum({ 'MD5:1/big.bin': createHash('md5').update(data).digest('hex') }), dir);
    stop = true;
    // One turn at least per 1 MiB read; hashed in one go, no turn ran before it finished.
    expect(turns).toBeGreaterThan(8);
  });

  it('an unknown agent fails the load, naming the agent (Triton\'s "unable to find ... for repo agent")', async () => {
    await expect(runRepositoryAgents({ name: 'm', model_repository_agents: { agents: [{ name: 'relocation' }] } }, modelDir())).rejects.toThrow(expect.objectContaining({
      code: 'INVALID_ARG',
      message: "unable to find 'libtritonrepoagent_relocation.so' for repo agent 'relocation': Triode implements only the repository agents 'checksum'",
    }));
  });
});

const noop: Backend = {
  name: 'noop',
  async modelInitialize() {
    return { async instanceInitialize() { return { async execute() { return { responses: [] }; }, async finalize() {} }; }, async finalize() {} };
  },
};

const servers: InferenceServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop(1000)));
});

describe('InferenceServer with model_repository_agents', () => {
  const config = (agents: string) => `backend: "noop"\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\nmodel_repository_agents { agents [ ${agents} ] }\n`;

  it('a right MD5 loads READY; a wrong one leaves the model UNAVAILABLE with the checksum message', async () => {
    const good = modelDir();
    writeFileSync(join(good, 'config.pbtxt'), config(`{ name: "checksum", parameters [ { key: "MD5:1/model.bin" value: "${MD5}" } ] }`));
    const bad = modelDir();
    writeFileSync(join(bad, 'config.pbtxt'), config('{ name: "checksum", parameters { key: "MD5:1/model.bin" value: "d726e132f91f16ebee703d96f6f73cb1" } }'));
    const s = await InferenceServer.create({ modelRepositories: [join(good, '..')], backends: [noop] });
    servers.push(s);
    expect(s.repositoryIndex()).toEqual([{ name: 'm', version: '1', state: 'READY', reason: '' }]);
    const t = await InferenceServer.create({ modelRepositories: [join(bad, '..')], backends: [noop] });
    servers.push(t);
    expect(t.repositoryIndex()).toEqual([{ name: 'm', state: 'UNAVAILABLE', reason: `Mismatched MD5 hash for file 1/model.bin, expect: d726e132f91f16ebee703d96f6f73cb1, got: ${MD5}` }]);
    expect(t.modelReady('m')).toBe(false);
  });

  it('an explicit load of a model with a wrong MD5 or an unknown agent fails with the reason', async () => {
    const dir = modelDir();
    writeFileSync(join(dir, 'config.pbtxt'), config('{ name: "checksum", parameters { key: "MD5:1/model.bin" value: "00" } }'));
    const s = await InferenceServer.create({ modelRepositories: [join(dir, '..')], backends: [noop], modelControlMode: 'explicit' });
    servers.push(s);
    await expect(s.loadModel('m')).rejects.toMatchObject({ message: expect.stringContaining('Mismatched MD5 hash for file 1/model.bin, expect: 00, got: ') });
    writeFileSync(join(dir, 'config.pbtxt'), config('{ name: "relocation" }'));
    await expect(s.loadModel('m')).rejects.toMatchObject({ message: expect.stringContaining("unable to find 'libtritonrepoagent_relocation.so' for repo agent 'relocation'") });
    writeFileSync(join(dir, 'config.pbtxt'), config(`{ name: "checksum", parameters { key: "MD5:1/model.bin" value: "${MD5}" } }`));
    await s.loadModel('m');
    expect(s.modelReady('m')).toBe(true);
  });
});
