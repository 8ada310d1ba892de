// Issue #8 benchmark, in one run against one `triode serve --model-control-mode explicit`:
//  1. unload/load(/infer) cycles of ppocr_cls through the repository API: the server's RSS after the
//     first load, at cycle 30 (once the first cycles' one-time growth is done), every 50 cycles,
//     and after the last (issue #15 target: < 5% growth from cycle 30 to 300);
//  2. 20 hot reloads of ppocr_cls (POST .../load while loaded: the new version loads beside the
//     serving one) while 4 clients send requests throughout: failed requests (target: 0).
// Run by hand:  node bench/model-control.mjs [--cycles 300] [--reloads 20]
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'packages', 'cli', 'bin', 'triode.js');
const { values: args } = parseArgs({ options: { cycles: { type: 'string', default: '100' }, reloads: { type: 'string', default: '20' } } });
const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const child = spawn(BIN, ['serve', '--model-repository', join(ROOT, 'model_repository'), '--model-control-mode', 'explicit',
  '--load-model', 'ppocr_cls', '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--log-info=false'],
{ stdio: ['ignore', 'ignore', 'inherit'] });
try {
  for (let i = 0; i < 300; i++) {
    if ((await fetch(`${base}/v2/health/ready`).catch(() => undefined))?.status === 200) break;
    await sleep(100);
  }
  const post = async (path) => {
    const r = await fetch(`${base}${path}`, { method: 'POST', body: '{}' });
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
  };
  const x = Float32Array.from({ length: 3 * 48 * 192 }, (_, i) => Math.sin(i));
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], parameters: { binary_data_size: x.byteLength } }], outputs: [{ name: 'softmax_0.tmp_0', parameters: { binary_data: true } }] }));
  const body = Buffer.concat([header, Buffer.from(x.buffer)]);
  const infer = () => fetch(`${base}/v2/models/ppocr_cls/infer`, { method: 'POST', body, headers: { 'Inference-Header-Content-Length': String(header.byteLength) } });
  for (let i = 0; i < 20; i++) await infer();
  await sleep(1000);
  const rss0 = rssMb(child.pid);
  const cycles = Number(args.cycles);
  const t0 = Date.now();
  let rss30;
  const series = [];
  for (let i = 0; i < cycles; i++) {
    await post('/v2/repository/models/ppocr_cls/unload');
    await post('/v2/repository/models/ppocr_cls/load');
    const r = await infer();
    if (r.status !== 200) throw new Error(`infer after cycle ${i}: ${r.status}`);
    if (i + 1 === 30) {
      await sleep(3000);
      rss30 = rssMb(child.pid);
    }
    if ((i + 1) % 50 === 0) series.push(`${i + 1}: ${rssMb(child.pid).toFixed(1)}`);
  }
  await sleep(3000);
  const rss1 = rssMb(child.pid);
  const cycleMs = (Date.now() - t0) / cycles;

  // Hot reloads under load.
  let ok = 0;
  let failed = 0;
  const errors = new Map();
  let running = true;
  const clients = Array.from({ length: 4 }, async () => {
    while (running) {
      const r = await infer().catch((e) => ({ status: 0, text: async () => String(e) }));
      if (r.status === 200) {
        ok++;
        await r.arrayBuffer();
      } else {
        failed++;
        const t = await r.text();
        errors.set(t, (errors.get(t) ?? 0) + 1);
      }
    }
  });
  const reloads = Number(args.reloads);
  const r0 = Date.now();
  for (let i = 0; i < reloads; i++) {
    await post('/v2/repository/models/ppocr_cls/load');
    await sleep(100);
  }
  running = false;
  await Promise.all(clients);
  const reloadWallS = (Date.now() - r0) / 1000;
  await sleep(3000);
  const rss2 = rssMb(child.pid);

  const md = `| measurement | result | target |\n|---|---|---|\n`
    + `| RSS after the first load / after ${cycles} unload+load cycles of ppocr_cls | ${rss0.toFixed(1)} MB / ${rss1.toFixed(1)} MB (${(((rss1 - rss0) / rss0) * 100).toFixed(1)}%) | < 5% growth |\n`
    + (rss30 !== undefined ? `| RSS at cycle 30 / after cycle ${cycles} | ${rss30.toFixed(1)} MB / ${rss1.toFixed(1)} MB (${(((rss1 - rss30) / rss30) * 100).toFixed(1)}%) | < 5% growth (issue #15) |\n` : '')
    + `| RSS every 50 cycles (MB, no settling pause) | ${series.join(', ')} | |\n`
    + `| one unload + load + infer cycle | ${cycleMs.toFixed(0)} ms | |\n`
    + `| requests during ${reloads} hot reloads (${reloadWallS.toFixed(1)} s, 4 clients) | ${ok} answered, ${failed} failed | 0 failed |\n`
    + `| RSS 3 s after the reloads (heap not yet collected: no forced GC) | ${rss2.toFixed(1)} MB | |\n`;
  process.stdout.write(md);
  for (const [e, n] of errors) process.stdout.write(`error x${n}: ${e}\n`);
} finally {
  child.kill('SIGTERM');
}
