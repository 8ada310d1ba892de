/**
 * A server shutdown and live sequences, as Triton's InferenceServer::Stop: requests continuing a
 * live sequence are still served, new sequences and other requests are refused UNAVAILABLE, and
 * the stop waits for the sequences to end (END or idle timeout).
 */
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Backend, ExecuteRequest, ExecuteResult } from './backend-api.js';
import type { InferenceRequest } from './infer-request.js';
import { InferenceServer } from './server.js';

function echoBackend(): Backend {
  const execute = async (requests: ExecuteRequest[]): Promise<ExecuteResult> => ({
    responses: requests.map((r) => ({ outputs: [{ ...r.inputs.find((t) => t.name === 'IN')!, name: 'OUT' }] })),
  });
  return {
    name: 'testing',
    async modelInitialize() {
      return { async instanceInitialize() { return { execute, async finalize() {} }; }, async finalize() {} };
    },
  };
}

async function serve(idleUs: number): Promise<InferenceServer> {
  const repo = mkdtempSync(join(tmpdir(), 'triode-shutdown-'));
  const io = 'input { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }';
  for (const [name, extra] of [['seq', `sequence_batching { max_sequence_idle_microseconds: ${idleUs} }`], ['plain', 'dynamic_batching { }']] as const) {
    mkdirSync(join(repo, name, '1'), { recursive: true });
    writeFileSync(join(repo, name, 'config.pbtxt'), `backend: "testing"\nmax_batch_size: 4\n${io}\n${extra}\ninstance_group { count: 1 kind: KIND_CPU }`);
  }
  return InferenceServer.create({ modelRepositories: [repo], backends: [echoBackend()] });
}

const req = (model: string, v: number, parameters: InferenceRequest['parameters'] = {}): InferenceRequest => ({
  modelName: model, parameters, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(v) }],
});
const STOPPING = { code: 'UNAVAILABLE', message: 'Server is stopping, scheduler for model has stopped accepting new inference requests' };

describe('InferenceServer.stop with live sequences', () => {
  it('serves a live sequence to its END, refuses new STARTs and other requests UNAVAILABLE, and completes after the END', async () => {
    const s = await serve(60_000_000);
    await s.infer(req('seq', 1, { sequence_id: 7, sequence_start: true }));
    let stopped = false;
    const stopping = s.stop(20_000).then((left) => { stopped = true; return left; });
    await new Promise((r) => setTimeout(r, 20));
    expect(Number((await s.infer(req('seq', 2, { sequence_id: 7 }))).outputs[0]!.data[0])).toBe(2);
    await expect(s.infer(req('seq', 3, { sequence_id: 8, sequence_start: true }))).rejects.toMatchObject(STOPPING);
    await expect(s.infer(req('plain', 4))).rejects.toMatchObject(STOPPING);
    await new Promise((r) => setTimeout(r, 50));
    expect(stopped).toBe(false);
    expect(Number((await s.infer(req('seq', 5, { sequence_id: 7, sequence_end: true }))).outputs[0]!.data[0])).toBe(5);
    expect(await stopping).toBe(0);
    expect(stopped).toBe(true);
    // Once stopped, nothing more is taken.
    await expect(s.infer(req('seq', 6, { sequence_id: 7 }))).rejects.toMatchObject({ code: 'UNAVAILABLE' });
  });

  it('a sequence never ended is reaped by its idle timeout while the stop waits, and the stop completes', async () => {
    const s = await serve(300_000);
    await s.infer(req('seq', 1, { sequence_id: 9, sequence_start: true }));
    const t0 = Date.now();
    expect(await s.stop(20_000)).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('a sequence never ended does not hold the stop past its timeout', async () => {
    const s = await serve(60_000_000);
    await s.infer(req('seq', 1, { sequence_id: 9, sequence_start: true }));
    const t0 = Date.now();
    await s.stop(300);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });
});
