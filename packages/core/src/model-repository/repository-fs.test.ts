import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readLabels } from './label-provider.js';
import { MAX_CONFIG_BYTES, MAX_MODEL_DIR_ENTRIES, configPath, listVersionFiles, listVersions, readModelConfig, resolveInside, scanRepositories, selectVersions, versionOfFolder } from './repository-fs.js';
import { signature } from './model-repository-manager.js';

function repo(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'triode-repo-'));
  for (const [p, text] of Object.entries(files)) {
    mkdirSync(join(root, p, '..'), { recursive: true });
    if (!p.endsWith('/')) writeFileSync(join(root, p), text);
  }
  return root;
}

describe('model repository', () => {
  it('lists numeric version folders only, ignoring names with a leading zero', () => {
    const r = repo({ 'm/1/x': '', 'm/3/x': '', 'm/10/x': '', 'm/01/x': '', 'm/abc/x': '', 'm/2': 'a file, not a folder' });
    expect(listVersions(join(r, 'm'))).toEqual([1, 3, 10]);
  });

  it("reads version folder names as Triton's VersionsToLoad (std::stoll), with its warning for each it ignores (review: 1e3, 2.0, ' 3', -1 were ignored without a word)", () => {
    const names = ['1e3', '2.0', ' 3', '-1', '+4', '0', '-0', '5abc', '00', '007', '.hidden', 'abc', '-', ' ', '99999999999999999999', '9007199254740992', 'warmup', 'initial_state', 'configs'];
    const r = repo(Object.fromEntries(names.map((n) => [`m/${n}/x`, ''])));
    writeFileSync(join(r, 'm/6'), 'a file, not a folder');
    symlinkSync(join(r, 'm/1e3'), join(r, 'm/7'));
    const warnings: string[] = [];
    expect(listVersions(join(r, 'm'), (w) => warnings.push(w))).toEqual([-1, 0, 1, 2, 3, 4, 5, 7]);
    expect(warnings.sort()).toEqual([
      "ignore version directory ' ' which fails to convert to integral number",
      "ignore version directory '-' which fails to convert to integral number",
      "ignore version directory '.hidden' which fails to convert to integral number",
      "ignore version directory '00' which contains leading zeros in its directory name",
      "ignore version directory '007' which contains leading zeros in its directory name",
      "ignore version directory '9007199254740992' whose number is past 9007199254740991, the largest version Triode takes",
      "ignore version directory '99999999999999999999' whose number is past 9007199254740991, the largest version Triode takes",
      "ignore version directory 'abc' which fails to convert to integral number",
    ]);
    expect(versionOfFolder('\t\n12x')).toEqual({ version: 12 });
    expect(versionOfFolder('a\u0001')).toEqual({ ignored: "ignore version directory 'a\\u0001' which fails to convert to integral number" });
  });

  it('selects versions by policy', () => {
    expect(selectVersions([1, 2, 3], undefined)).toEqual([3]);
    expect(selectVersions([1, 2, 3], { latest: { num_versions: 2 } })).toEqual([2, 3]);
    expect(selectVersions([1, 2, 3], { all: {} })).toEqual([1, 2, 3]);
    expect(selectVersions([1, 2, 3], { specific: { versions: [1, 3, 7] } })).toEqual([1, 3]);
  });

  it("selects as Triton's VersionsToLoad: latest with num_versions 0 or none given selects none, a policy of no kind selects all (before: 1 and none)", () => {
    expect(selectVersions([1, 2, 3], { latest: { num_versions: 0 } })).toEqual([]);
    expect(selectVersions([1, 2, 3], { latest: {} })).toEqual([]);
    expect(selectVersions([1, 2, 3], {})).toEqual([1, 2, 3]);
    expect(selectVersions([1, 2, 3], { specific: {} })).toEqual([]);
  });

  it('marks a model found in two repositories as an error for that model only', () => {
    const a = repo({ 'm/1/x': '', 'only_a/1/x': '' });
    const b = repo({ 'm/1/x': '', 'only_b/1/x': '' });
    const found = scanRepositories([a, b]);
    expect(found.get('m')?.error?.message).toMatch("model 'm' is found in multiple model repositories");
    expect(found.get('only_a')?.error).toBeUndefined();
    expect(found.get('only_b')?.error).toBeUndefined();
  });

  it('uses configs/<name>.pbtxt when --model-config-name names one', () => {
    const r = repo({ 'm/config.pbtxt': 'max_batch_size: 1', 'm/configs/h100.pbtxt': 'max_batch_size: 2' });
    expect(configPath(join(r, 'm'), 'h100')).toBe(join(r, 'm/configs/h100.pbtxt'));
    expect(readModelConfig(join(r, 'm'), { configName: 'h100', autoComplete: true }).max_batch_size).toBe(2);
    expect(readModelConfig(join(r, 'm'), { configName: 'a100', autoComplete: true }).max_batch_size).toBe(1);
  });

  it('reads a missing config as empty only when auto-complete is on', () => {
    const r = repo({ 'm/1/model.onnx': '' });
    expect(readModelConfig(join(r, 'm'), { autoComplete: true })).toEqual({});
    expect(() => readModelConfig(join(r, 'm'), { autoComplete: false })).toThrow('auto-complete is disabled');
  });

  it('reports where a config fails to parse', () => {
    const r = repo({ 'm/config.pbtxt': 'name: "m"\nmax_batch_size: x' });
    expect(() => readModelConfig(join(r, 'm'), { autoComplete: true })).toThrow(/failed to read text proto from .*config.pbtxt: 2:17: Expected integer, got: x/);
  });

  it('reads labels, one per line, and refuses paths outside the model folder', () => {
    const r = repo({ 'm/labels.txt': 'cat\r\ndog\n' });
    expect([0, 1, 2].map((i) => readLabels(join(r, 'm'), 'labels.txt').at(i))).toEqual(['cat', 'dog', undefined]);
    expect(() => resolveInside(join(r, 'm'), '../../etc/passwd')).toThrow('outside the model directory');
  });
});

