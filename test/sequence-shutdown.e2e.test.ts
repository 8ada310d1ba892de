/**
 * SIGTERM with a sequence live (Triton's graceful exit: InferAsync accepts inference while the
 * server exits, so a sequence spanning several requests can finish): over HTTP, the sequence's
 * next request and its END are served, a new START is refused 503, and the process exits after
 * the END.
 */
import { describe, expect, it } from 'vitest';
import { makeRepository } from './helpers/repository.js';
import { freePort, startTriode, until } from './helpers/process.js';

describe('shutdown with a live sequence', () => {
  it('serves the live sequence to its END, refuses a new START 503, then exits 0', async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const child = await startTriode(['serve', '--model-repository', makeRepository(['simple_sequence']), '--http-port', String(port), '--http-address', '127.0.0.1',
      '--allow-grpc=false', '--allow-metrics=false', '--exit-timeout-secs', '30']);
    const post = async (parameters: Record<string, unknown>, v: number) => {
      const r = await fetch(`${base}/v2/models/simple_sequence/infer`, { method: 'POST', body: JSON.stringify({ parameters, inputs: [{ name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [v] }] }) });
      return { status: r.status, json: await r.json() as Record<string, unknown> };
    };
    try {
      expect((await post({ sequence_id: 42, sequence_start: true }, 0)).status).toBe(200);
      process.kill(child.proc.pid!, 'SIGTERM');
      // Not ready once shutdown has begun (the schedulers stop accepting in the same step).
      await until(async () => (await fetch(`${base}/v2/health/ready`)).status !== 200);
      expect((await post({ sequence_id: 42 }, 5)).status).toBe(200);
      const refused = await post({ sequence_id: 43, sequence_start: true }, 1);
      expect(refused).toEqual({ status: 503, json: { error: 'Server is stopping, scheduler for model has stopped accepting new inference requests' } });
      let exited = false;
      void child.exited.then(() => { exited = true; });
      await new Promise((r) => setTimeout(r, 300));
      expect(exited).toBe(false);
      expect((await post({ sequence_id: 42, sequence_end: true }, 3)).status).toBe(200);
      expect(await child.exited).toBe(0);
      expect(child.output()).toMatch(/Model 'simple_sequence' \(version 1\) has 1 in-flight inferences/);
    } finally {
      child.proc.kill('SIGKILL');
    }
  });
});
