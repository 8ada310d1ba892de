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

/**
 * Send with `redis.sendCommand(new VectoredCommand(...))`, not through ioredis's auto-pipelining
 * (which would copy the pieces into one buffer again).
 */
export class VectoredCommand extends Command {
  readonly #pieces: Arg[];

  constructor(name: string, args: Arg[]) {
    super(name, args, { replyEncoding: 'utf8' });
    this.#pieces = respPieces(name, args);
  }

  /**
   * Writes the pieces itself, corked so they leave in one writev with the other commands of this
   * turn; ioredis then writes nothing.
   */
  override toWritable(socket: object): string | Buffer {
    const s = socket as Partial<Socket>;
    if (typeof s.cork !== 'function' || typeof s.write !== 'function' || typeof s.uncork !== 'function') {
      return Buffer.concat(this.#pieces.map((p) => (typeof p === 'string' ? Buffer.from(p) : p)));
    }
    corkForTurn(s as Pick<Socket, 'cork' | 'uncork'>);
    for (const p of this.#pieces) s.write(p);
    return '';
  }
}
