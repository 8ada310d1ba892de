/**
 * @module Protobuf text format reader for `inference.ModelConfig` (config.pbtxt).
 * Handles nested messages (`{}` or `<>`), repeated fields in both forms (`dims: 1 dims: 2` and
 * `dims: [1, 2]`), maps as repeated `{ key: … value: … }` entries, enums by name or number,
 * `#` comments, single- or double-quoted strings with C escapes (adjacent strings concatenate),
 * and numbers with sign, exponent, hex and `inf`/`nan`.
 * Triton: google::protobuf::TextFormat::Parse as used by core/src/model_config_utils.cc
 */
import { setOwn } from '../own-property.js';
import { ENUMS, INT_RANGES, MESSAGES, wideIntegerNote, type FieldSpec, type ScalarType, type ValueType } from './model-config-schema.js';
import type { ModelConfig } from './model-config.js';

type TokKind = 'ident' | 'number' | 'string' | 'punct' | 'eof';
interface Token {
  kind: TokKind;
  text: string;
  /** Decoded string value (kind 'string'). */
  value?: string;
  line: number;
  col: number;
}

/** A parse failure; `message` reads like protobuf's: `line:col: what`. */
export class PbtxtSyntaxError extends Error {
  constructor(line: number, col: number, what: string) {
    super(`${line}:${col}: ${what}`);
    this.name = 'PbtxtSyntaxError';
  }
}

const IDENT = /[A-Za-z_][A-Za-z0-9_.]*/y;
const NUMBER = /-?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fF]?|inf(?:inity)?|nan)/iy;
const SIMPLE_ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', f: '\f', v: '\v', '\\': '\\', "'": "'", '"': '"', '?': '?' };

function tokenize(src: string): Token[] {
  const toks: Token[] = [];
  let i = 0;
  let line = 1;
  let lineStart = 0;
  while (i < src.length) {
    const c = src[i]!;
    const col = i - lineStart + 1;
    if (c === '\n') { line++; i++; lineStart = i; continue; }
    if (c === ' ' || c === '\t' || c === '\r' || c === '\f' || c === '\v') { i++; continue; }
    if (c === '#') { while (i < src.length && src[i] !== '\n') i++; continue; }
    if ('{}[]<>:,;'.includes(c)) { toks.push({ kind: 'punct', text: c, line, col }); i++; continue; }
    if (c === '"' || c === "'") {
      let j = i + 1;
      let out = '';
      const bytes: number[] = [];
      const flush = () => { if (bytes.length) { out += Buffer.from(bytes).toString('utf8'); bytes.length = 0; } };
      for (;;) {
        if (j >= src.length || src[j] === '\n') throw new PbtxtSyntaxError(line, col, 'String literal is not terminated');
        const d = src[j]!;
        if (d === c) break;
        if (d === '\\') {
          const e = src[j + 1] ?? '';
          if (e in SIMPLE_ESCAPES) { flush(); out += SIMPLE_ESCAPES[e]; j += 2; continue; }
          let m: RegExpMatchArray | null;
          if ((m = /^[0-7]{1,3}/.exec(src.slice(j + 1, j + 4)))) { bytes.push(parseInt(m[0], 8) & 0xff); j += 1 + m[0].length; continue; }
          if ((e === 'x' || e === 'X') && (m = /^[0-9a-fA-F]{1,2}/.exec(src.slice(j + 2, j + 4)))) { bytes.push(parseInt(m[0], 16)); j += 2 + m[0].length; continue; }
          throw new PbtxtSyntaxError(line, j - lineStart + 1, `Invalid escape sequence in string literal: "\\${e}"`);
        }
        flush();
        out += d;
        j++;
      }
      flush();
      toks.push({ kind: 'string', text: src.slice(i, j + 1), value: out, line, col });
      i = j + 1;
      continue;
    }
    NUMBER.lastIndex = i;
    const num = NUMBER.exec(src);
    if (num && (/[\d.]/.test(c) || c === '-')) {
      toks.push({ kind: 'number', text: num[0], line, col });
      i += num[0].length;
      continue;
    }
    IDENT.lastIndex = i;
    const id = IDENT.exec(src);
    if (id) { toks.push({ kind: 'ident', text: id[0], line, col }); i += id[0].length; continue; }
    throw new PbtxtSyntaxError(line, col, `Unexpected character "${c}"`);
  }
  toks.push({ kind: 'eof', text: '', line, col: i - lineStart + 1 });
  return toks;
}

