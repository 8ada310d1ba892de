import { describe, expect, it } from 'vitest';
import { messageType } from '@triode/core';
import { MAX_SCALAR_CONTENTS, checkInferRequestWire } from './infer-request-scan.js';

/** A protobuf varint. */
function varint(n: number): Buffer {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return Buffer.from(out);
}

/** A length-delimited field. */
const field = (no: number, body: Buffer) => Buffer.concat([varint((no << 3) | 2), varint(body.length), body]);

describe('checkInferRequestWire', () => {
  it('attack: packed bool / int / fp32 contents count too: a byte of packed bool was a slot of a JS array each, without limit', () => {
    const head = Buffer.from(messageType('ModelInferRequest').encode({ model_name: 'm' }).finish());
    const packed = (contentsField: number, bytes: number) => Buffer.concat([head, field(5, Buffer.concat([field(1, Buffer.from('x')), field(5, field(contentsField, Buffer.alloc(bytes, 1)))]))]);
    // bool_contents (1) and int_contents (2): one element a byte; fp32_contents (6): one each 4 bytes.
    for (const [f, bytes] of [[1, MAX_SCALAR_CONTENTS + 1], [2, MAX_SCALAR_CONTENTS + 1], [6, 4 * MAX_SCALAR_CONTENTS + 4]] as const) {
      expect(() => checkInferRequestWire(packed(f, bytes))).toThrow(`the request has more bool, int, uint, fp32 and fp64 contents elements (use raw_input_contents) than the ${MAX_SCALAR_CONTENTS} a request may have`);
    }
    expect(() => checkInferRequestWire(packed(1, 1000))).not.toThrow();
  });
});
