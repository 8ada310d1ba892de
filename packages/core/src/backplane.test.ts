import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { LocalBackplane } from './backplane.js';
import { echoBackend } from './echo-backend.case.js';
import { InferenceServer } from './server.js';

describe('LocalBackplane while the server exits (Triton: InferenceServer::ModelIsReady, ModelReadyVersions)', () => {
  it('liveness and readiness are UNAVAILABLE "Server exiting"; model readiness, metadata, statistics and the repository extension "Server not ready"; the config still answers; an unknown model\'s metadata is NOT_FOUND first', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-exiting-'));
    mkdirSync(join(root, 'm', '1'), { recursive: true });
    writeFileSync(join(root, 'm', 'config.pbtxt'), 'backend: "echo"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n');
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echoBackend] });
    const b = new LocalBackplane(s);
    try {
      expect(await b.modelReady('m')).toBe(true);
      expect((await b.modelMetadata('m')).versions).toEqual(['1']);
      expect([await b.isLive(), await b.isReady()]).toEqual([true, true]);
      s.beginShutdown();
      await expect(b.isLive()).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'Server exiting' });
      await expect(b.isReady()).rejects.toMatchObject({ code: 'UNAVAILABLE', message: 'Server exiting' });
      const notReady = { code: 'UNAVAILABLE', message: 'Server not ready' };
      await expect(b.modelReady('m')).rejects.toMatchObject(notReady);
      await expect(b.modelReady('nope')).rejects.toMatchObject(notReady);
      await expect(b.modelMetadata('m')).rejects.toMatchObject(notReady);
      await expect(b.modelMetadata('nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
      await expect(b.modelStatistics('m')).rejects.toMatchObject(notReady);
      await expect(b.modelStatistics()).rejects.toMatchObject(notReady);
      expect(await b.modelConfig('m')).toMatchObject({ name: 'm' });
      // The repository extension too (Triton's RepositoryIndex, LoadModel, UnloadModel): a load
      // started here would race the models being stopped.
      await expect(b.repositoryIndex()).rejects.toMatchObject(notReady);
      await expect(b.loadModel('m')).rejects.toMatchObject(notReady);
      await expect(b.unloadModel('m')).rejects.toMatchObject(notReady);
    } finally {
      await s.stop(1000);
    }
  });
});
