import { describe, expect, it } from 'vitest';
import { loopTurned, nextLoopTurn } from './loop-turn.js';

describe('loopTurned: whether the event loop turned since the last main-thread run', () => {
  it('is false for a second call in the same turn, true again once the loop reached its check phase', async () => {
    await nextLoopTurn();
    expect(loopTurned()).toBe(true);
    expect(loopTurned()).toBe(false);
    await Promise.resolve();
    expect(loopTurned()).toBe(false);
    await nextLoopTurn();
    expect(loopTurned()).toBe(true);
  });

  it('a chain that waits for a turn whenever it finds none lets a timer fire in the middle', async () => {
    let fired = false;
    setTimeout(() => { fired = true; }, 1);
    let n = 0;
    const t0 = Date.now();
    while (!fired && n < 1_000_000 && Date.now() - t0 < 2000) {
      if (!loopTurned()) await nextLoopTurn();
      n++;
    }
    expect(fired).toBe(true);
  });
});
