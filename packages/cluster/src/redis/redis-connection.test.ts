import { describe, expect, it } from 'vitest';
import { openRedis, parseRedisUrl, redisOptions } from './redis-connection.js';

describe('parseRedisUrl', () => {
  it('reads host, port, TLS, credentials and database', () => {
    expect(parseRedisUrl('redis://127.0.0.1:6390')).toEqual({ host: '127.0.0.1', port: 6390, tls: false });
    expect(parseRedisUrl('rediss://u%40x:p%3Aw@cache.example:7000/3')).toEqual({ host: 'cache.example', port: 7000, tls: true, username: 'u@x', password: 'p:w', db: 3 });
    expect(parseRedisUrl('redis://:secret@[::1]/0')).toEqual({ host: '::1', port: 6379, tls: false, password: 'secret' });
  });

  it('refuses what is not a Redis URL without repeating it (it may hold a password)', () => {
    expect(() => parseRedisUrl('http://user:hunter2@x')).toThrow(/not a Redis URL: http:/);
    expect(() => parseRedisUrl('http://user:hunter2@x')).not.toThrow(/hunter2/);
    expect(() => parseRedisUrl('redis//:hunter2@nohost')).toThrow(/not a Redis URL/);
    expect(() => parseRedisUrl('redis//:hunter2@nohost')).not.toThrow(/hunter2/);
  });
});

describe('redisOptions', () => {
  it('gives every role the same endpoint, TLS server name and credentials', () => {
    for (const role of ['gateway', 'gateway-blocking', 'worker', 'subscriber', 'jobs'] as const) {
      expect(redisOptions('rediss://u:p@cache.example:7000/2', role)).toMatchObject({ host: 'cache.example', port: 7000, username: 'u', password: 'p', db: 2, tls: { servername: 'cache.example' } });
    }
    expect(redisOptions('rediss://127.0.0.1:7000', 'worker').tls).toEqual({});
    expect(redisOptions('redis://127.0.0.1', 'worker').tls).toBeUndefined();
  });

  it('a gateway fails fast while Redis is away; workers and BullMQ wait it out', () => {
    expect(redisOptions('redis://h', 'gateway')).toMatchObject({ enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    expect(redisOptions('redis://h', 'worker').maxRetriesPerRequest).toBeNull();
    expect(redisOptions('redis://h', 'jobs').maxRetriesPerRequest).toBeNull();
    // The claim commands stay out of auto-pipelining (it mangled their Buffer forms).
    expect(redisOptions('redis://h', 'worker').autoPipeliningIgnoredCommands).toEqual(['XAUTOCLAIM', 'XCLAIM']);
  });
});

describe('openRedis', () => {
  it('opens lazily and logs connection errors instead of letting them end the process', async () => {
    const seen: string[] = [];
    const logger = { verbose: (_l: number, m: string) => { seen.push(m); } } as unknown as Parameters<typeof openRedis>[2];
    const client = openRedis('redis://127.0.0.1:1', 'gateway', logger);
    expect(client.status).toBe('wait');
    expect(client.listenerCount('error')).toBe(1);
    client.emit('error', new Error('ECONNREFUSED 127.0.0.1:1'));
    expect(seen).toEqual(['redis (gateway): ECONNREFUSED 127.0.0.1:1']);
    client.disconnect();
  });
});
