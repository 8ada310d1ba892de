import { describe, expect, it } from 'vitest';
import type { InferenceRequest, InferenceResponse } from '../infer-request.js';
import { ResponseCache } from './response-cache.js';

const detach = (b: ArrayBufferLike) => structuredClone(b, { transfer: [b as ArrayBuffer] });

describe('response cache ownership', () => {
  it('keeps its own copy of a response whose data is a Node Buffer, and hands each hit a copy its caller owns', () => {
    const cache = new ResponseCache(1 << 20);
    const req: InferenceRequest = { modelName: 'm', inputs: [{ name: 'IN', datatype: 'UINT8', shape: [4], data: Uint8Array.of(1, 2, 3, 4) }] };
    const key = ResponseCache.key(req, 'm', 1);
    // A Buffer of its own: `slice()` on it is a view of the same memory, not a copy.
    const data = Buffer.allocUnsafeSlow(8).fill(7);
    const response: InferenceResponse = { modelName: 'm', modelVersion: '1', outputs: [{ name: 'OUT', datatype: 'UINT8', shape: [8], data }] };
    cache.insert(key, response);
    // The caller moves its response's buffer to a thread (a BLS caller, an instance): the entry stays whole.
    detach(data.buffer);
    const hit = cache.lookup(key)!;
    expect(hit.outputs[0]!.owned).toBe(true);
    expect(Array.from(hit.outputs[0]!.data as Uint8Array)).toEqual(new Array(8).fill(7));
    // A hit that is moved on takes nothing from the next one.
    detach(hit.outputs[0]!.data.buffer);
    expect(Array.from(cache.lookup(key)!.outputs[0]!.data as Uint8Array)).toEqual(new Array(8).fill(7));
  });
});
