/** Test helper: start `triode` as a child process on free ports and stop it by PID. */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import { ROOT } from './repository.js';

export const TRIODE_BIN = join(ROOT, 'packages', 'cli', 'bin', 'triode.js');

/** The lowest port the kernel hands out for outgoing connections and `listen(0)` (Linux; 32768 elsewhere). */
function ephemeralLow(): number {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : 32768;
  } catch {
    return 32768;
  }
}

/** Whether a listener can take `port` on every address now (0.0.0.0 conflicts with any bound to it). */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
  });
}

/** A port the OS picks from its ephemeral range, free a moment ago. */
function osPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** Below the ephemeral range, from here up. */
const LOWEST_PORT = 10_000;

/**
 * A port that was free a moment ago, taken at random below the kernel's ephemeral range: a port
 * the OS picks from that range may be taken, before the test's server listens on it, as the local
 * port of any outgoing connection (a full CI run failed so: a README-example gateway started
 * seconds after its port was chosen got EADDRINUSE). Where that range starts too low to leave
 * room, the OS picks.
 */
export async function freePort(): Promise<number> {
  const high = ephemeralLow();
  if (high - LOWEST_PORT >= 1000) {
    for (let i = 0; i < 50; i++) {
      const port = LOWEST_PORT + Math.floor(Math.random() * (high - LOWEST_PORT));
      if (await canListen(port)) return port;
    }
  }
  return osPort();
}

/** A `triode` child process. */
export interface Child {
  proc: ChildProcess;
  /** Everything it wrote to stderr and stdout so far. */
  output(): string;
  /** Resolves with the exit code once it has exited. */
  exited: Promise<number | null>;
  /** SIGTERM (by PID), then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<number | null>;
}

/**
 * Spawns `triode <args>` and waits until its output matches `ready` (default: the HTTP service line).
 * @param env variables added to this process's environment for the child
 */
export async function startTriode(args: string[], ready: RegExp = /Started HTTPService at/, timeoutMs = 60_000, env: Record<string, string> = {}): Promise<Child> {
  const proc = spawn(process.execPath, [TRIODE_BIN, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  const exited = new Promise<number | null>((resolve) => proc.once('exit', (code) => resolve(code)));
  const child: Child = {
    proc,
    output: () => out,
    exited,
    stop: async (graceMs = 10_000) => {
      if (proc.exitCode !== null || proc.signalCode !== null) return proc.exitCode;
      process.kill(proc.pid!, 'SIGTERM');
      const t = setTimeout(() => { if (proc.exitCode === null) process.kill(proc.pid!, 'SIGKILL'); }, graceMs);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => { void child.stop(0); reject(new Error(`triode did not start in ${timeoutMs} ms:\n${out}`)); }, timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (ready.test(out)) { clearTimeout(timer); resolve(); }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`triode exited with ${code} before it was ready:\n${out}`)); });
  });
  return child;
}

/** Polls `f` every 100 ms until it resolves true (a rejection counts as false); throws after `ms`. */
export async function until(f: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('condition not met in time');
}

/**
 * Sends `pieces` on a raw TCP connection to 127.0.0.1:`port` and resolves with everything that
 * came back (latin1) once the server closes, the socket fails, or `timeoutMs` pass.
 * @param end close our side after writing (false: leave it open, e.g. to see an answer that must
 *   not wait for a body that never comes)
 */
export function rawExchange(port: number, pieces: readonly (string | Buffer)[], { timeoutMs = 5000, end = false } = {}): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    const done = () => { s.destroy(); resolve(out); };
    s.on('data', (d: Buffer) => { out += d.toString('latin1'); });
    s.on('error', done);
    s.on('close', done);
    s.setTimeout(timeoutMs, done);
    for (const p of pieces) s.write(p);
    if (end) s.end();
  });
}
