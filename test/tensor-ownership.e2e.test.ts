/**
 * The tensor-ownership cases (test/helpers/ownership.case.ts) on `triode serve`: fan-out, taps,
 * the response cache, BLS reuse, decoupled and kept arrays, error codes as data, over real
 * instance threads.
 */
import { runOwnershipCases } from './helpers/ownership.case.js';
import { freePort, startTriode } from './helpers/process.js';

runOwnershipCases({
  name: 'triode serve',
  async start(repo) {
    const port = await freePort();
    const triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1',
      '--allow-grpc=false', '--allow-metrics=false', '--cache-config', 'local,size=1048576']);
    return { base: `http://127.0.0.1:${port}`, stop: async () => { await triode.stop(); } };
  },
});
