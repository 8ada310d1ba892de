import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EXAMPLES } from '../../../../test/helpers/repository.js';
import { OnnxLoader, nativeBinding, type ImmediateOrtSession, type NativeBinding, type OrtSession } from './onnxruntime-loader.js';

const SIMPLE = join(EXAMPLES, 'simple/1/model.onnx');
const ints = (v: number) => new Int32Array(16).fill(v);
const simpleFeeds = (a = 2, b = 3) => ({ INPUT0: new ort.Tensor('int32', ints(a), [1, 16]), INPUT1: new ort.Tensor('int32', ints(b), [1, 16]) });
const opts: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu'] };

/** The real binding, counting the native runs of the sessions it makes. */
function countingBinding(): { binding: NativeBinding; runs: () => number } {
  const real = nativeBinding()!;
  let runs = 0;
  function InferenceSession(): object {
    const inner = new real.binding.InferenceSession();
    return {
      loadModel: (p: string, o: object) => inner.loadModel(p, o),
      get inputMetadata() { return inner.inputMetadata; },
      get outputMetadata() { return inner.outputMetadata; },
      run: (...a: Parameters<typeof inner.run>) => { runs++; return inner.run(...a); },
      dispose: () => inner.dispose(),
    };
  }
  return { binding: { initOrt: real.initOrt, binding: { InferenceSession: InferenceSession as unknown as NativeBinding['binding']['InferenceSession'] } }, runs: () => runs };
}

const open: OrtSession[] = [];
afterEach(async () => {
  vi.restoreAllMocks();
  await Promise.all(open.splice(0).map((s) => s.release()));
});
/** A session of OnnxLoader's, on this binding ('default': the one it found; null: none). */
async function create(file: string, native: NativeBinding | null | 'default' = 'default'): Promise<OrtSession> {
  const s = await (native === 'default' ? OnnxLoader.create(file, opts) : OnnxLoader.create(file, opts, native));
  open.push(s);
  return s;
}
/** The same, on a binding: a session that answers at once. */
async function native(file: string, binding: NativeBinding | 'default' = 'default'): Promise<ImmediateOrtSession> {
  const s = await create(file, binding);
  if (!s.immediate) throw new Error('the session is not on the native binding');
  return s;
}

