/**
 * The Backplane conformance suite (test/helpers/backplane.case.ts) on both backplanes: the
 * embedded server's LocalBackplane (an in-process InferenceServer), and the gateway's
 * RedisBackplane over a real redis-server with two `triode worker` processes behind it.
 */
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, silentLogger } from '@triode/core';
import { RedisBackplane } from '@triode/cluster';
import { runBackplaneCases } from './helpers/backplane.case.js';
import { startTriode, type Child } from './helpers/process.js';
import { startRedis, type RedisHandle } from './helpers/redis.js';

runBackplaneCases({
  name: 'LocalBackplane',
  async setup(repository) {
    const server = await InferenceServer.create({
      modelRepositories: [repository],
      backends: [new OnnxRuntimeBackend(), new JavaScriptBackend({ logger: silentLogger })],
      modelControlMode: 'explicit',
      startupModels: ['*'],
      logger: silentLogger,
    });
    return { backplane: new LocalBackplane(server), stop: async () => { await server.stop(5000); } };
  },
});

runBackplaneCases({
  name: 'RedisBackplane',
  eventualStatistics: true,
  async setup(repository) {
    let redis: RedisHandle = await startRedis();
    const port = redis.port;
    const worker = (id: string) => startTriode(['worker', '--metrics-port', '0', '--redis', redis.url, '--model-repository', repository, '--worker-id', id,
      '--model-control-mode', 'explicit', '--load-model', '*', '--claim-idle-ms', '500'], /Started worker/);
    const workers: Child[] = await Promise.all([worker('c1'), worker('c2')]);
    const gateway = () => new RedisBackplane({
      redis: redis.url, requestTimeoutMs: 20_000, directReplies: { host: '127.0.0.1', advertise: '127.0.0.1' }, logger: silentLogger,
    });
    const backplane = gateway();
    await backplane.start();
    return {
      backplane,
      stop: async () => {
        await backplane.stop();
        await Promise.all(workers.map((w) => w.stop()));
        await redis.stop();
      },
      killWorker: async () => {
        const w = workers.shift()!;
        process.kill(w.proc.pid!, 'SIGKILL');
        await w.exited;
      },
      restartRedis: async (stopped) => {
        await redis.stop();
        await stopped();
        redis = await startRedis(port);
      },
      another: async () => {
        const g = gateway();
        await g.start();
        return g;
      },
    };
  },
});
