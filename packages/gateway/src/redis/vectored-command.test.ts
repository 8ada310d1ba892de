import { describe, expect, it } from 'vitest';
import { VectoredCommand } from './vectored-command.js';

const resp = (pieces: (string | Buffer)[]) => Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))).toString('latin1');

describe('VectoredCommand', () => {
  it('writes its pieces to the socket corked (one writev) and gives ioredis nothing more to write', () => {
    const tensor = Buffer.alloc(100_000, 7);
    const calls: string[] = [];
    const written: (string | Buffer)[] = [];
    const socket = { cork: () => calls.push('cork'), uncork: () => calls.push('uncork'), write: (p: string | Buffer) => { calls.push('write'); written.push(p); return true; } };
    const out = new VectoredCommand('xadd', ['s', '*', 't', tensor]).toWritable(socket);
    expect(out).toBe('');
    expect(calls[0]).toBe('cork');
    expect(calls.at(-1)).toBe('uncork');
    expect(written).toContain(tensor);
    // Without a socket to write to, one buffer with the same bytes.
    expect(resp([new VectoredCommand('xadd', ['s', '*', 't', tensor]).toWritable({}) as Buffer])).toBe(resp(written));
  });
});
