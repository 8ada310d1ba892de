// The "naive server" of PERF-BASELINE.md: Hono + onnxruntime-node on the event loop, KServe v2
// JSON in and out, one session per model, no batching, no worker threads. It is the baseline
// Triode is measured against; do not optimize it.
// Usage: node bench/naive-server.mjs <port> <model_repository>
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import * as ort from 'onnxruntime-node';
import { join } from 'node:path';

const [port = '8100', repo = 'model_repository'] = process.argv.slice(2);
const TYPES = { INT32: 'int32', FP32: 'float32', INT8: 'int8' };
const ARRAYS = { INT32: Int32Array, FP32: Float32Array, INT8: Int8Array };
const OUT_TYPES = { int32: 'INT32', float32: 'FP32', int8: 'INT8' };
const sessions = {};
for (const m of ['simple', 'ppocr_cls']) {
  sessions[m] = await ort.InferenceSession.create(join(repo, m, '1', 'model.onnx'), { intraOpNumThreads: 1, interOpNumThreads: 1 });
}

const app = new Hono();
app.post('/v2/models/:model/infer', async (c) => {
  const model = c.req.param('model');
  const session = sessions[model];
  if (!session) return c.json({ error: `unknown model ${model}` }, 404);
  const req = await c.req.json();
  const feeds = {};
  for (const inp of req.inputs) {
    feeds[inp.name] = new ort.Tensor(TYPES[inp.datatype], ARRAYS[inp.datatype].from(inp.data.flat(Infinity)), inp.shape);
  }
  const out = await session.run(feeds);
  return c.json({
    model_name: model,
    model_version: '1',
    outputs: Object.entries(out).map(([name, t]) => ({ name, datatype: OUT_TYPES[t.type], shape: t.dims, data: Array.from(t.data) })),
  });
});
serve({ fetch: app.fetch, port: Number(port), hostname: '127.0.0.1' }, () => console.log(`naive server on ${port}`));
