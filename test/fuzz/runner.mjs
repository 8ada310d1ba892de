// The fuzz runner: generates cases from a seed, sends them in batches to a `triode serve` child (or
// a server already running), checks after each batch that the server is alive, classifies what came
// back, samples its RSS, and on a crash finds the case that caused it by replaying the batch one
// case at a time on a fresh server. Used by test/fuzz.e2e.test.ts and bench/fuzz.mjs.
/* global AbortSignal */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Rng } from './prng.mjs';
import { ESCAPE_MARK } from './hostile.mjs';
import { httpCase } from './http-cases.mjs';
import { grpcCase } from './grpc-cases.mjs';
import { exchange, idleExchange } from './http-exec.mjs';
import { grpcExchange } from './grpc-exec.mjs';
import { classify, messageOf, statusKey } from './classify.mjs';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BIN = join(ROOT, 'packages', 'cli', 'bin', 'triode.js');
const EXAMPLES = ['simple', 'simple_string', 'simple_identity', 'ppocr_cls'];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Case `index` of run `seed` ("all": each case picks its protocol from its own stream). */
export function makeCase(seed, index, protocol) {
  const rng = Rng.forCase(seed, index, protocol);
  const p = protocol === 'all' ? (rng.chance(0.5) ? 'http' : 'grpc') : protocol;
  const tag = `${seed}-${index}`;
  try {
    return { index, ...(p === 'http' ? httpCase(rng, tag) : grpcCase(rng, tag)) };
  } catch (err) {
    // A bug of the fuzzer itself: shown as a client error, never as the server's failure.
    return { index, protocol: p, family: 'generator-error', desc: `the case generator threw: ${err?.stack ?? err}`, kind: 'skip' };
  }
}

/** The command line that replays case `index` alone. */
export function replayLine(seed, protocol, index) {
  return `node bench/fuzz.mjs --seed ${seed} --protocol ${protocol} --case ${index}`;
}

/** The bytes a case sends (a storm: every call's body, one after the other). */
export function requestBytes(c) {
  if (c.kind === 'storm') return Buffer.concat(c.calls.map((k) => k.body));
  return Buffer.concat([c.bytes ?? Buffer.alloc(0), c.body ?? Buffer.alloc(0)]);
}

/** The request of a case as text for echo checks: its bytes, plus its request line URL-decoded. */
export function requestText(c) {
  const raw = requestBytes(c);
  // A URL carries names percent-encoded: the server echoes them decoded.
  const line = raw.subarray(0, Math.max(0, raw.indexOf('\r\n'))).toString('latin1');
  const decoded = Buffer.from(line.replace(/%([0-9A-Fa-f]{2})/g, (_m, h) => String.fromCharCode(parseInt(h, 16))), 'latin1').toString('utf8');
  return `${raw.toString('utf8')}\n${decoded}`;
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); });
  });
}

