// Issue #5 benchmark: the OCR pipeline (the `ocr` model: PP-OCR det + cls + rec via BLS) over
// HTTP on examples/ocr/sample.png (640x200, two lines), images/s and latency at c=1 and c=8.
// Needs wrk and taskset. Usage: node bench/ocr.mjs [--seconds 10] [--pin auto|off]
// Pinning (bench/pinning.mjs): the server and wrk on separate cores (>= 8 cores: server on 0-1, wrk
// on 2-5; 2-7: server on the upper half, wrk on the lower; 1 core or --pin off: unpinned). The first
// line printed says which.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, cpSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { layout, machine as describeMachine, taskset } from './pinning.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, pin: { type: 'string', default: 'auto' } } });
const PIN = layout(availableParallelism(), args.pin); // the server on PIN.server, wrk on PIN.load
const machine = describeMachine(PIN, { server: 'server', load: 'wrk' });
console.log(`Machine: ${machine.cores} cores (${machine.cpu}); ${machine.layout}.\n`);
const repo = mkdtempSync(join(tmpdir(), 'triode-bench-'));
for (const m of ['ocr', 'ppocr_det', 'ppocr_cls', 'ppocr_rec']) cpSync(join(ROOT, 'model_repository', m), join(repo, m), { recursive: true });
const port = await new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
const p = spawn(...taskset(PIN.server, [join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--log-info=false']), { stdio: ['ignore', 'pipe', 'pipe'] });
await new Promise((res) => { let out = ''; const on = (d) => { out += d; if (/Started HTTPService/.test(out) || /\| ppocr_rec[^\n]*READY[\s\S]*\+\n/.test(out)) res(); }; p.stdout.on('data', on); p.stderr.on('data', on); });
await new Promise((r) => setTimeout(r, 500));
const img = readFileSync(join(ROOT, 'examples/ocr/sample.png'));
const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'IMAGE', shape: [1], datatype: 'BYTES', parameters: { binary_data_size: img.length + 4 } }], outputs: [{ name: 'TEXT' }] }));
const len = Buffer.alloc(4);
len.writeUInt32LE(img.length);
const bodyFile = join(repo, 'body.bin');
writeFileSync(bodyFile, Buffer.concat([header, len, img]));
const rows = [];
for (const c of [1, 8]) {
  const run = (d) => execFileSync(...taskset(PIN.load, ['wrk', '-t1', `-c${c}`, `-d${d}s`, '--latency', '-s', join(ROOT, 'bench/post.lua'), `http://127.0.0.1:${port}/v2/models/ocr/infer`]), { env: { ...process.env, BODY_FILE: bodyFile, HEADER_LEN: String(header.length) }, encoding: 'utf8' });
  run(3);
  const out = run(Number(args.seconds));
  const ms = (m) => (m ? Number(m[1]) * ({ us: 1e-3, ms: 1, s: 1000 }[m[2]]) : NaN);
  rows.push({ c, rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]), p50: ms(/\s50%\s+([\d.]+)(us|ms|s)/.exec(out)), p99: ms(/\s99%\s+([\d.]+)(us|ms|s)/.exec(out)), non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0) });
}
process.kill(p.pid, 'SIGTERM');
await new Promise((r) => p.once('exit', r));
console.log('| OCR pipeline, sample.png (2 lines), HTTP | images/s | p50 ms | p99 ms | errors |');
console.log('|---|---|---|---|---|');
for (const r of rows) console.log(`| c=${r.c} | ${r.rps.toFixed(1)} | ${r.p50.toFixed(1)} | ${r.p99.toFixed(1)} | ${r.non2xx} |`);
