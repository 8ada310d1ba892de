import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Backend } from '../backend-api.js';
import { InferenceServer } from '../server.js';
import { LabelList, MAX_LABEL_BYTES, MAX_LABELS, readModelLabels } from './label-provider.js';

/** A backend named "testing" that makes instances and never runs anything. */
const backend: Backend = {
  name: 'testing',
  async modelInitialize() {
    return { async instanceInitialize() { return { async execute() { return { responses: [] }; }, async finalize() {} }; }, async finalize() {} };
  },
};

const servers: InferenceServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.stop(1000)));
});

/** A repository with model "m": `outputs` outputs, each naming `labels.txt` (given by `files`). */
async function serve(outputs: number, files: Record<string, string | Buffer>): Promise<InferenceServer> {
  const repo = mkdtempSync(join(tmpdir(), 'triode-labels-'));
  mkdirSync(join(repo, 'm', '1'), { recursive: true });
  for (const [f, text] of Object.entries(files)) writeFileSync(join(repo, 'm', f), text);
  const out = Array.from({ length: outputs }, (_, k) => `output { name: "O${k}" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "${k % 2 ? './' : ''}labels.txt" }`).join('\n');
  writeFileSync(join(repo, 'm', 'config.pbtxt'), `backend: "testing"\ninput { name: "IN" data_type: TYPE_FP32 dims: [ 4 ] }\n${out}\n`);
  const s = await InferenceServer.create({ modelRepositories: [repo], backends: [backend] });
  servers.push(s);
  return s;
}

describe('label files', () => {
  it('reads one label a line, "\\r\\n" or "\\n", the last line with or without its end', () => {
    const l = new LabelList(Buffer.from('cat\r\ndog\n\nbird'));
    expect(Array.from({ length: l.length }, (_, i) => l.at(i))).toEqual(['cat', 'dog', '', 'bird']);
    expect(l.at(4)).toBeUndefined();
    expect(new LabelList(Buffer.from('a\n')).length).toBe(1);
    expect(new LabelList(Buffer.alloc(0)).length).toBe(0);
    expect(new LabelList(Buffer.from('é\n\n')).at(0)).toBe('é');
  });

  it('outputs naming one file share what was read once (review: each output read and split it again)', async () => {
    const s = await serve(6, { 'labels.txt': 'cat\ndog\n' });
    const m = s.getModel('m');
    const lists = new Set(['O0', 'O1', 'O2', 'O5'].map((o) => m.labels.get(o)));
    expect(lists.size).toBe(1);
    expect([...lists][0]!.at(1)).toBe('dog');
  });

  it(`a model with more than ${MAX_LABELS} labels is refused at load, naming the limit (review: 40 MiB of "\\n" ran the heap out)`, async () => {
    const s = await serve(2, { 'labels.txt': Buffer.alloc(MAX_LABELS + 1, 10) });
    expect(s.repositoryIndex()[0]).toMatchObject({
      state: 'UNAVAILABLE',
      reason: expect.stringContaining(`failed to read label file 'labels.txt': the label files of the model hold more than ${MAX_LABELS} labels, over the limit of ${MAX_LABELS} labels per model`),
    });
  });

  it('the distinct label files of a model count together against both limits', () => {
    const repo = mkdtempSync(join(tmpdir(), 'triode-labels-'));
    const lines = Buffer.alloc(MAX_LABELS / 2 + 1, 10);
    writeFileSync(join(repo, 'a.txt'), lines);
    writeFileSync(join(repo, 'b.txt'), lines);
    const config = (...files: string[]) => ({ output: files.map((f, k) => ({ name: `O${k}`, label_filename: f })) });
    expect(readModelLabels(repo, config('a.txt', 'a.txt', './a.txt')).get('O2')!.length).toBe(MAX_LABELS / 2 + 1);
    expect(() => readModelLabels(repo, config('a.txt', 'b.txt'))).toThrow(expect.objectContaining({ code: 'INVALID_ARG', message: expect.stringContaining(`over the limit of ${MAX_LABELS} labels per model`) }));
    const big = Buffer.alloc(MAX_LABEL_BYTES / 2 + 1, 0x61);
    writeFileSync(join(repo, 'c.txt'), big);
    writeFileSync(join(repo, 'd.txt'), big);
    expect(readModelLabels(repo, config('c.txt')).get('O0')!.length).toBe(1);
    expect(() => readModelLabels(repo, config('c.txt', 'd.txt'))).toThrow(`failed to read label file 'd.txt': the label files of the model hold more than ${MAX_LABEL_BYTES} bytes, over the limit of ${MAX_LABEL_BYTES} bytes per model`);
  });
});
