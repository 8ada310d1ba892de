import { describe, expect, it } from 'vitest';
import { serializeBytesTensor } from '@triode/core';
import { isOwned, markTransferable } from '@triode/core';
import { MAX_REPLY_TRACE_TIMESTAMPS, decodeReply, decodeRequest, decodeRequestParts, encodeReply, encodeRequest, encodeRequestParts, requestEnvelope } from './envelope-codec.js';
import { rawMessage } from '../../../../test/helpers/raw-envelope.js';

describe('tensor codec (gateway <-> worker)', () => {
  it('writes the header a plain JSON.stringify({ ...meta, env, tensors }) would mean, for any metadata and envelope (it is built as text)', () => {
    const header = (b: Buffer) => JSON.parse(b.subarray(4, 4 + b.readUInt32LE(0)).toString()) as Record<string, unknown>;
    const inputs = [{ name: 'n\u0000"\u00e9\u{1F600}', datatype: 'FP32' as const, shape: [1, 2], data: Float32Array.of(1, 2) }];
    const heads = (t: typeof inputs) => t.map((x) => ({ name: x.name, datatype: x.datatype, shape: x.shape, bytes: x.data.byteLength }));
    const envs = [
      { requestKey: '1', replyTo: 'triode:reply:g-1', enqueuedMs: 5, deadlineMs: 6, direct: { address: '10.0.0.1:1', token: 't"\\' } },
      { requestKey: '2', replyTo: 'triode:reply:g-2', enqueuedMs: 7, deadlineMs: 8 },
      // The same gateway again, after another: its constant part is not taken from the one before.
      { requestKey: '3', replyTo: 'triode:reply:g-1', enqueuedMs: 9, deadlineMs: 10, direct: { address: '10.0.0.1:1', token: 'other' } },
    ];
    const requests = [
      { modelName: 'm', inputs },
      { modelName: 'm', id: '\u2028x', parameters: { a: 'b' }, outputs: [{ name: 'o' }], inputs: [] as typeof inputs },
      // Keys named like the header's own are overridden by them, as with the spread.
      { modelName: 'm', inputs, ...{ env: 'forged', tensors: 'forged' } },
    ];
    for (const env of envs) {
      for (const req of requests) {
        const { inputs: ins, ...meta } = req;
        const expected = JSON.parse(JSON.stringify({ ...meta, env, tensors: heads(ins) })) as unknown;
        expect(header(encodeRequestParts(req, env)[0]!)).toEqual(expected);
        expect(header(encodeRequest(req, env))).toEqual(expected);
      }
    }
    // An empty metadata object still makes one JSON object (no stray comma).
    expect(header(encodeReply({ requestKey: 'k', end: true }))).toEqual({ requestKey: 'k', end: true, tensors: [] });
  });

  it('round-trips a request with its envelope, bigints and every tensor kind, from any buffer offset', () => {
    const req = {
      modelName: 'm', modelVersion: 2, id: 'r1',
      parameters: { sequence_id: 12345678901234567890n, flag: true, s: 'x' },
      outputs: [{ name: 'o', classCount: 3 }],
      inputs: [
        { name: 'a', datatype: 'INT32' as const, shape: [1, 3], data: Int32Array.of(1, -2, 3) },
        { name: 'b', datatype: 'BYTES' as const, shape: [2], data: serializeBytesTensor(['he\0llo', '']) },
        { name: 'c', datatype: 'FP64' as const, shape: [1], data: Float64Array.of(Math.PI) },
      ],
    };
    const env = { requestKey: '7', replyTo: 'triode:reply:g', enqueuedMs: 1, deadlineMs: 2 };
    const buf = encodeRequest(req, env);
    // What Redis hands back is a Buffer, often at an odd offset in a larger allocation.
    const shifted = Buffer.concat([Buffer.from([0xff]), buf]).subarray(1);
    const { request, env: e } = decodeRequest(shifted);
    expect(e).toEqual(env);
    expect(request.parameters).toEqual(req.parameters);
    expect(request.outputs).toEqual(req.outputs);
    expect(request.inputs.map((t) => [t.name, t.datatype, t.shape, Array.from(t.data as ArrayLike<number>)])).toEqual(
      req.inputs.map((t) => [t.name, t.datatype, t.shape, Array.from(t.data as ArrayLike<number>)]),
    );
  });

  it('round-trips parameters of NaN and ±Infinity (gRPC doubles), which JSON alone writes as null', () => {
    // Before: a gateway forwarded { timeout: NaN } as null, the worker refused the message as
    // malformed, and the client waited out the gateway's 30 s timeout for an error it never got.
    const req = {
      modelName: 'null', id: 'null',
      parameters: { timeout: Number.NaN, hi: Number.POSITIVE_INFINITY, lo: Number.NEGATIVE_INFINITY, n: 1.5, big: 2n ** 64n - 1n, z: 'x' },
      inputs: [],
    };
    const env = { requestKey: '1', replyTo: 'r', enqueuedMs: 1, deadlineMs: 2 };
    for (const decoded of [decodeRequest(encodeRequest(req, env)).request, decodeRequestParts(encodeRequestParts(req, env)).request]) {
      expect(decoded.parameters).toEqual({ timeout: Number.NaN, hi: Infinity, lo: -Infinity, n: 1.5, big: 2n ** 64n - 1n, z: 'x' });
      expect(Object.is(decoded.parameters!['timeout'], Number.NaN)).toBe(true);
    }
    // A reply's response parameters too (a JavaScript model may set any number).
    const reply = decodeReply(encodeReply({ requestKey: '1', response: { modelName: 'm', modelVersion: '1', outputs: [], parameters: { score: Number.NEGATIVE_INFINITY, name: 'NaN' } } }));
    expect(reply).toMatchObject({ response: { parameters: { score: -Infinity, name: 'NaN' } } });
    // What a client names or writes stays what it is, with or without tagged values beside it:
    // a parameters map keyed like the tags, strings that read like them (a review found the
    // object tags of the first fix, {"$bigint": "5"}, took such a map for a bigint and the worker
    // refused the request), and a bigint of any length a JSON integer can have (up to 309 digits).
    const spoofs: Record<string, string | bigint>[] = [{ $bigint: '5' }, { $number: 'NaN' }, { s: '[0,"bigint","5"]', t: '{"$bigint":"5"}' }, { b: 123456789012345678901234567890n, c: -(10n ** 308n) }];
    for (const parameters of spoofs) {
      for (const extra of [{}, { big: 2n ** 64n - 1n }] as Record<string, bigint>[]) {
        const p = { ...parameters, ...extra };
        expect(decodeRequest(encodeRequest({ modelName: 'm', inputs: [], parameters: p }, env)).request.parameters, JSON.stringify(Object.keys(p))).toEqual(p);
      }
    }
    // A tag a hostile message forges is no value: refused, never a BigInt() of megabytes of digits.
    for (const tag of [[0, 'number', '1e3'], [0, 'number', 'nan'], [0, 'bigint', 'abc'], [0, 'bigint', '1'.repeat(401)], [0, 'bigint', 5], [1, 'bigint', '5'], [0, 'other', '5']]) {
      expect(() => decodeRequest(rawMessage({ modelName: 'm', tensors: [], parameters: { p: tag, q: [0, 'bigint', '1'] }, env })), JSON.stringify(tag).slice(0, 40)).toThrow(/malformed message: request parameters/);
    }
    expect(decodeRequest(rawMessage({ modelName: 'm', tensors: [], parameters: { p: [0, 'bigint', '-' + '9'.repeat(400)] }, env })).request.parameters).toEqual({ p: -(10n ** 400n - 1n) });
    // What an earlier gateway writes for a 64-bit sequence id, {"$bigint": digits} as a value, still
    // reads (a rolling upgrade); as the parameters map itself it is a client's keys (above).
    expect(decodeRequest(rawMessage({ modelName: 'm', tensors: [], parameters: { sequence_id: { $bigint: '18446744073709551615' } }, env })).request.parameters).toEqual({ sequence_id: 2n ** 64n - 1n });
    expect(decodeReply(rawMessage({ requestKey: '1', response: { modelName: 'm', modelVersion: '1', parameters: { n: { $bigint: '-5' } } }, tensors: [] }))).toMatchObject({ response: { parameters: { n: -5n } } });
    const proto = decodeRequest(rawMessage({ modelName: 'm', tensors: [], parameters: { ['__proto__']: { $bigint: '7' } }, env })).request.parameters!;
    expect(Object.getOwnPropertyDescriptor(proto, '__proto__')?.value).toBe(7n);
    expect(Object.getPrototypeOf(proto)).toBe(Object.prototype);
    for (const old of [{ $bigint: 'abc' }, { $bigint: '5', x: 1 }, { $bigint: 5 }]) {
      expect(() => decodeRequest(rawMessage({ modelName: 'm', tensors: [], parameters: { p: old }, env }))).toThrow(/malformed message: request parameters/);
    }
  });

  it('reads the envelope of a request that does not decode, so the worker can answer its gateway', () => {
    const env = { requestKey: '5', replyTo: 'triode:reply:g', enqueuedMs: 1, deadlineMs: 2 };
    const bad = rawMessage({ modelName: 7, tensors: [], env });
    expect(() => decodeRequest(bad)).toThrow(/malformed message: modelName/);
    expect(requestEnvelope(bad)).toEqual(env);
    expect(requestEnvelope(encodeRequestParts({ modelName: 'm', inputs: [] }, env)[0]!)).toEqual(env);
    for (const junk of [Buffer.from([1, 2]), Buffer.from([200, 0, 0, 0, 123]), rawMessage('x'), rawMessage({ env: { ...env, deadlineMs: 'never' } }), rawMessage({ modelName: 'm' })]) {
      expect(requestEnvelope(junk)).toBeUndefined();
    }
  });

  it('leaves the abort signal behind (it cannot cross processes) and keeps a decoupled final flag', () => {
    const req = { modelName: 'm', inputs: [], signal: new AbortController().signal };
    const { request } = decodeRequest(encodeRequest(req, { requestKey: '1', replyTo: 'r', enqueuedMs: 0, deadlineMs: 0 }));
    expect('signal' in request).toBe(false);
    const reply = decodeReply(encodeReply({ requestKey: '1', response: { modelName: 'm', modelVersion: '1', outputs: [], final: true }, more: true }));
    expect(reply).toMatchObject({ response: { final: true }, more: true });
  });

  it('round-trips a request as parts: the tensors are views of the request, and decode from any offsets', () => {
    const a = Int32Array.of(1, -2, 3);
    const req = { modelName: 'm', id: 'p', parameters: { sequence_id: 2n ** 63n }, inputs: [
      { name: 'a', datatype: 'INT32' as const, shape: [1, 3], data: a },
      { name: 'b', datatype: 'BYTES' as const, shape: [1], data: serializeBytesTensor(['x']) },
    ] };
    const env = { requestKey: '9', replyTo: 'r', enqueuedMs: 1, deadlineMs: 2, direct: { address: '10.0.0.1:4000', token: '3b241101-e2bb-4255-8caf-4136c566a962' } };
    const parts = encodeRequestParts(req, env);
    expect(parts).toHaveLength(3);
    expect(parts[1]!.buffer).toBe(a.buffer);
    const shifted = parts.map((p) => Buffer.concat([Buffer.from([0]), p]).subarray(1));
    const { request, env: e } = decodeRequestParts(shifted);
    expect(e).toEqual(env);
    expect(request.parameters).toEqual(req.parameters);
    expect(Array.from(request.inputs[0]!.data as Int32Array)).toEqual([1, -2, 3]);
    // Each tensor has a buffer of its own (the parts were views into a shared one, so they were
    // copied) and says so: it moves to an instance thread instead of being structured-cloned there.
    for (const t of request.inputs) {
      expect(t.owned).toBe(true);
      expect(isOwned(t)).toBe(true);
      expect(t.data.buffer).not.toBe(shifted[1]!.buffer);
    }
    expect(() => decodeRequestParts(parts.slice(0, 2))).toThrow(/do not match/);
  });

  it('uses a part in place only when its buffer was declared its own (the RESP reader does so), never by its size', () => {
    const req = { modelName: 'm', inputs: [{ name: 'a', datatype: 'INT32' as const, shape: [1024], data: new Int32Array(1024).fill(7) }] };
    const [head, part] = encodeRequestParts(req, { requestKey: '1', replyTo: 'r', enqueuedMs: 0, deadlineMs: 0 });
    // A whole buffer of its own, not declared: copied.
    const whole = new Uint8Array(part!);
    const copied = decodeRequestParts([head!, whole]).request.inputs[0]!;
    expect(copied.data.buffer).not.toBe(whole.buffer);
    markTransferable(whole.buffer);
    const inPlace = decodeRequestParts([head!, whole]).request.inputs[0]!;
    expect(inPlace.data.buffer).toBe(whole.buffer);
    for (const t of [copied, inPlace]) {
      expect(t.owned).toBe(true);
      expect(Array.from(t.data as Int32Array).every((v) => v === 7)).toBe(true);
    }
  });

  it('round-trips responses and errors', () => {
    const ok = decodeReply(encodeReply({ requestKey: '1', response: { modelName: 'm', modelVersion: '1', id: 'x', outputs: [{ name: 'o', datatype: 'FP32', shape: [2], data: Float32Array.of(1.5, 2) }] } }));
    expect(ok).toMatchObject({ requestKey: '1', response: { modelName: 'm', modelVersion: '1', id: 'x' } });
    expect('response' in ok && Array.from(ok.response.outputs[0]!.data as Float32Array)).toEqual([1.5, 2]);
    expect(decodeReply(encodeReply({ requestKey: '2', error: { code: 'INVALID_ARG', message: 'bad' } }))).toEqual({ requestKey: '2', error: { code: 'INVALID_ARG', message: 'bad' } });
  });

  it('attack: refuses a reply whose outputs do not fit their shapes, or name one output twice (review: a forged reply went to clients as a 200 with "shape":[1,16],"data":[0])', () => {
    const reply = (outputs: object[]) => encodeReply({ requestKey: '7', response: { modelName: 'm', modelVersion: '1', outputs: outputs as never } });
    const enc = (s: string[]) => Buffer.concat(s.map((x) => { const b = Buffer.alloc(4 + x.length); b.writeUInt32LE(x.length, 0); b.write(x, 4); return b; }));
    for (const outputs of [
      [{ name: 'o', datatype: 'INT32', shape: [1, 16], data: new Int32Array(1) }],
      [{ name: 'o', datatype: 'UINT8', shape: [2 ** 40], data: new Uint8Array(4) }],
      [{ name: 'o', datatype: 'INT32', shape: [1], data: new Uint8Array(3) }],
      [{ name: 'o', datatype: 'BYTES', shape: [3], data: enc(['a']) }],
      [{ name: 'o', datatype: 'BYTES', shape: [1], data: Uint8Array.of(9, 0, 0, 0, 1) }],
      [{ name: 'o', datatype: 'FP32', shape: [1], data: new Float32Array(1) }, { name: 'o', datatype: 'FP32', shape: [1], data: new Float32Array(1) }],
    ]) {
      expect(() => decodeReply(reply(outputs)), JSON.stringify(outputs.map((o) => (o as { shape: number[] }).shape))).toThrow(/malformed message: output 'o'/);
    }
    const fine = decodeReply(reply([{ name: 'o', datatype: 'BYTES', shape: [2], data: enc(['a', 'bc']) }, { name: 'p', datatype: 'INT64', shape: [], data: new BigInt64Array(1) }, { name: 'q', datatype: 'FP32', shape: [0, 3], data: new Float32Array(0) }]));
    expect('response' in fine && fine.response.outputs.map((o) => o.name)).toEqual(['o', 'p', 'q']);
  });

  it('rejects a truncated message', () => {
    const buf = encodeRequest({ modelName: 'm', inputs: [{ name: 'a', datatype: 'INT32', shape: [4], data: new Int32Array(4) }] }, { requestKey: '1', replyTo: 'r', enqueuedMs: 0, deadlineMs: 0 });
    expect(() => decodeRequest(buf.subarray(0, buf.length - 12))).toThrow("malformed message: tensor 'a'");
  });

  it('attack: a header\'s fields the wire does not define (a signal, a trace, the queue time) never reach the request', () => {
    const env = { requestKey: '1', replyTo: 'r', enqueuedMs: 0, deadlineMs: 0 };
    // A `signal` of {} made the gateway running such an async job throw from its timeout timer and exit.
    const meta = { modelName: 'm', id: 'x', tensors: [], env, signal: {}, trace: { timestamps: 5 }, queuedSinceMs: 'soon', __proto__x: 1, extra: 'y' };
    for (const { request } of [decodeRequest(rawMessage(meta)), decodeRequestParts([rawMessage(meta)])]) {
      expect(request).toEqual({ modelName: 'm', id: 'x', inputs: [] });
      expect(Object.keys(request).sort()).toEqual(['id', 'inputs', 'modelName']);
    }
  });

  it('attack: refuses messages whose fields have the wrong types, as malformed (never a TypeError later)', () => {
    const env = { requestKey: '1', replyTo: 'r', enqueuedMs: 0, deadlineMs: 0 };
    for (const meta of [
      { modelName: 'm', tensors: [] }, // no envelope
      { modelName: 'm', tensors: [], env: { ...env, deadlineMs: 'never' } },
      { modelName: 'm', tensors: [], env: { ...env, direct: { address: 5, token: 't' } } },
      { modelName: 'm', tensors: [], env: { ...env, replyTo: ['x'] } },
      { modelName: 'm', tensors: [], env: { ...env, replyTo: 'r'.repeat(5000) } },
      { modelName: 'm', tensors: [], env: { ...env, requestKey: '1'.repeat(5000) } },
      { modelName: 'm', tensors: [], env: { ...env, direct: { address: `${'h'.repeat(5000)}:1`, token: 't' } } },
      { modelName: 'm', tensors: [], env: { ...env, direct: { address: 'h:1', token: 't'.repeat(200) } } },
      // Not a gateway's token (a UUID): bytes a worker would send to the address (review).
      { modelName: 'm', tensors: [], env: { ...env, direct: { address: 'h:1', token: 'PING\r\nFLUSHALL\r\n' } } },
      { modelName: 'm', tensors: [], env: { ...env, direct: { address: 'h:1', token: '3B241101-E2BB-4255-8CAF-4136C566A962' } } },
      { modelName: ['m'], tensors: [], env },
      { modelName: 'm', modelVersion: '2', tensors: [], env },
      { modelName: 'm', tensors: {}, env },
      { modelName: 'm', tensors: [{ name: 'a', datatype: 'INT32', shape: [2], bytes: '8' }], env },
      { modelName: 'm', tensors: [{ name: 'a', datatype: 'INT32', shape: [-2], bytes: 8 }], env },
      { modelName: 'm', tensors: [{ name: 'a', datatype: 'NOPE', shape: [2], bytes: 8 }], env },
      { modelName: 'm', tensors: [], outputs: 'abc', env },
      { modelName: 'm', tensors: [], outputs: [{ name: 'o', classCount: -1 }], env },
      { modelName: 'm', tensors: [], parameters: { p: {} }, env },
      { modelName: 'm', tensors: [], blsChain: 'x', env },
      [], 'text', null,
    ]) {
      expect(() => decodeRequest(rawMessage(meta)), JSON.stringify(meta)).toThrow(/malformed message/);
      expect(() => decodeRequestParts([rawMessage(meta)]), JSON.stringify(meta)).toThrow(/malformed message/);
    }
    for (const meta of [
      { requestKey: 1, end: true },
      { requestKey: '1', error: { code: 'INTERNAL', message: { toString: 1 } } },
      { requestKey: '1', error: 'boom' },
      { requestKey: '1', response: { modelName: 'm' } },
      { requestKey: '1', response: { modelName: 'm', modelVersion: '1', parameters: [] } },
      { requestKey: '1' },
    ]) {
      expect(() => decodeReply(rawMessage(meta)), JSON.stringify(meta)).toThrow(/malformed message/);
    }
  });
});

