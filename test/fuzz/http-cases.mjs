// HTTP fuzz cases: each is raw bytes (sent in pieces, some slowly) for one connection, generated
// from a case's own PRNG stream. Mutations of valid KServe v2 requests for the example models,
// binary-extension lies, chunked bodies, framing tricks, slowloris, and the repository and
// control APIs with hostile names and paths.
import { gzipSync } from 'node:zlib';
import { hostileJson, hostileName, hostileNumber, hostilePath, mutateJson, mutateText } from './hostile.mjs';

const DATATYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BF16', 'BYTES', 'FP8', 'int32', 'STRING', '', 'INT32 ', 'TYPE_INT32'];
const SHAPES = [[2147483647, 16], [1e9, 1e9], [-1, 16], [0, 16], [1.5, 16], ['1', 16], new Array(64).fill(2), [65536, 65536, 65536, 65536],
  [], [16], [1, 16, 1], [8, 16], [9, 16], [-5], [4294967296, 16], [2 ** 53, 1], [1, -16], [1, 0], null, 'x', [[1], 16]];

/** The example models the cases aim at, with a valid request builder each. */
const MODELS = {
  simple: { weight: 5, inputs: (rng, b) => [0, 1].map((k) => ({ name: `INPUT${k}`, datatype: 'INT32', shape: [b, 16], data: Array.from({ length: b * 16 }, () => rng.int(-1000, 1000)) })) },
  simple_string: { weight: 2, inputs: (rng, b) => [0, 1].map((k) => ({ name: `INPUT${k}`, datatype: 'BYTES', shape: [b, 16], data: Array.from({ length: b * 16 }, () => String(rng.int(-99, 99))) })) },
  simple_identity: { weight: 1, inputs: (rng, b) => [{ name: 'INPUT0', datatype: 'BYTES', shape: [b, 2], data: Array.from({ length: b * 2 }, () => rng.pick(['a', '', '\u0000x', 'ü'.repeat(10)])) }] },
  ppocr_cls: { weight: 1, inputs: (rng) => [{ name: 'x', datatype: 'FP32', shape: [1, 3, 48, 192], data: new Array(3 * 48 * 192).fill(0).map(() => Math.round(rng.next() * 100) / 100) }] },
};

function pickModel(rng) {
  return rng.weighted(Object.fromEntries(Object.entries(MODELS).map(([k, m]) => [k, m.weight])));
}

/** A valid JSON inference request for `model` (batch 1..2; ppocr_cls: 1). */
function validDoc(rng, model) {
  const doc = { inputs: MODELS[model].inputs(rng, model === 'ppocr_cls' ? 1 : rng.int(1, 2)) };
  if (rng.chance(0.3)) doc.id = `req-${rng.int(0, 1e6)}`;
  if (rng.chance(0.3)) doc.outputs = [{ name: model === 'ppocr_cls' ? 'softmax_0.tmp_0' : 'OUTPUT0', parameters: { binary_data: rng.chance(0.5), ...(rng.chance(0.3) ? { classification: rng.int(1, 3) } : {}) } }];
  if (rng.chance(0.2)) doc.parameters = { binary_data_output: rng.chance(0.5) };
  return doc;
}

/** Tensor data as little-endian bytes (BYTES: 4-byte length prefixes). */
function tensorBytes(input) {
  if (input.datatype === 'BYTES') {
    return Buffer.concat(input.data.map((s) => {
      const b = Buffer.from(String(s));
      const len = Buffer.alloc(4);
      len.writeUInt32LE(b.byteLength);
      return Buffer.concat([len, b]);
    }));
  }
  if (input.datatype === 'FP32') return Buffer.from(Float32Array.from(input.data).buffer);
  return Buffer.from(Int32Array.from(input.data).buffer);
}

/** The binary-extension form of a valid request: JSON header with binary_data_size, then the bytes. */
function binaryParts(rng, model) {
  const doc = validDoc(rng, model);
  const chunks = [];
  for (const input of doc.inputs) {
    if (rng.chance(0.85)) {
      const bytes = tensorBytes(input);
      chunks.push(bytes);
      delete input.data;
      input.parameters = { binary_data_size: bytes.byteLength };
    }
  }
  return { doc, chunks };
}