type Value = string | number | boolean | Value[] | { [k: string]: Value };
type Msg = { [k: string]: Value };

class Parser {
  #toks: Token[];
  #pos = 0;

  constructor(src: string) {
    this.#toks = tokenize(src);
  }

  #peek(): Token { return this.#toks[this.#pos]!; }
  #next(): Token { return this.#toks[this.#pos++]!; }
  #fail(t: Token, what: string): never { throw new PbtxtSyntaxError(t.line, t.col, what); }
  #accept(p: string): boolean {
    const t = this.#peek();
    if (t.kind === 'punct' && t.text === p) { this.#pos++; return true; }
    return false;
  }
  #expect(p: string): void {
    const t = this.#peek();
    if (!this.#accept(p)) this.#fail(t, `Expected "${p}", found "${t.text}".`);
  }

  parseTop(type: string): Msg {
    const m = this.#message(type, undefined);
    const t = this.#peek();
    if (t.kind !== 'eof') this.#fail(t, `Expected identifier, got: ${t.text}`);
    return m;
  }

  #message(type: string, close: string | undefined): Msg {
    const spec = MESSAGES[type];
    if (!spec) throw new TypeError(`no schema for ${type}`);
    const out: Msg = {};
    const oneofs = new Map<string, string>();
    for (;;) {
      const t = this.#peek();
      if (close !== undefined && this.#accept(close)) return out;
      if (t.kind === 'eof') {
        if (close !== undefined) this.#fail(t, `Expected "${close}".`);
        return out;
      }
      if (t.kind !== 'ident') this.#fail(t, `Expected identifier, got: ${t.text}`);
      this.#next();
      // Own fields only: 'constructor' or 'toString' are on every object, not in the schema.
      const field = Object.hasOwn(spec, t.text) ? spec[t.text] : undefined;
      if (!field) this.#fail(t, `Message type "inference.${type}" has no field named "${t.text}".`);
      if (field.oneof) {
        const prev = oneofs.get(field.oneof);
        if (prev !== undefined && prev !== t.text) {
          this.#fail(t, `Field "${t.text}" is specified along with field "${prev}", another member of oneof "${field.oneof}".`);
        }
        oneofs.set(field.oneof, t.text);
      }
      this.#field(out, t, field);
      if (!this.#accept(',')) this.#accept(';');
    }
  }

  #field(out: Msg, nameTok: Token, field: FieldSpec): void {
    const name = nameTok.text;
    const isMsg = typeof field.type === 'object' && 'message' in field.type;
    const isMapOrMsg = isMsg || field.mapKey !== undefined;
    const hasColon = this.#accept(':');
    if (!hasColon && !isMapOrMsg) this.#fail(this.#peek(), `Expected ":", found "${this.#peek().text}".`);
    const repeated = field.repeated || field.mapKey !== undefined;
    const values: Value[] = [];
    if (this.#accept('[')) {
      if (!repeated) this.#fail(nameTok, `Non-repeated field "${name}" cannot be given a list of values.`);
      if (!this.#accept(']')) {
        do values.push(this.#value(field)); while (this.#accept(','));
        this.#expect(']');
      }
    } else {
      values.push(this.#value(field));
    }
    if (field.mapKey !== undefined) {
      const m = (out[name] ??= {}) as Msg;
      for (const entry of values as Msg[]) {
        const key = entry['key'] ?? (field.mapKey === 'string' ? '' : 0);
        // An own entry even for the key "__proto__" (assigning it would set the map's prototype).
        setOwn(m, String(key), entry['value'] ?? (isMsg ? {} : ''));
      }
    } else if (field.repeated) {
      // One by one: spreading 100k+ values overflows the stack.
      const list = (out[name] ??= []) as Value[];
      for (const v of values) list.push(v);
    } else {
      if (Object.hasOwn(out, name)) this.#fail(nameTok, `Non-repeated field "${name}" is specified multiple times.`);
      out[name] = values[0]!;
    }
  }

  #value(field: FieldSpec): Value {
    if (field.mapKey !== undefined) {
      const open = this.#peek();
      const close = this.#accept('{') ? '}' : this.#accept('<') ? '>' : this.#fail(open, `Expected "{", found "${open.text}".`);
      const entry: Msg = {};
      for (;;) {
        if (this.#accept(close)) break;
        const k = this.#next();
        if (k.kind !== 'ident' || (k.text !== 'key' && k.text !== 'value')) this.#fail(k, `Map entry has no field named "${k.text}".`);
        const spec: FieldSpec = k.text === 'key' ? { type: field.mapKey } : { type: field.type };
        if (k.text in entry) this.#fail(k, `Non-repeated field "${k.text}" is specified multiple times.`);
        this.#field(entry, k, spec);
        if (!this.#accept(',')) this.#accept(';');
      }
      return entry;
    }
    return this.#single(field.type);
  }

  #single(type: ValueType): Value {
    const t = this.#peek();
    if (typeof type === 'object' && 'message' in type) {
      const close = this.#accept('{') ? '}' : this.#accept('<') ? '>' : this.#fail(t, `Expected "{", found "${t.text}".`);
      return this.#message(type.message, close);
    }
    this.#next();
    if (typeof type === 'object') {
      const names = ENUMS[type.enum] ?? [];
      if (t.kind === 'ident') {
        if (!names.includes(t.text)) this.#fail(t, `Unknown enumeration value of "${t.text}" for field of type inference.${type.enum}.`);
        return t.text;
      }
      if (t.kind === 'number' && /^\d+$/.test(t.text)) {
        const n = Number(t.text);
        const name = names[n];
        if (name === undefined) this.#fail(t, `Unknown enumeration value of "${t.text}" for field of type inference.${type.enum}.`);
        return name;
      }
      this.#fail(t, `Expected integer or identifier, got: ${t.text}`);
    }
    const v = scalarFromToken(t, type, (what) => this.#fail(t, what));
    if (typeof v === 'string') {
      // Adjacent string literals concatenate, as in C.
      let out = v;
      while (this.#peek().kind === 'string') out += this.#next().value ?? '';
      return out;
    }
    return v;
  }
}

function scalarFromToken(t: Token, type: ScalarType, fail: (what: string) => never): Value {
  switch (type) {
    case 'string':
    case 'bytes': {
      if (t.kind !== 'string') fail(`Expected string, got: ${t.text}`);
      return t.value ?? '';
    }
    case 'bool': {
      if (t.kind === 'ident' && ['true', 'True', 't'].includes(t.text)) return true;
      if (t.kind === 'ident' && ['false', 'False', 'f'].includes(t.text)) return false;
      if (t.kind === 'number' && (t.text === '0' || t.text === '1')) return t.text === '1';
      return fail(`Invalid value for boolean field: "${t.text}"`);
    }
    case 'float':
    case 'double': {
      if (t.kind === 'ident' && /^-?(inf|infinity|nan)$/i.test(t.text)) return t.text.toLowerCase().includes('nan') ? NaN : Infinity;
      if (t.kind !== 'number') fail(`Expected double, got: ${t.text}`);
      const text = t.text.replace(/[fF]$/, '');
      if (/inf/i.test(text)) return text.startsWith('-') ? -Infinity : Infinity;
      if (/nan/i.test(text)) return NaN;
      return Number(text);
    }
    default: {
      if (t.kind !== 'number' || !/^-?(0[xX][0-9a-fA-F]+|\d+)$/.test(t.text)) fail(`Expected integer, got: ${t.text}`);
      const neg = t.text.startsWith('-');
      const abs = neg ? t.text.slice(1) : t.text;
      const n = (neg ? -1 : 1) * Number(abs);
      const [lo, hi] = INT_RANGES[type]!;
      if (!Number.isSafeInteger(n) || n < lo || n > hi) {
        const note = /^-?\d+$/.test(t.text) ? wideIntegerNote(type, t.text) : undefined;
        fail(`Integer out of range (${t.text})${note ? `: ${note}` : ''}`);
      }
      return n;
    }
  }
}

/**
 * Parses protobuf text format into a plain object shaped by the schema of `type`
 * (default `ModelConfig`). Repeated fields are arrays, maps are objects, enums are names,
 * 64-bit integers are numbers. Unset fields are absent (defaults are applied by normalization).
 * @throws PbtxtSyntaxError with `line:col: what` on malformed input.
 * @example parsePbtxt('name: "simple" max_batch_size: 8') // { name: 'simple', max_batch_size: 8 }
 */
export function parsePbtxt(src: string): ModelConfig;
export function parsePbtxt(src: string, type: string): Record<string, unknown>;
export function parsePbtxt(src: string, type = 'ModelConfig'): ModelConfig | Record<string, unknown> {
  return new Parser(src).parseTop(type) as unknown as ModelConfig;
}
