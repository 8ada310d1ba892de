import { describe, expect, it } from 'vitest';
import { InferenceServer, LocalBackplane } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { parseRestrictions } from '../control/restricted.js';
import { createHttpApp } from './http-server.js';
import { restrictedGroupOf } from './restricted-api.js';

describe('--http-restricted-api', () => {
  it('maps paths to Triton\'s endpoint groups', () => {
    expect(restrictedGroupOf('/v2/health/ready')).toBe('health');
    expect(restrictedGroupOf('/v2/models/m/versions/2/ready')).toBe('health');
    expect(restrictedGroupOf('/v2')).toBe('metadata');
    expect(restrictedGroupOf('/v2/models/m')).toBe('metadata');
    expect(restrictedGroupOf('/v2/models/m/infer')).toBe('inference');
    expect(restrictedGroupOf('/v2/models/m/generate_stream')).toBe('inference');
    expect(restrictedGroupOf('/v2/models/m/config')).toBe('model-config');
    expect(restrictedGroupOf('/v2/models/stats')).toBe('statistics');
    expect(restrictedGroupOf('/v2/models/m/versions/1/stats')).toBe('statistics');
    expect(restrictedGroupOf('/v2/repository/models/m/load')).toBe('model-repository');
    expect(restrictedGroupOf('/v2/models/m/trace/setting')).toBe('trace');
    expect(restrictedGroupOf('/v2/logging')).toBe('logging');
    expect(restrictedGroupOf('/v2/systemsharedmemory/status')).toBe('shared-memory');
    expect(restrictedGroupOf('/v2/cudasharedmemory/region/r/unregister')).toBe('shared-memory');
    // Not a shared-memory path in Triton (its regex is matched whole): 404, not 403 (before: any path under the prefix).
    for (const p of ['/v2/systemsharedmemoryx/status', '/v2/systemsharedmemory/region/r/status/x', '/v2/cudasharedmemory/region/a/b/status', '/v2/systemsharedmemory']) {
      expect(restrictedGroupOf(p), p).toBeUndefined();
    }
  });

  it('answers 403 with Triton\'s message without the header, and serves with it; other groups stay open', async () => {
    const server = await InferenceServer.create({ modelRepositories: [makeRepository([])], backends: [], modelControlMode: 'explicit' });
    const app = createHttpApp(new LocalBackplane(server), { restrictions: parseRestrictions(['model-repository,logging:admin-key=s3cret']) });
    try {
      const denied = await app.request('/v2/repository/index', { method: 'POST', body: '{}' });
      expect(denied.status).toBe(403);
      expect(await denied.json()).toEqual({ error: "This API is restricted, expecting header 'admin-key'" });
      const ok = await app.request('/v2/repository/index', { method: 'POST', body: '{}', headers: { 'admin-key': 's3cret' } });
      expect(ok.status).toBe(200);
      expect((await app.request('/v2/health/live')).status).toBe(200);
      expect((await app.request('/v2/logging', { headers: { 'admin-key': 'wrong' } })).status).toBe(403);
    } finally {
      await server.stop(500);
    }
  });
});
