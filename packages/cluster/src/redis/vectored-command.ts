/**
 * @module A Redis command whose Buffer arguments go to the socket as they are (one vectored
 * write), for requests that carry tensors. ioredis copies every argument of a command into one
 * new buffer, and its auto-pipelining copies the commands of a tick into another: two copies of
 * each tensor per request, and the garbage collections they cause (V8 collects when external
 * memory grows by 64 MiB, so every copy of a 110 KB tensor brings the next collection closer).
 */
import type { Socket } from 'node:net';
import { Command } from 'ioredis';
import { corkForTurn } from '../cork-for-turn.js';
import { respPieces } from './resp.js';

type Arg = string | Buffer;

/** Buffer arguments at least this long go to the socket as they are; the rest is copied together. */
const OWN_WRITE_BYTES = 16 * 1024;

/**
 * The command's bytes as few Buffers as can be without copying a large argument: each run of
 * strings and small Buffers joined into one (a `simple` request's XADD is one write, not seven:
 * each write costs the stream a queue entry and the system call an iovec).
 */
function chunksOf(pieces: readonly Arg[]): Buffer[] {
  const chunks: Buffer[] = [];
  let run: Arg[] = [];
  let runBytes = 0;
  const flush = () => {
    if (run.length === 0) return;
    const out = Buffer.allocUnsafe(runBytes);
    let off = 0;
    for (const p of run) off += typeof p === 'string' ? out.write(p, off, 'utf8') : (out.set(p, off), p.byteLength);
    chunks.push(out);
    run = [];
    runBytes = 0;
  };
  for (const p of pieces) {
    if (typeof p !== 'string' && p.byteLength >= OWN_WRITE_BYTES) {
      flush();
      chunks.push(p);
    } else {
      run.push(p);
      runBytes += typeof p === 'string' ? Buffer.byteLength(p) : p.byteLength;
    }
  }
  flush();
  return chunks;
}

/**
 * Send with `redis.sendCommand(new VectoredCommand(...))`, not through ioredis's auto-pipelining
 * (which would copy the pieces into one buffer again).
 */
export class VectoredCommand extends Command {
  readonly #chunks: Buffer[];

  constructor(name: string, args: Arg[]) {
    super(name, args, { replyEncoding: 'utf8' });
    this.#chunks = chunksOf(respPieces(name, args));
  }

  /**
   * Writes the pieces itself, corked so they leave in one writev with the other commands of this
   * turn; ioredis then writes nothing.
   */
  override toWritable(socket: object): string | Buffer {
    const s = socket as Partial<Socket>;
    if (typeof s.cork !== 'function' || typeof s.write !== 'function' || typeof s.uncork !== 'function') {
      return Buffer.concat(this.#chunks);
    }
    corkForTurn(s as Pick<Socket, 'cork' | 'uncork'>);
    for (const c of this.#chunks) s.write(c);
    return '';
  }
}
