/**
 * The onnxruntime backend's main-thread path (`execution_thread`, issue #18) on `triode serve`: a
 * fast model moves to the main thread and answers the same; `instance` never does; a model whose
 * runs grow goes back to its thread; an instance's executions stay serial; unload releases the
 * main-thread session and a reload works. Which path ran is read from the log lines the backend
 * writes when an instance changes path (nothing is added to the wire responses).
 */
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES, binaryBody, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';
import { T, model, node, valueInfo } from '../scripts/onnx-writer.mjs';

const t16 = (name: string) => `{ name: "${name}" data_type: TYPE_INT32 dims: [ 16 ] }`;
const simpleConfig = (name: string, mode: string, thresholdUs?: number) => [
  `name: "${name}"`, 'platform: "onnxruntime_onnx"', 'max_batch_size: 8', `input [ ${t16('INPUT0')}, ${t16('INPUT1')} ]`,
  `output [ ${t16('OUTPUT0')}, ${t16('OUTPUT1')} ]`, 'dynamic_batching { }',
  `parameters { key: "execution_thread" value: { string_value: "${mode}" } }`,
  // A threshold no run of `simple` reaches (20-200 µs on a busy 2-core machine, more in a starved
  // child): these tests are about the path, not the threshold, which execution-thread-policy.test.ts
  // covers with injected timings.
  ...(thresholdUs ? [`parameters { key: "execution_thread_threshold_us" value: { string_value: "${thresholdUs}" } }`] : []),
].join('\n');

// ppocr_det, one instance, no batching, with a threshold no machine meets (1 µs): it must never leave
// its thread, however fast the machine. (Moving back to the thread when runs grow is tested with
// injected measurements in execution-thread-policy.test.ts and onnxruntime-instance.test.ts.)
const DET_CONFIG = [
  'name: "det_one"', 'platform: "onnxruntime_onnx"', 'max_batch_size: 1',
  'input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, -1, -1 ] } ]',
  'output [ { name: "sigmoid_0.tmp_0" data_type: TYPE_FP32 dims: [ 1, -1, -1 ] } ]',
  'instance_group [ { count: 1, kind: KIND_CPU } ]',
  'parameters { key: "execution_thread_threshold_us" value: { string_value: "1" } }',
].join('\n');

// simple with one instance and no batching, threshold 100 ms (simple takes 20-200 µs on a busy
// 2-core machine; the margin is for a starved child, this test is about the path, not the
// threshold): it moves to the main thread, and concurrent requests then use both paths.
const ONE_CONFIG = [
  'name: "simple_one"', 'platform: "onnxruntime_onnx"', 'max_batch_size: 8', `input [ ${t16('INPUT0')}, ${t16('INPUT1')} ]`,
  `output [ ${t16('OUTPUT0')}, ${t16('OUTPUT1')} ]`, 'instance_group [ { count: 1, kind: KIND_CPU } ]',
  'parameters { key: "execution_thread_threshold_us" value: { string_value: "100000" } }',
].join('\n');

let triode: Child;
let base: string;
let repo: string;

beforeAll(async () => {
  repo = makeRepository(['simple'], {
    'simple_auto/config.pbtxt': simpleConfig('simple_auto', 'auto', 100000),
    'simple_instance/config.pbtxt': simpleConfig('simple_instance', 'instance', 100000),
    'simple_main/config.pbtxt': simpleConfig('simple_main', 'main'),
    'det_one/config.pbtxt': DET_CONFIG,
    'simple_one/config.pbtxt': ONE_CONFIG,
  });
  for (const m of ['simple_auto', 'simple_instance', 'simple_main', 'simple_one']) cpSync(join(EXAMPLES, 'simple', '1'), join(repo, m, '1'), { recursive: true });
  cpSync(join(EXAMPLES, 'ppocr_det', '1'), join(repo, 'det_one', '1'), { recursive: true });
  // Y = Expand(X, SHP): fixed input dims, but the output's shape is a request's SHP values.
  mkdirSync(join(repo, 'expand_auto', '1'), { recursive: true });
  writeFileSync(join(repo, 'expand_auto', '1', 'model.onnx'), model('expand', [node('Expand', ['X', 'SHP'], ['Y'], 'expand')],
    [valueInfo(11, 'X', T.FLOAT, [1]), valueInfo(11, 'SHP', T.INT64, [2])], [valueInfo(12, 'Y', T.FLOAT, ['a', 'b'])]));
  writeFileSync(join(repo, 'expand_auto', 'config.pbtxt'), [
    'name: "expand_auto"', 'platform: "onnxruntime_onnx"', 'max_batch_size: 0',
    'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] }, { name: "SHP" data_type: TYPE_INT64 dims: [ 2 ] } ]',
    'output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]', 'instance_group [ { count: 1, kind: KIND_CPU } ]',
    'parameters { key: "execution_thread_threshold_us" value: { string_value: "100000" } }',
  ].join('\n'));
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1',
    '--allow-grpc=false', '--allow-metrics=false', '--model-control-mode', 'explicit', '--log-verbose', '1',
    ...['simple', 'simple_auto', 'simple_instance', 'simple_main', 'simple_one', 'det_one', 'expand_auto'].flatMap((m) => ['--load-model', m])]);
}, 120_000);

