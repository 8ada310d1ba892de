// Issue #18's ppocr_cls target: Triode serving ppocr_cls (binary tensors, b1 requests, wrk at
// --concurrency) against raw onnxruntime with the same threads on the same cores
// (bench/raw-limit.mjs: one session a thread, 1 intra-op thread each, session.run back to back).
// Pinning (bench/pinning.mjs): >= 8 cores: the servers and the raw limit on cpus 0-1, wrk on 2-5
// (the layout); 2-7 cores: the upper half against the lower; the first line says which.
// Raw uses as many threads as the servers have cores. Each round measures raw, then each Triode
// variant (rotating the order), so the machine's drift lands on all alike; the ratio is per round.
// Variants (--variants, comma-separated):
//   shipped   model_repository/ppocr_cls as is (2 instances, execution_thread auto)
//   instance  the same with execution_thread "instance" (Triton's: every batch on its thread)
//   batching  the same with dynamic_batching { }
//   instant   Triode with the same request and config, but a model that answers at once (a ReduceMax
//             over the input, ~25 µs): what Triode's path costs for this 110 KB request, warm
//   floor     bench/floor-server.mjs (Hono reading the body, a fixed answer): what Node's HTTP costs
// instant and floor answer in a few hundred µs, so the server's CPU a request is the figure to read
// for them, not req/s (wrk's one thread is then as busy as the server).
// Before the first round each server is loaded for --settle seconds (default 10): at ppocr_cls's
// ~700 requests a second V8 takes several seconds to optimize the request path (a function is
// optimized after some hundreds to thousands of calls, again after a deoptimization; --trace-opt),
// and a first round measured before that read 0.62x raw where the next two read 0.76x and 0.86x
// (bench/RESULTS.md, 2026-11-27, night). --warmup is each round's own, before each measurement.
// Needs wrk, taskset and `npm run build`. Run by hand:
//   node bench/cls-raw.mjs [--seconds 4] [--warmup 1] [--settle 10] [--rounds 3] [--concurrency 16] [--variants shipped,instance]
import { execFileSync } from 'node:child_process';
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { get } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuCount, layout, machine as describeMachine, taskset } from './pinning.mjs';
import { fmt, freePort, median, perRequest, start, stop, threadStats, wrk } from './harness.mjs';
import { makeInstant } from './instant-model.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '4' },
  warmup: { type: 'string', default: '1' },
  settle: { type: 'string', default: '10' },
  rounds: { type: 'string', default: '3' },
  concurrency: { type: 'string', default: '16' },
  variants: { type: 'string', default: 'shipped,instance' },
  pin: { type: 'string', default: 'auto' },
  out: { type: 'string', default: join(ROOT, 'bench', 'out', 'cls-raw.json') },
} });
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);
const SETTLE = Number(args.settle);
const ROUNDS = Number(args.rounds);
const CONCURRENCY = args.concurrency.split(',').map(Number);
const VARIANTS = args.variants.split(',');
const EXTRA = {
  shipped: '',
  instance: 'parameters { key: "execution_thread" value: { string_value: "instance" } }',
  batching: 'dynamic_batching { }',
  instant: '',
  floor: '',
};
for (const v of VARIANTS) if (!(v in EXTRA)) throw new Error(`unknown variant ${v}: one of ${Object.keys(EXTRA).join(', ')}`);

const PIN = layout(availableParallelism(), args.pin);
const wrkThreads = PIN.pinned ? cpuCount(PIN.load) : 2;
const rawThreads = PIN.pinned ? cpuCount(PIN.server) : 2;
const machine = describeMachine(PIN, { server: 'servers and raw onnxruntime', load: 'wrk', loadThreads: wrkThreads });
console.log(JSON.stringify({ machine, rawThreads }));

const dir = mkdtempSync(join(tmpdir(), 'triode-cls-bench-'));
const x = new Float32Array(3 * 48 * 192).map((_, i) => Math.round(Math.sin(i) * 1e4) / 1e4);
const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], parameters: { binary_data_size: x.byteLength } }] }));
writeFileSync(join(dir, 'cls.bin'), Buffer.concat([header, Buffer.from(x.buffer)]));
const body = { file: join(dir, 'cls.bin'), headerLen: String(header.byteLength) };

function raw() {
  const [cmd, rest] = taskset(PIN.server, [process.execPath, join(ROOT, 'bench', 'raw-limit.mjs'), join(ROOT, 'model_repository'), 'ppocr_cls', String(rawThreads), String(SECONDS)]);
  return JSON.parse(execFileSync(cmd, rest, { cwd: ROOT, encoding: 'utf8' }).trim().split('\n').at(-1)).inferencesPerSec;
}

const stats = (port) => new Promise((res, rej) => {
  get({ host: '127.0.0.1', port, path: '/v2/models/ppocr_cls/stats', agent: false }, (r) => {
    let b = '';
    r.setEncoding('utf8').on('data', (d) => { b += d; }).on('end', () => {
      const m = JSON.parse(b).model_stats[0];
      const s = m.inference_stats;
      res({ n: s.success.count, executions: m.execution_count, inferences: m.inference_count, request: s.success.ns, queue: s.queue.ns, compute: s.compute_input.ns + s.compute_infer.ns + s.compute_output.ns, infer: s.compute_infer.ns });
    }).on('error', rej);
  }).on('error', rej);
});

