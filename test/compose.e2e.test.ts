/**
 * docker-compose.yml, checked where no Docker engine runs (this project's machines and CI):
 * - the compose CLI accepts it (`docker compose config`, or Debian's docker-compose, which
 *   .ci/run installs);
 * - every service has a healthcheck, Redis a password and an append-only file, no service
 *   bind-mounts a host model repository (a fresh clone has no ONNX files: the image has them),
 *   the image is a maintained Node LTS, Prometheus scrapes every Triode process on its port;
 * - the same topology runs as plain processes: Redis with the compose command, the gateway and
 *   both workers with their compose commands and environment (TRIODE_REDIS_URL with the password,
 *   TRIODE_CLUSTER_SECRET), and every service's own healthcheck command passes against them.
 * What a test must change is swapped and nothing else: ports for free ones (the compose network
 * gives each container its own), the host `redis` for 127.0.0.1, /app/model_repository for a copy
 * holding `simple`, Redis's data directory for a temporary one.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';

interface Service {
  image?: string;
  build?: unknown;
  command?: string[];
  environment?: Record<string, string>;
  volumes?: string[];
  ports?: string[];
  healthcheck?: { test: string[] };
  depends_on?: unknown;
}

const COMPOSE = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
const services = (parse(COMPOSE, { merge: true }) as { services: Record<string, Service> }).services;

/** Compose's interpolation of what the environment does not set: `${VAR:-default}` and `$$`. */
function interpolate(s: string): string {
  return s.replace(/\$\{(\w+):-([^}]*)\}/g, (_m, _v: string, d: string) => d).replaceAll('$$', '$');
}

/** The compose CLI of this machine, if any: `docker compose` or docker-compose. */
function composeCli(): string[] | undefined {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  if (spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0) return ['docker-compose'];
  return undefined;
}

const children: Child[] = [];
let redis: ChildProcess | undefined;

afterAll(async () => {
  await Promise.all(children.map((c) => c.stop()));
  if (redis?.pid !== undefined && redis.exitCode === null) process.kill(redis.pid, 'SIGKILL');
});

