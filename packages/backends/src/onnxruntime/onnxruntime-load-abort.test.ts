import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import type { Piscina as PiscinaType } from 'piscina';
import { EXAMPLES } from '../../../../test/helpers/repository.js';
import { OnnxRuntimeBackend } from './onnxruntime-backend.js';

/** An instance thread whose load task never ends: the stand-in for a session build that never returns. */
const HANG_FILE = join(mkdtempSync(join(tmpdir(), 'triode-hang-')), 'hang.mjs');
writeFileSync(HANG_FILE, 'export default function () { for (;;) {} }\n');

const pools: PiscinaType[] = [];
vi.mock('piscina', async (importOriginal) => {
  const real = await importOriginal<typeof import('piscina')>();
  class HangingPiscina extends real.Piscina {
    constructor(options: ConstructorParameters<typeof real.Piscina>[0]) {
      super({ ...options, filename: HANG_FILE });
      pools.push(this);
    }
  }
  return { ...real, Piscina: HangingPiscina, default: HangingPiscina };
});

afterAll(async () => {
  // Without the fix the thread spins on: end it here so that it does not outlive the test.
  await Promise.allSettled(pools.map((p) => p.destroy()));
});

describe('onnxruntime load given up', () => {
  it('aborts the instance thread of a load whose task never ends, and the pool ends its threads', async () => {
    const ac = new AbortController();
    const config = { name: 'simple', platform: 'onnxruntime_onnx', parameters: { execution_thread: { string_value: 'instance' } } };
    const model = await new OnnxRuntimeBackend().modelInitialize({
      name: 'simple', version: 1, modelPath: join(EXAMPLES, 'simple'), versionPath: join(EXAMPLES, 'simple/1'), config, backendConfig: {}, signal: ac.signal,
    });
    const load = model.instanceInitialize({ kind: 'KIND_CPU', count: 1 }, 0);
    const outcome = load.then(() => 'loaded', (err: Error) => err);
    // Thread starts and exits are polled long: the 1 s default was thin on a loaded machine.
    await vi.waitFor(() => expect(pools[0]?.threads.length).toBe(1), { timeout: 30_000 });
    ac.abort(new Error('load timed out'));
    // Bounded: without the signal the load never settles.
    const settled = await Promise.race([outcome, new Promise((r) => setTimeout(() => r('still loading'), 30_000))]);
    expect(settled).toBeInstanceOf(Error);
    expect(pools).toHaveLength(1);
    await vi.waitFor(() => expect(pools[0]!.threads.length).toBe(0), { timeout: 30_000 });
    // No fresh thread is started in its place.
    await new Promise((r) => setTimeout(r, 200));
    expect(pools[0]!.threads.length).toBe(0);
  });
});
