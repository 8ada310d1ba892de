import { describe, expect, it } from 'vitest';
import { VectoredCommand } from './vectored-command.js';
import { Redis } from 'ioredis';
import { startRedis } from '../../../../test/helpers/redis.js';

const resp = (pieces: (string | Buffer)[]) => Buffer.concat(pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p))).toString('latin1');

describe('VectoredCommand', () => {
  it('writes its pieces to the socket corked until the turn ends (one writev for the turn\'s commands) and gives ioredis nothing more to write', async () => {
    const tensor = Buffer.alloc(100_000, 7);
    const calls: string[] = [];
    const written: (string | Buffer)[] = [];
    const socket = { cork: () => calls.push('cork'), uncork: () => calls.push('uncork'), write: (p: string | Buffer) => { calls.push('write'); written.push(p); return true; } };
    const out = new VectoredCommand('xadd', ['s', '*', 't', tensor]).toWritable(socket);
    expect(out).toBe('');
    const onePiece = written.length;
    expect(new VectoredCommand('xadd', ['s', '*', 't', tensor]).toWritable(socket)).toBe('');
    expect(calls[0]).toBe('cork');
    expect(calls).not.toContain('uncork'); // both commands wait for the end of the turn
    await new Promise((r) => setImmediate(r));
    expect(calls.filter((c) => c === 'cork')).toHaveLength(1);
    expect(calls.at(-1)).toBe('uncork');
    expect(calls.filter((c) => c === 'uncork')).toHaveLength(1);
    expect(written.filter((p) => p === tensor)).toHaveLength(2);
    // The next turn corks again.
    const next = calls.length;
    new VectoredCommand('xadd', ['s', '*', 't', tensor]).toWritable(socket);
    expect(calls[next]).toBe('cork');
    await new Promise((r) => setImmediate(r));
    expect(calls.at(-1)).toBe('uncork');
    written.splice(onePiece);
    // Without a socket to write to, one buffer with the same bytes.
    expect(resp([new VectoredCommand('xadd', ['s', '*', 't', tensor]).toWritable({}) as Buffer])).toBe(resp(written));
  });
});

describe('VectoredCommand through ioredis (ioredis is pinned exactly: this relies on Command.toWritable, not a documented API)', () => {
  it('ioredis writes the command through toWritable, and Redis stores the tensor bytes as they were', async () => {
    const redis = await startRedis();
    const client = new Redis(redis.url, { lazyConnect: true });
    try {
      await client.connect();
      let written = 0;
      class Counted extends VectoredCommand {
        override toWritable(socket: object): string | Buffer {
          written++;
          return super.toWritable(socket);
        }
      }
      const tensor = Buffer.from(Float32Array.from({ length: 1000 }, (_, i) => i / 7).buffer);
      const id = await client.sendCommand(new Counted('xadd', ['s', '*', 't', tensor])) as string;
      expect(written).toBe(1);
      const fields = (await client.xrangeBuffer('s', id, id))[0]![1];
      expect(fields[0]!.toString()).toBe('t');
      expect(fields[1]!.equals(tensor)).toBe(true);
    } finally {
      client.disconnect();
      await redis.stop();
    }
  });
});
