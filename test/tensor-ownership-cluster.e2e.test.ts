/**
 * The tensor-ownership cases (test/helpers/ownership.case.ts) through the cluster (issue #15: "the
 * same ensembles answer correctly through the cluster"): a gateway with one worker over a real
 * redis-server; the worker runs the ensembles, BLS calls and the response cache.
 */
import { runOwnershipCases } from './helpers/ownership.case.js';
import { freePort, startTriode, until } from './helpers/process.js';
import { startRedis } from './helpers/redis.js';

runOwnershipCases({
  name: 'cluster (gateway + worker)',
  async start(repo) {
    const redis = await startRedis();
    const worker = await startTriode(['worker', '--redis', redis.url, '--model-repository', repo, '--metrics-port', '0', '--cache-config', 'local,size=1048576'], /Started worker/);
    const port = await freePort();
    const gateway = await startTriode(['gateway', '--redis', redis.url, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--metrics-port', '0']);
    const base = `http://127.0.0.1:${port}`;
    await until(async () => (await fetch(`${base}/v2/health/ready`)).status === 200);
    return {
      base,
      stop: async () => {
        await Promise.all([gateway.stop(), worker.stop()]);
        await redis.stop();
      },
    };
  },
});
