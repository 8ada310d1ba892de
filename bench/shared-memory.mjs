// System shared memory against binary tensors in the body: one `triode serve --allow-client-shm=true`
// serving ppocr_cls (its input is 110,592 bytes), one region in /dev/shm holding that input and the
// output's 8 bytes, and wrk sending in turn the binary request (JSON header + the tensor's bytes) and
// the shared-memory request (a ~310-byte JSON body naming the region for the input and the output).
// Each round measures both (the order rotates), so the machine's drift lands on both alike; the
// table gives medians of the rounds: req/s, latency, and the server's CPU a request (all its threads,
// and its main thread: where HTTP and the copy out of the region run).
// --batch B sends B crops a request (110,592 bytes each; ppocr_cls takes up to 16). --model instant
// swaps ppocr_cls's model for one that answers at once (a ReduceMax over the input, as
// bench/cls-raw.mjs's `instant`), so what is left is what moving the tensor costs.
// Pinning (bench/pinning.mjs): >= 8 cores: the server on cpus 0-1, wrk on 2-5; 2-7 cores: the
// upper half against the lower. Needs wrk, taskset, /dev/shm and `npm run build`. Run by hand:
//   node bench/shared-memory.mjs [--seconds 4] [--warmup 1] [--settle 6] [--rounds 3] [--concurrency 1,16]
//     [--batch 1] [--model ppocr_cls|instant]
import { cpSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuCount, layout, machine as describeMachine } from './pinning.mjs';
import { fmt, freePort, median, perRequest, start, stop, threadStats, wrk } from './harness.mjs';
import { makeInstant } from './instant-model.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '4' },
  warmup: { type: 'string', default: '1' },
  settle: { type: 'string', default: '6' },
  rounds: { type: 'string', default: '3' },
  concurrency: { type: 'string', default: '1,16' },
  pin: { type: 'string', default: 'auto' },
  batch: { type: 'string', default: '1' },
  model: { type: 'string', default: 'ppocr_cls' },
} });
const BATCH = Number(args.batch);
const PIN = layout(availableParallelism(), args.pin, 'pair');
const wrkThreads = PIN.pinned ? cpuCount(PIN.load) : 2;
console.log(JSON.stringify({ machine: describeMachine(PIN, { server: 'server', load: 'wrk', loadThreads: wrkThreads }) }));

const INPUT_BYTES = BATCH * 3 * 48 * 192 * 4;
const OUTPUT_AT = INPUT_BYTES; // whole pages: the output right after the input
const OUTPUT_BYTES = BATCH * (args.model === 'instant' ? 1 : 2) * 4;
const KEY = `/triode-bench-shm-${process.pid}`;
const object = Buffer.alloc(INPUT_BYTES + 4096);
const input = new Float32Array(BATCH * 3 * 48 * 192).map((_, i) => ((i % 255) / 255 - 0.5) * 2);
object.set(Buffer.from(input.buffer), 0);
writeFileSync(`/dev/shm${KEY}`, object);
// The object goes with the run, however it ends.
process.on('exit', () => rmSync(`/dev/shm${KEY}`, { force: true }));
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => process.exit(130));

const dir = mkdtempSync(join(tmpdir(), 'triode-shm-bench-'));
const repo = join(dir, 'repo');
cpSync(join(ROOT, 'model_repository', 'ppocr_cls'), join(repo, 'ppocr_cls'), { recursive: true });
// bench/cls-raw.mjs's instant model: the same input, an answer at once.
if (args.model === 'instant') makeInstant(join(repo, 'ppocr_cls'));
const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [BATCH, 3, 48, 192], parameters: { binary_data_size: INPUT_BYTES } }], outputs: [{ name: 'softmax_0.tmp_0', parameters: { binary_data: true } }] }));
writeFileSync(join(dir, 'binary.bin'), Buffer.concat([header, Buffer.from(input.buffer)]));
const window = (offset, size) => ({ shared_memory_region: 'cls', shared_memory_offset: offset, shared_memory_byte_size: size });
writeFileSync(join(dir, 'shm.json'), JSON.stringify({
  inputs: [{ name: 'x', datatype: 'FP32', shape: [BATCH, 3, 48, 192], parameters: window(0, INPUT_BYTES) }],
  outputs: [{ name: 'softmax_0.tmp_0', parameters: window(OUTPUT_AT, OUTPUT_BYTES) }],
}));
const BODIES = { binary: { file: join(dir, 'binary.bin'), headerLen: String(header.byteLength) }, shm: { file: join(dir, 'shm.json'), headerLen: '' } };

const port = await freePort();
const server = await start(PIN.server, ['node', '--initial-old-space-size=128', join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo,
  '--model-control-mode', 'explicit', '--load-model', 'ppocr_cls', '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false',
  '--allow-client-shm=true'], /Started HTTPService at/, ROOT);
const rows = [];
try {
  const base = `http://127.0.0.1:${port}`;
  const reg = await fetch(`${base}/v2/systemsharedmemory/region/cls/register`, { method: 'POST', body: JSON.stringify({ key: KEY, offset: 0, byte_size: object.byteLength }) });
  if (reg.status !== 200) throw new Error(`register: ${reg.status} ${await reg.text()}`);
  for (const [name, body] of Object.entries(BODIES)) {
    const r = await fetch(`${base}/v2/models/ppocr_cls/infer`, { method: 'POST', body: await (await import('node:fs/promises')).readFile(body.file), headers: body.headerLen ? { 'Inference-Header-Content-Length': body.headerLen } : {} });
    if (r.status !== 200) throw new Error(`${name}: ${r.status} ${await r.text()}`);
  }
  const url = `${base}/v2/models/ppocr_cls/infer`;
  const run = (body, c, seconds) => wrk({ cpus: PIN.load, threads: wrkThreads, url, body, c, seconds, root: ROOT });
  run(BODIES.binary, 16, Number(args.settle));
  run(BODIES.shm, 16, Number(args.settle));
  for (const c of args.concurrency.split(',').map(Number)) {
    const got = { binary: [], shm: [] };
    for (let round = 0; round < Number(args.rounds); round++) {
      const order = round % 2 ? ['shm', 'binary'] : ['binary', 'shm'];
      for (const kind of order) {
        run(BODIES[kind], c, Number(args.warmup));
        const a = threadStats(server.pid);
        const w = run(BODIES[kind], c, Number(args.seconds));
        const b = threadStats(server.pid);
        got[kind].push({ ...w, ...perRequest(a, b, w.requests) });
      }
    }
    for (const kind of ['binary', 'shm']) {
      const m = (k) => median(got[kind].map((x) => x[k]));
      rows.push({ kind, c, rps: m('rps'), p50: m('p50'), p99: m('p99'), cpu: m('cpuUsPerRequest'), main: m('mainCpuUsPerRequest'), non2xx: got[kind].reduce((s, x) => s + x.non2xx, 0) });
    }
  }
} finally {
  await stop(server);
  rmSync(`/dev/shm${KEY}`, { force: true });
  rmSync(dir, { recursive: true, force: true });
}
console.log(`\nppocr_cls${args.model === 'instant' ? ' (instant model)' : ''}, batch ${BATCH} (${INPUT_BYTES} bytes of input)`);
console.log('\n| request | c | req/s | p50 ms | p99 ms | process CPU µs/req | main thread CPU µs/req | non-2xx |\n|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(`| ${r.kind} | ${r.c} | ${fmt(r.rps)} | ${fmt(r.p50, 3)} | ${fmt(r.p99, 3)} | ${fmt(r.cpu, 1)} | ${fmt(r.main, 1)} | ${r.non2xx} |`);
