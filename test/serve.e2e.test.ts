/**
 * End to end: `triode serve` as a child process on a free port, spoken to over a real socket the
 * way NVIDIA's tritonclient HTTP examples do (simple_http_infer_client.py,
 * simple_http_async_infer_client.py, simple_http_string_infer_client.py,
 * simple_http_health_metadata.py), plus ppocr_cls with JSON and binary tensors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deserializeBytesTensor, serializeBytesTensor } from '@triode/core';
import { cpSync, existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT, binaryBody, makeRepository, splitBinary } from './helpers/repository.js';
import { freePort, startTriode, until, type Child } from './helpers/process.js';

let triode: Child;
let base: string;
let metricsPort: number;

const IN0 = Int32Array.from({ length: 16 }, (_, i) => i);
const ONES = new Int32Array(16).fill(1);
const NEG = new Int32Array(16).fill(-1);

async function infer(model: string, header: unknown, chunks: ArrayBufferView[] = [], query = ''): Promise<{ status: number; json: Record<string, unknown>; rest: Buffer }> {
  const { body, headerLength } = binaryBody(header, chunks);
  const headers: Record<string, string> = { 'Content-Type': 'application/octet-stream' };
  if (chunks.length) headers['Inference-Header-Content-Length'] = String(headerLength);
  const r = await fetch(`${base}/v2/models/${model}/infer${query}`, { method: 'POST', body, headers });
  const buf = Buffer.from(await r.arrayBuffer());
  const h = r.headers.get('inference-header-content-length');
  if (h === null) return { status: r.status, json: JSON.parse(buf.toString()) as Record<string, unknown>, rest: Buffer.alloc(0) };
  return { status: r.status, ...splitBinary(buf, Number(h)) };
}

const i32 = (b: Buffer) => Array.from(new Int32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)));

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const repo = makeRepository(['simple', 'simple_int8', 'simple_string', 'ppocr_cls']);
  metricsPort = await freePort();
  triode = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--metrics-port', String(metricsPort)]);
});

afterAll(async () => {
  await triode?.stop();
});

describe('triode serve over a socket', () => {
  it('prints Triton\'s model table at startup', () => {
    expect(triode.output()).toMatch(/\| Model\s+\| Version \| Status \|/);
    expect(triode.output()).toMatch(/\| simple\s+\| 1\s+\| READY\s+\|/);
  });

  it('simple_http_health_metadata.py: live, ready, model ready, metadata, unknown model', async () => {
    expect((await fetch(`${base}/v2/health/live`)).status).toBe(200);
    expect((await fetch(`${base}/v2/health/ready`)).status).toBe(200);
    expect((await fetch(`${base}/v2/models/simple/ready`)).status).toBe(200);
    const meta = await (await fetch(`${base}/v2`)).json() as { name: string };
    expect(meta.name).toBe('triton');
    const m = await (await fetch(`${base}/v2/models/simple`)).json() as { name: string; inputs: unknown[] };
    expect(m.name).toBe('simple');
    expect(m.inputs).toHaveLength(2);
    const bad = await fetch(`${base}/v2/models/wrong_model_name`);
    expect(bad.status).toBe(404);
    expect((await bad.json() as { error: string }).error).toContain('Request for unknown model');
  });

  it('simple_http_infer_client.py: INPUT0 JSON + INPUT1 binary, OUTPUT0 binary + OUTPUT1 JSON, query params, statistics', async () => {
    const r = await infer('simple', {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array.from(IN0) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1', parameters: { binary_data: false } }],
    }, [NEG], '?test_1=1&test_2=2');
    expect(r.status).toBe(200);
    expect(i32(r.rest)).toEqual(Array.from(IN0, (x) => x - 1));
    const outs = r.json['outputs'] as { name: string; data?: number[] }[];
    expect(outs[1]!.data).toEqual(Array.from(IN0, (x) => x + 1));

    // outputs=None: every output comes back, binary by default in the Python client.
    const all = await infer('simple', {
      parameters: { binary_data_output: true },
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
      ],
    }, [IN0, ONES]);
    expect((all.json['outputs'] as unknown[]).length).toBe(2);
    expect(i32(all.rest)).toEqual([...Array.from(IN0, (x) => x + 1), ...Array.from(IN0, (x) => x - 1)]);

    const stats = await (await fetch(`${base}/v2/models/simple/stats`)).json() as { model_stats: { inference_stats: { success: { count: number } } }[] };
    expect(stats.model_stats).toHaveLength(1);
    expect(stats.model_stats[0]!.inference_stats.success.count).toBeGreaterThanOrEqual(2);

    const unknown = await infer('wrong_model', { inputs: [] });
    expect(unknown.status).toBe(404);
    expect(String(unknown.json['error'])).toMatch(/^Request for unknown model/);
  });

  it('simple_http_async_infer_client.py: concurrent requests each get their own answer', async () => {
    const results = await Promise.all(Array.from({ length: 32 }, (_, k) => infer('simple', {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', parameters: { binary_data_size: 64 } },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }],
    }, [IN0.map((x) => x * k), ONES])));
    results.forEach((r, k) => {
      expect(r.status).toBe(200);
      expect(i32(r.rest)).toEqual(Array.from(IN0, (x) => x * k + 1));
    });
  });

  it('simple_http_string_infer_client.py: decimal strings, binary and JSON', async () => {
    const a = serializeBytesTensor(Array.from(IN0, String));
    const b = serializeBytesTensor(Array.from(ONES, String));
    const bin = await infer('simple_string', {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'BYTES', parameters: { binary_data_size: a.byteLength } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'BYTES', parameters: { binary_data_size: b.byteLength } },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: true } }, { name: 'OUTPUT1', parameters: { binary_data: true } }],
    }, [a, b]);
    expect(bin.status).toBe(200);
    const sizes = (bin.json['outputs'] as { parameters: { binary_data_size: number } }[]).map((o) => o.parameters.binary_data_size);
    const s0 = deserializeBytesTensor(new Uint8Array(bin.rest.subarray(0, sizes[0]))).map((x) => Buffer.from(x).toString());
    const s1 = deserializeBytesTensor(new Uint8Array(bin.rest.subarray(sizes[0]))).map((x) => Buffer.from(x).toString());
    expect(s0).toEqual(Array.from(IN0, (x) => String(x + 1)));
    expect(s1).toEqual(Array.from(IN0, (x) => String(x - 1)));

    const json = await infer('simple_string', {
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'BYTES', data: Array.from(IN0, String) },
        { name: 'INPUT1', shape: [1, 16], datatype: 'BYTES', data: Array.from(ONES, String) },
      ],
    });
    expect((json.json['outputs'] as { data: string[] }[])[1]!.data).toEqual(Array.from(IN0, (x) => String(x - 1)));
  });

  it('simple_int8 adds INT8 tensors (binary)', async () => {
    const a = Int8Array.from({ length: 16 }, (_, i) => i);
    const b = new Int8Array(16).fill(1);
    const r = await infer('simple_int8', {
      parameters: { binary_data_output: true },
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT8', parameters: { binary_data_size: 16 } },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT8', parameters: { binary_data_size: 16 } },
      ],
    }, [a, b]);
    expect(r.status).toBe(200);
    expect(Array.from(new Int8Array(r.rest.buffer.slice(r.rest.byteOffset, r.rest.byteOffset + 16)))).toEqual(Array.from(a, (x) => x + 1));
  });

  it('ppocr_cls infers with JSON and with binary tensors, with the same result', async () => {
    const x = Float32Array.from({ length: 3 * 48 * 192 }, (_, i) => Math.sin(i) * 0.5);
    const json = await infer('ppocr_cls', { inputs: [{ name: 'x', shape: [1, 3, 48, 192], datatype: 'FP32', data: Array.from(x) }] });
    expect(json.status).toBe(200);
    const pj = (json.json['outputs'] as { shape: number[]; data: number[] }[])[0]!;
    expect(pj.shape).toEqual([1, 2]);
    const bin = await infer('ppocr_cls', {
      inputs: [{ name: 'x', shape: [1, 3, 48, 192], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } }],
      outputs: [{ name: 'softmax_0.tmp_0', parameters: { binary_data: true } }],
    }, [x]);
    expect(bin.status).toBe(200);
    const pb = Array.from(new Float32Array(bin.rest.buffer.slice(bin.rest.byteOffset, bin.rest.byteOffset + 8)));
    expect(pb[0]).toBeCloseTo(pj.data[0]!, 6);
    expect(pb[0]! + pb[1]!).toBeCloseTo(1, 5);
  });

  it('answers a batch of 4 cls crops with a [4, 2] output', async () => {
    const x = new Float32Array(4 * 3 * 48 * 192).fill(0.1);
    const r = await infer('ppocr_cls', {
      parameters: { binary_data_output: true },
      inputs: [{ name: 'x', shape: [4, 3, 48, 192], datatype: 'FP32', parameters: { binary_data_size: x.byteLength } }],
    }, [x]);
    expect(r.status).toBe(200);
    expect((r.json['outputs'] as { shape: number[] }[])[0]!.shape).toEqual([4, 2]);
  });
});

describe('metrics', () => {
  it('serves Prometheus metrics on --metrics-port, counting the requests above', async () => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(text).toContain('# TYPE nv_inference_request_success counter');
    expect(Number(/nv_inference_request_success\{model="simple",version="1"\} (\d+)/.exec(text)?.[1])).toBeGreaterThan(30);
  });
});

describe('shutdown', () => {
  it('on SIGTERM finishes the requests in flight and exits 0', async () => {
    const port = await freePort();
    const metricsPort = await freePort();
    const url = `http://127.0.0.1:${port}`;
    // The gate model holds its first execution until a file exists: the six requests are known to be
    // in (one executing, five queued) before the SIGTERM, and finish only after it, on any machine.
    const gateDir = mkdtempSync(join(tmpdir(), 'triode-gate-'));
    const repo = makeRepository([]);
    cpSync(join(ROOT, 'test', 'fixtures', 'models', 'gate'), join(repo, 'gate'), { recursive: true });
    writeFileSync(join(repo, 'gate', 'config.pbtxt'), `parameters { key: "gate_dir" value: { string_value: ${JSON.stringify(gateDir)} } }\n`, { flag: 'a' });
    const child = await startTriode(['serve', '--model-repository', repo, '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--metrics-port', String(metricsPort), '--exit-timeout-secs', '20']);
    const infer = (k: number) => fetch(`${url}/v2/models/gate/infer`, { method: 'POST', body: JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'INT32', data: [k] }] }) })
      .then(async (r) => ({ status: r.status, json: await r.json() as { outputs?: { data: number[] }[] } }));
    const pending = async () => Number(/^nv_inference_pending_request_count\{model="gate",version="1"\} (\d+)$/m.exec(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text())?.[1]);
    const first = infer(0);
    await until(async () => existsSync(join(gateDir, 'started')));
    const rest = Array.from({ length: 5 }, (_, k) => infer(k + 1));
    await until(async () => (await pending()) === 5);
    process.kill(child.proc.pid!, 'SIGTERM');
    // Shutdown has begun (the server is waiting on the six) before they may finish.
    await until(async () => /Waiting for in-flight requests to complete/.test(child.output()));
    writeFileSync(join(gateDir, 'open'), '');
    const results = await Promise.all([first, ...rest]);
    results.forEach((r, k) => {
      expect(r.status).toBe(200);
      expect(r.json.outputs?.[0]?.data).toEqual([k + 1]);
    });
    expect(await child.exited).toBe(0);
  });

  it('on SIGTERM finishes a generate_stream in flight: every event arrives, the stream ends, then the process exits', async () => {
    const port = await freePort();
    const child = await startTriode(['serve', '--model-repository', makeRepository(['repeat_int32']), '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--exit-timeout-secs', '20']);
    const n = 12;
    const r = await fetch(`http://127.0.0.1:${port}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: Array.from({ length: n }, (_, i) => i), DELAY: Array.from({ length: n }, () => 100), WAIT: [0] }) });
    expect(r.status).toBe(200);
    setTimeout(() => process.kill(child.proc.pid!, 'SIGTERM'), 300);
    // Before the fix the stream was counted out once its first byte left: shutdown unloaded the
    // model under it, the last event was lost and the stream never ended.
    const text = await r.text();
    const outs = [...text.matchAll(/"OUT":(\d+)/g)].map((m) => Number(m[1]));
    expect(outs).toEqual(Array.from({ length: n }, (_, i) => i));
    expect(await child.exited).toBe(0);
    expect(child.output()).not.toMatch(/in flight at exit|exit timeout expired/);
  });

  it('a client that never finishes reading a stream does not hold the process past --exit-timeout-secs', async () => {
    const port = await freePort();
    const child = await startTriode(['serve', '--model-repository', makeRepository(['repeat_int32']), '--http-port', String(port), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false', '--exit-timeout-secs', '2']);
    // 200 events 100 ms apart: 20 s of stream, far past the exit timeout.
    const r = await fetch(`http://127.0.0.1:${port}/v2/models/repeat_int32/generate_stream`, { method: 'POST', body: JSON.stringify({ IN: Array.from({ length: 200 }, (_, i) => i), DELAY: Array.from({ length: 200 }, () => 100), WAIT: [0] }) });
    const reading = r.text().catch(() => 'cut');
    const t0 = Date.now();
    process.kill(child.proc.pid!, 'SIGTERM');
    await child.exited;
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(await reading).toBeDefined();
  });
});
