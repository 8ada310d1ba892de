// gRPC fuzz cases: protobuf messages of Triton's GRPCInferenceService (encoded with protobufjs from
// packages/core/proto), mutated in meaning, in bytes and in framing; plus HTTP/2-level abuse:
// resets, GOAWAY, dropped sessions, cancel and deadline storms.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import protobuf from 'protobufjs';
import { hostileName, hostileNumber, hostilePath } from './hostile.mjs';
import { victimConfig } from './http-cases.mjs';

const PROTO_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'packages', 'core', 'proto');
const SERVICE = '/inference.GRPCInferenceService';

let root;
function type(name) {
  if (!root) {
    root = new protobuf.Root();
    root.resolvePath = (_o, target) => join(PROTO_DIR, target.replace(/^.*[\\/]/, ''));
    root.loadSync(['grpc_service.proto'], { keepCase: true });
    root.resolveAll();
  }
  return root.lookupType(`inference.${name}`);
}

/** Set when the case being generated encoded a string that is not UTF-8 (see grpcCase). */
let encodedNotUtf8 = false;

/** True when a string of `v` (searched deeply, bytes skipped) holds a lone surrogate. */
function hasLoneSurrogate(v) {
  if (typeof v === 'string') return /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(v);
  if (!v || typeof v !== 'object' || Buffer.isBuffer(v)) return false;
  return Object.entries(v).some(([k, x]) => hasLoneSurrogate(k) || hasLoneSurrogate(x));
}

/** A message encoded as protobuf (no verification: the fuzzer may send what a typed client cannot). */
export function encode(name, message) {
  if (hasLoneSurrogate(message)) encodedNotUtf8 = true;
  return Buffer.from(type(name).encode(message).finish());
}

/** The ModelStreamInferResponse messages of a response body (gRPC frames): how many, and their `error_message`s. */
export function streamResponses(body) {
  const out = [];
  let count = 0;
  for (let at = 0; at + 5 <= body.byteLength;) {
    const n = body.readUInt32BE(at + 1);
    if (body[at] !== 0 || at + 5 + n > body.byteLength) break;
    try {
      const m = type('ModelStreamInferResponse').decode(body.subarray(at + 5, at + 5 + n));
      count++;
      if (m.error_message) out.push(m.error_message);
    } catch {
      out.push(`(undecodable response message of ${n} bytes)`);
    }
    at += 5 + n;
  }
  return { count, errors: out };
}

/** gRPC length-prefixed framing of one message. */
export function frame(payload, compressed = 0, declared = payload.byteLength) {
  const head = Buffer.alloc(5);
  head[0] = compressed;
  head.writeUInt32BE(declared >>> 0, 1);
  return Buffer.concat([head, payload]);
}

const DATATYPES = ['BOOL', 'UINT8', 'INT8', 'INT16', 'INT32', 'INT64', 'UINT64', 'FP16', 'FP32', 'FP64', 'BF16', 'BYTES', 'int32', '', 'FP8', 'TYPE_FP32'];
const SHAPES = [[2147483647, 16], [-1, 16], [0, 16], [9, 16], [8, 16], [2 ** 53, 1], [], [16], new Array(64).fill(2), ['9223372036854775807', 16],
  ['-9223372036854775808'], [65536, 65536, 65536, 65536], [1, 16, 1], [4294967296, 16], [1, -16]];

/** A valid ModelInferRequest for simple (raw or typed contents), simple_string or ppocr_cls. */
function validInfer(rng) {
  const model = rng.weighted({ simple: 6, simple_string: 2, ppocr_cls: 1 });
  const b = model === 'ppocr_cls' ? 1 : rng.int(1, 2);
  const msg = { model_name: model, id: rng.chance(0.3) ? `g-${rng.int(0, 1e6)}` : '', inputs: [], raw_input_contents: [] };
  if (model === 'ppocr_cls') {
    msg.inputs.push({ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192] });
    msg.raw_input_contents.push(Buffer.from(Float32Array.from({ length: 3 * 48 * 192 }, () => rng.next()).buffer));
    return msg;
  }
  const typed = rng.chance(0.3);
  for (const k of [0, 1]) {
    const values = Array.from({ length: b * 16 }, () => rng.int(-1000, 1000));
    if (model === 'simple') {
      if (typed) msg.inputs.push({ name: `INPUT${k}`, datatype: 'INT32', shape: [b, 16], contents: { int_contents: values } });
      else {
        msg.inputs.push({ name: `INPUT${k}`, datatype: 'INT32', shape: [b, 16] });
        msg.raw_input_contents.push(Buffer.from(Int32Array.from(values).buffer));
      }
    } else if (typed) msg.inputs.push({ name: `INPUT${k}`, datatype: 'BYTES', shape: [b, 16], contents: { bytes_contents: values.map((v) => Buffer.from(String(v))) } });
    else {
      msg.inputs.push({ name: `INPUT${k}`, datatype: 'BYTES', shape: [b, 16] });
      msg.raw_input_contents.push(Buffer.concat(values.map((v) => { const s = Buffer.from(String(v)); const l = Buffer.alloc(4); l.writeUInt32LE(s.byteLength); return Buffer.concat([l, s]); })));
    }
  }
  if (rng.chance(0.2)) msg.outputs = [{ name: 'OUTPUT0', parameters: rng.chance(0.5) ? { classification: { int64_param: rng.int(1, 3) } } : {} }];
  return msg;
}