afterAll(async () => { await triode?.stop(); });

/** The backend's log messages about `model`'s instances. */
function pathLog(model: string): string[] {
  return triode.output().split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { msg: string }).msg)
    .filter((m) => m.startsWith(`model "${model}" instance`));
}

async function addSub(model: string, a: number): Promise<{ sum: number[]; diff: number[] }> {
  const in0 = new Int32Array(16).map((_, i) => i * a);
  const in1 = new Int32Array(16).fill(a);
  const header = { inputs: [['INPUT0', in0], ['INPUT1', in1]].map(([name]) => ({ name, datatype: 'INT32', shape: [1, 16], parameters: { binary_data_size: 64 } })) };
  const { body, headerLength } = binaryBody(header, [in0, in1]);
  const r = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body, headers: { 'Inference-Header-Content-Length': String(headerLength) } });
  expect(r.status).toBe(200);
  const out = await r.json() as { outputs: { name: string; data: number[] }[] };
  const get = (n: string) => out.outputs.find((o) => o.name === n)!.data;
  return { sum: get('OUTPUT0'), diff: get('OUTPUT1') };
}

async function det(side: number): Promise<number[]> {
  const x = new Float32Array(3 * side * side).fill(0.5);
  const header = { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 3, side, side], parameters: { binary_data_size: x.byteLength } }], outputs: [{ name: 'sigmoid_0.tmp_0' }] };
  const { body, headerLength } = binaryBody(header, [x]);
  const r = await fetch(`${base}/v2/models/det_one/infer`, { method: 'POST', body, headers: { 'Inference-Header-Content-Length': String(headerLength) } });
  expect(r.status).toBe(200);
  return ((await r.json()) as { outputs: { shape: number[] }[] }).outputs[0]!.shape;
}

interface Stats { execution_count: number; inference_stats: Record<'compute_input' | 'compute_infer' | 'compute_output' | 'success', { count: number; ns: number }> }
async function stats(model: string): Promise<Stats> {
  const r = await fetch(`${base}/v2/models/${model}/stats`);
  return ((await r.json()) as { model_stats: Stats[] }).model_stats[0]!;
}

const expected = (a: number) => ({ sum: Array.from({ length: 16 }, (_, i) => i * a + a), diff: Array.from({ length: 16 }, (_, i) => i * a - a) });

