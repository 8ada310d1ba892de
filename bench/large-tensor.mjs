// What an 11 MB request costs Triode outside the model: ppocr_det's tensors (input FP32
// [1,3,960,960], output [1,1,960,960], binary) through `detlike`, a one-node ONNX model of those
// shapes (ReduceMax over the channels, ~10 ms on one thread), against a node:http server that
// reads the same body and answers as many bytes without a model (the floor). Triode runs twice:
// as the `triode` bin (its shebang's node flags: --initial-old-space-size=128) and as
// `node triode.js` (no flags: how the benches started it before 2026-11-27). Rounds alternate;
// per server: req/s, and CPU a request on the main thread and on the other threads (schedstat).
// Pinning as bench/pinning.mjs (servers on 0-1 and wrk on 2-5 with >= 8 cores; 2 cores: 1 and 0).
// Needs wrk, taskset and `npm run build`. Run by hand:
//   node bench/large-tensor.mjs [--seconds 5] [--rounds 3] [--concurrency 4]
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { T, int, model, msg, node, str, valueInfo } from '../scripts/onnx-writer.mjs';
import { cpuCount, layout, machine as describeMachine } from './pinning.mjs';
import { fmt, freePort, median, perRequest, start, stop, threadStats, wrk } from './harness.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(ROOT, 'packages/cli/bin/triode.js');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '5' },
  warmup: { type: 'string', default: '1' },
  rounds: { type: 'string', default: '3' },
  concurrency: { type: 'string', default: '4' },
  pin: { type: 'string', default: 'auto' },
} });
const [SECONDS, WARMUP, ROUNDS, C] = [Number(args.seconds), Number(args.warmup), Number(args.rounds), Number(args.concurrency)];
const PIN = layout(availableParallelism(), args.pin);
const wrkThreads = PIN.pinned ? cpuCount(PIN.load) : 2;
const machine = describeMachine(PIN, { server: 'servers', load: 'wrk', loadThreads: wrkThreads });

const dir = mkdtempSync(join(tmpdir(), 'triode-large-'));
const axes = msg(5, [str(1, 'axes'), int(8, 1), int(20, 7)]);
mkdirSync(join(dir, 'repo', 'detlike', '1'), { recursive: true });
writeFileSync(join(dir, 'repo', 'detlike', '1', 'model.onnx'), Buffer.from(model('detlike', [node('ReduceMax', ['x'], ['y'], 'rmax', [axes])],
  [valueInfo(11, 'x', T.FLOAT, ['b', 3, 'h', 'w'])], [valueInfo(12, 'y', T.FLOAT, ['b', 1, 'h', 'w'])])));
writeFileSync(join(dir, 'repo', 'detlike', 'config.pbtxt'), 'platform: "onnxruntime_onnx"\nmax_batch_size: 16\n'
  + 'input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]\noutput [ { name: "y" data_type: TYPE_FP32 dims: [ 1, -1, -1 ] } ]\n'
  + 'instance_group [ { count: 1, kind: KIND_CPU } ]\n');
const x = new Float32Array(3 * 960 * 960).map((_, i) => Math.sin(i));
const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, 960, 960], parameters: { binary_data_size: x.byteLength } }], outputs: [{ name: 'y', parameters: { binary_data: true } }] }));
writeFileSync(join(dir, 'body'), Buffer.concat([header, Buffer.from(x.buffer)]));
const body = { file: join(dir, 'body'), headerLen: String(header.byteLength) };
// The floor: reads the body into one buffer and answers the output's size in bytes.
writeFileSync(join(dir, 'floor.mjs'), `import { createServer } from 'node:http';
const out = Buffer.alloc(960 * 960 * 4 + 128, 1);
createServer((req, res) => { const chunks = []; req.on('data', (c) => chunks.push(c)); req.on('end', () => { Buffer.concat(chunks);
  res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': out.length }); res.end(out); }); })
  .listen(Number(process.argv[2]), '127.0.0.1', () => console.log('floor up'));\n`);

const servers = [];
const rows = [];
try {
  const serve = (port) => ['serve', '--model-repository', join(dir, 'repo'), '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--http-max-input-size=1073741824'];
  let port = await freePort();
  servers.push({ name: 'triode (the bin)', port, url: `http://127.0.0.1:${port}/v2/models/detlike/infer`, proc: await start(PIN.server, [BIN, ...serve(port)], /Started HTTPService at/, ROOT) });
  port = await freePort();
  servers.push({ name: 'node triode.js', port, url: `http://127.0.0.1:${port}/v2/models/detlike/infer`, proc: await start(PIN.server, [process.execPath, BIN, ...serve(port)], /Started HTTPService at/, ROOT) });
  port = await freePort();
  servers.push({ name: 'floor (node:http)', port, url: `http://127.0.0.1:${port}/`, proc: await start(PIN.server, [process.execPath, join(dir, 'floor.mjs'), String(port)], /floor up/, ROOT) });
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < servers.length; k++) {
      const s = servers[(k + round) % servers.length];
      if (WARMUP > 0) wrk({ cpus: PIN.load, threads: wrkThreads, url: s.url, body, c: C, seconds: WARMUP, root: ROOT });
      const t0 = threadStats(s.proc.pid);
      const r = wrk({ cpus: PIN.load, threads: wrkThreads, url: s.url, body, c: C, seconds: SECONDS, root: ROOT });
      rows.push({ round, server: s.name, ...r, ...perRequest(t0, threadStats(s.proc.pid), r.requests) });
      console.log(JSON.stringify(rows.at(-1)));
    }
  }
} finally {
  for (const s of servers) await stop(s.proc);
  rmSync(dir, { recursive: true, force: true });
}
const pick = (name, key) => median(rows.filter((r) => r.server === name).map((r) => r[key]));
console.log(`\nMachine: ${machine.cores} cores (${machine.cpu}); ${machine.layout}. c=${C}, ${ROUNDS} rounds of ${SECONDS} s; medians.\n`);
console.log('| server | req/s | p50 ms | CPU ms/req, main thread | CPU ms/req, other threads | non-2xx |');
console.log('|---|---|---|---|---|---|');
for (const s of servers) {
  const other = pick(s.name, 'cpuUsPerRequest') - pick(s.name, 'mainCpuUsPerRequest');
  console.log(`| ${s.name} | ${fmt(pick(s.name, 'rps'), 1)} | ${fmt(pick(s.name, 'p50'), 1)} | ${fmt(pick(s.name, 'mainCpuUsPerRequest') / 1000, 2)} | ${fmt(other / 1000, 2)} | ${rows.filter((r) => r.server === s.name).reduce((a, r) => a + r.non2xx, 0)} |`);
}