function hostileParam(rng) {
  return rng.pick([{ bool_param: true }, { int64_param: hostileNumber(rng) > 0 ? '9223372036854775807' : '-9223372036854775808' }, { int64_param: -1 },
    { string_param: 'x'.repeat(rng.pick([0, 5000])) }, { double_param: rng.pick([NaN, Infinity, -1, 1e308]) }, { uint64_param: '18446744073709551615' }, {}]);
}

/** One meaning-level mutation of a valid ModelInferRequest (the bytes stay valid protobuf). */
function mutateInfer(rng, msg, tag) {
  const input = msg.inputs[rng.int(0, msg.inputs.length - 1)];
  switch (rng.int(0, 9)) {
    case 0: msg.model_name = hostileName(rng, tag); return `model_name ${JSON.stringify(msg.model_name).slice(0, 60)}`;
    case 1: msg.model_version = rng.pick(['-1', '0', '99999999999999999999', 'abc', '1.5', '\u0000', '1 ']); return `model_version ${JSON.stringify(msg.model_version)}`;
    case 2: input.datatype = rng.pick(DATATYPES); return `datatype ${JSON.stringify(input.datatype)}`;
    case 3: input.shape = rng.pick(SHAPES); return `shape ${JSON.stringify(input.shape).slice(0, 60)}`;
    case 4: {
      const r = msg.raw_input_contents;
      const k = rng.int(0, 4);
      if (k === 0) r.pop();
      else if (k === 1) r.push(rng.bytes(rng.int(0, 100)));
      else if (k === 2 && r.length) r[0] = r[0].subarray(0, rng.int(0, r[0].byteLength - 1));
      else if (k === 3 && r.length) { const c = Buffer.from(r[0]); if (c.byteLength >= 4) c.writeUInt32LE(rng.pick([0xffffffff, 0x7fffffff, 0x10000]), 0); r[0] = c; }
      else r.push(Buffer.alloc(rng.pick([1, 64 * 1024, 4 * 1024 * 1024])));
      return 'raw_input_contents of a wrong count or size';
    }
    case 5: input.contents = rng.pick([{ int_contents: [1, 2, 3] }, { fp32_contents: new Array(16).fill(1.5) }, { bytes_contents: [Buffer.from('1')] }, { int64_contents: ['9223372036854775807'] }, { bool_contents: new Array(32).fill(true) }, { uint_contents: [1] }]); return `contents ${Object.keys(input.contents)[0]} (raw too: ${msg.raw_input_contents.length > 0})`;
    case 6: msg.parameters = { [rng.pick(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout', 'binary_data_output', 'headers', 'x'])]: hostileParam(rng) }; return `request parameter ${Object.keys(msg.parameters)[0]}`;
    case 7: msg.inputs.push({ ...msg.inputs[0] }); return 'a duplicated input';
    case 8: msg.inputs.splice(0, 1); return 'a missing input';
    default: msg.outputs = [{ name: hostileName(rng, tag), parameters: { classification: hostileParam(rng) } }]; return 'a hostile requested output';
  }
}

/** Byte-level corruption of an encoded message. */
function corrupt(rng, bytes) {
  const b = Buffer.from(bytes);
  const k = rng.int(0, 3);
  if (k === 0) { for (let i = rng.int(1, 8); i > 0; i--) b[rng.int(0, Math.max(0, b.byteLength - 1))] = rng.int(0, 255); return { bytes: b, what: 'flipped bytes' }; }
  if (k === 1) return { bytes: b.subarray(0, rng.int(0, Math.max(0, b.byteLength - 1))), what: 'truncated protobuf' };
  if (k === 2) { const at = rng.int(0, b.byteLength); return { bytes: Buffer.concat([b.subarray(0, at), rng.bytes(rng.int(1, 16)), b.subarray(at)]), what: 'inserted bytes' }; }
  return { bytes: rng.bytes(rng.int(0, 300)), what: 'random bytes' };
}

const call = (path, body, extra = {}) => ({ kind: 'call', path, body, headers: {}, ...extra });

const GENERATORS = {
  'infer-mutate': (rng, tag) => {
    const msg = validInfer(rng);
    const what = rng.chance(0.1) ? 'valid request' : mutateInfer(rng, msg, tag);
    const stream = rng.chance(0.2);
    return { desc: `${stream ? 'ModelStreamInfer' : 'ModelInfer'} ${msg.model_name === undefined ? '' : JSON.stringify(msg.model_name).slice(0, 40)}: ${what}`, ...call(`${SERVICE}/${stream ? 'ModelStreamInfer' : 'ModelInfer'}`, frame(encode('ModelInferRequest', msg))), expectResponses: stream ? 1 : undefined };
  },
  'bad-protobuf': (rng) => {
    const { bytes, what } = corrupt(rng, encode('ModelInferRequest', validInfer(rng)));
    const rpc = rng.pick(['ModelInfer', 'ModelInfer', 'ModelStreamInfer', 'ModelMetadata', 'RepositoryModelLoad', 'LogSettings']);
    return { desc: `${rpc} with ${what}`, ...call(`${SERVICE}/${rpc}`, frame(bytes)), badBytes: true };
  },
  'bad-frame': (rng) => {
    const payload = encode('ModelInferRequest', validInfer(rng));
    const k = rng.int(0, 7);
    const rpc = rng.chance(0.7) ? 'ModelInfer' : 'ModelStreamInfer';
    const bodies = [
      ['compressed flag without grpc-encoding', frame(payload, 1)],
      ['length prefix larger than the message', frame(payload, 0, payload.byteLength + rng.int(1, 1000))],
      ['length prefix 0xFFFFFFFF', frame(payload, 0, 0xffffffff)],
      ['length prefix smaller than the message', frame(payload, 0, rng.int(0, payload.byteLength - 1))],
      ['two messages on a unary call', Buffer.concat([frame(payload), frame(payload)])],
      ['an empty body', Buffer.alloc(0)],
      ['a partial 5-byte prefix', Buffer.from([0, 0, 0])],
      ['flag byte 7', frame(payload, 7)],
    ];
    // A stream that ends OK owes each request it took an answer (a result or an error_message).
    const owed = rpc === 'ModelStreamInfer' ? { 0: 1, 4: 2, 7: 1 }[k] : undefined;
    return { desc: `${rpc}: ${bodies[k][0]}`, ...call(`${SERVICE}/${rpc}`, bodies[k][1]), badBytes: true, expectResponses: owed };
  },
  encoding: (rng) => {
    const payload = encode('ModelInferRequest', validInfer(rng));
    const enc = rng.pick(['gzip', 'gzip', 'deflate', 'br', 'x-bogus', 'identity']);
    const garbage = rng.chance(0.5);
    const body = frame(garbage ? rng.bytes(rng.int(0, 200)) : (enc === 'gzip' ? gzipSync(payload) : payload), enc === 'identity' ? 0 : 1);
    const rpc = rng.pick(['ModelInfer', 'ModelStreamInfer']);
    return { desc: `${rpc} with grpc-encoding ${enc} over ${garbage ? 'garbage' : 'the message'}`, ...call(`${SERVICE}/${rpc}`, body, { headers: { 'grpc-encoding': enc } }), badBytes: true, expectResponses: rpc === 'ModelStreamInfer' ? 1 : undefined };
  },
  reset: (rng) => {
    const body = frame(encode('ModelInferRequest', validInfer(rng)));
    const code = rng.int(0, 13);
    const cut = rng.int(0, body.byteLength);
    const rpc = rng.pick(['ModelInfer', 'ModelStreamInfer']);
    return { desc: `${rpc} reset (RST_STREAM ${code}) after ${cut} of ${body.byteLength} bytes`, ...call(`${SERVICE}/${rpc}`, body.subarray(0, cut)), abort: { how: 'rst', code, afterMs: rng.int(0, 10) } };
  },
  goaway: (rng) => {
    const body = frame(encode('ModelInferRequest', validInfer(rng)));
    const how = rng.pick(['goaway', 'goaway-then-destroy', 'destroy', 'socket']);
    const cut = rng.chance(0.5) ? body.byteLength : rng.int(0, body.byteLength);
    const rpc = rng.pick(['ModelInfer', 'ModelStreamInfer']);
    return { desc: `${rpc} with the session ended by ${how} after ${cut} of ${body.byteLength} bytes`, ...call(`${SERVICE}/${rpc}`, body.subarray(0, cut)), abort: { how, code: rng.int(0, 13), afterMs: rng.int(0, 10) } };
  },
  storm: (rng) => {
    if (rng.chance(0.15)) {
      // HTTP/2 rapid reset (CVE-2023-44487): open and cancel streams as fast as the client can.
      const n = rng.pick([500, 2000]);
      const body = frame(encode('ModelInferRequest', validInfer(rng)));
      return { desc: `rapid reset: ${n} ModelInfer streams opened and cancelled at once`, kind: 'storm', path: `${SERVICE}/ModelInfer`, calls: Array.from({ length: n }, () => ({ body, cancelAfterMs: 0 })) };
    }
    const n = rng.int(10, 40);
    const deadline = rng.chance(0.5);
    const rpc = rng.pick(['ModelInfer', 'ModelInfer', 'ModelStreamInfer']);
    const calls = Array.from({ length: n }, () => ({
      body: frame(encode('ModelInferRequest', validInfer(rng))),
      timeout: deadline ? rng.pick(['1n', '1u', '1m', '2m', '5m', '20m', '100m']) : undefined,
      cancelAfterMs: deadline ? undefined : rng.int(0, 20),
    }));
    return { desc: `${deadline ? 'deadline' : 'cancel'} storm: ${n} ${rpc} calls on one session`, kind: 'storm', path: `${SERVICE}/${rpc}`, calls };
  },
  stream: (rng, tag) => {
    const n = rng.int(1, 10);
    const frames = [];
    for (let i = 0; i < n; i++) {
      const msg = validInfer(rng);
      if (rng.chance(0.4)) mutateInfer(rng, msg, tag);
      frames.push(frame(encode('ModelInferRequest', msg)));
    }
    const end = rng.pick(['end', 'end', 'rst', 'goaway']);
    return { desc: `ModelStreamInfer with ${n} requests (some mutated), then ${end}`, ...call(`${SERVICE}/ModelStreamInfer`, Buffer.concat(frames)), abort: end === 'end' ? undefined : { how: end, code: 8, afterMs: rng.int(0, 30) }, expectResponses: end === 'end' ? n : undefined };
  },
  'other-rpcs': (rng, tag) => {
    const name = hostileName(rng, tag);
    const k = rng.int(0, 4);
    if (k === 0) { const rpc = rng.pick(['ModelMetadata', 'ModelConfig', 'ModelReady', 'ModelStatistics']); return { desc: `${rpc} of ${JSON.stringify(name).slice(0, 60)}`, ...call(`${SERVICE}/${rpc}`, frame(encode(`${rpc}Request`, { name, version: rng.pick(['', '1', '-1', 'x', '99999999999999999999']) }))) }; }
    if (k === 1) return { desc: `RepositoryIndex of repository ${JSON.stringify(name).slice(0, 60)}`, ...call(`${SERVICE}/RepositoryIndex`, frame(encode('RepositoryIndexRequest', { repository_name: name, ready: rng.chance(0.5) }))) };
    if (k === 2) return { desc: `unknown method ${rng.pick(['/inference.GRPCInferenceService/Nope', '/x', '/grpc.health.v1.Health/Check'])}`, ...call(rng.pick([`${SERVICE}/Nope`, '/x', '/', '/grpc.health.v1.Health/Watch']), frame(rng.bytes(rng.int(0, 30)))), badBytes: true };
    if (k === 3) return { desc: 'a non-gRPC content-type', ...call(`${SERVICE}/ModelInfer`, frame(encode('ModelInferRequest', validInfer(rng))), { headers: { 'content-type': rng.pick(['application/json', 'text/plain', 'application/grpc-web']) } }), badBytes: true };
    const settings = rng.chance(0.5) ? { trace_file: { value: [hostilePath(rng, tag)] }, trace_level: { value: ['TIMESTAMPS'] } } : { log_file: { string_param: hostilePath(rng, tag) } };
    const rpc = settings.trace_file ? 'TraceSetting' : 'LogSettings';
    return { desc: `${rpc} with a ${settings.trace_file ? 'trace_file' : 'log_file'} of ${JSON.stringify(settings.trace_file?.value[0] ?? settings.log_file.string_param).slice(0, 60)}`, ...call(`${SERVICE}/${rpc}`, frame(encode(`${rpc}Request`, { settings }))) };
  },
  repository: (rng, tag) => {
    let name = hostileName(rng, tag);
    if (['simple', 'simple_string', 'ppocr_cls', 'simple_identity'].includes(name)) name = 'victim';
    const parameters = {};
    let detail = 'no parameters';
    const k = rng.int(0, 3);
    if (k === 0) { parameters.config = { string_param: JSON.stringify(victimConfig()).replace(/16/, String(hostileNumber(rng))) }; detail = 'a config override'; }
    if (k === 1) {
      const path = hostilePath(rng, tag);
      parameters.config = { string_param: JSON.stringify(victimConfig()) };
      parameters[`file:${path}`] = rng.pick([{ bytes_param: rng.bytes(rng.int(0, 64)) }, { string_param: 'AAAA' }, { int64_param: 1 }, { bool_param: true }]);
      detail = `a file override ${JSON.stringify(`file:${path}`).slice(0, 80)}`;
    }
    if (k === 2) { parameters[rng.pick(['config', 'file:', 'unload_dependents'])] = hostileParam(rng); detail = 'a parameter of an odd type'; }
    const unload = k === 3;
    return { desc: `${unload ? 'RepositoryModelUnload' : 'RepositoryModelLoad'} of ${JSON.stringify(name).slice(0, 60)} with ${detail}`,
      ...call(`${SERVICE}/${unload ? 'RepositoryModelUnload' : 'RepositoryModelLoad'}`, frame(encode(unload ? 'RepositoryModelUnloadRequest' : 'RepositoryModelLoadRequest', { model_name: name, repository_name: rng.chance(0.1) ? hostileName(rng, tag) : '', parameters }))) };
  },
  metadata: (rng) => {
    const headers = rng.pick([
      { 'grpc-timeout': rng.pick(['0n', '0m', '99999999H', '999999999S', '-1m', 'abc', '1', '1x', '']) },
      { 'x-big': 'a'.repeat(rng.pick([8000, 60000])) },
      Object.fromEntries(Array.from({ length: rng.pick([100, 1000]) }, (_, i) => [`x-m${i}`, 'v'])),
      { 'grpc-accept-encoding': rng.pick(['gzip', 'br,zstd', '*', 'gzip'.repeat(500)]) },
      { 'x-bin-bin': rng.pick(['!!!', 'AAAA', '']) },
      { 'content-type': 'application/grpc+json' },
    ]);
    return { desc: `ModelInfer with metadata ${JSON.stringify(headers).slice(0, 80)}`, ...call(`${SERVICE}/${rng.pick(['ModelInfer', 'ModelStreamInfer', 'ModelMetadata'])}`, frame(encode('ModelInferRequest', validInfer(rng))), { headers }), mayClose: true, badBytes: true };
  },
  'http1-on-grpc': (rng) => ({ desc: 'HTTP/1.1 request or garbage on the gRPC port', kind: 'raw', bytes: rng.chance(0.5) ? Buffer.from('POST /inference.GRPCInferenceService/ModelInfer HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc') : rng.bytes(rng.int(1, 500)) }),
};

/** How often each family is drawn. */
export const GRPC_WEIGHTS = { 'infer-mutate': 24, 'bad-protobuf': 12, 'bad-frame': 10, encoding: 5, reset: 10, goaway: 8, storm: 4, stream: 8, 'other-rpcs': 10, repository: 8, metadata: 3, 'http1-on-grpc': 1 };

/** gRPC case `rng` draws (the rng is the case's own stream; `tag` names its escape files). */
export function grpcCase(rng, tag) {
  const family = rng.weighted(GRPC_WEIGHTS);
  encodedNotUtf8 = false;
  const c = { protocol: 'grpc', family, ...GENERATORS[family](rng, tag) };
  // protobufjs writes a lone surrogate as bytes that are not UTF-8: invalid protobuf, so INTERNAL
  // is then a right answer.
  if (encodedNotUtf8) c.badBytes = true;
  return c;
}