const rows = [];
const servers = [];
try {
  for (const v of VARIANTS) {
    const port = await freePort();
    if (v === 'floor') {
      const proc = await start(PIN.server, [process.execPath, join(ROOT, 'bench', 'floor-server.mjs'), String(port)], /floor server on/, ROOT);
      servers.push({ variant: v, port, proc });
      continue;
    }
    const repo = join(dir, v);
    cpSync(join(ROOT, 'model_repository', 'ppocr_cls'), join(repo, 'ppocr_cls'), { recursive: true });
    if (EXTRA[v]) appendFileSync(join(repo, 'ppocr_cls', 'config.pbtxt'), `\n${EXTRA[v]}\n`);
    if (v === 'instant') makeInstant(join(repo, 'ppocr_cls'));
    const proc = await start(PIN.server, [join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo, '--http-port', String(port),
      '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false'], /Started HTTPService at/, ROOT);
    servers.push({ variant: v, port, proc });
  }
  // JIT warm-up, once per server (see above).
  if (SETTLE > 0) {
    for (const s of servers) wrk({ cpus: PIN.load, threads: wrkThreads, url: `http://127.0.0.1:${s.port}/v2/models/ppocr_cls/infer`, body, c: CONCURRENCY[0], seconds: SETTLE, root: ROOT });
  }
  for (let round = 0; round < ROUNDS; round++) {
    const rawRate = raw();
    rows.push({ round, variant: 'raw', rps: rawRate });
    console.log(JSON.stringify(rows.at(-1)));
    for (const c of CONCURRENCY) {
      for (let k = 0; k < servers.length; k++) {
        const s = servers[(k + round) % servers.length];
        const url = `http://127.0.0.1:${s.port}/v2/models/ppocr_cls/infer`;
        if (WARMUP > 0) wrk({ cpus: PIN.load, threads: wrkThreads, url, body, c, seconds: WARMUP, root: ROOT });
        // The floor server has no statistics.
        const triode = s.variant !== 'floor';
        const [t0, s0] = [threadStats(s.proc.pid), triode ? await stats(s.port) : undefined];
        const r = wrk({ cpus: PIN.load, threads: wrkThreads, url, body, c, seconds: SECONDS, root: ROOT });
        const [t1, s1] = [threadStats(s.proc.pid), triode ? await stats(s.port) : undefined];
        const row = { round, variant: s.variant, c, ...r, ...perRequest(t0, t1, r.requests), rawRps: rawRate, ofRaw: +(r.rps / rawRate).toFixed(3) };
        if (s0 && s1) {
          const n = s1.n - s0.n;
          Object.assign(row, {
            requestsPerExecution: +((s1.inferences - s0.inferences) / (s1.executions - s0.executions)).toFixed(2),
            inferUsPerRequest: +((s1.infer - s0.infer) / n / 1000).toFixed(1),
            serverOverheadUs: +(((s1.request - s0.request) - (s1.queue - s0.queue) - (s1.compute - s0.compute)) / n / 1000).toFixed(1),
          });
        }
        rows.push(row);
        console.log(JSON.stringify(rows.at(-1)));
      }
    }
  }
} finally {
  for (const s of servers) await stop(s.proc);
  rmSync(dir, { recursive: true, force: true });
}

const pick = (v, c, key) => median(rows.filter((r) => r.variant === v && r.c === c).map((r) => r[key]));
const lines = [`Machine: ${machine.cores} cores (${machine.cpu}); ${machine.layout}. Raw onnxruntime: ${rawThreads} threads on the servers' cpus. ${ROUNDS} rounds of ${SECONDS} s (+${WARMUP} s warmup) after ${SETTLE} s of load on each server; medians.`, ''];
lines.push(`Raw onnxruntime, ${rawThreads} threads: ${fmt(median(rows.filter((r) => r.variant === 'raw').map((r) => r.rps)))} inferences/s (rounds: ${rows.filter((r) => r.variant === 'raw').map((r) => fmt(r.rps)).join(', ')})`, '');
lines.push('| Triode variant | c | req/s | / raw (median of per-round ratios) | p50 ms | p99 ms | process CPU µs/req | main thread CPU µs/req | context switches/req (main) | compute_infer µs/req | requests/execution | server overhead µs/req | non-2xx |');
lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const v of VARIANTS) {
  for (const c of CONCURRENCY) {
    const non2xx = rows.filter((r) => r.variant === v && r.c === c).reduce((a, r) => a + r.non2xx, 0);
    lines.push(`| ${v} | ${c} | ${fmt(pick(v, c, 'rps'))} | ${fmt(pick(v, c, 'ofRaw'), 2)} | ${fmt(pick(v, c, 'p50'), 2)} | ${fmt(pick(v, c, 'p99'), 2)} | ${fmt(pick(v, c, 'cpuUsPerRequest'), 1)} | ${fmt(pick(v, c, 'mainCpuUsPerRequest'), 1)} | ${fmt(pick(v, c, 'switchesPerRequest'), 2)} (${fmt(pick(v, c, 'mainSwitchesPerRequest'), 2)}) | ${fmt(pick(v, c, 'inferUsPerRequest'), 1)} | ${fmt(pick(v, c, 'requestsPerExecution'), 2)} | ${fmt(pick(v, c, 'serverOverheadUs'), 1)} | ${non2xx} |`);
  }
}
console.log(lines.join('\n'));
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, JSON.stringify({ date: new Date().toISOString(), machine, rawThreads, args, rows }, null, 2));