describe('hostile repository files', () => {
  it('a FIFO as config.pbtxt or label file is refused at once (before, open() waited for a writer and the event loop with it)', () => {
    const r = repo({ 'm/1/x': '' });
    execFileSync('mkfifo', [join(r, 'm/config.pbtxt'), join(r, 'm/labels.txt')]);
    expect(() => readModelConfig(join(r, 'm'), { autoComplete: true })).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: "failed to read config file 'config.pbtxt': not a regular file" }));
    expect(() => readLabels(join(r, 'm'), 'labels.txt')).toThrow(/label file 'labels.txt': not a regular file/);
  });

  it('a config.pbtxt linked to /dev/zero, or over the size limit, is refused before it is read (before, /dev/zero was read until the process aborted)', () => {
    const r = repo({ 'm/1/x': '', 'big/config.pbtxt': `max_batch_size: 1\n${'#'.repeat(MAX_CONFIG_BYTES)}\n` });
    symlinkSync('/dev/zero', join(r, 'm/config.pbtxt'));
    expect(() => readModelConfig(join(r, 'm'), { autoComplete: true })).toThrow(/not a regular file/);
    expect(() => readModelConfig(join(r, 'big'), { autoComplete: true })).toThrow(`over the limit of ${MAX_CONFIG_BYTES}`);
  });

  it(`a model directory of more than ${MAX_MODEL_DIR_ENTRIES} entries is refused, without looking at them all (review: 100,000 version folders held the event loop 1.2 s a load)`, () => {
    const r = repo({ 'm/config.pbtxt': '', 'm/7/model.onnx': 'x' });
    for (let i = 1; i < MAX_MODEL_DIR_ENTRIES; i++) mkdirSync(join(r, 'm', String(i + 10)));
    expect(() => listVersions(join(r, 'm'))).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: `the model directory holds more than ${MAX_MODEL_DIR_ENTRIES} entries` }));
    expect(() => listVersionFiles(join(r, 'm'))).toThrow(/more than/);
    const ok = repo({ 'm/7/model.js': 'x', 'm/8/model.onnx/model.onnx': 'x', 'm/9/other': 'x' });
    expect(listVersions(join(ok, 'm'))).toEqual([7, 8, 9]);
    expect(listVersionFiles(join(ok, 'm')).sort()).toEqual(['model.js', 'model.onnx']);
  });

  it('a model directory of symlink loops is read once per directory (before, 12 links to "." made millions of entries on every load and poll)', () => {
    const r = repo({ 'm/1/model.onnx': 'x' });
    for (let i = 0; i < 12; i++) symlinkSync('.', join(r, `m/l${i}`));
    const sig = signature(join(r, 'm'));
    expect(sig.length).toBeLessThan(1000);
    expect(sig).toContain('model.onnx:1:');
    // A change inside still changes it.
    writeFileSync(join(r, 'm/1/model.onnx'), 'xy');
    expect(signature(join(r, 'm'))).not.toBe(sig);
  });
});
