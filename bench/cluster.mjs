// Issue #6 and issue #16 benchmark (run by hand; needs wrk, redis-server and taskset):
//   node bench/cluster.mjs [--seconds 10] [--pin auto|off] [--workers 1,2,4] [--gateways 1]
//                          [--scale-model sleepy|ppocr_cls|simple] [--compare yes|no] [--tensor-fetch-min-bytes N]
// Issue #16 scope 7 ("one gateway carries >= 0.8x its own HTTP frontend floor"; "8 workers >= 0.9x
// linear"), on a 16-core machine, as PERF-BASELINE.md finding 9 measured it:
//   node bench/cluster.mjs --workers 1,2,4,8 --gateways 1,2 --scale-model ppocr_cls   # x linear
//   node bench/cluster.mjs --workers 1,2,4,8 --gateways 1,2 --scale-model simple      # gateway vs its floor
// (with ppocr_cls, 8 workers cannot saturate a gateway: the floor line means something with `simple`)
// Every triode process starts through the bin's shebang (its V8 flags), as `npx triode` does.
// 1. Cluster (redis + 1 gateway + 1 worker) vs embedded (`triode serve`), binary requests,
//    `simple` and `ppocr_cls` at c=1 and c=16.
// Pinning (bench/pinning.mjs): with >= 16 cores, the cluster as PERF-BASELINE.md finding 9 (Redis
// on cpu 0, gateway g on the next two cpus (1-2, 3-4, ...), worker i on its own cpu after the
// gateways', wrk on the cpus left, shared by the wrks of a multi-gateway run; the layout is made
// for the largest --gateways and --workers) and the embedded server as the other benches (cpus 0-1,
// wrk on 2-5); part 1's one worker gets two cpus (the first two workers'), as the embedded server
// does. With fewer cores, or --pin off, nothing is pinned (embedded included, so both share the
// same cores). The first line printed says which.
// 2. Gateway frontend floor: bench/floor-server.mjs (Hono answering infer posts without inference)
//    pinned to the first gateway's cpus, loaded as the scale-out's one-gateway rows are.
// 3. Scale-out: the --scale-model (default `sleepy`: latency-bound, 20 ms per batch of up to 8, 1
//    instance per worker, 400 inferences/s per worker; `ppocr_cls` is finding 9's, run here as a copy
//    with 1 instance per worker) at c=64. For each --gateways count g: a fresh redis, g gateways, then
//    workers added through the --workers counts. With several gateways, one wrk per gateway runs at
//    the same time, the 64 connections split between them; req/s is their sum, p50/p99 the worst
//    gateway's. x linear = req/s / (n x the 1-gateway 1-worker req/s).
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { availableParallelism, cpus as osCpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { describe, layout, taskset } from './pinning.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: {
  seconds: { type: 'string', default: '10' }, pin: { type: 'string', default: 'auto' },
  workers: { type: 'string', default: '1,2,4' }, gateways: { type: 'string', default: '1' },
  'scale-model': { type: 'string', default: 'sleepy' },
  compare: { type: 'string', default: 'yes' }, // part 1 (embedded vs cluster); `no` runs parts 2-3 only
  'tensor-fetch-min-bytes': { type: 'string' }, // the gateways' --tensor-fetch-min-bytes (0: every tensor through Redis); default: theirs
} });
const SECONDS = Number(args.seconds);
/** '1,2,4' -> [1, 2, 4]: positive integers, ascending, without repeats. */
function countList(name, s) {
  const l = s.split(',').map((x) => x.trim()).filter(Boolean).map(Number);
  if (!l.length || l.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--${name} must be a comma-separated list of positive integers, not ${s}`);
  return [...new Set(l)].sort((a, b) => a - b);
}
const WORKERS = countList('workers', args.workers); // the scale-out's worker counts
const GATEWAYS = countList('gateways', args.gateways); // the scale-out's gateway counts
const SCALE_C = 64; // the scale-out's connections (split between the gateways)
const SCALE_MODEL = args['scale-model'];
if (!['yes', 'no'].includes(args.compare)) throw new Error(`--compare must be yes or no, not ${args.compare}`);
const COMPARE = args.compare === 'yes';
const BODY_MODELS = ['simple', 'ppocr_cls', 'sleepy']; // the models with a request body below
if (!BODY_MODELS.includes(SCALE_MODEL)) throw new Error(`--scale-model must be one of ${BODY_MODELS.join(', ')}, not ${SCALE_MODEL}`);

// Pinning: CLUSTER's roles (redis, gateways[g], workers[i], load), EMBEDDED's (server, load); '' = unpinned.
const CORES = availableParallelism();
// Part 1's worker gets as many cpus as the embedded server (two, the first two worker cpus): the
// comparison is of the cluster's path, not of one core against two (the 16-core run of 2026-11-28
// gave the worker one cpu and read 0.62x). So the layout keeps at least two worker cpus for it.
const CLUSTER = layout(CORES, args.pin, { cluster: { gateways: Math.max(...GATEWAYS), workers: Math.max(...WORKERS, COMPARE ? 2 : 1) } });
const EMBEDDED = layout(CORES, CLUSTER.pinned ? args.pin : 'off');
const COMPARE_WORKER = CLUSTER.pinned && COMPARE ? `${CLUSTER.workers[0]}-${CLUSTER.workers[1]}` : '';
console.log(`Machine: ${CORES} cores (${osCpus()[0]?.model ?? 'unknown'}); cluster: ${describe(CLUSTER, { load: 'wrk' })}; embedded: ${
  CLUSTER.pinned ? `${describe(EMBEDDED, { server: 'server', load: 'wrk' })}${COMPARE_WORKER ? `; the cluster's one worker in the comparison (part 1) on cpu ${COMPARE_WORKER}, as many as the embedded server` : ''}` : 'not pinned either'}.\n`);
const BIN = join(ROOT, 'packages/cli/bin/triode.js');
const procs = [];
const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });
function start(cpus, cmd, argv, ready) {
  const p = spawn(...taskset(cpus, [cmd, ...argv]), { stdio: ['ignore', 'pipe', 'pipe'] });
  p.stderr.on('data', (d) => { if (process.env.BENCH_DEBUG) process.stderr.write(d); });
  procs.push(p);
  return new Promise((res, rej) => { let out = ''; const on = (d) => { out += d; if (ready.test(out)) res(p); }; p.stdout.on('data', on); p.stderr.on('data', on); p.once('exit', (c) => rej(new Error(`${argv.join(' ')} exited ${c}: ${out}`))); });
}
async function stop(p) { if (p.exitCode !== null || p.signalCode !== null) return; const e = new Promise((r) => p.once('exit', r)); p.kill('SIGTERM'); await e; }
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const repo = mkdtempSync(join(tmpdir(), 'triode-bench-'));
for (const m of BODY_MODELS) cpSync(join(ROOT, 'model_repository', m), join(repo, m), { recursive: true });

// The scale-out's model: 1 instance per worker. When the repository's config asks for another
// count, a copy `<model>_1x` with `instance_group [{ count: 1, kind: KIND_CPU }]` (the original
// stays as it is for part 1).
const SCALE = (() => {
  const config = readFileSync(join(ROOT, 'model_repository', SCALE_MODEL, 'config.pbtxt'), 'utf8');
  const group = /^[ \t]*instance_group\s*\[[\s\S]*?\}\s*\]/m.exec(config);
  const counts = group ? [...group[0].matchAll(/count\s*:\s*(\d+)/g)].map((m) => Number(m[1])) : [];
  if (counts.length === 1 && counts[0] === 1 && !/KIND_GPU/.test(group[0])) return { name: SCALE_MODEL, instances: '1 instance per worker, as configured' };
  const name = `${SCALE_MODEL}_1x`;
  cpSync(join(ROOT, 'model_repository', SCALE_MODEL), join(repo, name), { recursive: true });
  const one = 'instance_group [{ count: 1, kind: KIND_CPU }]';
  const copy = (group ? config.replace(group[0], one) : `${config.trimEnd()}\n${one}\n`).replace(/^(\s*name\s*:\s*)"[^"]*"/m, `$1"${name}"`);
  writeFileSync(join(repo, name, 'config.pbtxt'), copy);
  return { name, instances: `a copy with 1 instance; the repository's config has ${group ? group[0].replace(/\s+/g, ' ').trim() : 'no instance_group'}` };
})();

