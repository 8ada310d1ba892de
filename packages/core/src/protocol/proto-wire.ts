/**
 * @module A protobuf reader over wire bytes that counts fields without decoding them. Decoding
 * makes a JS object of every repeated entry: two bytes of an empty repeated message or bytes
 * field become an object or a Buffer of a hundred bytes, one byte of a packed int64 a Long. The
 * server scans requests with it, the client responses, before protobufjs decodes them.
 */

/** Reads fields of [i, end) of `b`; `malformed` makes the error thrown for bytes that do not parse. */
export class ProtoWire {
  constructor(readonly b: Uint8Array, public i: number, readonly end: number, readonly malformed: () => Error) {}

  varint(): number {
    let v = 0;
    let scale = 1;
    for (let k = 0; k < 10; k++) {
      if (this.i >= this.end) throw this.malformed();
      const c = this.b[this.i++]!;
      v += (c & 0x7f) * scale;
      if (c < 0x80) return v;
      scale *= 128;
    }
    throw this.malformed();
  }

  /**
   * Skips a field of `type`; returns the [start, end) of a length-delimited one. A group (wire
   * type 3, deprecated) is skipped to its end as protobufjs skips it: refusing it as malformed
   * would let anything after it through unchecked, since the decoder takes it.
   */
  skip(type: number, no = 0, depth = 0): [number, number] | undefined {
    if (type === 0) this.varint();
    else if (type === 1) this.advance(8);
    else if (type === 5) this.advance(4);
    else if (type === 2) {
      const n = this.varint();
      const start = this.i;
      this.advance(n);
      return [start, this.i];
    } else if (type === 3) {
      if (depth > 64) throw this.malformed();
      for (;;) {
        const tag = this.varint();
        const t = tag & 7;
        if (t === 4) {
          if (Math.floor(tag / 8) !== no) throw this.malformed();
          break;
        }
        this.skip(t, Math.floor(tag / 8), depth + 1);
      }
    } else throw this.malformed();
    return undefined;
  }

  advance(n: number): void {
    if (n > this.end - this.i) throw this.malformed();
    this.i += n;
  }

  /** Calls `field` for each field until the end. */
  fields(field: (no: number, type: number, span: [number, number] | undefined) => void): void {
    while (this.i < this.end) {
      const tag = this.varint();
      const type = tag & 7;
      const no = Math.floor(tag / 8);
      field(no, type, this.skip(type, no));
    }
  }

  /** A reader over the span of a length-delimited field of this one. */
  within(span: [number, number]): ProtoWire {
    return new ProtoWire(this.b, span[0], span[1], this.malformed);
  }
}

/** Varints in [start, end) of `b` (a packed repeated field's element count): one per byte below 0x80. */
export function countVarints(b: Uint8Array, start: number, end: number): number {
  let n = 0;
  for (let i = start; i < end; i++) if (b[i]! < 0x80) n++;
  return n;
}

/**
 * Elements one field of an InferTensorContents adds when decoded, by kind: `objects` (a Buffer
 * each: bytes_contents; a Long each: int64/uint64_contents) and `scalars` (a number or boolean
 * each in a JS array: bool, int, uint, fp32 and fp64 contents; a packed bool or small int is one
 * byte on the wire for eight in the array, before the array's growth).
 * Fields: bool 1, int 2, int64 3, uint 4, uint64 5, fp32 6, fp64 7, bytes 8 (grpc_service.proto).
 */
export function contentsElements(b: Uint8Array, field: number, type: number, span: [number, number] | undefined): { objects: number; scalars: number } {
  const packed = type === 2 && span !== undefined;
  const len = packed ? span[1] - span[0] : 0;
  switch (field) {
    case 8: return { objects: type === 2 ? 1 : 0, scalars: 0 };
    case 3: case 5: return { objects: packed ? countVarints(b, span[0], span[1]) : 1, scalars: 0 };
    case 1: case 2: case 4: return { objects: 0, scalars: packed ? countVarints(b, span[0], span[1]) : 1 };
    case 6: return { objects: 0, scalars: packed ? Math.ceil(len / 4) : 1 };
    case 7: return { objects: 0, scalars: packed ? Math.ceil(len / 8) : 1 };
    default: return { objects: 0, scalars: 0 };
  }
}
