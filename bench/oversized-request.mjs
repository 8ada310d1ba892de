// Issue #14: one outsized ppocr_rec request against `triode serve` (binary input, JSON output asked
// for): its answer, and the server's RSS before, at its peak and 10 s after (VmRSS, sampled every
// 50 ms). The default width 38192 makes the input 3 x 48 x 38192 FP32 = 22.0 MB.
//   node bench/oversized-request.mjs [width] [binary-in-json-out|binary-out]
import { spawn } from 'node:child_process';
import { clearInterval, setInterval } from 'node:timers';
import { readFileSync, mkdtempSync, cpSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const repo = mkdtempSync(join(tmpdir(), 'rec-'));
cpSync(join(ROOT, 'model_repository/ppocr_rec'), join(repo, 'ppocr_rec'), { recursive: true });
const port = Number(process.env.PORT ?? 18555);
const p = spawn(process.execPath, ['--initial-old-space-size=128', join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false'], { stdio: ['ignore', 'pipe', 'pipe'] });
let out = ''; p.stderr.on('data', (d) => { out += d; }); p.stdout.on('data', (d) => { out += d; });
const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p.pid}/status`, 'utf8'))[1]) / 1024;
while (!/Started HTTPService/.test(out)) await new Promise((r) => setTimeout(r, 200));
const base = `http://127.0.0.1:${port}`;
const W = Number(process.argv[2] ?? 38192);
const mode = process.argv[3] ?? 'binary-in-json-out';
// warm-up with a normal request so baseline includes sessions
const small = new Float32Array(3 * 48 * 320).fill(0.5);
async function send(x, w, outBinary) {
  const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'x', shape: [1, 3, 48, w], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } }], ...(outBinary ? { parameters: { binary_data_output: true } } : {}) }));
  const t = Date.now();
  const r = await fetch(`${base}/v2/models/ppocr_rec/infer`, { method: 'POST', headers: { 'Inference-Header-Content-Length': String(header.length) }, body: Buffer.concat([header, Buffer.from(x.buffer)]) });
  const body = Buffer.from(await r.arrayBuffer());
  return { status: r.status, ms: Date.now() - t, bytes: body.length, text: r.status !== 200 ? body.toString().slice(0, 300) : '' };
}
// Warm up (sessions, code paths), so the baseline includes them.
console.log('warm', await send(small, 320, false).then((r) => r.status));
await new Promise((r) => setTimeout(r, 1000));
const before = rss();
let peak = before;
const iv = setInterval(() => { peak = Math.max(peak, rss()); }, 50);
const x = new Float32Array(3 * 48 * W).fill(0.5);
console.log('request bytes', x.byteLength, 'mode', mode);
const r = await send(x, W, mode === 'binary-out');
console.log(r);
for (let i = 0; i < 20; i++) { await new Promise((res) => setTimeout(res, 500)); }
clearInterval(iv);
const after = rss();
console.log({ beforeMiB: before.toFixed(0), peakMiB: peak.toFixed(0), afterMiB: after.toFixed(0), ratio: (after / before).toFixed(3) });
console.log('still serving', await send(small, 320, false).then((r) => r.status));
p.kill('SIGTERM');