/** One HTTP/1.1 request as bytes (Connection: close; Content-Length unless `headers` frames the body itself). */
export function httpRequest(method, path, headers = {}, body = Buffer.alloc(0)) {
  const b = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const h = { Host: '127.0.0.1', Connection: 'close', ...headers };
  const framed = Object.keys(h).some((k) => /^(content-length|transfer-encoding)$/i.test(k));
  if (!framed && (b.byteLength > 0 || method === 'POST')) h['Content-Length'] = String(b.byteLength);
  const head = `${method} ${path} HTTP/1.1\r\n${Object.entries(h).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`;
  return Buffer.concat([Buffer.from(head, 'latin1'), b]);
}

/** A URL path segment for a (hostile) name: usually percent-encoded, sometimes raw. */
function segment(rng, name) {
  return rng.chance(0.8) ? enc(name) : name;
}

/** Percent-encoding of the UTF-8 bytes of `name` (lone surrogates too, unlike encodeURIComponent). */
function enc(name) {
  return [...Buffer.from(name, 'utf8')].map((b) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
}

/** Real example models are kept loaded: control cases aimed at them go to the throwaway model "victim". */
function controlName(rng, tag) {
  const n = hostileName(rng, tag);
  return ['simple', 'simple_string', 'ppocr_cls', 'simple_identity'].includes(n) ? 'victim' : n;
}

let bomb;
/** A gzip body that inflates to 64 MiB of zeros (past --http-max-input-size), made once. */
function gzipBomb() {
  bomb ??= gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
  return bomb;
}

const GENERATORS = {
  'json-bytes': (rng) => {
    const picked = pickModel(rng);
    // ppocr_cls's JSON is 100 KB of numbers: byte edits there mostly test the number parser; use simple.
    const model = picked === 'ppocr_cls' ? 'simple' : picked;
    const text = mutateText(rng, JSON.stringify(validDoc(rng, model)));
    return { desc: `POST /v2/models/${model}/infer, JSON body with byte edits`, bytes: httpRequest('POST', `/v2/models/${model}/infer`, { 'Content-Type': 'application/json' }, text) };
  },
  'json-shape': (rng) => {
    const model = pickModel(rng);
    let doc = validDoc(rng, model);
    const what = rng.int(0, 4);
    const input = doc.inputs[rng.int(0, doc.inputs.length - 1)];
    let detail;
    if (what === 0) { input.shape = rng.pick(SHAPES); detail = `shape ${JSON.stringify(input.shape)?.slice(0, 60)}`; }
    else if (what === 1) { input.datatype = rng.pick(DATATYPES); detail = `datatype ${JSON.stringify(input.datatype)}`; }
    else if (what === 2) { input.data = rng.chance(0.5) ? hostileJson(rng) : input.data.map((v, i) => (i === 0 ? hostileJson(rng) : v)); detail = 'data of a wrong type or size'; }
    else if (what === 4 && rng.chance(0.3)) {
      // Nesting deeper than a recursive parser's stack (written as text: JSON.stringify would overflow here).
      const n = rng.pick([10000, 100000, 1000000]);
      const at = rng.pick(['inputs', 'data', 'shape', 'parameters']);
      const text = at === 'inputs' ? `{"inputs":${'['.repeat(n)}${']'.repeat(n)}}` : `{"inputs":[{"name":"INPUT0","datatype":"INT32","${at}":${'['.repeat(n)}${']'.repeat(n)}}]}`;
      return { desc: `POST /v2/models/${model}/infer, JSON with "${at}" nested ${n} deep`, bytes: httpRequest('POST', `/v2/models/${model}/infer`, {}, text) };
    } else {
      const n = rng.int(1, 3);
      for (let i = 0; i < n; i++) doc = mutateJson(rng, doc);
      detail = `${n} structured mutation(s)`;
    }
    return { desc: `POST /v2/models/${model}/infer, JSON with ${detail}`, bytes: httpRequest('POST', `/v2/models/${model}/infer`, {}, JSON.stringify(doc) ?? 'null') };
  },
  'binary-lie': (rng) => {
    const model = pickModel(rng);
    const { doc, chunks } = binaryParts(rng, model);
    const lie = rng.int(0, 9);
    let header = Buffer.from(JSON.stringify(doc));
    let headerLength = String(header.byteLength);
    let extraHeaders = {};
    let detail;
    const binInput = doc.inputs.find((i) => i.parameters?.binary_data_size !== undefined);
    if (lie === 0) { headerLength = rng.pick(['-1', '0', 'abc', '1e3', '99999999999999999999', String(header.byteLength + 1e6), ' 12', '0x10', String(header.byteLength - 3)]); detail = `Inference-Header-Content-Length ${headerLength}`; }
    else if (lie === 1 && binInput) { binInput.parameters.binary_data_size = hostileNumber(rng); detail = `binary_data_size ${binInput.parameters.binary_data_size}`; }
    else if (lie === 2 && binInput) { binInput.parameters.binary_data_size = rng.pick(['16', null, [], { a: 1 }, true]); detail = `binary_data_size of type ${typeof binInput.parameters.binary_data_size}`; }
    else if (lie === 3) { chunks.push(rng.bytes(rng.int(1, 64))); detail = 'trailing bytes after the tensors'; }
    else if (lie === 4 && chunks.length) { const i = rng.int(0, chunks.length - 1); chunks[i] = chunks[i].subarray(0, rng.int(0, chunks[i].byteLength - 1)); detail = 'a tensor cut short'; }
    else if (lie === 5 && model !== 'simple' && model !== 'ppocr_cls' && chunks.length) {
      const c = Buffer.from(chunks[0]);
      c.writeUInt32LE(rng.pick([0xffffffff, 0x7fffffff, c.byteLength, c.byteLength - 3, 0x10000]), 0);
      chunks[0] = c;
      detail = 'a BYTES element whose length prefix lies';
    } else if (lie === 6 && binInput) { binInput.shape = rng.pick([[1 << 20, 16], [1, 1 << 30], [2147483647, 2147483647]]); detail = `huge dims ${JSON.stringify(binInput.shape)} over a small binary tensor`; }
    else if (lie === 7) { extraHeaders = { 'Content-Encoding': rng.pick(['gzip', 'deflate', 'br', 'x-unknown']) }; detail = `Content-Encoding ${extraHeaders['Content-Encoding']} over plain bytes`; }
    else if (lie === 8) { header = Buffer.from(mutateText(rng, header.toString())); headerLength = String(header.byteLength); detail = 'binary header JSON with byte edits'; }
    else { detail = 'valid binary request'; }
    const body = Buffer.concat([header, ...chunks]);
    return { desc: `POST /v2/models/${model}/infer, binary extension: ${detail}`, bytes: httpRequest('POST', `/v2/models/${model}/infer`, { 'Inference-Header-Content-Length': headerLength, ...extraHeaders }, body) };
  },
  amplify: (rng) => {
    // A small request whose JSON answer is large: NUL bytes come back as 6-char \u0000 escapes.
    const n = rng.pick([1, 2, 3]) * 1024 * 1024;
    const fill = rng.pick([0x00, 0x22, 0x41]);
    const el = Buffer.alloc(n, fill);
    const len = Buffer.alloc(4);
    len.writeUInt32LE(n);
    const header = Buffer.from(JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'BYTES', shape: [1, 1], parameters: { binary_data_size: n + 4 } }], outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }] }));
    return { desc: `POST /v2/models/simple_identity/infer: one ${n >> 20} MiB BYTES element of 0x${fill.toString(16)}, answer asked as JSON`,
      bytes: httpRequest('POST', '/v2/models/simple_identity/infer', { 'Inference-Header-Content-Length': String(header.byteLength) }, Buffer.concat([header, len, el])) };
  },
  chunked: (rng) => {
    const model = rng.pick(['simple', 'simple_string']);
    const body = Buffer.from(JSON.stringify(validDoc(rng, model)));
    const head = httpRequest('POST', `/v2/models/${model}/infer`, { 'Transfer-Encoding': 'chunked' });
    const parts = [];
    let at = 0;
    const bad = rng.int(0, 6);
    while (at < body.byteLength) {
      const n = Math.min(body.byteLength - at, rng.int(1, 400));
      const size = bad === 1 && parts.length === 1 ? rng.pick(['ZZ', '-1', 'FFFFFFFFFFFFFFFF', '1;ext="x"', ' 10', '']) : n.toString(16);
      parts.push(Buffer.from(`${size}\r\n`), body.subarray(at, at + n), Buffer.from(bad === 2 ? '\n' : '\r\n'));
      at += n;
    }
    if (bad === 3) parts.push(Buffer.from('ffffff\r\nabc'));
    else if (bad !== 4) parts.push(Buffer.from('0\r\n\r\n'));
    const names = ['valid chunked body', 'a bad chunk size', 'chunks ended by bare LF', 'a chunk that claims 16 MiB then stops', 'no terminating chunk', 'valid chunked body', 'valid chunked body'];
    // Unterminated bodies: the client half-closes after a while, as a client that gave up does.
    return { desc: `POST /v2/models/${model}/infer, Transfer-Encoding chunked: ${names[bad]}`, bytes: Buffer.concat([head, ...parts]), pieces: rng.chance(0.5) ? 8 : 1, endAfterMs: bad >= 3 && bad <= 4 ? 300 : undefined, mayClose: bad >= 1 && bad <= 4 };
  },
  slowloris: (rng) => {
    const model = 'simple';
    const bytes = httpRequest('POST', `/v2/models/${model}/infer`, {}, JSON.stringify(validDoc(rng, model)));
    const pieces = rng.int(10, 40);
    const delayMs = rng.int(5, 25);
    const stall = rng.chance(0.3);
    return { desc: `slowloris: a valid request sent in ${pieces} pieces ${delayMs} ms apart${stall ? ', the last piece never sent (client half-closes)' : ''}`,
      bytes: stall ? bytes.subarray(0, bytes.byteLength - rng.int(1, 20)) : bytes, pieces, delayMs, endAfterMs: stall ? 200 : undefined, mayClose: stall };
  },
  'idle-connections': (rng) => {
    const n = rng.int(20, 80);
    return { desc: `${n} idle connections holding half-sent request heads while a health check runs`, kind: 'idle', idle: n, prefix: Buffer.from(rng.pick(['POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\n', 'GET /v2/heal', '', 'POST /v2/models/simple/infer HTTP/1.1\r\nContent-Length: 100000\r\n\r\n{"in'])), bytes: httpRequest('GET', '/v2/health/live') };
  },
  framing: (rng) => {
    const valid = JSON.stringify(validDoc(rng, 'simple'));
    const f = rng.int(0, 15);
    const P = '/v2/models/simple/infer';
    switch (f) {
      case 0: { const m = rng.pick(['PUT', 'DELETE', 'PATCH', 'OPTIONS', 'TRACE', 'CONNECT', 'FOO', 'G\u0000ET', 'HEAD']); return { desc: `${m} ${P}`, bytes: httpRequest(m, P, {}, valid), mayClose: true }; }
      case 1: { const n = rng.pick([4000, 9000, 20000, 100000]); return { desc: `GET with a ${n}-char path`, bytes: httpRequest('GET', `/v2/models/${'a'.repeat(n)}/config`), mayClose: true }; }
      case 2: { const n = rng.pick([100, 2000, 5000]); const h = Object.fromEntries(Array.from({ length: n }, (_, i) => [`X-H${i}`, 'v'.repeat(20)])); return { desc: `${n} request headers`, bytes: httpRequest('POST', P, h, valid), mayClose: true }; }
      case 3: return { desc: 'Content-Encoding gzip over garbage', bytes: httpRequest('POST', P, { 'Content-Encoding': 'gzip' }, rng.bytes(rng.int(0, 200))) };
      case 4: return { desc: 'Content-Encoding gzip bomb (64 MiB inflated)', bytes: httpRequest('POST', P, { 'Content-Encoding': rng.pick(['gzip', 'gzip, identity']) }, gzipBomb()) };
      case 5: return { desc: 'two different Content-Length headers', bytes: Buffer.from(`POST ${P} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 5\r\nContent-Length: ${valid.length}\r\n\r\n${valid}`), mayClose: true };
      case 6: return { desc: 'Content-Length and Transfer-Encoding together', bytes: Buffer.from(`POST ${P} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${valid.length}\r\nTransfer-Encoding: chunked\r\n\r\n${valid}`), mayClose: true };
      case 7: { const n = rng.pick([5, 50]) * 1024 * 1024; return { desc: `a ${n >> 20} MiB body (past --http-max-input-size)`, bytes: httpRequest('POST', P, {}, Buffer.alloc(n, 0x20)), mayClose: true }; }
      case 8: return { desc: 'Content-Length larger than the body (client half-closes)', bytes: httpRequest('POST', P, { 'Content-Length': String(valid.length + rng.int(1, 1e6)) }, valid), endAfterMs: 200, mayClose: true };
      case 9: return { desc: 'Content-Length smaller than the body (rest is a pipelined garbage request)', bytes: httpRequest('POST', P, { 'Content-Length': String(rng.int(0, valid.length - 1)) }, valid), mayClose: true };
      case 10: return { desc: 'random bytes instead of a request', bytes: rng.bytes(rng.int(1, 2000)), mayClose: true };
      case 11: return { desc: 'Expect: 100-continue', bytes: httpRequest('POST', P, { Expect: rng.pick(['100-continue', 'bogus']) }, valid), mayClose: true };
      case 12: return { desc: 'bare LF line endings', bytes: Buffer.from(httpRequest('POST', P, {}, valid).toString('latin1').replace(/\r\n/g, '\n'), 'latin1'), mayClose: true };
      case 14: return { desc: 'an HTTP/2 prior-knowledge preface on the HTTP port', bytes: Buffer.concat([Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'), rng.bytes(rng.int(0, 64))]), mayClose: true };
      case 15: return { desc: 'Upgrade: h2c / websocket', bytes: httpRequest('GET', '/v2/health/live', { Upgrade: rng.pick(['h2c', 'websocket']), 'HTTP2-Settings': 'AAMAAABkAARAAAAAAAIAAAAA', Connection: 'Upgrade, HTTP2-Settings' }), mayClose: true };
      default: return { desc: `Content-Length ${'9'.repeat(25)}`, bytes: httpRequest('POST', P, { 'Content-Length': '9'.repeat(25) }, valid), mayClose: true, endAfterMs: 200 };
    }
  },
  endpoints: (rng, tag) => {
    const name = hostileName(rng, tag);
    const m = segment(rng, name);
    const v = rng.chance(0.3) ? `/versions/${segment(rng, rng.pick(['1', '0', '-1', '99999999999999999999', 'abc', '1.5', '', '%00', '..']))}` : '';
    const f = rng.int(0, 6);
    if (f === 0) return { desc: `GET model metadata of ${JSON.stringify(name).slice(0, 80)}`, bytes: httpRequest('GET', `/v2/models/${m}${v}`), mayClose: m !== enc(name) };
    if (f === 1) return { desc: `GET ready/config/stats of ${JSON.stringify(name).slice(0, 80)}`, bytes: httpRequest('GET', `/v2/models/${m}${v}/${rng.pick(['ready', 'config', 'stats', 'trace/setting'])}`), mayClose: m !== enc(name) };
    if (f === 2) return { desc: `POST infer to ${JSON.stringify(name).slice(0, 80)}`, bytes: httpRequest('POST', `/v2/models/${m}${v}/infer`, {}, JSON.stringify(validDoc(rng, 'simple'))), mayClose: m !== enc(name) };
    if (f === 3) {
      const doc = rng.chance(0.5) ? { text_input: hostileJson(rng), parameters: hostileJson(rng) } : mutateJson(rng, { text_input: 'x', max_tokens: 4, parameters: { stream: false } });
      return { desc: 'POST generate with a mutated body', bytes: httpRequest('POST', `/v2/models/${rng.pick(['simple', 'simple_identity', m])}/${rng.pick(['generate', 'generate_stream'])}`, {}, JSON.stringify(doc) ?? '') };
    }
    if (f === 4) return { desc: `GET async job ${JSON.stringify(name).slice(0, 80)}`, bytes: httpRequest('GET', `/v2/jobs/${m}${rng.chance(0.5) ? '/result' : ''}`), mayClose: m !== enc(name) };
    if (f === 5) return { desc: 'POST infer_async with a mutated body', bytes: httpRequest('POST', `/v2/models/${rng.pick(['simple', m])}/infer_async`, {}, JSON.stringify(mutateJson(rng, validDoc(rng, 'simple')))), mayClose: true };
    return { desc: 'GET /v2/models/stats, /v2, health', bytes: httpRequest('GET', rng.pick(['/v2/models/stats', '/v2', '/v2/health/ready', '/v2/health/live', '/v2/models', '/metrics'])) };
  },
  repository: (rng, tag) => {
    const name = controlName(rng, tag);
    const m = segment(rng, name);
    const repo = rng.chance(0.2) ? `/${segment(rng, hostileName(rng, tag))}` : '';
    const f = rng.int(0, 5);
    if (f === 0) return { desc: 'POST repository index with a hostile body', bytes: httpRequest('POST', `/v2/repository${repo}/index`, {}, rng.chance(0.5) ? (JSON.stringify({ ready: hostileJson(rng) }) ?? '') : mutateText(rng, '{"ready":true}')), mayClose: repo !== '' };
    if (f === 1) return { desc: `POST unload of ${JSON.stringify(name).slice(0, 80)}`, bytes: httpRequest('POST', `/v2/repository${repo}/models/${m}/unload`, {}, JSON.stringify({ parameters: { unload_dependents: rng.chance(0.5) ? hostileJson(rng) : true } })), mayClose: true };
    const parameters = {};
    let detail = 'no parameters';
    if (f === 2) { parameters.config = rng.chance(0.3) ? hostileJson(rng) : JSON.stringify(mutateJson(rng, victimConfig())); detail = 'a mutated config override'; }
    if (f === 3 || f === 4) {
      const path = f === 3 ? hostilePath(rng, tag) : '1/model.onnx';
      parameters.config = JSON.stringify(victimConfig());
      parameters[`file:${path}`] = rng.pick([rng.bytes(rng.int(0, 64)).toString('base64'), '!!not base64!!', '', 'AAAA'.repeat(1000), hostileJson(rng)]);
      detail = `a file override ${JSON.stringify(`file:${path}`).slice(0, 90)}`;
    }
    if (f === 5 && rng.chance(0.5)) { parameters[rng.pick(['config', 'file:', 'file:1/model.onnx', '', '__proto__'])] = hostileJson(rng); detail = 'a parameter of a wrong type'; }
    const body = rng.chance(0.1) ? mutateText(rng, JSON.stringify({ parameters })) : JSON.stringify({ parameters });
    return { desc: `POST load of ${JSON.stringify(name).slice(0, 80)} with ${detail}`, bytes: httpRequest('POST', `/v2/repository${repo}/models/${m}/load`, {}, body), mayClose: true };
  },
  control: (rng, tag) => {
    const path = hostilePath(rng, tag);
    if (rng.chance(0.5)) {
      const doc = { trace_file: path, trace_level: rng.pick([['TIMESTAMPS'], ['OFF'], 'TIMESTAMPS', hostileJson(rng)]), trace_rate: rng.pick(['1', hostileJson(rng)]), log_frequency: rng.pick(['1', '0', hostileJson(rng)]) };
      const where = rng.pick(['/v2/trace/setting', '/v2/models/simple/trace/setting']);
      return { desc: `POST ${where} with trace_file ${JSON.stringify(path).slice(0, 80)}`, bytes: httpRequest('POST', where, {}, JSON.stringify(doc)) };
    }
    const doc = { log_file: path };
    if (rng.chance(0.3)) doc[rng.pick(['log_info', 'log_warning', 'log_error', 'log_verbose_level', 'log_format'])] = hostileJson(rng);
    return { desc: `POST /v2/logging with log_file ${JSON.stringify(path).slice(0, 80)}`, bytes: httpRequest('POST', '/v2/logging', {}, JSON.stringify(doc)) };
  },
};

/** How often each family is drawn. */
export const HTTP_WEIGHTS = { amplify: 1, 'json-bytes': 14, 'json-shape': 20, 'binary-lie': 16, chunked: 8, slowloris: 3, 'idle-connections': 1, framing: 10, endpoints: 10, repository: 12, control: 4 };

/** The config of the throwaway model "victim" (a copy of `simple`) that load cases override. */
export function victimConfig() {
  const io = (p) => [0, 1].map((k) => ({ name: `${p}${k}`, data_type: 'TYPE_INT32', dims: [16] }));
  return { name: 'victim', platform: 'onnxruntime_onnx', max_batch_size: 8, input: io('INPUT'), output: io('OUTPUT') };
}

/** HTTP case `rng` draws (the rng is the case's own stream; `tag` names its escape files). */
export function httpCase(rng, tag) {
  const family = rng.weighted(HTTP_WEIGHTS);
  return { protocol: 'http', family, ...GENERATORS[family](rng, tag) };
}