function rssKb(pid) {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** A model repository for the fuzzer: the examples plus "victim", a copy of simple that load cases override. */
export function makeRepository() {
  const repo = mkdtempSync(join(tmpdir(), 'triode-fuzz-repo-'));
  for (const m of EXAMPLES) cpSync(join(ROOT, 'model_repository', m), join(repo, m), { recursive: true });
  cpSync(join(ROOT, 'model_repository', 'simple'), join(repo, 'victim'), { recursive: true });
  writeFileSync(join(repo, 'victim', 'config.pbtxt'), readFileSync(join(repo, 'victim', 'config.pbtxt'), 'utf8').replace('name: "simple"', 'name: "victim"'));
  return repo;
}

/** Starts `triode serve` on free ports (explicit model control, everything loaded) and waits until ready. */
async function startServer(repo) {
  const httpPort = await freePort();
  const grpcPort = await freePort();
  const proc = spawn(process.execPath, [BIN, 'serve', '--model-repository', repo, '--model-control-mode', 'explicit', '--load-model', '*',
    '--http-port', String(httpPort), '--http-address', '127.0.0.1', '--grpc-port', String(grpcPort), '--grpc-address', '127.0.0.1',
    '--http-max-input-size', String(4 * 1024 * 1024), '--allow-metrics=false', '--exit-timeout-secs', '0'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const keep = (d) => { out = (out + d.toString()).slice(-20000); };
  proc.stdout.on('data', keep);
  proc.stderr.on('data', keep);
  const exited = new Promise((resolve) => proc.once('exit', (code, signal) => resolve(signal ?? code)));
  // Never leave a server behind, whatever ends this process.
  const reap = () => { if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL'); };
  process.on('exit', reap);
  void exited.then(() => process.off('exit', reap));
  const server = { proc, pid: proc.pid, httpPort, grpcPort, exited, output: () => out, own: true, repo };
  const end = Date.now() + 120_000;
  while (Date.now() < end) {
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`triode exited before it was ready:\n${out}`);
    const r = await fetch(`http://127.0.0.1:${httpPort}/v2/health/ready`, { signal: AbortSignal.timeout(1000) }).catch(() => undefined);
    if (r?.ok && /Started GRPCInferenceService/.test(out)) return server;
    await sleep(200);
  }
  await stopServer(server);
  throw new Error(`triode was not ready in 120 s:\n${out}`);
}

async function stopServer(server) {
  if (!server.own || server.proc.exitCode !== null || server.proc.signalCode !== null) return;
  process.kill(server.pid, 'SIGTERM');
  const t = setTimeout(() => { if (server.proc.exitCode === null) process.kill(server.pid, 'SIGKILL'); }, 5000);
  await server.exited;
  clearTimeout(t);
}

function exitedOf(server) {
  return server.own && (server.proc.exitCode !== null || server.proc.signalCode !== null);
}

/** 'ok', 'slow' (answered within 5 s but not 1 s), 'dead' (process exited) or 'hung'. */
async function liveness(server) {
  for (const ms of [1000, 5000]) {
    if (exitedOf(server)) return 'dead';
    const r = await fetch(`http://127.0.0.1:${server.httpPort}/v2/health/live`, { signal: AbortSignal.timeout(ms) }).catch(() => undefined);
    if (r?.status === 200) return ms === 1000 ? 'ok' : 'slow';
    // A process that is exiting may still hold its port a moment.
    await sleep(100);
  }
  return exitedOf(server) ? 'dead' : 'hung';
}

async function runCase(server, c, hangMs) {
  if (c.kind === 'skip') return { outcomes: [{ clientError: c.desc }], ms: 0 };
  // Each exchange has its own hang bound; this watchdog only keeps a fuzzer bug from stalling a run.
  let watchdog;
  const stalled = new Promise((resolve) => { watchdog = setTimeout(() => resolve({ outcomes: [{ clientError: 'the case did not finish (fuzzer watchdog)' }], ms: hangMs * 2 }), hangMs * 2); });
  try {
    return await Promise.race([exec(server, c, hangMs), stalled]);
  } finally {
    clearTimeout(watchdog);
  }
}

async function exec(server, c, hangMs) {
  try {
    if (c.protocol === 'http') {
      const o = c.kind === 'idle' ? await idleExchange(server.httpPort, c, hangMs) : await exchange(server.httpPort, c, hangMs);
      return { outcomes: [o], ms: o.ms };
    }
    return await grpcExchange(server.grpcPort, c, hangMs);
  } catch (err) {
    return { outcomes: [{ clientError: String(err?.message ?? err) }], ms: 0 };
  }
}

/** Files and folders named with the escape mark in the places an escaping path could reach. */
function escapeFiles(repo) {
  const dirs = [...new Set([tmpdir(), '/tmp', ROOT, dirname(ROOT), '/', homedir(), dirname(repo)])];
  const found = [];
  for (const d of dirs) {
    let names = [];
    try { names = readdirSync(d); } catch { /* unreadable */ }
    for (const n of names) if (n.includes(ESCAPE_MARK)) found.push(join(d, n));
  }
  return found;
}

/**
 * Runs a fuzz session. Options: seed, protocol ('http' | 'grpc' | 'all'), cases (a fixed count) or
 * minutes (a budget), batch (cases sent at once, default 16), hangMs (default 10000), only (case
 * indexes to run instead), httpPort/grpcPort (a running server: no restarts, no RSS), log (progress),
 * traceCases (log every case and what it got).
 * Resolves with the summary (see formatSummary).
 */
export async function runFuzz(options) {
  const { seed = 1, protocol = 'all', batch = 16, hangMs = 10_000, log = () => {}, maxCrashes = 5 } = options;
  const external = options.httpPort !== undefined;
  const repo = external ? '' : makeRepository();
  const removeRepo = () => { if (repo) rmSync(repo, { recursive: true, force: true }); };
  process.on('exit', removeRepo);
  const secrets = [repo, ROOT, join(ROOT, 'node_modules')].filter(Boolean);
  const baselineEscapes = new Set(escapeFiles(repo || tmpdir()));
  const start = Date.now();
  const deadline = options.minutes !== undefined ? start + options.minutes * 60_000 : Infinity;
  const summary = { seed, protocol, cases: 0, byStatus: {}, byFamily: {}, byFamilyStatus: {}, crashes: [], hangs: [], unexplained: [], explained: [], leaks: [], drops: [], escapes: [], slowLiveness: 0, rss: { startKb: 0, maxKb: 0, endKb: 0 }, restarts: 0, durationMs: 0 };
  const record = (list, c, detail) => list.push({ index: c.index, protocol: c.protocol, family: c.family, desc: c.desc, detail, replay: replayLine(seed, protocol, c.index) });
  let server = external
    ? { httpPort: options.httpPort, grpcPort: options.grpcPort ?? 8001, own: false, pid: options.pid, output: () => '' }
    : await startServer(repo);
  const sampleRss = () => {
    const kb = server.pid ? rssKb(server.pid) : 0;
    if (kb) summary.rss.maxKb = Math.max(summary.rss.maxKb, kb);
    return kb;
  };
  summary.rss.startKb = sampleRss();
  const indexes = options.only ?? [];
  let next = 0;
  const more = () => (options.only ? next < indexes.length : options.cases !== undefined ? next < options.cases : Date.now() < deadline);
  try {
    while (more()) {
      const cases = [];
      while (cases.length < batch && more()) cases.push(makeCase(seed, options.only ? indexes[next++] : next++, protocol));
      const results = await Promise.all(cases.map((c) => runCase(server, c, hangMs)));
      const state = await liveness(server);
      const findings = [];
      for (let i = 0; i < cases.length; i++) {
        const c = cases[i];
        summary.cases++;
        summary.byFamily[`${c.protocol} ${c.family}`] = (summary.byFamily[`${c.protocol} ${c.family}`] ?? 0) + 1;
        const text = requestText(c);
        for (const o of results[i].outcomes) {
          const key = statusKey(c.protocol, o);
          summary.byStatus[key] = (summary.byStatus[key] ?? 0) + 1;
          const fam = (summary.byFamilyStatus[`${c.protocol} ${c.family}`] ??= {});
          fam[key] = (fam[key] ?? 0) + 1;
          if (o.streamErrors?.length) summary.byStatus['grpc in-stream error'] = (summary.byStatus['grpc in-stream error'] ?? 0) + o.streamErrors.length;
          for (const f of classify(c, o, text, secrets)) findings.push([c, f]);
          if (options.traceCases) log(`case ${c.index} (${c.protocol} ${c.family}) ${c.desc}\n  -> ${key}${messageOf(o) ? `: ${JSON.stringify(messageOf(o).slice(0, 400))}` : ''}${o.streamErrors?.length ? `; in-stream errors: ${JSON.stringify(o.streamErrors.map((m) => m.slice(0, 200)))}` : ''}`);
        }
      }
      if (state === 'slow') summary.slowLiveness++;
      if (state === 'ok' || state === 'slow') {
        for (const [c, f] of findings) record({ hang: summary.hangs, 'unexplained-5xx': summary.unexplained, 'explained-5xx': summary.explained, leak: summary.leaks, drop: summary.drops }[f.type], c, f.detail);
      } else {
        // The server died or stopped answering: what the other cases saw is collateral. Keep 5xx
        // and leaks; find the culprit by replaying the batch one case at a time.
        for (const [c, f] of findings) if (f.type === 'leak' || f.type === 'unexplained-5xx') record(f.type === 'leak' ? summary.leaks : summary.unexplained, c, f.detail);
        const tail = server.output().slice(-1500);
        log(`server ${state} after cases ${cases[0].index}..${cases[cases.length - 1].index}`);
        if (!server.own) {
          record(summary.crashes, cases[0], `server ${state} after the batch of cases ${cases[0].index}..${cases[cases.length - 1].index} (external server: not bisected)`);
          break;
        }
        await stopServer(server);
        server = await startServer(repo);
        summary.restarts++;
        let culprit = false;
        for (const c of cases) {
          await runCase(server, c, hangMs);
          const s = await liveness(server);
          if (s === 'dead' || s === 'hung') {
            culprit = true;
            record(s === 'dead' ? summary.crashes : summary.hangs, c, `server ${s === 'dead' ? `exited (${server.proc.exitCode ?? server.proc.signalCode})` : 'stopped answering /v2/health/live'}; server output:\n${server.output().slice(-1500)}`);
            await stopServer(server);
            server = await startServer(repo);
            summary.restarts++;
          }
        }
        if (!culprit) {
          record(state === 'dead' ? summary.crashes : summary.hangs, cases[0], `server ${state} after the batch of cases ${cases[0].index}..${cases[cases.length - 1].index}; no single case reproduces it; server output:\n${tail}`);
          summary[state === 'dead' ? 'crashes' : 'hangs'].at(-1).replay = `node bench/fuzz.mjs --seed ${seed} --protocol ${protocol} --from ${cases[0].index} --cases ${cases.length}`;
        }
        if (summary.crashes.length + summary.hangs.length >= maxCrashes) { log('too many crashes/hangs: stopping'); break; }
      }
      const rss = sampleRss();
      if (summary.cases % (batch * 20) < batch) log(`${summary.cases} cases, ${Math.round((Date.now() - start) / 1000)} s, RSS ${Math.round(rss / 1024)} MiB (max ${Math.round(summary.rss.maxKb / 1024)} MiB)`);
    }
    summary.rss.endKb = sampleRss();
  } finally {
    if (server.own) await stopServer(server);
    removeRepo();
    process.off('exit', removeRepo);
  }
  for (const f of escapeFiles(repo || tmpdir())) {
    if (baselineEscapes.has(f)) continue;
    const m = new RegExp(`${ESCAPE_MARK}-(\\d+)-(\\d+)`).exec(f);
    const c = m ? makeCase(seed, Number(m[2]), protocol) : { index: -1, protocol, family: '?', desc: '?' };
    record(summary.escapes, c, `a request created ${f} (outside the repository)`);
    if (existsSync(f)) rmSync(f, { recursive: true, force: true });
  }
  summary.durationMs = Date.now() - start;
  summary.failures = [...summary.crashes, ...summary.hangs, ...summary.unexplained, ...summary.leaks, ...summary.escapes];
  return summary;
}

/** The summary as text: a table of counts (`verbose`: also by family), then each distinct finding with its replay line. */
export function formatSummary(s, verbose = false) {
  const mib = (kb) => `${(kb / 1024).toFixed(0)} MiB`;
  const rows = [
    ['seed', String(s.seed)], ['protocol', s.protocol], ['cases', String(s.cases)], ['duration', `${(s.durationMs / 1000).toFixed(1)} s`],
    ['crashes', String(s.crashes.length)], ['hangs', String(s.hangs.length)], ['unexplained 5xx', String(s.unexplained.length)], ['5xx with a cause', String(s.explained.length)],
    ['leaks', String(s.leaks.length)], ['escapes (files outside the repository)', String(s.escapes.length)], ['drops (closed without an answer)', String(s.drops.length)],
    ['slow liveness (> 1 s)', String(s.slowLiveness)], ['server restarts', String(s.restarts)],
    ['RSS start / max / end', s.rss.startKb ? `${mib(s.rss.startKb)} / ${mib(s.rss.maxKb)} / ${mib(s.rss.endKb)}` : 'n/a (external server)'],
  ];
  const w = Math.max(...rows.map((r) => r[0].length));
  let out = `| ${'what'.padEnd(w)} | value |\n|${'-'.repeat(w + 2)}|-------|\n${rows.map(([k, v]) => `| ${k.padEnd(w)} | ${v} |`).join('\n')}\n`;
  const statuses = Object.entries(s.byStatus).sort((a, b) => a[0].localeCompare(b[0]));
  out += `\nby status: ${statuses.map(([k, v]) => `${k}: ${v}`).join(', ')}\n`;
  if (verbose) {
    out += '\nby family:\n';
    for (const [f, st] of Object.entries(s.byFamilyStatus).sort((a, b) => a[0].localeCompare(b[0]))) {
      out += `  ${f} (${s.byFamily[f]} cases): ${Object.entries(st).map(([k, v]) => `${k.replace(/^(http|grpc) /, '')}: ${v}`).join(', ')}\n`;
    }
  }
  for (const [name, list] of [['crashes', s.crashes], ['hangs', s.hangs], ['unexplained 5xx', s.unexplained], ['leaks', s.leaks], ['escapes', s.escapes], ['drops', s.drops], ['5xx with a cause (not failures)', s.explained]]) {
    if (!list.length) continue;
    out += `\n${name} (${list.length}):\n`;
    // One line per distinct failure: same family and same detail (numbers blanked) counted together.
    const groups = new Map();
    for (const f of list) {
      const key = `${f.protocol} ${f.family}: ${f.detail.split('\n')[0].replace(/\\?'[^']*'|\\"[^"]*\\"/g, 'Q').replace(/\d+/g, 'N').slice(0, 160)}`;
      if (!groups.has(key)) groups.set(key, { first: f, n: 0 });
      groups.get(key).n++;
    }
    for (const { first, n } of groups.values()) {
      out += `- [${n}x] case ${first.index} (${first.protocol} ${first.family}) ${first.desc}\n    ${first.detail.replace(/\n/g, '\n    ')}\n    replay: ${first.replay}\n`;
    }
  }
  return out;
}