describe('execution_thread on triode serve', () => {
  it('simple (auto) moves to the main thread and answers exactly as on its thread; statistics count every execution', async () => {
    const before = await stats('simple_auto');
    for (let k = 0; k < 100; k++) expect(await addSub('simple_auto', k)).toEqual(expected(k));
    expect(pathLog('simple_auto').some((m) => / runs on the main thread: a request takes \d+ µs to compute, at most 100000 µs/.test(m))).toBe(true);
    // Answers once it is there, concurrently too (batches then go to the thread, lone requests to the main thread).
    const results = await Promise.all(Array.from({ length: 64 }, (_, k) => addSub('simple_auto', k)));
    results.forEach((r, k) => expect(r).toEqual(expected(k)));
    const after = await stats('simple_auto');
    expect(after.inference_stats.success.count - before.inference_stats.success.count).toBe(164);
    const execs = after.execution_count - before.execution_count;
    expect(execs).toBeGreaterThanOrEqual(100);
    for (const k of ['compute_input', 'compute_infer', 'compute_output'] as const) {
      expect(after.inference_stats[k].count - before.inference_stats[k].count).toBe(164);
      expect(after.inference_stats[k].ns).toBeGreaterThan(before.inference_stats[k].ns);
    }
  });

  it('attack: auto keeps a model whose output size a request sets (Expand to SHP) on its thread, however cheap its runs measure', async () => {
    // Before: after its warmup it ran on the main thread, and one request asking for a [4096, 65536]
    // expansion held every endpoint for as long as that took.
    const body = JSON.stringify({ inputs: [{ name: 'X', datatype: 'FP32', shape: [1], data: [1] }, { name: 'SHP', datatype: 'INT64', shape: [2], data: [1, 2] }] });
    for (let k = 0; k < 60; k++) {
      const r = await fetch(`${base}/v2/models/expand_auto/infer`, { method: 'POST', body });
      expect(r.status).toBe(200);
    }
    const messages = triode.output().split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(messages).toContain("model \"expand_auto\" runs on its instance threads only (execution_thread auto): operator 'Expand' takes its output size from 'SHP', which a request can set");
    expect(pathLog('expand_auto')).toEqual([]);
  });

  it('a model forced to "instance" never runs on the main thread; one forced to "main" always does', async () => {
    for (let k = 0; k < 100; k++) expect(await addSub('simple_instance', k)).toEqual(expected(k));
    expect(pathLog('simple_instance')).toEqual([]);
    for (let k = 0; k < 20; k++) expect(await addSub('simple_main', k)).toEqual(expected(k));
    expect(pathLog('simple_main')).toEqual([
      'model "simple_main" instance 0 runs on the main thread (execution_thread "main")',
      'model "simple_main" instance 1 runs on the main thread (execution_thread "main")',
    ]);
  });

  it('a model whose runs take longer than its threshold stays on its thread', async () => {
    for (let k = 0; k < 60; k++) expect(await det(32)).toEqual([1, 1, 32, 32]);
    expect(pathLog('det_one')).toEqual([]);
  });

  it('one instance still runs one execution at a time: its compute time never adds up to more than the wall time', async () => {
    for (let k = 0; k < 60; k++) expect(await addSub('simple_one', k)).toEqual(expected(k));
    expect(pathLog('simple_one').some((m) => m.includes('runs on the main thread'))).toBe(true);
    // Lone requests (main thread) and overlapping ones (its thread) at once, on one instance.
    const before = await stats('simple_one');
    const t0 = performance.now();
    const results = await Promise.all(Array.from({ length: 48 }, (_, k) => addSub('simple_one', k)));
    const wallNs = (performance.now() - t0) * 1e6;
    results.forEach((r, k) => expect(r).toEqual(expected(k)));
    const after = await stats('simple_one');
    const compute = (['compute_input', 'compute_infer', 'compute_output'] as const).reduce((a, k) => a + after.inference_stats[k].ns - before.inference_stats[k].ns, 0);
    expect(after.execution_count - before.execution_count).toBe(48);
    expect(compute).toBeLessThanOrEqual(wallNs);
  });

  it('unload releases the main-thread sessions; a reload works, again and again, without growing memory', async () => {
    const rss = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${triode.proc.pid}/status`, 'utf8'))![1]) * 1024;
    const post = (path: string) => fetch(`${base}/v2/repository/models/simple_auto/${path}`, { method: 'POST' });
    // The model's one main-thread session, released with its last instance (once an unload).
    const released = () => triode.output().split('\n').filter((l) => l.startsWith('{')).map((l) => (JSON.parse(l) as { msg: string }).msg)
      .filter((m) => m === 'model "simple_auto": released its main-thread session').length;
    let first = 0;
    for (let cycle = 0; cycle < 8; cycle++) {
      const had = released();
      expect((await post('unload')).status).toBe(200);
      await until(async () => (await fetch(`${base}/v2/models/simple_auto/ready`)).status !== 200);
      // Instance 0 at least had moved to the main thread (the first test): its session is released.
      if (cycle === 0) expect(released()).toBeGreaterThan(had);
      expect((await post('load')).status).toBe(200);
      for (let k = 0; k < 60; k++) expect(await addSub('simple_auto', k)).toEqual(expected(k));
      if (cycle === 1) first = rss();
    }
    expect(rss() - first).toBeLessThan(80 * 1024 * 1024);
    // Every load moved to the main thread again, and every unload released what it had made.
    const moves = pathLog('simple_auto').filter((m) => m.includes('runs on the main thread')).length;
    expect(moves).toBeGreaterThanOrEqual(9);
    expect(released()).toBeGreaterThanOrEqual(8);
  }, 120_000);
});
