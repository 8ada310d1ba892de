import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '@triode/core';
import { EXAMPLES } from '../../../../test/helpers/repository.js';
import type { ExecuteTask, LoadTask } from './messages.js';
import { ARENA_CHECK_MIN_INPUT_BYTES, OnnxSession, type SessionRunResult } from './onnxruntime-session.js';
import { ExecutionThreadPolicy } from './execution-thread-policy.js';
import { OnnxInstance, mainThreadPath } from './onnxruntime-instance.js';
import { sessionSettings } from './onnxruntime-utils.js';
import { OnnxLoader } from './onnxruntime-loader.js';

/**
 * The session made anew after a run that grew the process's memory by more than arena_reset_bytes
 * (bench/gpu.mjs, ppocr_det at batch 16 on the CPU: every run grew it by ~2 GiB). Stand-ins: RSS
 * grows 2 GiB at each read, and onnxruntime's session creation is watched or made to fail.
 */
const SIMPLE = join(EXAMPLES, 'simple/1/model.onnx');
const load = (extra: Partial<LoadTask> = {}): LoadTask => ({ op: 'load', modelFile: SIMPLE, sessionOptions: sessionSettings({}), ...extra });
/** A batch of `rows` rows of `simple` (two INT32 [rows, 16] inputs); 8192 rows: 1 MiB, the least that is checked. */
const task = (rows: number, v = 1): ExecuteTask => ({
  op: 'execute', outputNames: ['OUTPUT0'], batching: true,
  requests: [{ inputs: ['INPUT0', 'INPUT1'].map((name) => ({ name, datatype: 'INT32' as const, shape: [rows, 16], data: new Int32Array(16 * rows).fill(v) })), batchSize: rows }],
});
const BIG = ARENA_CHECK_MIN_INPUT_BYTES / (16 * 4 * 2);
const first = (r: SessionRunResult) => {
  const x = r.responses[0]!;
  return 'outputs' in x ? (x.outputs[0]!.data as Int32Array)[0] : x;
};

const create = OnnxLoader.create.bind(OnnxLoader);
const spyCreate = () => vi.spyOn(OnnxLoader, 'create');

beforeEach(() => {
  let rss = 0;
  vi.spyOn(process.memoryUsage, 'rss').mockImplementation(() => (rss += 2 ** 31));
});
afterEach(() => { vi.restoreAllMocks(); });

describe('OnnxSession: the remake after an outsized run', () => {
  it('a run that comes in while another remakes the session waits for it: before, it answered "the instance has no session"', async () => {
    const s = new OnnxSession();
    await s.load(load());
    let remaking!: () => void;
    const remakeStarted = new Promise<void>((r) => { remaking = r; });
    spyCreate().mockImplementation(async (...args: Parameters<typeof create>) => {
      remaking();
      await sleep(20);
      return create(...args);
    });
    const a = s.run(task(BIG, 1));
    await remakeStarted;
    const b = s.run(task(1, 5));
    const [ra, rb] = await Promise.all([a, b]);
    expect(first(ra)).toBe(2);
    expect(ra.remade).toMatchObject({ limitBytes: 2 ** 30 });
    expect(ra.remade!.grewBytes).toBeGreaterThan(2 ** 30);
    expect(ra.remade!.error).toBeUndefined();
    expect(first(rb)).toBe(10);
    await s.unload();
  });

  it('a remake that fails once is reported, and the next run loads the session again: before, every later run answered "no session"', async () => {
    const s = new OnnxSession();
    await s.load(load());
    spyCreate().mockRejectedValueOnce(new Error('out of memory (stand-in)'));
    const r = await s.run(task(BIG));
    expect(first(r)).toBe(2);
    expect(r.remade).toMatchObject({ error: 'out of memory (stand-in)' });
    expect(first(await s.run(task(1, 3)))).toBe(6);
    expect(first(await s.run(task(1, 4)))).toBe(8);
    await s.unload();
  });

  it('when loading it again fails too, the instance is lost, and the error says why', async () => {
    const path = await mainThreadPath(load());
    spyCreate().mockRejectedValue(new Error('out of memory (stand-in)'));
    expect(await path.run(task(BIG), [])).toMatchObject({ remade: { error: 'out of memory (stand-in)' } });
    const lost = await path.run(task(1), []);
    expect(lost).toEqual({ error: { code: 'UNAVAILABLE', instanceLost: true, message: expect.stringMatching(/could not be made anew: out of memory \(stand-in\); loading it again failed too: out of memory \(stand-in\)/) } });
    expect(await path.run(task(1), [])).toEqual(lost);
    await path.close();
  });

  it.each([
    ['a GPU session (its activations are not in RSS)', load({ gpu: 'GPU 0 (Fake GPU)' })],
    ['a session without a CPU memory arena', load({ sessionOptions: { ...sessionSettings({}), enableCpuMemArena: false } })],
    ['arena_reset_bytes 0', load({ sessionOptions: { ...sessionSettings({}), arenaResetBytes: 0 } })],
  ])('%s is never remade', async (_name, l) => {
    const s = new OnnxSession();
    await s.load(l);
    const made = spyCreate();
    const r = await s.run(task(BIG));
    expect(first(r)).toBe(2);
    expect(r.remade).toBeUndefined();
    expect(made).not.toHaveBeenCalled();
    await s.unload();
  });

  it('the instance logs each remake, and a failed one as a warning with its reason', async () => {
    const lines: { level: string; msg: string }[] = [];
    const logger: Logger = {
      error: (msg) => lines.push({ level: 'error', msg }), warning: (msg) => lines.push({ level: 'warning', msg }),
      info: (msg) => lines.push({ level: 'info', msg }), verbose: () => undefined,
    };
    const main = await mainThreadPath(load());
    const instance = new OnnxInstance({ main, policy: new ExecutionThreadPolicy('main'), batching: true, logger, label: 'model "m" instance 0', model: 'm' });
    const request = () => ({ ...task(BIG).requests[0]!, outputNames: ['OUTPUT0'], parameters: {} });
    await instance.execute([request()]);
    expect(lines).toEqual([{ level: 'info', msg: expect.stringMatching(/^model "m" instance 0: its session was made anew \(\d+ ms\) to give back its memory arena: a run grew the process's memory by \d+ MiB, over arena_reset_bytes \(1024 MiB\)$/) }]);
    spyCreate().mockRejectedValueOnce(new Error('out of memory (stand-in)'));
    await instance.execute([request()]);
    expect(lines[1]).toEqual({ level: 'warning', msg: expect.stringContaining('its session could not be made anew after a run grew the process\'s memory by') });
    expect(lines[1]!.msg).toContain('out of memory (stand-in); it is loaded again before the next batch');
    await instance.finalize();
  });
});
