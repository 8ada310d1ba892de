// What the wrk-driven benches share (bench/http.mjs, bench/cls-raw.mjs): free ports, servers
// started under taskset and stopped by PID, wrk runs parsed, and a process's CPU and context
// switches read from /proc (exact per thread, no profiler in the way).
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { taskset } from './pinning.mjs';

export const freePort = () => new Promise((res) => { const s = createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => res(p)); }); });

const children = new Set();
process.on('exit', () => { for (const c of children) if (c.exitCode === null) try { process.kill(c.pid, 'SIGKILL'); } catch { /* gone */ } });

/** Starts `argv` on `cpus` ('' = unpinned) in `cwd`; resolves once its output matches `ready`. */
export async function start(cpus, argv, ready, cwd) {
  const [cmd, rest] = taskset(cpus, argv);
  const p = spawn(cmd, rest, { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(p);
  let out = '';
  await new Promise((res, rej) => {
    const on = (d) => { out += d; if (ready.test(out)) res(); };
    p.stdout.on('data', on);
    p.stderr.on('data', on);
    p.once('error', rej);
    p.once('exit', (code) => rej(new Error(`${argv.join(' ')} exited ${code}: ${out}`)));
  });
  p.removeAllListeners('exit');
  p.stdout.removeAllListeners('data').resume();
  p.stderr.removeAllListeners('data').resume();
  return p;
}

/** SIGTERM, then SIGKILL after 15 s. */
export async function stop(p) {
  if (p.exitCode !== null) return;
  const done = new Promise((r) => p.once('exit', r));
  process.kill(p.pid, 'SIGTERM');
  const t = setTimeout(() => process.kill(p.pid, 'SIGKILL'), 15000);
  await done;
  clearTimeout(t);
  children.delete(p);
}

/**
 * CPU (ns, from schedstat) and context switches (voluntary + involuntary) of a process: the main
 * thread's and all threads' together. Differences of two readings over a wrk window, divided by the
 * requests, are the per-request figures.
 */
export function threadStats(pid) {
  let cpuNs = 0, switches = 0, mainCpuNs = 0, mainSwitches = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let ns, sw;
    try {
      ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
      sw = Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0) + Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? 0);
    } catch { continue; } // a thread that ended between the listing and the read
    cpuNs += ns; switches += sw;
    if (tid === String(pid)) { mainCpuNs = ns; mainSwitches = sw; }
  }
  return { cpuNs, switches, mainCpuNs, mainSwitches };
}

/** Per-request figures between two threadStats readings. */
export function perRequest(a, b, requests) {
  return {
    cpuUsPerRequest: +((b.cpuNs - a.cpuNs) / requests / 1000).toFixed(1),
    mainCpuUsPerRequest: +((b.mainCpuNs - a.mainCpuNs) / requests / 1000).toFixed(1),
    switchesPerRequest: +((b.switches - a.switches) / requests).toFixed(2),
    mainSwitchesPerRequest: +((b.mainSwitches - a.mainSwitches) / requests).toFixed(2),
  };
}

const toMs = (v, unit) => Number(v) * ({ us: 1e-3, ms: 1, s: 1000, m: 60000 }[unit] ?? 1);

/** One section of /proc/net/netstat or /proc/net/snmp (a names line, then a values line) as a lookup. */
function procSection(file, prefix) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const i = lines.findIndex((l) => l.startsWith(prefix));
  const names = lines[i].split(/\s+/).slice(1);
  const values = lines[i + 1].split(/\s+/).slice(1).map(Number);
  return (n) => values[names.indexOf(n)] ?? 0;
}

/**
 * The kernel's TCP counters that explain a stalled request (TcpExt in /proc/net/netstat, Tcp in
 * /proc/net/snmp); {} without them. A SYN that waits is 1 s; a lost segment waits for a
 * retransmission timeout (200 ms or more: tcpTimeouts) or a tail-loss probe (lossProbes).
 */
function tcpCounters() {
  try {
    const ext = procSection('/proc/net/netstat', 'TcpExt:');
    const tcp = procSection('/proc/net/snmp', 'Tcp:');
    return {
      listenOverflows: ext('ListenOverflows'), listenDrops: ext('ListenDrops'), synRetrans: ext('TCPSynRetrans'),
      tcpTimeouts: ext('TCPTimeouts'), lossProbes: ext('TCPLossProbes'), retransSegs: tcp('RetransSegs'),
    };
  } catch { return {}; }
}

/** One wrk run on `cpus` with `threads` threads, POSTing `body` ({ file, headerLen }) through bench/post.lua. */
export function wrk({ cpus, threads, url, body, c, seconds, root }) {
  const argv = ['wrk', '-t', String(Math.max(1, Math.min(threads, c))), '-c', String(c), '-d', `${seconds}s`, '--latency', '-s', join(root, 'bench', 'post.lua'), url];
  const [cmd, rest] = taskset(cpus, argv);
  const tcp0 = tcpCounters();
  const out = execFileSync(cmd, rest, { env: { ...process.env, BODY_FILE: body.file, HEADER_LEN: body.headerLen }, encoding: 'utf8', maxBuffer: 1 << 24 });
  const pct = (p) => { const m = new RegExp(`\\s${p}%\\s+([\\d.]+)(us|ms|s|m)`).exec(out); return m ? toMs(m[1], m[2]) : NaN; };
  return {
    rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? NaN), p50: pct(50), p99: pct(99),
    non2xx: Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0),
    requests: Number(/(\d+) requests in/.exec(out)?.[1] ?? NaN),
    socketErrors: /Socket errors: (.*)/.exec(out)?.[1] ?? '',
    // Where a tail comes from: the slowest request, and the kernel's listen-queue overflows, SYN
    // retransmissions (a connection whose SYN waits 1 s shows as a 1 s request) and segment
    // retransmissions during the run, machine-wide (on a loopback-only run, the benchmark's).
    p90: pct(90), maxMs: (() => { const m = /Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s|m)/.exec(out); return m ? toMs(m[1], m[2]) : NaN; })(),
    ...Object.fromEntries(Object.entries(tcpCounters()).map(([k, v]) => [k, v - (tcp0[k] ?? 0)])),
  };
}

export const median = (xs) => { const s = xs.filter(Number.isFinite).sort((a, b) => a - b); return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN; };

/** A number for a markdown table: '-' when not finite. */
export const fmt = (x, d = 0) => (Number.isFinite(x) ? x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }) : '-');
