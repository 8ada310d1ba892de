// The "frontend floor" of PERF-BASELINE.md finding 8: Hono reading an infer request's body and
// answering a fixed `simple`-shaped JSON response, without parsing the body or running a model.
// What HTTP alone costs in Node; Triode's target is >= 0.6x its rate at c=64 (issue #18).
// Usage: node bench/floor-server.mjs <port>
import { serve } from '@hono/node-server';
import { Hono } from 'hono';

const [port = '8200'] = process.argv.slice(2);
const data = Array.from({ length: 16 }, (_, i) => i + 1);
const answer = JSON.stringify({
  model_name: 'simple', model_version: '1',
  outputs: [{ name: 'OUTPUT0', datatype: 'INT32', shape: [1, 16], data }, { name: 'OUTPUT1', datatype: 'INT32', shape: [1, 16], data }],
});

const app = new Hono();
app.post('/v2/models/:model/infer', async (c) => {
  await c.req.arrayBuffer();
  return c.body(answer, 200, { 'Content-Type': 'application/json' });
});
serve({ fetch: app.fetch, port: Number(port), hostname: '127.0.0.1' }, () => console.log(`floor server on ${port}`));
