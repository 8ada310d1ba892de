// Issue #18's benchmark: `simple` over HTTP, Triode (binary and JSON tensors) against the naive
// server (bench/naive-server.mjs, JSON) and the frontend floor (bench/floor-server.mjs), in one run.
// All three servers run at once; each round measures every case on each server in turn (the
// order rotates per round), so the machine's drift lands on all of them alike; the table gives
// medians over the rounds and the ratios the issue asks for, and Triode's server overhead per
// request from its statistics extension (request time - queue - compute, as perf_analyzer).
//
// Pinning (bench/pinning.mjs): with >= 8 cores each server runs on cores 0-1 and wrk (4 threads) on
// cores 2-5, the layout of PERF-BASELINE.md; with 2-7 cores, servers on the upper half and wrk on the
// lower (2 cores: server on core 1, wrk on core 0, so every server gets ONE core); with 1 core or
// --pin off, unpinned; with 2-7 cores and --pin split, each server's main thread alone on the last
// core and its other threads on the one before, wrk below them (2 cores: on core 0 with those
// threads): the main thread has a core of its own and the process a second, as in the issue's
// layout. The first line printed says which. Needs wrk and taskset, and `npm run build`. Run by hand:
//   node bench/http.mjs [--seconds 5] [--warmup 1] [--rounds 3] [--concurrency 1,16,64] [--pin auto|off|split]
//     [--triode-args "..."]    extra `triode serve` flags
//     [--execution-thread auto|main|instance]   simple's execution_thread parameter
import { get } from 'node:http';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuCount, layout, machine as describeMachine, splitThreads } from './pinning.mjs';
import { fmt as f, freePort, median, perRequest, start as startOn, stop, threadStats, wrk as wrkOn } from './harness.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '5' },
  warmup: { type: 'string', default: '1' },
  rounds: { type: 'string', default: '3' },
  concurrency: { type: 'string', default: '1,16,64' },
  pin: { type: 'string', default: 'auto' },
  'triode-args': { type: 'string', default: '' },
  'execution-thread': { type: 'string', default: '' },
  out: { type: 'string', default: join(ROOT, 'bench', 'out', 'http.json') },
} });
const SECONDS = Number(args.seconds);
const WARMUP = Number(args.warmup);
const ROUNDS = Number(args.rounds);
const CONCURRENCY = args.concurrency.split(',').map(Number);

// --- pinning (bench/pinning.mjs) -----------------------------------------------------------------
const PIN = layout(availableParallelism(), args.pin, 'pair', { split: true });
const serverCpus = PIN.server;
const wrkCpus = PIN.load;
const wrkThreads = PIN.pinned ? cpuCount(wrkCpus) : 2;
const machine = describeMachine(PIN, { server: 'servers', load: 'wrk', loadThreads: wrkThreads });
const CORES = machine.cores;
console.log(JSON.stringify({ machine }));

// --- bodies --------------------------------------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), 'triode-http-bench-'));
const in0 = new Int32Array(16).map((_, i) => i);
const in1 = new Int32Array(16).fill(1);
writeFileSync(join(dir, 'simple.json'), JSON.stringify({ inputs: [['INPUT0', in0], ['INPUT1', in1]].map(([name, d]) => ({ name, datatype: 'INT32', shape: [1, 16], data: Array.from(d) })) }));
const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })) }));
writeFileSync(join(dir, 'simple.bin'), Buffer.concat([header, Buffer.from(in0.buffer), Buffer.from(in1.buffer)]));
const BODIES = { json: { file: join(dir, 'simple.json'), headerLen: '' }, binary: { file: join(dir, 'simple.bin'), headerLen: String(header.byteLength) } };

// --- processes -----------------------------------------------------------------------------------
const start = (argv, ready) => startOn(serverCpus, argv, ready, ROOT);
const wrk = (url, body, c, seconds) => wrkOn({ cpus: wrkCpus, threads: wrkThreads, url, body, c, seconds, root: ROOT });

/** Triode's statistics for simple: cumulative counts and ns. */
async function triodeStats(port) {
  // A fresh connection each time (agent: false): a kept-alive one may be closed under us.
  const text = await new Promise((res, rej) => {
    get({ host: '127.0.0.1', port, path: '/v2/models/simple/stats', agent: false }, (r) => {
      let b = '';
      r.setEncoding('utf8').on('data', (d) => { b += d; }).on('end', () => res(b)).on('error', rej);
    }).on('error', rej);
  });
  const s = JSON.parse(text).model_stats[0].inference_stats;
  const m = JSON.parse(text).model_stats[0];
  return { n: s.success.count, inferences: m.inference_count, executions: m.execution_count, request: s.success.ns, queue: s.queue.ns, compute: s.compute_input.ns + s.compute_infer.ns + s.compute_output.ns };
}

