import { describe, expect, it } from 'vitest';
import { VectoredCommand } from './vectored-command.js';
import { Redis } from 'ioredis';
import { startRedis } from '../../../../test/helpers/redis.js';

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
