/**
 * The README's cluster example (`<!-- example: cluster -->`), run line by line as printed: a
 * redis-server, two workers and a gateway as plain processes on one host. Only what a test must
 * change is swapped: every port for a free one (the same port everywhere it appears), `npx triode`
 * for the bin itself (npx's wrapper leaves servers behind when killed), and `./model_repository`
 * for a copy holding `simple` (two workers loading every example would take most of a minute
 * here). Before, the second worker died with EADDRINUSE on metrics port 8002.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');
const block = /<!-- example: cluster -->\n```bash\n([\s\S]*?)```/.exec(README)?.[1] ?? '';

/** The words of a shell line: quoted words ('' included) as one, the trailing `&` dropped. */
function words(line: string): string[] {
  return [...line.replace(/\s*&\s*$/, '').matchAll(/'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2]!);
}

const children: Child[] = [];
let redisPid: number | undefined;

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  if (redisPid !== undefined) {
    try { process.kill(redisPid, 'SIGKILL'); } catch { /* already gone */ }
  }
});

describe("README's cluster example", () => {
  it('runs as printed (ports and repository swapped) and gives a ready cluster that answers through the gateway', async () => {
    const lines = block.split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    expect(lines).toHaveLength(4);
    // Every port the block names, mapped to a free one.
    const ports = new Map<string, string>();
    for (const p of new Set(block.match(/(?<=[ :])\d{4,5}\b/g) ?? [])) ports.set(p, String(await freePort()));
    const repo = makeRepository(['simple']);
    const swap = (w: string) => w.replace(/(?<=^|:)(\d{4,5})$/, (p) => ports.get(p) ?? p).replace('./model_repository', repo);
    for (const line of lines) {
      const [cmd, ...args] = words(line).map(swap);
      if (cmd === 'redis-server') {
        const proc = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
        redisPid = proc.pid;
        await new Promise<void>((resolve, reject) => {
          let out = '';
          proc.stdout!.on('data', (d: Buffer) => { out += d.toString(); if (/Ready to accept connections/.test(out)) resolve(); });
          proc.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
        });
        continue;
      }
      expect([cmd, args[0]]).toEqual(['npx', 'triode']);
      const rest = args.slice(1);
      children.push(await startTriode(rest, rest[0] === 'worker' ? /Started worker/ : /Started HTTPService at/));
    }
    const base = `http://127.0.0.1:${ports.get('8000')!}`;
    await until(async () => (await fetch(`${base}/v2/health/ready`)).status === 200);
    const r = await fetch(`${base}/v2/models/simple/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(2) })) }),
    });
    expect(r.status).toBe(200);
    expect((await r.json() as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual(new Array(16).fill(4));
    // Every process serves its metrics on its own port: the gateway on 8002, the workers on theirs.
    for (const p of ['8002', '8012', '8013']) expect((await fetch(`http://127.0.0.1:${ports.get(p)!}/metrics`)).status).toBe(200);
  }, 120_000);
});
