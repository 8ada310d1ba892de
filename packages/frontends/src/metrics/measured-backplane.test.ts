/**
 * MeasuredBackplane (a gateway's own metrics): which failures make a series. A name a client made
 * up must never make one, whatever the error (NOT_FOUND, or UNAVAILABLE with no worker live).
 */
import { describe, expect, it } from 'vitest';
import { Errors, type Backplane, type InferenceRequest, type InferenceResponse, type ModelIndexEntry } from '@triode/core';
import { MeasuredBackplane } from './measured-backplane.js';

function inner(index: ModelIndexEntry[], infer: (r: InferenceRequest) => Promise<InferenceResponse>): Backplane {
  return { infer, repositoryIndex: async () => index } as unknown as Backplane;
}
const req = (modelName: string): InferenceRequest => ({ modelName, inputs: [] }) as unknown as InferenceRequest;
const series = (m: MeasuredBackplane) => m.metricsSnapshot().map((s) => `${s.name}/${s.version}`);

describe('MeasuredBackplane', () => {
  it('a made-up name gets no series when no worker is live (UNAVAILABLE), nor when it is unknown', async () => {
    const m = new MeasuredBackplane(inner([], () => Promise.reject(Errors.unavailable('no live worker'))));
    for (let i = 0; i < 5; i++) await expect(m.infer(req(`made_up_${i}`))).rejects.toThrow(/no live worker/);
    // Before: each name got a permanent set of series.
    expect(series(m)).toEqual([]);
    const n = new MeasuredBackplane(inner([{ name: 'simple', state: 'READY' } as ModelIndexEntry], (r) => Promise.reject(Errors.unknownModel(r.modelName))));
    await expect(n.infer(req('nope'))).rejects.toThrow();
    // A version named does not make one either (review: it did, one per made-up name).
    for (let i = 0; i < 5; i++) await expect(n.infer({ ...req(`nope_${i}`), modelVersion: 1 } as InferenceRequest)).rejects.toThrow();
    expect(series(n)).toEqual([]);
  });

  it('a known model\'s failures and successes are counted in one series per version: a request naming none counts under the version that answers', async () => {
    let fail = true;
    const m = new MeasuredBackplane(inner([{ name: 'simple', version: '1', state: 'READY' } as ModelIndexEntry], async (r) => {
      if (fail) throw Errors.unavailable('not ready');
      return { modelName: r.modelName, modelVersion: '1', outputs: [] } as unknown as InferenceResponse;
    }));
    // Before: the failure went to a series of its own, version "".
    await expect(m.infer(req('simple'))).rejects.toThrow();
    expect(m.metricsSnapshot()).toMatchObject([{ name: 'simple', version: '1', failures: { OTHER: 1 } }]);
    fail = false;
    await m.infer(req('simple'));
    fail = true;
    await expect(m.infer(req('simple'))).rejects.toThrow();
    // A version the cluster does not list makes no series of its own.
    for (let v = 2; v < 7; v++) await expect(m.infer({ ...req('simple'), modelVersion: v } as InferenceRequest)).rejects.toThrow();
    expect(series(m)).toEqual(['simple/1']);
    expect(m.metricsSnapshot()[0]).toMatchObject({ failures: { OTHER: 2 }, stats: { inference_stats: { success: { count: 1 } } } });
  });

  it('a decoupled request that got no response and named no version counts under the model\'s version, not a "" series (review)', async () => {
    const backplane = { ...inner([{ name: 'dec', version: '3', state: 'READY' } as ModelIndexEntry], () => Promise.reject(Errors.internal('unused'))), inferStream: async () => undefined } as unknown as Backplane;
    const m = new MeasuredBackplane(backplane);
    await m.inferStream(req('dec'), () => undefined);
    expect(series(m)).toEqual(['dec/3']);
    expect(m.metricsSnapshot()[0]).toMatchObject({ stats: { inference_stats: { success: { count: 1 } } } });
  });

  it('requests in flight that name no version show as pending under the version that answers (before, always 0)', async () => {
    const held: (() => void)[] = [];
    const m = new MeasuredBackplane(inner([{ name: 'simple', version: '1', state: 'READY' } as ModelIndexEntry], (r) => new Promise((resolve) => {
      held.push(() => resolve({ modelName: r.modelName, modelVersion: '1', outputs: [] } as unknown as InferenceResponse));
    })));
    const first = m.infer(req('simple'));
    held.shift()!();
    await first;
    const waiting = [m.infer(req('simple')), m.infer(req('simple')), m.infer(req('simple'))];
    expect(m.metricsSnapshot()).toMatchObject([{ name: 'simple', version: '1', pending: 3 }]);
    for (const f of held.splice(0)) f();
    await Promise.all(waiting);
    expect(m.metricsSnapshot()).toMatchObject([{ name: 'simple', version: '1', pending: 0 }]);
  });
});
