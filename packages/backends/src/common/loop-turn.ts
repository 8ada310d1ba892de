/**
 * @module Whether the event loop has turned between two runs on the main thread. A model run on the
 * main thread blocks it and answers at once (onnxruntime-loader.ts), so runs chained by promises
 * alone (an embedded caller's `while (...) await server.infer(...)`, a queue drained batch after
 * batch) would never let the loop poll its sockets or fire its timers: health checks, other
 * clients and the caller's own timeouts would wait for the chain to end. A run that follows
 * another with no turn between them first waits for one (an immediate); a run that came in from
 * I/O (a request read in the poll phase) finds the turn taken and runs at once, at the cost of one
 * immediate queued per turn, not one per run.
 */
import { setImmediate as nextImmediate } from 'node:timers/promises';

let armed = false;
const fire = (): void => { armed = false; };

/**
 * True when the event loop has reached its check phase since the last call (or this is the first):
 * the caller may run now. Either way, it is armed for the next call.
 */
export function loopTurned(): boolean {
  if (armed) return false;
  armed = true;
  setImmediate(fire);
  return true;
}

/** Resolves at the event loop's next check phase (after its poll phase: pending I/O and timers first). */
export function nextLoopTurn(): Promise<void> {
  return nextImmediate();
}
