/**
 * Scheduling end to end over HTTP against `triode serve`: interleaved sequences as NVIDIA's
 * simple_http_sequence_sync_infer_client.py sends them (with and without -d), implicit state of a
 * real stateful model (Silero VAD) kept apart per sequence, and dynamic batching, made
 * deterministic by a model that holds its first execution until the test has queued the rest.
 */
import { cpSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLES, ROOT, makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';

let triode: Child;
let base: string;
let metricsBase: string;
/** The gate model's folder: it writes `started` when its first execution begins, waits for `open`. */
const gateDir = mkdtempSync(join(tmpdir(), 'triode-gate-'));

async function post(model: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(`${base}/v2/models/${model}/infer`, { method: 'POST', body: JSON.stringify(body) });
  return { status: r.status, json: await r.json() as Record<string, unknown> };
}

const VALUES = [11, 7, 5, 3, 2, 0, 1];

/** One sequence as the client example sends it: the start value, then VALUES, END on the last. */
async function runSequence(model: string, id: number | string, start: number, sign: number): Promise<number[]> {
  const values = [start, ...VALUES.map((v) => v * sign)];
  const out: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const parameters: Record<string, unknown> = { sequence_id: id };
    if (i === 0) parameters['sequence_start'] = true;
    if (i === values.length - 1) parameters['sequence_end'] = true;
    const r = await post(model, { id: `${id}_${i}`, parameters, inputs: [{ name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [values[i]] }] });
    expect(r.status).toBe(200);
    expect(r.json['id']).toBe(`${id}_${i}`);
    out.push((r.json['outputs'] as { data: number[] }[])[0]!.data[0]!);
  }
  return out;
}

beforeAll(async () => {
  const port = await freePort();
  const metricsPort = await freePort();
  base = `http://127.0.0.1:${port}`;
  metricsBase = `http://127.0.0.1:${metricsPort}`;
  const repo = makeRepository(['simple', 'simple_sequence', 'simple_dyna_sequence', 'silero_vad']);
  cpSync(join(ROOT, 'test', 'fixtures', 'models', 'gate'), join(repo, 'gate'), { recursive: true });
  writeFileSync(join(repo, 'gate', 'config.pbtxt'), `parameters { key: "gate_dir" value: { string_value: ${JSON.stringify(gateDir)} } }\n`, { flag: 'a' });
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false',
    '--metrics-port', String(metricsPort)]);
});

afterAll(async () => {
  await triode?.stop();
});

