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
    expect(series(n)).toEqual([]);
  });

  it('a known model\'s failures and successes are counted', async () => {
    let fail = true;
    const m = new MeasuredBackplane(inner([{ name: 'simple', state: 'UNAVAILABLE' } as ModelIndexEntry], async (r) => {
      if (fail) throw Errors.unavailable('not ready');
      return { modelName: r.modelName, modelVersion: '1', outputs: [] } as unknown as InferenceResponse;
    }));
    await expect(m.infer(req('simple'))).rejects.toThrow();
    expect(m.metricsSnapshot()).toMatchObject([{ name: 'simple', version: '', failures: { OTHER: 1 } }]);
    fail = false;
    await m.infer(req('simple'));
    expect(series(m)).toEqual(['simple/', 'simple/1']);
  });
});
