/**
 * @module What a listening server does with an 'error' it emits after it listens: with no
 * listener, EventEmitter throws it and the process ends. Node emits one for an accept that failed
 * for a reason libuv does not absorb (ENOBUFS, ENOMEM under memory pressure; it absorbs EMFILE).
 */

/** Reports the server's errors after it listens as process warnings, and keeps it serving. */
export function keepServingOnError(server: { on(event: 'error', listener: (err: Error) => void): unknown }, what: string): void {
  server.on('error', (err: Error) => process.emitWarning(`${what}: ${err.message}`));
}