describe('sequence batching over HTTP', () => {
  it('simple_sequence: three interleaved sequences get their own results', async () => {
    const [a, b, c] = await Promise.all([
      runSequence('simple_sequence', 1000, 0, 1),
      runSequence('simple_sequence', 1001, 100, -1),
      runSequence('simple_sequence', 'b1cbdc5f-8e8a-4f7e-9a5e-3c1d6a1e2f00', 20, -1),
    ]);
    expect(a).toEqual([1, 11, 7, 5, 3, 2, 0, 1]);
    expect(b).toEqual([101, -11, -7, -5, -3, -2, 0, -1]);
    expect(c).toEqual([21, -11, -7, -5, -3, -2, 0, -1]);
  });

  it('simple_dyna_sequence (Oldest, CORRID): the END request adds the correlation id', async () => {
    const [a, b, c] = await Promise.all([
      runSequence('simple_dyna_sequence', 1000, 0, 1),
      runSequence('simple_dyna_sequence', 1001, 100, -1),
      runSequence('simple_dyna_sequence', 1002, 20, -1),
    ]);
    expect(a).toEqual([1, 11, 7, 5, 3, 2, 0, 1001]);
    expect(b).toEqual([101, -11, -7, -5, -3, -2, 0, 1000]);
    expect(c).toEqual([21, -11, -7, -5, -3, -2, 0, 1001]);
  });

  it('attack: a string correlation id for a numeric CORRID is refused alone; the sequences batched beside it go on', async () => {
    const input = { name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [1] };
    const [evil, a, b] = await Promise.all([
      post('simple_dyna_sequence', { parameters: { sequence_id: 'evil', sequence_start: true }, inputs: [input] }),
      post('simple_dyna_sequence', { parameters: { sequence_id: 4301, sequence_start: true, sequence_end: true }, inputs: [input] }),
      post('simple_dyna_sequence', { parameters: { sequence_id: 4302, sequence_start: true, sequence_end: true }, inputs: [input] }),
    ]);
    expect(evil.status).toBe(400);
    expect(evil.json['error']).toBe("inference request to model 'simple_dyna_sequence' has a string correlation ID, but the model expects a UINT64 CORRID");
    expect([a.status, b.status]).toEqual([200, 200]);
  });

  it("answers Triton's errors: no correlation id, no START, batch size over 1", async () => {
    const input = { name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [1] };
    let r = await post('simple_sequence', { inputs: [input] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toBe("inference request to model 'simple_sequence' must specify a non-zero or non-empty correlation ID");
    r = await post('simple_sequence', { parameters: { sequence_id: 4242 }, inputs: [input] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toBe("inference request for sequence 4242 to model 'simple_sequence' must specify the START flag on the first request of the sequence");
    r = await post('simple_sequence', { parameters: { sequence_id: 4243, sequence_start: true }, inputs: [{ name: 'INPUT', shape: [2, 1], datatype: 'INT32', data: [1, 2] }] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toBe("inference request to model 'simple_sequence' must specify batch-size 1 due to requirements of sequence batcher");
  });

  it('attack: a string correlation id over 256 bytes is refused before its sequence starts (review: 40 ids of 5 MB held 500 MB); one of 256 runs', async () => {
    const input = { name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [4] };
    let r = await post('simple_sequence', { parameters: { sequence_id: 'x'.repeat(5_000_000), sequence_start: true }, inputs: [input] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toBe('string correlation ID (sequence_id) of 5000000 bytes is longer than the 256 bytes accepted');
    r = await post('simple_sequence', { parameters: { sequence_id: 'x'.repeat(256), sequence_start: true, sequence_end: true }, inputs: [input] });
    expect(r.status).toBe(200);
    expect((r.json['outputs'] as { data: number[] }[])[0]!.data).toEqual([5]);
  });

  it('a string id with a newline is echoed whole in the START error (review: the message was cut at the newline)', async () => {
    const r = await post('simple_sequence', { parameters: { sequence_id: 'a\nb' }, inputs: [{ name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [1] }] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toBe("inference request for sequence a\\u000ab to model 'simple_sequence' must specify the START flag on the first request of the sequence");
  });

  it.each([
    [{ sequence_start: 'bogus' }, "Unable to parse 'sequence_start': attempt to access JSON non-boolean as boolean"],
    [{ sequence_id: -5 }, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    [{ sequence_id: 1.5 }, "Unable to parse 'sequence_id': attempt to access JSON non-string as string"],
    [{ priority: -1 }, "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as unsigned-integer"],
  ])('%j to a model without sequence batching is refused with Triton\'s words (review: 200 over HTTP, refused over gRPC)', async (parameters, error) => {
    const data = Array.from({ length: 16 }, () => 1);
    const r = await post('simple', { parameters, inputs: [{ name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data }, { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data }] });
    expect(r.status).toBe(400);
    expect(r.json['error']).toBe(error);
  });

  it('silero_vad: implicit state is kept per sequence, exactly as feeding it back by hand', async () => {
    // Two tones under a slow envelope, different per sequence (4 decimals, so JSON is exact).
    const chunk = (seed: number, k: number) => Array.from({ length: 512 }, (_, i) => {
      const t = (i + k * 512) / 16000;
      const v = Math.sin(2 * Math.PI * (150 + 40 * seed) * t) * Math.sin(2 * Math.PI * 3 * t) * 0.6 + Math.sin(2 * Math.PI * (700 + 90 * seed) * t) * 0.25;
      return Math.round(v * 1e4) / 1e4;
    });
    // Ground truth: onnxruntime directly, state fed back by hand.
    const session = await ort.InferenceSession.create(join(EXAMPLES, 'silero_vad', '1', 'model.onnx'));
    const truth = async (seed: number, keepState = true) => {
      let state: ort.Tensor = new ort.Tensor('float32', new Float32Array(256), [2, 1, 128]);
      const out: number[] = [];
      for (let k = 0; k < 6; k++) {
        const r = await session.run({ input: new ort.Tensor('float32', Float32Array.from(chunk(seed, k)), [1, 512]), state, sr: new ort.Tensor('int64', BigInt64Array.of(16000n), [1]) });
        out.push((r['output']!.data as Float32Array)[0]!);
        if (keepState) state = r['stateN']! as ort.Tensor;
      }
      return out;
    };
    const served = async (seed: number, id: number) => {
      const out: number[] = [];
      for (let k = 0; k < 6; k++) {
        const r = await post('silero_vad', {
          parameters: { sequence_id: id, sequence_start: k === 0, sequence_end: k === 5 },
          inputs: [
            { name: 'input', shape: [1, 512], datatype: 'FP32', data: chunk(seed, k) },
            { name: 'sr', shape: [1], datatype: 'INT64', data: [16000] },
          ],
        });
        expect(r.status).toBe(200);
        out.push((r.json['outputs'] as { data: number[] }[])[0]!.data[0]!);
      }
      return out;
    };
    const [x, y] = await Promise.all([served(1, 7001), served(4, 7002)]);
    const [tx, ty] = [await truth(1), await truth(4)];
    expect(x).toEqual(tx.map((v) => Math.fround(v)));
    expect(y).toEqual(ty.map((v) => Math.fround(v)));
    // The state matters: the same chunks without it give other probabilities.
    expect(await truth(1, false)).not.toEqual(tx);
    await session.release();
  });
});

describe('dynamic batching over HTTP', () => {
  // Deterministic on any machine: the first request holds the only instance (the gate model waits
  // for a file), the other 63 are seen queued (nv_inference_pending_request_count), then the gate
  // opens and the queue must drain in batches of max_batch_size (8), in arrival order.
  it('64 concurrent requests: 1 held, 63 queued behind it, then exactly 8 batches (8 x 7 + 7)', async () => {
    const infer = (k: number) => post('gate', { inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'INT32', data: [k] }] });
    const stats = async () => (await (await fetch(`${base}/v2/models/gate/stats`)).json() as {
      model_stats: { execution_count: number; inference_count: number; batch_stats: { batch_size: number; compute_infer: { count: number } }[] }[];
    }).model_stats[0]!;
    const pending = async () => Number(/^nv_inference_pending_request_count\{model="gate",version="1"\} (\d+)$/m.exec(await (await fetch(`${metricsBase}/metrics`)).text())?.[1]);
    expect((await stats()).execution_count).toBe(0);
    const first = infer(0);
    await until(async () => existsSync(join(gateDir, 'started')));
    const rest = Array.from({ length: 63 }, (_, k) => infer(k + 1));
    await until(async () => (await pending()) === 63);
    writeFileSync(join(gateDir, 'open'), '');
    const results = await Promise.all([first, ...rest]);
    results.forEach((r, k) => {
      expect(r.status).toBe(200);
      expect((r.json['outputs'] as { data: number[] }[])[0]!.data).toEqual([k + 1]);
    });
    const after = await stats();
    expect(after.inference_count).toBe(64);
    expect(after.execution_count).toBe(9);
    const bySize = Object.fromEntries(after.batch_stats.map((b) => [b.batch_size, b.compute_infer.count]));
    expect(bySize).toEqual({ 1: 1, 7: 1, 8: 7 });
  });
});