function bodyFile(name, inputs) {
  const header = Buffer.from(JSON.stringify({ parameters: { binary_data_output: true }, inputs: inputs.map(([n, dt, shape, data]) => ({ name: n, datatype: dt, shape, parameters: { binary_data_size: data.byteLength } })) }));
  const f = join(repo, `${name}.bin`);
  writeFileSync(f, Buffer.concat([header, ...inputs.map(([, , , d]) => Buffer.from(d.buffer))]));
  return { file: f, headerLen: String(header.length) };
}
const bodies = {
  simple: bodyFile('simple', [['INPUT0', 'INT32', [1, 16], new Int32Array(16).fill(1)], ['INPUT1', 'INT32', [1, 16], new Int32Array(16).fill(2)]]),
  ppocr_cls: bodyFile('cls', [['x', 'FP32', [1, 3, 48, 192], new Float32Array(3 * 48 * 192).fill(0.1)]]),
  sleepy: bodyFile('sleepy', [['INPUT0', 'INT32', [1, 1], Int32Array.of(7)]]),
};
bodies[SCALE.name] = bodies[SCALE_MODEL];
const wrkArgs = (port, model, c, seconds) => ['wrk', `-t${c > 1 ? 2 : 1}`, `-c${c}`, `-d${seconds}s`, '--latency', '-s', join(ROOT, 'bench/post.lua'), `http://127.0.0.1:${port}/v2/models/${model}/infer`];
const wrkEnv = (model) => ({ ...process.env, BODY_FILE: bodies[model].file, HEADER_LEN: bodies[model].headerLen });
function parseWrk(out) {
  const ms = (m) => (m ? Number(m[1]) * ({ us: 1e-3, ms: 1, s: 1000 }[m[2]]) : NaN);
  return { rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]), p50: ms(/\s50%\s+([\d.]+)(us|ms|s)/.exec(out)), p99: ms(/\s99%\s+([\d.]+)(us|ms|s)/.exec(out)), non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0) };
}
function wrk(cpus, port, model, c, seconds) {
  return parseWrk(execFileSync(...taskset(cpus, wrkArgs(port, model, c, seconds)), { env: wrkEnv(model), encoding: 'utf8' }));
}
const measure = (cpus, port, model, c) => { wrk(cpus, port, model, c, 2); return wrk(cpus, port, model, c, SECONDS); };
/** One wrk per port, all at once (all on `cpus`), the c connections split between them. */
async function wrkAll(cpus, ports, model, c, seconds) {
  const runs = ports.map((port, i) => {
    const ci = Math.floor(c / ports.length) + (i < c % ports.length ? 1 : 0);
    const p = spawn(...taskset(cpus, wrkArgs(port, model, ci, seconds)), { env: wrkEnv(model), stdio: ['ignore', 'pipe', 'pipe'] });
    procs.push(p);
    let out = '', err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    return new Promise((res, rej) => p.once('close', (code) => (code === 0 ? res(parseWrk(out)) : rej(new Error(`wrk on port ${port} exited ${code}: ${err}${out}`)))));
  });
  const rs = await Promise.all(runs);
  return { rps: rs.reduce((s, r) => s + r.rps, 0), p50: Math.max(...rs.map((r) => r.p50)), p99: Math.max(...rs.map((r) => r.p99)), non2xx: rs.reduce((s, r) => s + r.non2xx, 0) };
}
const measureAll = async (cpus, ports, model, c) => { await wrkAll(cpus, ports, model, c, 2); return wrkAll(cpus, ports, model, c, SECONDS); };
/** Redis's per-command call counts (INFO commandstats), read over a plain socket. */
function redisCalls(port) {
  return new Promise((res, rej) => {
    const sock = connect(port, '127.0.0.1', () => sock.write('INFO commandstats\r\n'));
    let out = '';
    sock.setEncoding('latin1');
    sock.on('data', (d) => {
      out += d;
      const m = /^\$(\d+)\r\n/.exec(out);
      if (m && out.length >= m[0].length + Number(m[1]) + 2) {
        sock.end();
        res(Object.fromEntries([...out.matchAll(/cmdstat_(\w+):calls=(\d+)/g)].map((x) => [x[1], Number(x[2])])));
      }
    });
    sock.on('error', rej);
  });
}
/** CPU time a process has used, all its threads (ns), from /proc; 0 where /proc has none. */
function cpuNs(pid) {
  try {
    let ns = 0;
    for (const t of readdirSync(`/proc/${pid}/task`)) ns += Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'utf8').split(' ')[0]);
    return ns;
  } catch { return 0; }
}
const redisArgs = (port) => ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
const FETCH_ARGS = args['tensor-fetch-min-bytes'] === undefined ? [] : ['--tensor-fetch-min-bytes', args['tensor-fetch-min-bytes']];
const gatewayArgs = (url, port) => ['gateway', '--metrics-port', '0', '--redis', url, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', ...FETCH_ARGS];
const startWorker = (cpus, url, id) => start(cpus, BIN, ['worker', '--metrics-port', '0', '--redis', url, '--model-repository', repo, '--worker-id', id, '--log-info=false'], /\+\n[\s\S]*\+\n/);
const rows = [];
try {
  // Embedded.
  if (COMPARE) {
    const port = await freePort();
    const p = await start(EMBEDDED.server, BIN, ['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--log-info=false'], /READY[\s\S]*\+\n/);
    await sleep(500);
    for (const model of ['simple', 'ppocr_cls']) for (const c of [1, 16]) rows.push({ mode: 'embedded', model, c, ...measure(EMBEDDED.load, port, model, c) });
    await stop(p);
  }
  // Cluster: redis + gateway + 1 worker.
  if (COMPARE) {
    const redisPort = await freePort();
    const redis = await start(CLUSTER.redis, 'redis-server', redisArgs(redisPort), /Ready to accept/);
    const url = `redis://127.0.0.1:${redisPort}`;
    const gwPort = await freePort();
    const gw = await start(CLUSTER.gateways[0], BIN, gatewayArgs(url, gwPort), /Started HTTPService/);
    const worker = await startWorker(COMPARE_WORKER, url, 'w0');
    await sleep(1500);
    for (const model of ['simple', 'ppocr_cls']) for (const c of [1, 16]) rows.push({ mode: 'cluster (1 worker)', model, c, ...measure(CLUSTER.load, gwPort, model, c) });
    await stop(worker);
    await stop(gw);
    await stop(redis);
  }
  // The gateway frontend floor: on the first gateway's cpus, loaded as the one-gateway scale-out rows.
  let floor;
  {
    const port = await freePort();
    const p = await start(CLUSTER.gateways[0], process.execPath, [join(ROOT, 'bench/floor-server.mjs'), String(port)], /floor server on/);
    floor = await measureAll(CLUSTER.load, [port], SCALE.name, SCALE_C);
    await stop(p);
  }
  // Scale-out: for each gateway count, a fresh redis, the gateways, and workers added as n grows.
  const scale = [];
  for (const g of GATEWAYS) {
    const redisPort = await freePort();
    const redis = await start(CLUSTER.redis, 'redis-server', redisArgs(redisPort), /Ready to accept/);
    const url = `redis://127.0.0.1:${redisPort}`;
    const gwPorts = [];
    const gws = [];
    for (let i = 0; i < g; i++) {
      gwPorts.push(await freePort());
      gws.push(await start(CLUSTER.gateways[i], BIN, gatewayArgs(url, gwPorts[i]), /Started HTTPService/));
    }
    const workers = [];
    for (const n of WORKERS) {
      while (workers.length < n) workers.push(await startWorker(CLUSTER.workers[workers.length], url, `w${workers.length}`));
      await sleep(2000);
      await wrkAll(CLUSTER.load, gwPorts, SCALE.name, SCALE_C, 2);
      const before = await redisCalls(redisPort);
      const cpu0 = [redis, ...gws, ...workers].map((p) => cpuNs(p.pid));
      const t0 = process.hrtime.bigint();
      const r = await wrkAll(CLUSTER.load, gwPorts, SCALE.name, SCALE_C, SECONDS);
      const wall = Number(process.hrtime.bigint() - t0);
      const busy = [redis, ...gws, ...workers].map((p, i) => (cpuNs(p.pid) - cpu0[i]) / wall);
      const after = await redisCalls(redisPort);
      // Redis commands a request over the measured window (wrk's count: req/s x seconds).
      const perReq = (cmd) => ((after[cmd] ?? 0) - (before[cmd] ?? 0)) / (r.rps * SECONDS);
      scale.push({ gateways: g, workers: n, ...r, xreadgroup: perReq('xreadgroup'), xadd: perReq('xadd'), xack: perReq('xack'),
        // Cores each role kept busy over the window: Redis, the busiest gateway, the mean worker.
        busy: { redis: busy[0], gateway: Math.max(...busy.slice(1, 1 + g)), worker: busy.slice(1 + g).reduce((a, b) => a + b, 0) / n } });
    }
    for (const w of workers) await stop(w);
    for (const gw of gws) await stop(gw);
    await stop(redis);
  }

  if (COMPARE) {
    console.log('| mode | model | c | req/s | p50 ms | p99 ms | errors |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(`| ${r.mode} | ${r.model} | ${r.c} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(3)} | ${r.p99.toFixed(3)} | ${r.non2xx} |`);
    const get = (mode, model, c) => rows.find((r) => r.mode.startsWith(mode) && r.model === model && r.c === c);
    console.log(`\nppocr_cls c=16: cluster ${(get('cluster', 'ppocr_cls', 16).rps / get('embedded', 'ppocr_cls', 16).rps).toFixed(2)}x embedded (target >= 0.7); added p50 at c=1: simple ${(get('cluster', 'simple', 1).p50 - get('embedded', 'simple', 1).p50).toFixed(3)} ms, ppocr_cls ${(get('cluster', 'ppocr_cls', 1).p50 - get('embedded', 'ppocr_cls', 1).p50).toFixed(3)} ms (target <= 0.5)\n`);
  }

  // x linear against the 1-gateway 1-worker rate (or, without that row, the first row's rate per worker).
  const base = scale.find((s) => s.gateways === 1 && s.workers === 1);
  const perWorker = base ? base.rps : scale[0].rps / scale[0].workers;
  const baseNote = base ? '1 gateway, 1 worker' : `${scale[0].gateways} gateway(s), ${scale[0].workers} workers / ${scale[0].workers}: no 1-gateway 1-worker row`;
  const sleepy = SCALE_MODEL === 'sleepy';
  console.log(`Scale-out: ${SCALE.name} (${SCALE.instances}${sleepy ? '; 20 ms per batch of 8, ideal 400/s per worker' : ''}), c=${SCALE_C} split between the gateways (one wrk each); x linear = req/s / (n x ${perWorker.toFixed(0)} req/s, ${baseNote})`);
  console.log(`| gateways | workers | req/s | p50 ms | p99 ms | non-2xx | x linear |${sleepy ? ' x ideal (400/s per worker) |' : ''} Redis XREADGROUP / XADD / XACK a request | cores busy: Redis / busiest gateway / mean worker |`);
  console.log(`|---|---|---|---|---|---|---|${sleepy ? '---|' : ''}---|---|`);
  for (const s of scale) console.log(`| ${s.gateways} | ${s.workers} | ${s.rps.toFixed(0)} | ${s.p50.toFixed(3)} | ${s.p99.toFixed(3)} | ${s.non2xx} | ${(s.rps / (perWorker * s.workers)).toFixed(2)} |${sleepy ? ` ${(s.rps / (400 * s.workers)).toFixed(2)} |` : ''} ${s.xreadgroup.toFixed(2)} / ${s.xadd.toFixed(2)} / ${s.xack.toFixed(2)} | ${s.busy.redis.toFixed(2)} / ${s.busy.gateway.toFixed(2)} / ${s.busy.worker.toFixed(2)} |`);
  console.log(`\nGateway frontend floor (bench/floor-server.mjs ${CLUSTER.gateways[0] ? `on cpu ${CLUSTER.gateways[0]}` : 'unpinned'}, c=${SCALE_C}, ${SCALE.name}'s body): ${floor.rps.toFixed(0)} req/s, p50 ${floor.p50.toFixed(3)} ms, p99 ${floor.p99.toFixed(3)} ms, non-2xx ${floor.non2xx}`);
  const oneGw = scale.filter((s) => s.gateways === 1);
  if (oneGw.length) {
    const best = oneGw.reduce((a, b) => (b.rps > a.rps ? b : a));
    console.log(`one gateway: ${best.rps.toFixed(0)} req/s (${best.workers} worker${best.workers > 1 ? 's' : ''}) = ${(best.rps / floor.rps).toFixed(2)}x its frontend floor (target >= 0.8)`);
  } else console.log('one gateway: no 1-gateway rows (--gateways has no 1)');
  const eight = scale.filter((s) => s.workers === 8);
  if (eight.length) console.log(`8 workers: ${eight.map((s) => `${(s.rps / (perWorker * 8)).toFixed(2)}x linear with ${s.gateways} gateway${s.gateways > 1 ? 's' : ''}`).join(', ')} (target >= 0.9)`);
} finally {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
}