describe('docker-compose.yml', () => {
  it('is valid for the compose CLI (in CI, .ci/run installs one: it must be there)', () => {
    const cli = composeCli();
    if (!cli) {
      // Only a developer's machine without a compose CLI gets here; CI always has one.
      expect(process.env['CI'], 'no compose CLI: install docker-compose (apt-get install -y docker-compose)').toBeFalsy();
      return;
    }
    for (const profile of [[], ['--profile', 'gpu']]) {
      const r = spawnSync(cli[0]!, [...cli.slice(1), '-f', join(ROOT, 'docker-compose.yml'), ...profile, 'config', '-q'], { encoding: 'utf8' });
      expect(r.stderr, profile.join(' ')).toBe('');
      expect(r.status).toBe(0);
    }
  });

  it('has a healthcheck on every service, Redis with a password and AOF, models in the image, a maintained Node LTS image', () => {
    expect(Object.keys(services).sort()).toEqual(['gateway', 'prometheus', 'redis', 'worker-gpu', 'worker1', 'worker2']);
    // GPU workers only under the `gpu` profile, with the GPUs reserved and the image that has the Vulkan loader.
    const gpu = services['worker-gpu'] as Service & { profiles?: string[]; deploy?: { resources?: { reservations?: { devices?: { driver?: string; capabilities?: string[] }[] } } } };
    expect(gpu.profiles).toEqual(['gpu']);
    expect(gpu.deploy?.resources?.reservations?.devices?.[0]).toMatchObject({ driver: 'nvidia', capabilities: ['gpu'] });
    expect(gpu.build).toMatchObject({ dockerfile: 'Dockerfile.gpu' });
    expect(gpu.command).toContain('--gpus');
    expect(readFileSync(join(ROOT, 'Dockerfile.gpu'), 'utf8')).toMatch(/apt-get install -y --no-install-recommends libvulkan1/);
    for (const [name, s] of Object.entries(services)) expect(s.healthcheck?.test, name).toBeDefined();
    const redisCmd = services['redis']!.command!.join(' ');
    expect(redisCmd).toMatch(/--requirepass/);
    expect(redisCmd).toMatch(/--appendonly yes/);
    expect(services['redis']!.ports, 'Redis is not published outside the compose network').toBeUndefined();
    for (const name of ['gateway', 'worker1', 'worker2', 'worker-gpu']) {
      const env = services[name]!.environment!;
      expect(interpolate(env['TRIODE_REDIS_URL']!)).toMatch(/^redis:\/\/:[^@]+@redis:6379$/);
      expect(env['TRIODE_CLUSTER_SECRET']).toBeTruthy();
      expect((services[name]!.command ?? []).join(' ')).not.toMatch(/--redis|--cluster-secret/); // secrets stay out of argv
      expect(services[name]!.volumes ?? []).not.toContainEqual(expect.stringMatching(/model_repository/));
    }
    for (const file of ['Dockerfile', 'Dockerfile.gpu']) {
      const from = /^FROM node:(\d+)-/m.exec(readFileSync(join(ROOT, file), 'utf8'))?.[1];
      // Even-numbered Node releases are the LTS lines; 20 reached its end of life in April 2026.
      expect(Number(from) % 2, file).toBe(0);
      expect(Number(from), file).toBeGreaterThanOrEqual(22);
    }
    // Prometheus scrapes every Triode process on the port its command gives it.
    const prom = parse(readFileSync(join(ROOT, 'deploy', 'prometheus.yml'), 'utf8')) as { scrape_configs: { static_configs: { targets: string[] }[] }[] };
    const targets = prom.scrape_configs.flatMap((c) => c.static_configs.flatMap((t) => t.targets)).sort();
    const expected = ['gateway', 'worker1', 'worker2'].map((n) => {
      const cmd = services[n]!.command!;
      return `${n}:${cmd[cmd.indexOf('--metrics-port') + 1]}`;
    }).sort();
    expect(targets).toEqual(expected);
  });

  it('runs as plain processes with the compose commands and environment, and every service\'s healthcheck passes', async () => {
    const ports = new Map<string, Map<string, string>>(); // service -> compose port -> free port
    const portOf = async (service: string, p: string) => {
      let m = ports.get(service);
      if (!m) ports.set(service, (m = new Map()));
      if (!m.has(p)) m.set(p, String(await freePort()));
      return m.get(p)!;
    };
    const redisPort = await portOf('redis', '6379');
    const env = (s: Service) => Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, interpolate(v).replace('@redis:6379', `@127.0.0.1:${redisPort}`)]));
    // Redis: the compose command, on a free port, its data in a temporary directory.
    const r = services['redis']!;
    const [shell, flag, script] = r.command!.map(interpolate);
    redis = spawn(shell!, [flag!, `${script!} --port ${redisPort} --bind 127.0.0.1`], { cwd: mkdtempSync(join(tmpdir(), 'triode-compose-redis-')), env: { ...process.env, ...env(r) }, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      redis!.stdout!.on('data', (d: Buffer) => { out += d.toString(); if (/Ready to accept connections/.test(out)) resolve(); });
      redis!.once('exit', (code) => reject(new Error(`redis-server exited with ${code}: ${out}`)));
    });
    const repo = makeRepository(['simple']);
    const health = async (name: string): Promise<number | null> => {
      const s = services[name]!;
      const [kind, ...given] = s.healthcheck!.test.map(interpolate);
      let cmd = given;
      const mapped = ports.get(name) ?? new Map<string, string>();
      cmd = cmd.map((c) => c.replace(/127\.0\.0\.1:(\d+)/g, (m, p: string) => (mapped.has(p) ? `127.0.0.1:${mapped.get(p)!}` : m)));
      if (name === 'redis') cmd = cmd.map((c) => c.replace('redis-cli', `redis-cli -p ${redisPort}`));
      const argv = kind === 'CMD-SHELL' ? ['sh', '-c', cmd.join(' ')] : cmd;
      return spawnSync(argv[0]!, argv.slice(1), { env: { ...process.env, ...env(s) }, stdio: 'ignore', timeout: 10_000 }).status;
    };
    expect(await health('redis')).toBe(0);
    // Workers, then the gateway (compose starts them once Redis is healthy).
    for (const name of ['worker1', 'worker2', 'gateway']) {
      const s = services[name]!;
      const args: string[] = [];
      const cmd = s.command!;
      for (let i = 0; i < cmd.length; i++) {
        const a = cmd[i]!;
        if (/^--(http|grpc|metrics)-port$/.test(a)) {
          args.push(a, await portOf(name, cmd[++i]!));
        } else if (a === '/app/model_repository') {
          args.push(repo);
        } else {
          args.push(a);
        }
      }
      children.push(await startTriode(args, name === 'gateway' ? /Started HTTPService at/ : /Started worker/, 60_000, env(s)));
    }
    await until(async () => (await health('gateway')) === 0, 30_000);
    for (const name of ['worker1', 'worker2']) expect(await health(name), name).toBe(0);
    // And it serves, with the cluster secret set on every side.
    const r2 = await fetch(`http://127.0.0.1:${ports.get('gateway')!.get('8000')!}/v2/models/simple/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(3) })) }),
    });
    expect(r2.status).toBe(200);
    expect(children.map((c) => c.output()).join('\n')).toMatch(/cluster secret set/);
  }, 120_000);
});
