import { getHeapStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import type { InferenceRequest, InferenceResponse, ParameterValue } from '../infer-request.js';
import { ENTRY_OVERHEAD_BYTES, KEY_HASH_CHUNK_BYTES, ResponseCache, TENSOR_OVERHEAD_BYTES, entryBytes } from './response-cache.js';

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

describe('response cache key', () => {
  const req = (parameters: InferenceRequest['parameters']): InferenceRequest => ({
    modelName: 'm',
    inputs: [{ name: 'IN', datatype: 'UINT8', shape: [1], data: Uint8Array.of(1) }],
    parameters,
  });

  it('cannot be spelled by one request for another: names and values are length-prefixed', () => {
    // Before, parts were joined with \u0000 and \u0002: this one parameter keyed as the two.
    const forged = ResponseCache.key(req({ tenant: 'alice\u0002zone\u0000string\u0000eu' }), 'm', 1);
    expect(forged).not.toBe(ResponseCache.key(req({ tenant: 'alice', zone: 'eu' }), 'm', 1));
    expect(ResponseCache.key(req({ a: 'b\u0000c' }), 'm', 1)).not.toBe(ResponseCache.key(req({ 'a\u0000string\u0000b': 'c' }), 'm', 1));
  });

  it('keyAsync gives the key that key gives, hashing large inputs a slice at a time', async () => {
    const big = new Uint8Array(KEY_HASH_CHUNK_BYTES * 2 + 3).fill(9);
    const r: InferenceRequest = {
      modelName: 'm',
      inputs: [{ name: 'B', datatype: 'UINT8', shape: [big.length], data: big }, { name: 'A', datatype: 'UINT8', shape: [1], data: Uint8Array.of(1) }],
      outputs: [{ name: 'OUT', classCount: 2 }],
      parameters: { tenant: 'alice', n: 1n },
    };
    const key = await ResponseCache.keyAsync(r, 'm', '1@2');
    expect(key).toBe(ResponseCache.key(r, 'm', '1@2'));
    expect(await ResponseCache.keyAsync(req({ tenant: 'bob' }), 'm', 1)).toBe(ResponseCache.key(req({ tenant: 'bob' }), 'm', 1));
    // Its last byte, in the last slice, counts.
    big[big.length - 1] = 0;
    expect(await ResponseCache.keyAsync(r, 'm', '1@2')).not.toBe(key);
  });

  it('covers what a model reads of the parameters the core acts on (correlation id, flags, timeout), as the model sees them, and nothing else of them', () => {
    const key = (p: InferenceRequest['parameters']) => ResponseCache.key(req(p), 'm', 1);
    const none = key({});
    // Absent, 0, "" and false are what a model sees when they are not given.
    const unseen: Record<string, ParameterValue>[] = [{ sequence_id: 0 }, { sequence_id: '' }, { sequence_start: false, sequence_end: false }, { timeout: 0 }, { priority: 2 }, { binary_data_output: true }];
    for (const p of unseen) expect(key(p)).toBe(none);
    const one = key({ sequence_id: 1 });
    expect(key({ sequence_id: 1n })).toBe(one);
    const others = [one, key({ sequence_id: 2 }), key({ sequence_id: '1' }), key({ sequence_id: 1, sequence_start: true }), key({ sequence_id: 1, sequence_end: true }), key({ sequence_id: 1, timeout: 10 }), key({ timeout: 10 }), none];
    expect(new Set(others).size).toBe(others.length);
    // A custom parameter cannot spell them.
    expect(key({ qn1: '1' })).not.toBe(one);
  });

  it('keys an integer parameter the same whether it came as a number or a 64-bit integer', () => {
    expect(ResponseCache.key(req({ n: 1 }), 'm', 1)).toBe(ResponseCache.key(req({ n: 1n }), 'm', 1));
    expect(ResponseCache.key(req({ n: 1 }), 'm', 1)).not.toBe(ResponseCache.key(req({ n: '1' }), 'm', 1));
  });
});

describe('response cache size', () => {
  const response = (outputs: number, elements: number, i: number): InferenceResponse => ({
    modelName: 'm',
    modelVersion: '1',
    outputs: Array.from({ length: outputs }, (_, j) => ({ name: `OUTPUT${j}`, datatype: 'FP32' as const, shape: [1, elements], data: new Float32Array(elements).fill(i) })),
  });

  it('answers a hit with every output, of every type, viewing one buffer that its caller owns', () => {
    const cache = new ResponseCache(1 << 20);
    const outputs: InferenceResponse['outputs'] = [
      { name: 'A', datatype: 'UINT8', shape: [3], data: Uint8Array.of(1, 2, 3) },
      { name: 'B', datatype: 'INT64', shape: [2], data: BigInt64Array.of(-1n, 1n << 40n) },
      { name: 'C', datatype: 'FP16', shape: [1], data: Uint16Array.of(0x3c00) },
      // A view into a larger buffer at an odd offset: only its bytes are kept.
      { name: 'D', datatype: 'INT8', shape: [2], data: new Int8Array(Int8Array.of(9, -5, 6, 7).buffer, 1, 2) },
      { name: 'E', datatype: 'FP64', shape: [1, 1], data: Float64Array.of(0.5) },
    ];
    cache.insert('k', { id: 'first', modelName: 'm', modelVersion: '1', parameters: { p: 'v' }, outputs });
    const hit = cache.lookup('k')!;
    expect(hit.id).toBeUndefined();
    expect(hit.parameters).toEqual({ p: 'v' });
    expect(hit.outputs.map((t) => [t.name, t.datatype, t.shape, t.data.constructor.name, Array.from(t.data as ArrayLike<number | bigint>)])).toEqual([
      ['A', 'UINT8', [3], 'Uint8Array', [1, 2, 3]],
      ['B', 'INT64', [2], 'BigInt64Array', [-1n, 1n << 40n]],
      ['C', 'FP16', [1], 'Uint16Array', [0x3c00]],
      ['D', 'INT8', [2], 'Int8Array', [-5, 6]],
      ['E', 'FP64', [1, 1], 'Float64Array', [0.5]],
    ]);
    expect(new Set(hit.outputs.map((t) => t.data.buffer)).size).toBe(1);
    expect(hit.outputs.every((t) => t.owned === true)).toBe(true);
    // The hit's buffer is its own: writing to it reaches neither the entry nor the next hit.
    (hit.outputs[0]!.data as Uint8Array)[0] = 99;
    hit.outputs[1]!.shape[0] = 7;
    const again = cache.lookup('k')!;
    expect(again.outputs[0]!.data[0]).toBe(1);
    expect(again.outputs[1]!.shape).toEqual([2]);
    expect(again.outputs[0]!.data.buffer).not.toBe(hit.outputs[0]!.data.buffer);
  });

  it('counts each output of an entry, not only its bytes', () => {
    // 16 one-element outputs: before, 64 bytes and 512 were counted for about 6 KB held.
    const one = entryBytes(44, response(1, 1, 0));
    const sixteen = entryBytes(44, response(16, 1, 0));
    expect(one).toBeGreaterThanOrEqual(ENTRY_OVERHEAD_BYTES + 44 + TENSOR_OVERHEAD_BYTES + 8);
    expect(sixteen - one).toBeGreaterThanOrEqual(15 * (TENSOR_OVERHEAD_BYTES + 8));
    // A response's parameters are held too.
    expect(entryBytes(44, { ...response(1, 1, 0), parameters: { note: 'x'.repeat(10_000) } }) - one).toBeGreaterThan(10_000);
  });

  // What an entry really holds, measured: a cache's own heap and external memory, once full, stay
  // near its capacity whatever the number of outputs (before, 16 one-element outputs held 6x it).
  it.each([
    [1, 1],
    [16, 1],
    [4, 256],
  ])('holds about its capacity in memory, full of %i-output entries of %i elements', (outputs, elements) => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const held = (): number => {
      gc();
      gc();
      const h = getHeapStatistics();
      return h.used_heap_size + h.external_memory;
    };
    const capacity = 4_000_000;
    const cache = new ResponseCache(capacity);
    const before = held();
    const count = Math.ceil((3 * capacity) / (4 * outputs * elements + 200));
    for (let i = 0; i < count; i++) cache.insert(`key${i}`.padEnd(44, '='), response(outputs, elements, i));
    const full = held() - before;
    // Read after the measure: an optimized frame keeps no variable that is not read again, and
    // the collector would take the whole cache.
    expect(cache.stats().evictions).toBeGreaterThan(0);
    expect(full).toBeLessThan(1.5 * capacity);
  });
});