describe('tracing across the cluster (a traced request\'s envelope flag, the core\'s timestamps in its reply)', () => {
  const env = { requestKey: '1', replyTo: 'triode:reply:g', enqueuedMs: 1, deadlineMs: 2 };
  const header = (b: Buffer) => b.subarray(4, 4 + b.readUInt32LE(0)).toString();
  const response = { modelName: 'm', modelVersion: '1', outputs: [] };
  const core = [
    { name: 'REQUEST_START', ns: 1000 }, { name: 'QUEUE_START', ns: 1000 }, { name: 'COMPUTE_START', ns: 2000 }, { name: 'COMPUTE_INPUT_END', ns: 2100 },
    { name: 'COMPUTE_OUTPUT_START', ns: 2900 }, { name: 'COMPUTE_END', ns: 3000 }, { name: 'REQUEST_END', ns: 3100.5 },
  ];

  it('a traced request says so in its envelope; an untraced one carries nothing more (and its trace never crosses)', () => {
    const req = { modelName: 'm', inputs: [], trace: { timestamps: [{ name: 'HTTP_RECV_START', ns: 5 }] } };
    const traced = encodeRequestParts(req, { ...env, trace: true })[0]!;
    expect(decodeRequestParts([traced]).env.trace).toBe(true);
    expect(decodeRequest(encodeRequest(req, { ...env, trace: true })).env.trace).toBe(true);
    expect(decodeRequestParts([traced]).request.trace).toBeUndefined();
    const plain = encodeRequestParts(req, env)[0]!;
    expect(header(plain)).not.toContain('trace');
    expect(decodeRequestParts([plain]).env).toEqual(env);
    for (const trace of [false, 1, 'yes', {}]) {
      expect(() => decodeRequest(rawMessage({ modelName: 'm', tensors: [], env: { ...env, trace } })), JSON.stringify(trace)).toThrow(/malformed message: envelope trace/);
    }
  });

  it('a reply carries the core\'s timestamps back, names and ns in their order; a reply without them has no trace field', () => {
    const r = decodeReply(encodeReply({ requestKey: '1', response, trace: core }));
    expect('response' in r && r.trace).toEqual(core);
    const plain = encodeReply({ requestKey: '1', response });
    expect(header(plain)).not.toContain('trace');
    expect('trace' in decodeReply(plain)).toBe(false);
  });

  it('attack: a reply\'s trace is hostile: over the bound it is dropped whole; entries with an unknown name or an ns that is not a finite number are dropped; the reply is still answered', () => {
    const forged = (trace: unknown) => decodeReply(rawMessage({ requestKey: '1', response: { modelName: 'm', modelVersion: '1' }, tensors: [], trace }));
    const answered = (trace: unknown) => {
      const r = forged(trace);
      expect('response' in r && r.response.modelName).toBe('m');
      return 'response' in r ? r.trace : undefined;
    };
    // Too many: a worker's core takes 7; a list past the bound is junk, dropped whole.
    expect(answered(new Array(MAX_REPLY_TRACE_TIMESTAMPS + 1).fill({ name: 'REQUEST_START', ns: 1 }))).toBeUndefined();
    expect(answered(new Array(MAX_REPLY_TRACE_TIMESTAMPS).fill({ name: 'REQUEST_START', ns: 1 }))).toHaveLength(MAX_REPLY_TRACE_TIMESTAMPS);
    // Not a list, or nothing left once the bad entries are dropped.
    for (const t of ['REQUEST_START', 5, null, { name: 'REQUEST_START', ns: 1 }, [], [null, 'x', 7]]) expect(answered(t), JSON.stringify(t)).toBeUndefined();
    // Only the known names (the frontend's are the gateway's own), with a finite ns >= 0; extra keys are not kept.
    const kept = answered([
      { name: 'REQUEST_START', ns: 10, extra: 'x'.repeat(100) },
      { name: 'HTTP_SEND_END', ns: 11 }, { name: '__proto__', ns: 11 }, { name: 'request_end', ns: 11 }, { name: ['COMPUTE_END'], ns: 11 },
      { name: 'COMPUTE_START', ns: '12' }, { name: 'COMPUTE_START', ns: -1 }, { name: 'COMPUTE_START', ns: [0, 'number', 'NaN'] },
      { name: 'COMPUTE_START', ns: [0, 'number', 'Infinity'] }, { name: 'COMPUTE_START', ns: [0, 'bigint', '12'] }, { name: 'COMPUTE_START' },
      // Past uint64 ns (review: 1e300 was kept and written as "ns":1e+300).
      { name: 'COMPUTE_END', ns: 1e300 }, { name: 'COMPUTE_END', ns: 2 ** 64 },
      { name: 'REQUEST_END', ns: 13 },
    ]);
    expect(kept).toEqual([{ name: 'REQUEST_START', ns: 10 }, { name: 'REQUEST_END', ns: 13 }]);
    // A trace on an error or the end of a stream is no part of them.
    const err = decodeReply(rawMessage({ requestKey: '1', error: { code: 'INTERNAL', message: 'x' }, tensors: [], trace: core }));
    expect(err).toEqual({ requestKey: '1', error: { code: 'INTERNAL', message: 'x' } });
  });
});
