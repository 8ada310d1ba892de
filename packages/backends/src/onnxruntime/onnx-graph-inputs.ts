/**
 * @module The input names an ONNX file's graph lists, initializers that are inputs included: what
 * onnxruntime takes as inputs (its required inputs and its overridable initializers). onnxruntime-node
 * shows the required inputs only, so a config input it does not list is looked up here, to tell an
 * overridable initializer from a name the model does not have.
 * The file is walked, not read whole: every field but the graph's inputs (weights and nodes, often
 * gigabytes) is skipped by its length, so what is read is the tags and lengths of the graph's
 * fields and its inputs' names.
 * Triton: onnxruntime_backend/src/onnxruntime_utils.cc (InputNames, OverridableInitializerNames)
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';

/** Bytes read from the file at a time. */
const CHUNK = 64 * 1024;
/** A name longer than this is not kept (no config names such an input). */
const MAX_NAME_BYTES = 64 * 1024;
/** Nesting of deprecated groups skipped before the file is taken as malformed. */
const MAX_GROUP_DEPTH = 64;

const malformed = (): Error => new Error('not an ONNX model');

/** A protobuf reader over a file, reading it CHUNK bytes at a time where it is not skipped. */
class FileWire {
  readonly #fd: number;
  readonly #buf = Buffer.allocUnsafe(CHUNK);
  #bufAt = 0;
  #bufEnd = 0;
  pos = 0;

  constructor(fd: number, readonly size: number) {
    this.#fd = fd;
  }

  byte(end: number): number {
    if (this.pos >= end) throw malformed();
    if (this.pos < this.#bufAt || this.pos >= this.#bufEnd) {
      const n = readSync(this.#fd, this.#buf, 0, CHUNK, this.pos);
      if (n <= 0) throw malformed();
      this.#bufAt = this.pos;
      this.#bufEnd = this.pos + n;
    }
    return this.#buf[this.pos++ - this.#bufAt]!;
  }

  varint(end: number): number {
    let v = 0;
    let scale = 1;
    for (let k = 0; k < 10; k++) {
      const c = this.byte(end);
      v += (c & 0x7f) * scale;
      if (c < 0x80) return v;
      scale *= 128;
    }
    throw malformed();
  }

  /** The end of a length-delimited field whose length comes next. */
  spanEnd(end: number): number {
    const n = this.varint(end);
    if (n > end - this.pos) throw malformed();
    return this.pos + n;
  }

  text(end: number): string | undefined {
    const n = end - this.pos;
    if (n > MAX_NAME_BYTES) {
      this.pos = end;
      return undefined;
    }
    const out = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) out[i] = this.byte(end);
    return out.toString('utf8');
  }

  skip(type: number, no: number, end: number, depth = 0): void {
    if (type === 0) this.varint(end);
    else if (type === 1 || type === 5) {
      const n = type === 1 ? 8 : 4;
      if (n > end - this.pos) throw malformed();
      this.pos += n;
    } else if (type === 2) this.pos = this.spanEnd(end);
    else if (type === 3) {
      if (depth >= MAX_GROUP_DEPTH) throw malformed();
      for (;;) {
        const tag = this.varint(end);
        if ((tag & 7) === 4) {
          if (Math.floor(tag / 8) !== no) throw malformed();
          return;
        }
        this.skip(tag & 7, Math.floor(tag / 8), end, depth + 1);
      }
    } else throw malformed();
  }

  /** Calls `field` for each field of [pos, end); it reads its field or returns false to have it skipped. */
  fields(end: number, field: (no: number, type: number) => boolean): void {
    while (this.pos < end) {
      const tag = this.varint(end);
      const type = tag & 7;
      const no = Math.floor(tag / 8);
      if (!field(no, type)) this.skip(type, no, end);
    }
  }
}

/**
 * The names of the graph inputs of the ONNX model in `path` (ModelProto.graph, GraphProto.input,
 * ValueInfoProto.name), in file order.
 * @throws Error when the file is not a regular file or does not read as an ONNX model
 */
export function onnxGraphInputNames(path: string): string[] {
  // Non-blocking: a file swapped for a FIFO must not wait for a writer.
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new Error('not a regular file');
    const w = new FileWire(fd, st.size);
    const names: string[] = [];
    // ModelProto: graph 7. GraphProto: input 11. ValueInfoProto: name 1.
    w.fields(w.size, (no, type) => {
      if (no !== 7 || type !== 2) return false;
      const graphEnd = w.spanEnd(w.size);
      w.fields(graphEnd, (g, t) => {
        if (g !== 11 || t !== 2) return false;
        const inputEnd = w.spanEnd(graphEnd);
        w.fields(inputEnd, (v, u) => {
          if (v !== 1 || u !== 2) return false;
          const name = w.text(w.spanEnd(inputEnd));
          if (name !== undefined) names.push(name);
          return true;
        });
        return true;
      });
      return true;
    });
    return names;
  } finally {
    closeSync(fd);
  }
}