// --- run -----------------------------------------------------------------------------------------
const rows = [];
try {
  const repo = join(dir, 'repo');
  cpSync(join(ROOT, 'model_repository', 'simple'), join(repo, 'simple'), { recursive: true });
  if (args['execution-thread']) appendFileSync(join(repo, 'simple', 'config.pbtxt'), `\nparameters { key: "execution_thread" value: { string_value: "${args['execution-thread']}" } }\n`);
  const [tport, nport, fport] = [await freePort(), await freePort(), await freePort()];
  // The bin itself, as users run it: its shebang's node flags (--initial-old-space-size=128) apply;
  // `node triode.js` would skip them (bench/RESULTS.md, 2026-11-27).
  const triode = await start([join(ROOT, 'packages/cli/bin/triode.js'), 'serve', '--model-repository', repo, '--http-port', String(tport), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', ...args['triode-args'].split(' ').filter(Boolean)], /Started HTTPService at/);
  const naive = await start([process.execPath, join(ROOT, 'bench', 'naive-server.mjs'), String(nport), join(ROOT, 'model_repository')], /naive server on/);
  const floor = await start([process.execPath, join(ROOT, 'bench', 'floor-server.mjs'), String(fport)], /floor server on/);
  const url = (port) => `http://127.0.0.1:${port}/v2/models/simple/infer`;
  // Where Triode placed simple (a GPU machine without CUDA must keep it on the CPU: KIND_AUTO).
  const config = await new Promise((res, rej) => get({ host: '127.0.0.1', port: tport, path: '/v2/models/simple/config', agent: false }, (r) => {
    let b = '';
    r.setEncoding('utf8').on('data', (d) => { b += d; }).on('end', () => res(JSON.parse(b))).on('error', rej);
  }).on('error', rej));
  machine.triodeSimple = { instance_group: config.instance_group, execution_accelerators: config.optimization?.execution_accelerators ?? null };
  console.log(JSON.stringify({ triodeSimple: machine.triodeSimple }));
  const SERVERS = [
    { server: 'triode', encoding: 'binary', proc: triode, port: tport },
    { server: 'triode', encoding: 'json', proc: triode, port: tport },
    { server: 'naive', encoding: 'json', proc: naive, port: nport },
    { server: 'floor', encoding: 'binary', proc: floor, port: fport },
  ];
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of CONCURRENCY) {
      for (let k = 0; k < SERVERS.length; k++) {
        const s = SERVERS[(k + round) % SERVERS.length];
        const body = BODIES[s.encoding];
        if (PIN.split) splitThreads(s.proc.pid, PIN.split);
        if (WARMUP > 0) wrk(url(s.port), body, c, WARMUP);
        if (PIN.split) splitThreads(s.proc.pid, PIN.split); // threads made during the warm-up
        const before = s.server === 'triode' ? await triodeStats(s.port) : undefined;
        const t0 = threadStats(s.proc.pid);
        const r = wrk(url(s.port), body, c, SECONDS);
        const row = { round, server: s.server, encoding: s.encoding, c, ...r, ...perRequest(t0, threadStats(s.proc.pid), r.requests) };
        if (before) {
          const after = await triodeStats(s.port);
          const n = after.n - before.n;
          row.requestsPerExecution = +((after.inferences - before.inferences) / (after.executions - before.executions)).toFixed(2);
          row.serverRequestUs = +((after.request - before.request) / n / 1000).toFixed(1);
          row.serverOverheadUs = +(((after.request - before.request) - (after.queue - before.queue) - (after.compute - before.compute)) / n / 1000).toFixed(1);
        }
        rows.push(row);
        console.log(JSON.stringify(row));
      }
    }
  }
  for (const p of [triode, naive, floor]) await stop(p);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// --- report --------------------------------------------------------------------------------------
const pick = (server, encoding, c, key) => median(rows.filter((r) => r.server === server && r.encoding === encoding && r.c === c).map((r) => r[key]));
/** Per round ratio a/b of req/s, then the median of those (the same round's drift cancels). */
const ratio = (a, b, c) => median([...Array(ROUNDS).keys()].map((round) => {
  const x = rows.find((r) => r.round === round && r.server === a[0] && r.encoding === a[1] && r.c === c);
  const y = rows.find((r) => r.round === round && r.server === b[0] && r.encoding === b[1] && r.c === c);
  return x && y ? x.rps / y.rps : NaN;
}));
const lines = [];
lines.push(`Machine: ${CORES} cores (${machine.cpu}); ${machine.layout}. ${ROUNDS} rounds of ${SECONDS} s (+${WARMUP} s warmup) per case; medians. Triode placed simple as ${JSON.stringify(machine.triodeSimple?.instance_group ?? null)}.`);
lines.push('');
lines.push('| server | tensors | c | req/s | p50 ms | p99 ms | process CPU µs/req | main thread CPU µs/req | context switches/req (main) | Triode requests/execution | Triode server overhead µs/req | non-2xx |');
lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const [server, encoding] of [['triode', 'binary'], ['triode', 'json'], ['naive', 'json'], ['floor', 'binary']]) {
  for (const c of CONCURRENCY) {
    const non2xx = rows.filter((r) => r.server === server && r.encoding === encoding && r.c === c).reduce((a, r) => a + r.non2xx, 0);
    lines.push(`| ${server} | ${encoding} | ${c} | ${f(pick(server, encoding, c, 'rps'))} | ${f(pick(server, encoding, c, 'p50'), 3)} | ${f(pick(server, encoding, c, 'p99'), 3)} | ${f(pick(server, encoding, c, 'cpuUsPerRequest'), 1)} | ${f(pick(server, encoding, c, 'mainCpuUsPerRequest'), 1)} | ${f(pick(server, encoding, c, 'switchesPerRequest'), 2)} (${f(pick(server, encoding, c, 'mainSwitchesPerRequest'), 2)}) | ${server === 'triode' ? f(pick(server, encoding, c, 'requestsPerExecution'), 2) : ''} | ${server === 'triode' ? f(pick(server, encoding, c, 'serverOverheadUs'), 1) : ''} | ${non2xx} |`);
  }
}
lines.push('');
lines.push('| ratio (median of per-round ratios) | ' + CONCURRENCY.map((c) => `c=${c}`).join(' | ') + ' |');
lines.push('|---|' + CONCURRENCY.map(() => '---').join('|') + '|');
lines.push('| Triode binary / naive JSON (target >= 1.0) | ' + CONCURRENCY.map((c) => f(ratio(['triode', 'binary'], ['naive', 'json'], c), 2)).join(' | ') + ' |');
lines.push('| Triode JSON / naive JSON (target >= 1.0) | ' + CONCURRENCY.map((c) => f(ratio(['triode', 'json'], ['naive', 'json'], c), 2)).join(' | ') + ' |');
lines.push('| Triode binary / frontend floor (target >= 0.6 at c=64) | ' + CONCURRENCY.map((c) => f(ratio(['triode', 'binary'], ['floor', 'binary'], c), 2)).join(' | ') + ' |');
// The tail at the highest concurrency, round by round: p99/p50 (target <= 5 at c=256), the
// slowest request, the kernel's listen overflows, SYN and segment retransmissions during the
// window, and wrk's socket errors (its `timeout`s are requests over its 2 s limit, left out of its
// latencies).
const top = Math.max(...CONCURRENCY);
lines.push('');
lines.push(`| tail at c=${top}, each round | p50 ms | p90 ms | p99 ms | p99/p50 | max ms | listen overflows | SYN retransmits | retransmitted segments | retransmission timeouts | tail-loss probes | wrk socket errors |`);
lines.push('|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows.filter((x) => x.c === top)) {
  lines.push(`| ${r.server} ${r.encoding}, round ${r.round + 1} | ${f(r.p50, 3)} | ${f(r.p90, 3)} | ${f(r.p99, 3)} | ${f(r.p99 / r.p50, 1)} | ${f(r.maxMs, 1)} | ${r.listenOverflows ?? '-'} | ${r.synRetrans ?? '-'} | ${r.retransSegs ?? '-'} | ${r.tcpTimeouts ?? '-'} | ${r.lossProbes ?? '-'} | ${r.socketErrors || '-'} |`);
}
console.log(lines.join('\n'));
mkdirSync(dirname(args.out), { recursive: true });
writeFileSync(args.out, JSON.stringify({ date: new Date().toISOString(), machine, args, rows }, null, 2));
