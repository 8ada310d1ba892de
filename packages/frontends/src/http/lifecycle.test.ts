import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { HttpLifecycle } from './lifecycle.js';

describe('HttpLifecycle', () => {
  it('finishes requests that arrived before shutdown and refuses inference after it with 503', async () => {
    const lc = new HttpLifecycle();
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    const app = new Hono();
    app.use(lc.middleware());
    app.post('/slow', async (c) => { await gate; return c.text('done'); });
    app.get('/v2/health/live', (c) => c.body('', 200));

    const slow = app.request('/slow', { method: 'POST' });
    await new Promise((r) => setImmediate(r));
    expect(lc.inflight).toBe(1);
    let drained = false;
    const shutdown = lc.shutdown(10_000).then((left) => { drained = true; return left; });

    const refused = await app.request('/slow', { method: 'POST' });
    expect(refused.status).toBe(503);
    expect(await refused.json()).toEqual({ error: 'Server is stopping, no new inference requests are accepted' });
    expect((await app.request('/v2/health/live')).status).toBe(200);
    expect(drained).toBe(false);

    release();
    expect(await (await slow).text()).toBe('done');
    expect(await shutdown).toBe(0);
  });

  it('gives up after the timeout and reports what is left', async () => {
    const lc = new HttpLifecycle();
    const app = new Hono();
    app.use(lc.middleware());
    app.post('/never', () => new Promise<Response>(() => undefined));
    void app.request('/never', { method: 'POST' });
    await new Promise((r) => setImmediate(r));
    expect(await lc.shutdown(20)).toBe(1);
  });
});
