// A hand-rolled ONNX (protobuf) encoder for small graphs, so no Python or onnx package is needed:
// scripts/make-example-models.mjs writes the example repository with it, tests their own models
// (test/helpers/ragged-onnx.ts). Types: onnx-writer.d.mts.

function varint(n) {
  const out = [];
  let v = BigInt(n);
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return out;
}
const key = (field, wire) => varint((field << 3) | wire);
export const int = (field, n) => [...key(field, 0), ...varint(n)];
export const bytes = (field, b) => [...key(field, 2), ...varint(b.length), ...b];
export const str = (field, s) => bytes(field, [...Buffer.from(s, 'utf8')]);
export const msg = (field, parts) => bytes(field, parts.flat());

/** TensorProto.DataType values. */
export const T = { FLOAT: 1, UINT8: 2, INT8: 3, INT32: 6, INT64: 7, STRING: 8, BOOL: 9, UINT64: 13 };

/** A ValueInfoProto (graph input: field 11, output: field 12); a string dim is symbolic. */
export function valueInfo(field, name, elemType, dims) {
  const dimMsgs = dims.map((d) => msg(1, typeof d === 'string' ? [str(2, d)] : [int(1, d)]));
  return msg(field, [str(1, name), msg(2, [msg(1, [int(1, elemType), msg(2, dimMsgs)])])]);
}

/** A NodeProto. */
export function node(op, inputs, outputs, name, attrs = []) {
  return msg(1, [...inputs.map((i) => str(1, i)), ...outputs.map((o) => str(2, o)), str(3, name), str(4, op), ...attrs]);
}

/** The `to` attribute of a Cast node. */
export const castTo = (t) => msg(5, [str(1, 'to'), int(3, t), int(20, 2)]);

/** A graph initializer (field 5 of GraphProto): an INT64 tensor of `dims` holding `values`. */
export function int64Initializer(name, dims, values) {
  const raw = Buffer.alloc(values.length * 8);
  values.forEach((v, i) => raw.writeBigInt64LE(BigInt(v), i * 8));
  return msg(5, [...dims.map((d) => int(1, d)), int(2, T.INT64), str(8, name), bytes(9, [...raw])]);
}

/** A ModelProto (IR version 7, opset 13) of one graph; `initializers` go before the inputs. */
export function model(graphName, nodes, inputs, outputs, initializers = []) {
  const graph = msg(7, [...nodes, str(2, graphName), ...initializers, ...inputs, ...outputs]);
  return Uint8Array.from([...int(1, 7), ...str(2, 'triode'), ...graph, ...msg(8, [str(1, ''), int(2, 13)])]);
}
