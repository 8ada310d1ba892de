import { describe, expect, it } from 'vitest';
import { RateLimiter, type RateLimitedInstance, type RateLimitedInstanceSpec } from './rate-limiter.js';

const needs = (resources: { name: string; count: number; global?: boolean }[], priority?: number, device = 0): RateLimitedInstanceSpec =>
  ({ device, rateLimiter: { resources, ...(priority !== undefined ? { priority } : {}) } });

describe('RateLimiter', () => {
  it("defaults each resource to the largest count any instance asks for (Triton's rate_limiter.md example)", () => {
    const l = new RateLimiter();
    l.register([needs([{ name: 'R1', count: 4 }, { name: 'R2', count: 4 }])]);
    l.register([needs([{ name: 'R2', count: 5 }, { name: 'R3', count: 10 }, { name: 'R4', count: 5 }])]);
    l.register([needs([{ name: 'R1', count: 1 }, { name: 'R3', count: 7 }, { name: 'R4', count: 2 }])]);
    expect(['R1', 'R2', 'R3', 'R4'].map((r) => l.available(r, 0))).toEqual([4, 5, 10, 5]);
  });

  it('--rate-limit-resource overrides: per device, for every device, and global (rate_limiter.md example)', () => {
    const l = new RateLimiter({ resources: [{ name: 'R1', count: 10 }, { name: 'R2', count: 5, device: 0 }, { name: 'R2', count: 8, device: 1 }, { name: 'R3', count: 2 }] });
    l.register([needs([{ name: 'R1', count: 1 }, { name: 'R2', count: 1 }], 1, 0), needs([{ name: 'R1', count: 1 }, { name: 'R2', count: 1 }], 1, 1)]);
    l.register([needs([{ name: 'R3', count: 1, global: true }])]);
    expect([l.available('R1', 0), l.available('R2', 0), l.available('R1', 1), l.available('R2', 1), l.available('R3', 'global')]).toEqual([10, 5, 10, 8, 2]);
  });

  it("refuses a count it cannot meet, with Triton's messages, and registers nothing then", () => {
    const l = new RateLimiter({ resources: [{ name: 'resource1', count: 3 }, { name: 'resource2', count: 2 }] });
    expect(() => l.register([needs([{ name: 'resource1', count: 4 }])])).toThrow(expect.objectContaining({
      code: 'INVALID_ARG',
      message: 'Resource count for "resource1" is limited to 3 which will prevent scheduling of one or more model instances, the minimum required count is 4',
    }));
    // Given for device 10 only: unavailable on device 0. Not given at all: unavailable.
    expect(() => new RateLimiter({ resources: [{ name: 'resource1', count: 10, device: 10 }] }).register([needs([{ name: 'resource1', count: 4 }])]))
      .toThrow('Resource count for "resource1" is limited to 0 which will prevent scheduling');
    expect(() => l.register([needs([{ name: 'other', count: 1 }])])).toThrow('Resource count for "other" is limited to 0');
    const g = new RateLimiter();
    g.register([needs([{ name: 'resource2', count: 2, global: true }])]);
    expect(() => g.register([needs([{ name: 'resource2', count: 2 }])])).toThrow('Resource "resource2" is present as both global and device-specific resource in the model configuration.');
    // The failed registration left nothing behind: the limits are those of the first instance.
    expect([g.available('resource2', 'global'), g.available('resource2', 0)]).toEqual([2, 0]);
  });

  it('an instance holds its resources while it executes; per-device resources do not compete across devices, global ones do', () => {
    const l = new RateLimiter();
    const [a0, b0, c1] = l.register([needs([{ name: 'R', count: 1 }], 1, 0), needs([{ name: 'R', count: 1 }], 1, 0), needs([{ name: 'R', count: 1 }], 1, 1)]) as [RateLimitedInstance, RateLimitedInstance, RateLimitedInstance];
    const granted: string[] = [];
    a0.stage(() => granted.push('a0'));
    c1.stage(() => granted.push('c1'));
    expect(granted).toEqual(['a0', 'c1']);
    b0.stage(() => granted.push('b0'));
    expect([granted.length, l.inUse('R', 0), l.inUse('R', 1)]).toEqual([2, 1, 1]);
    a0.release(true);
    expect(granted).toEqual(['a0', 'c1', 'b0']);
    // Only the first in priority order is tried (Triton's AttemptAllocation): c1 waits behind b0.
    b0.release(true);
    c1.release(true);
    b0.stage(() => granted.push('b0'));
    a0.stage(() => granted.push('a0'));
    c1.stage(() => granted.push('c1'));
    expect(granted.slice(3)).toEqual(['b0']);
    b0.release(true);
    expect(granted.slice(3)).toEqual(['b0', 'a0', 'c1']);

    const gl = new RateLimiter();
    const [x0, y1] = gl.register([needs([{ name: 'G', count: 1, global: true }], 1, 0), needs([{ name: 'G', count: 1, global: true }], 1, 1)]) as [RateLimitedInstance, RateLimitedInstance];
    const order: string[] = [];
    x0.stage(() => order.push('x0'));
    y1.stage(() => order.push('y1'));
    expect([order, gl.inUse('G', 'global')]).toEqual([['x0'], 1]);
    x0.release(true);
    expect(order).toEqual(['x0', 'y1']);
  });

  it('an instance with no resources is allocated at once; unregistering drops what was staged', () => {
    const l = new RateLimiter();
    const [free, a, b] = l.register([{ device: 0 }, needs([{ name: 'R', count: 1 }]), needs([{ name: 'R', count: 1 }])]) as RateLimitedInstance[];
    let n = 0;
    free!.stage(() => n++);
    a!.stage(() => n++);
    b!.stage(() => { throw new Error('b was unregistered'); });
    expect(n).toBe(2);
    l.unregister([b!]);
    a!.release(true);
    expect([b!.state, l.inUse('R', 0)]).toEqual(['available', 0]);
  });

  it('priority 2 gets half the chances of priority 1: shares 2:1 over many grants of one resource', () => {
    const l = new RateLimiter();
    const [p1, p2] = l.register([needs([{ name: 'R', count: 1 }], 1), needs([{ name: 'R', count: 1 }], 2)]) as [RateLimitedInstance, RateLimitedInstance];
    let running: RateLimitedInstance | undefined;
    const grants = new Map<RateLimitedInstance, number>([[p1, 0], [p2, 0]]);
    // Both always have work: each is staged again as it releases (Triton's OnRelease order).
    const onGrant = (x: RateLimitedInstance) => () => {
      expect(running).toBeUndefined();
      running = x;
      grants.set(x, grants.get(x)! + 1);
    };
    p1.stage(onGrant(p1));
    p2.stage(onGrant(p2));
    for (let round = 0; round < 300; round++) {
      const x = running!;
      running = undefined;
      x.release(true, onGrant(x));
    }
    const [a, b] = [grants.get(p1)!, grants.get(p2)!];
    expect(a + b).toBe(301);
    expect(Math.abs(a - 2 * b)).toBeLessThanOrEqual(2);
  });

  it('with priorities equal, grants alternate; priority 0 counts as 1', () => {
    const l = new RateLimiter();
    const [x, y] = l.register([needs([{ name: 'R', count: 1 }], 0), needs([{ name: 'R', count: 1 }], 1)]) as [RateLimitedInstance, RateLimitedInstance];
    const order: string[] = [];
    let running: RateLimitedInstance | undefined;
    const on = (i: RateLimitedInstance, name: string) => () => { order.push(name); running = i; };
    x.stage(on(x, 'x'));
    y.stage(on(y, 'y'));
    for (let k = 0; k < 5; k++) running!.release(true, on(running!, running === x ? 'x' : 'y'));
    expect(order).toEqual(['x', 'y', 'x', 'y', 'x', 'y']);
  });
});
