import { describe, expect, it } from 'vitest';
import { isTransferable } from '@triode/core';
import { RespError, RespReader, respPieces, type RespValue } from './resp.js';

const big = Buffer.alloc(100_000, 3);
// An XREADGROUP reply (one stream, two entries; the first carries a 100 KB tensor field), then
// +OK, an integer, an error, a nil bulk and a nil array, as one byte stream.
const wire = Buffer.concat([
  Buffer.from('*1\r\n*2\r\n$12\r\ntriode:req:m\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*4\r\n$1\r\nr\r\n$2\r\nhi\r\n$1\r\nt\r\n'),
  Buffer.from(`$${big.byteLength}\r\n`), big, Buffer.from('\r\n'),
  Buffer.from('*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\nr\r\n$0\r\n\r\n'),
  Buffer.from('+OK\r\n:42\r\n-NOGROUP No such key\r\n$-1\r\n*-1\r\n'),
]);

function check(replies: RespValue[]): void {
  expect(replies).toHaveLength(6);
  const [xread, ok, n, err, nilBulk, nilArray] = replies;
  const [[stream, entries]] = xread as [[Buffer, [Buffer, Buffer[]][]]];
  expect(stream.toString()).toBe('triode:req:m');
  expect(entries.map(([id]) => id.toString())).toEqual(['1-0', '1-1']);
  const fields = entries[0]![1];
  expect(fields.map((f) => f.byteLength)).toEqual([1, 2, 1, big.byteLength]);
  expect(fields[3]!.equals(big)).toBe(true);
  // The tensor got an ArrayBuffer of its own: it can move to an instance thread as it is.
  expect(isTransferable(fields[3]!)).toBe(true);
  expect(entries[1]![1][1]!.byteLength).toBe(0);
  expect(ok).toBe('OK');
  expect(n).toBe(42);
  expect(err).toBeInstanceOf(RespError);
  expect((err as RespError).message).toBe('NOGROUP No such key');
  expect(nilBulk).toBeNull();
  expect(nilArray).toBeNull();
}

const resp = (pieces: (string | Buffer)[]) => Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))).toString('latin1');

describe('respPieces', () => {
  it('encodes RESP as one buffer when no argument is large', () => {
    const tensor = Buffer.from([1, 2, 3]);
    const pieces = respPieces('xadd', ['s', '*', 'r', Buffer.from('hé'), 't', tensor, 'ü€😀']);
    expect(pieces).toHaveLength(1);
    expect(resp(pieces)).toBe(resp([Buffer.from('*8\r\n$4\r\nxadd\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nr\r\n$3\r\n'), Buffer.from('hé'), '\r\n$1\r\nt\r\n$3\r\n', tensor, '\r\n$9\r\n', Buffer.from('ü€😀'), '\r\n']));
    expect(resp(respPieces('PING', []))).toBe('*1\r\n$4\r\nPING\r\n');
    expect(resp(respPieces('SET', ['k', '']))).toBe('*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n');
  });

  it('passes large Buffers through as they are, the rest around them in buffers of its own', () => {
    const big = Buffer.alloc(16 * 1024, 7);
    const huge = Buffer.alloc(100_000, 9);
    const small = Buffer.from('xyz');
    const pieces = respPieces('XADD', ['s', '*', 'r', small, 't', big, 't', huge]);
    expect(pieces).toHaveLength(5);
    expect(pieces[1]).toBe(big);
    expect(pieces[3]).toBe(huge);
    expect(resp(pieces)).toBe(resp(['*9\r\n$4\r\nXADD\r\n$1\r\ns\r\n$1\r\n*\r\n$1\r\nr\r\n$3\r\nxyz\r\n$1\r\nt\r\n$16384\r\n', big, '\r\n$1\r\nt\r\n$100000\r\n', huge, '\r\n']));
    // A large argument last, and two in a row: nothing empty is left between or after them.
    const two = respPieces('X', [big, huge]);
    expect(resp(two)).toBe(resp(['*3\r\n$1\r\nX\r\n$16384\r\n', big, '\r\n$100000\r\n', huge, '\r\n']));
    expect(two.filter((p) => p.byteLength === 0)).toEqual([]);
  });

  it('writes what Node would for any text: long, non-ASCII, lone surrogates, many arguments', () => {
    const args = ['a'.repeat(300), 'é'.repeat(200), '\ud800x', '', 'x'.repeat(256), 'ü', ...Array.from({ length: 12 }, (_, i) => String(i * 1000))];
    const expected = `*${args.length + 1}\r\n$3\r\nSET\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
    expect(Buffer.concat(respPieces('SET', args)).equals(Buffer.from(expected))).toBe(true);
  });
});

describe('RespReader', () => {
  it('reads a stream of replies in one chunk', () => {
    check(new RespReader().push(wire));
  });

  it('reads the same whatever the chunking: split at every point around the headers, and in 7-byte pieces', () => {
    for (let at = 1; at < wire.byteLength; at += at < 200 || at > wire.byteLength - 200 ? 1 : 997) {
      const r = new RespReader();
      check([...r.push(wire.subarray(0, at)), ...r.push(wire.subarray(at))]);
    }
    const r = new RespReader();
    const out: RespValue[] = [];
    for (let i = 0; i < wire.byteLength; i += 7) out.push(...r.push(wire.subarray(i, i + 7)));
    check(out);
  });

  it('returns nothing until a reply is complete, and forgets a partial reply on reset', () => {
    const r = new RespReader();
    expect(r.push(wire.subarray(0, 500))).toEqual([]);
    r.reset();
    expect(r.push(Buffer.from('+PONG\r\n'))).toEqual(['PONG']);
  });

  it('throws on bytes that are not RESP', () => {
    expect(() => new RespReader().push(Buffer.from('?what\r\n'))).toThrow(/malformed reply/);
    expect(() => new RespReader().push(Buffer.from('$abc\r\n'))).toThrow(/malformed reply/);
    expect(() => new RespReader().push(Buffer.from('*1e9\r\n'))).toThrow(/malformed reply/);
  });

  it('attack: a reply of many values in many chunks is walked once (not once a chunk: quadratic on a huge reply)', () => {
    const n = 20_000;
    const reply = Buffer.from(`*${n}\r\n${'$1\r\nx\r\n'.repeat(n)}`);
    const r = new RespReader();
    const out: RespValue[] = [];
    for (let i = 0; i < reply.byteLength; i += 100) out.push(...r.push(reply.subarray(i, i + 100)));
    expect(out).toHaveLength(1);
    expect((out[0] as Buffer[]).length).toBe(n);
    // The array's header and each bulk string's, walked once each to find the reply's end.
    expect(r.headersWalked).toBe(n + 1);
  });
});
