/** Test helper: a redis-server of the test's own on a free port, stopped by PID. */
import { spawn, type ChildProcess } from 'node:child_process';
import { freePort } from './process.js';

/** A running redis-server. */
export interface RedisHandle {
  port: number;
  url: string;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts redis-server (no persistence) on `port` or a free one; resolves once it accepts connections.
 * @param extraArgs more redis-server arguments (e.g. `--requirepass`, `--user`)
 */
export async function startRedis(port?: number, extraArgs: readonly string[] = []): Promise<RedisHandle> {
  const p = port ?? (await freePort());
  const proc = spawn('redis-server', ['--port', String(p), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', ...extraArgs], { stdio: ['ignore', 'pipe', 'pipe'] });
  await new Promise<void>((resolve, reject) => {
    let out = '';
    const on = (d: Buffer) => { out += d.toString(); if (/Ready to accept connections/.test(out)) resolve(); };
    proc.stdout!.on('data', on);
    proc.stderr!.on('data', on);
    proc.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
    proc.once('error', reject);
  });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  return {
    port: p,
    url: `redis://127.0.0.1:${p}`,
    proc,
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) process.kill(proc.pid!, 'SIGKILL');
      await exited;
    },
  };
}
