import { describe, expect, it } from 'vitest';
import { RedisBackplane } from './redis-backplane.js';

describe('RedisBackplane', () => {
  it('refuses a model name that is a path before anything reaches Redis', async () => {
    // Not started, and no Redis at that address: the name is checked first.
    const b = new RedisBackplane({ redis: 'redis://127.0.0.1:1', directReplies: false });
    for (const name of ['../../etc', 'a/b', '..', '', 'x\u0000y']) {
      await expect(b.loadModel(name)).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/invalid model name/) as unknown });
      await expect(b.unloadModel(name)).rejects.toMatchObject({ code: 'INVALID_ARG' });
    }
  });
});
