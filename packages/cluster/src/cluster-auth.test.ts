import { describe, expect, it } from 'vitest';
import type { Logger } from '@triode/core';
import { ClusterAuth, redactRedisUrl } from './cluster-auth.js';

function recordingLogger(): Logger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, error: (m) => lines.push(m), warning: (m) => lines.push(m), info: () => undefined, verbose: () => undefined };
}

describe('ClusterAuth', () => {
  it('signs parts as they are and accepts only the same parts, kind and secret', () => {
    const a = new ClusterAuth('s3cret');
    const parts = [Buffer.from('head'), new Uint8Array([1, 2, 3])];
    const mac = a.mac('request', parts)!;
    expect(mac.byteLength).toBe(32);
    expect(a.verify('request', parts, mac)).toBe(true);
    // Another kind, other parts, parts shifted from one to the next, another secret: refused.
    expect(a.verify('reply', parts, mac)).toBe(false);
    expect(a.verify('request', [Buffer.from('head'), new Uint8Array([1, 2, 4])], mac)).toBe(false);
    expect(a.verify('request', [Buffer.from('hea'), new Uint8Array([0x64, 1, 2, 3])], mac)).toBe(false);
    expect(new ClusterAuth('other').verify('request', parts, mac)).toBe(false);
    expect(a.verify('request', parts, undefined)).toBe(false);
    expect(a.rejected.get('request')).toBe(3);
    expect(a.rejected.get('reply')).toBe(1);
  });

  it('signed text opens only with the secret; without a secret nothing is signed or checked', () => {
    const a = new ClusterAuth('s3cret');
    const signed = a.signText('control', '{"id":"1"}');
    expect(signed).toMatch(/^[0-9a-f]{64}\.\{"id":"1"\}$/);
    expect(a.openText('control', signed)).toBe('{"id":"1"}');
    expect(a.openText('control', '{"id":"1"}')).toBeUndefined();
    expect(a.openText('control', signed.replace('"1"', '"2"'))).toBeUndefined();
    expect(a.openText('desired', signed)).toBeUndefined();
    const none = new ClusterAuth();
    expect(none.enabled).toBe(false);
    expect(none.mac('reply', [Buffer.from('x')])).toBeUndefined();
    expect(none.signText('control', 'x')).toBe('x');
    expect(none.openText('control', signed)).toBe('{"id":"1"}');
    expect(none.verify('reply', [Buffer.from('x')], undefined)).toBe(true);
  });

  it('logs rejections at most once per kind every 10 s, counting every one', () => {
    const logger = recordingLogger();
    const a = new ClusterAuth('s3cret', logger);
    for (let i = 0; i < 50; i++) a.openText('control', 'forged');
    a.openText('registry', 'forged');
    expect(a.rejected.get('control')).toBe(50);
    expect(logger.lines).toHaveLength(2);
    expect(logger.lines[0]).toMatch(/dropped an unsigned control/);
  });
});

describe('redactRedisUrl', () => {
  it('hides the password', () => {
    expect(redactRedisUrl('redis://user:pw@h:6379/1')).toBe('redis://user:***@h:6379/1');
    expect(redactRedisUrl('rediss://:pw@h')).toBe('rediss://:***@h');
    expect(redactRedisUrl('redis://h:6379')).toBe('redis://h:6379');
  });
});
