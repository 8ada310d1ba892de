/**
 * The README's examples, run as printed against a live `triode serve` (the port swapped for a
 * free one), and its embedding example compared with examples/embed.mjs and run.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, type Child } from './helpers/process.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

/** `<!-- example: name -->` then a bash block and a text block with its expected output. */
function examples(): { name: string; script: string; expected: string }[] {
  const re = /<!-- example: ([\w-]+) -->\n```bash\n([\s\S]*?)```\n```text\n([\s\S]*?)```/g;
  return [...README.matchAll(re)].map((m) => ({ name: m[1]!, script: m[2]!, expected: m[3]! }));
}

let triode: Child;
let port: number;

beforeAll(async () => {
  port = await freePort();
  triode = await startTriode(['serve', '--model-repository', makeRepository(['simple', 'ppocr_cls', 'ppocr_det', 'ppocr_rec', 'ocr']), '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false']);
});

afterAll(async () => {
  await triode?.stop();
});

describe('README', () => {
  it('has the examples this test runs', () => {
    expect(examples().map((e) => e.name)).toEqual(['health', 'server-metadata', 'model-metadata', 'infer-json', 'infer-binary', 'ocr', 'unknown-model']);
  });

  it.each(examples().map((e) => [e.name, e] as const))('example %s prints what the README says', (_name, e) => {
    const script = e.script.replaceAll('localhost:8000', `127.0.0.1:${port}`).replaceAll('/tmp/simple.bin', `/tmp/triode-readme-${port}.bin`);
    const out = execFileSync('bash', ['-c', script], { encoding: 'utf8', cwd: ROOT });
    expect(out.trim()).toBe(e.expected.trim());
  });

  it('shows examples/embed.mjs verbatim, and it runs as printed', () => {
    const block = /<!-- embed -->\n```js\n([\s\S]*?)```/.exec(README)?.[1];
    expect(block).toBe(readFileSync(join(ROOT, 'examples', 'embed.mjs'), 'utf8'));
    const out = execFileSync(process.execPath, [join(ROOT, 'examples', 'embed.mjs')], { cwd: ROOT, encoding: 'utf8' });
    expect(out).toContain('OUTPUT0 [ 1, 16 ] 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16');
    expect(out).toContain('OUTPUT1 [ 1, 16 ] -1 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14');
  });
});