describe('OnnxLoader: sessions on onnxruntime-node\'s native binding, run with no hop (issue #18)', () => {
  it('onnxruntime-node 1.30.0 (pinned exactly) still has its private dist/binding: a session class with loadModel, run, dispose and raw metadata', () => {
    const b = nativeBinding();
    expect(b).toBeDefined();
    expect(typeof b!.initOrt).toBe('function');
    const proto = b!.binding.InferenceSession.prototype as unknown as Record<string, unknown>;
    for (const m of ['loadModel', 'run', 'dispose']) expect(typeof proto[m]).toBe('function');
  });

  it('a run answers at once (no promise, no immediate), with onnxruntime-common\'s Tensors, for the outputs asked only', async () => {
    const s = await native(SIMPLE);
    const immediate = vi.spyOn(globalThis, 'setImmediate');
    const out = s.run(simpleFeeds(), ['OUTPUT1']);
    expect(immediate).not.toHaveBeenCalled();
    expect(out).not.toBeInstanceOf(Promise);
    expect(Object.keys(out)).toEqual(['OUTPUT1']);
    expect(out['OUTPUT1']).toBeInstanceOf(ort.Tensor);
    expect(out['OUTPUT1']!.dims).toEqual([1, 16]);
    expect(Array.from(out['OUTPUT1']!.data as Int32Array)).toEqual(new Array(16).fill(-1));
  });

  it.each(['simple', 'simple_string', 'ppocr_cls', 'silero_vad', 'simple_int8'])('%s: names and metadata are what onnxruntime-common\'s session shows', async (name) => {
    const file = join(EXAMPLES, `${name}/1/model.onnx`);
    const common = await ort.InferenceSession.create(file, opts);
    const s = await create(file);
    expect(s.immediate).toBe(true);
    expect(s.inputNames).toEqual(common.inputNames);
    expect(s.outputNames).toEqual(common.outputNames);
    expect(s.inputMetadata).toEqual(common.inputMetadata);
    expect(s.outputMetadata).toEqual(common.outputMetadata);
    await common.release();
  });

  it('checks what onnxruntime-common checks, with its messages, before the native run', async () => {
    const { binding, runs } = countingBinding();
    const s = await native(SIMPLE, binding);
    const thrown = (f: () => unknown) => { try { f(); return undefined; } catch (e) { return e; } };
    expect(thrown(() => s.run({ INPUT0: simpleFeeds().INPUT0 }, ['OUTPUT0']))).toEqual(new Error("input 'INPUT1' is missing in 'feeds'."));
    expect(thrown(() => s.run(simpleFeeds(), ['NOPE']))).toEqual(new RangeError("'fetches' contains invalid output name: NOPE."));
    expect(thrown(() => s.run(simpleFeeds(), []))).toEqual(new TypeError("'fetches' cannot be an empty array."));
    expect(runs()).toBe(0);
    // onnxruntime-common throws the same three (in a promise).
    const common = await ort.InferenceSession.create(SIMPLE, opts);
    await expect(common.run({ INPUT0: simpleFeeds().INPUT0 }, ['OUTPUT0'])).rejects.toThrow("input 'INPUT1' is missing in 'feeds'.");
    await expect(common.run(simpleFeeds(), ['NOPE'])).rejects.toThrow("'fetches' contains invalid output name: NOPE.");
    await expect(common.run(simpleFeeds(), [])).rejects.toThrow("'fetches' cannot be an empty array.");
    await common.release();
    expect(s.run(simpleFeeds(4, 1), ['OUTPUT0'])['OUTPUT0']!.data).toEqual(ints(5));
    expect(runs()).toBe(1);
  });

  it('a bad input the checks let through fails in the native run, as a throw (the session turns it into an answer)', async () => {
    const s = await native(SIMPLE);
    const wrong = { INPUT0: new ort.Tensor('float32', new Float32Array(16), [1, 16]), INPUT1: simpleFeeds().INPUT1 };
    expect(() => s.run(wrong, ['OUTPUT0'])).toThrow(/type/i);
    expect(s.run(simpleFeeds(1, 1), ['OUTPUT0'])['OUTPUT0']!.data).toEqual(ints(2));
  });

  it('takes plain objects as inputs (no Tensor made), and refuses one whose data is shorter than its shape, as a throw', async () => {
    const s = await native(SIMPLE);
    const feed = (data: Int32Array, dims = [1, 16]) => ({ location: 'cpu', type: 'int32', dims, data });
    expect(s.run({ INPUT0: feed(ints(2)), INPUT1: feed(ints(3)) }, ['OUTPUT0'])['OUTPUT0']!.data).toEqual(ints(5));
    expect(() => s.run({ INPUT0: feed(new Int32Array(8)), INPUT1: feed(ints(3)) }, ['OUTPUT0'])).toThrow();
    expect(() => s.run({ INPUT0: feed(ints(1), [1, 16.5]), INPUT1: feed(ints(3)) }, ['OUTPUT0'])).toThrow(/dims/);
    expect(() => s.run({ INPUT0: { location: 'cpu', type: 'int32', dims: [1, 16], data: new Float32Array(16) }, INPUT1: feed(ints(3)) }, ['OUTPUT0'])).toThrow(/typed array/);
    expect(s.run({ INPUT0: feed(ints(4)), INPUT1: feed(ints(3)) }, ['OUTPUT1'])['OUTPUT1']!.data).toEqual(ints(1));
  });

  it('a string input with fewer strings than its shape holds is refused, as a throw', async () => {
    const s = await native(join(EXAMPLES, 'simple_string/1/model.onnx'));
    const name = s.inputNames[0]!;
    const feeds = Object.fromEntries(s.inputNames.map((n) => [n, { location: 'cpu', type: 'string', dims: [1, 16], data: new Array<string>(16).fill('1') }]));
    expect(() => s.run({ ...feeds, [name]: { location: 'cpu', type: 'string', dims: [1, 16], data: ['1', '2'] } }, [s.outputNames[0]!])).toThrow();
    expect(Object.keys(s.run(feeds, [s.outputNames[0]!]))).toEqual([s.outputNames[0]]);
  });

  it('a model file that is not a model fails to load, as with onnxruntime-common', async () => {
    const bad = join(mkdtempSync(join(tmpdir(), 'triode-loader-')), 'model.onnx');
    writeFileSync(bad, 'not a model');
    const mine = await OnnxLoader.create(bad, opts).then(() => 'loaded', (e: unknown) => e);
    const theirs = await ort.InferenceSession.create(bad, opts).then(() => 'loaded', (e: unknown) => e);
    expect(mine).toBeInstanceOf(Error);
    expect((mine as Error).message).toBe((theirs as Error).message);
  });

  it('without the binding (or with a provider onnxruntime-node does not list), sessions are onnxruntime-common\'s, with the same answers', async () => {
    const s = await create(SIMPLE, null);
    expect(s.immediate).toBe(false);
    const out = await s.run(simpleFeeds(), ['OUTPUT0', 'OUTPUT1']);
    expect(Array.from(out['OUTPUT0']!.data as Int32Array)).toEqual(new Array(16).fill(5));
    expect(s.inputNames).toEqual(['INPUT0', 'INPUT1']);
    await expect(Promise.resolve().then(() => s.run(simpleFeeds(), ['NOPE']))).rejects.toThrow("'fetches' contains invalid output name: NOPE.");
    // A provider it does not list: onnxruntime-common's answer, whatever it is.
    const unlisted = { ...opts, executionProviders: ['no-such-provider'] } as unknown as ort.InferenceSession.SessionOptions;
    const common = vi.spyOn(ort.InferenceSession, 'create');
    const e = await OnnxLoader.create(SIMPLE, unlisted).then(() => 'loaded', (x: unknown) => x);
    expect(common).toHaveBeenCalledTimes(1);
    expect(e).toBeInstanceOf(Error);
    expect((e as Error).message).toMatch(/no available backend found/);
  });
});
