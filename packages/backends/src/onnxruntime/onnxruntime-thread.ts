/**
 * @module The code that runs inside an instance thread: one onnxruntime session per thread.
 * `session.run` blocks this thread for the whole inference, which is why it lives here and not on
 * the event loop that serves I/O (unless the instance runs on the main thread: see
 * execution-thread-policy.ts). Every error is returned as data.
 * Triton: onnxruntime_backend/src/onnxruntime.cc (ModelInstanceState::ProcessRequests)
 */
import { Piscina } from 'piscina';
import type { ExecuteReply, ExecuteResult, LoadReply, ThreadTask } from './messages.js';
import { OnnxSession, outputBuffers } from './onnxruntime-session.js';

const session = new OnnxSession();

/** Piscina entry. */
export default async function handle(task: ThreadTask): Promise<ExecuteReply | LoadReply> {
  switch (task.op) {
    case 'load':
      return session.load(task);
    case 'execute':
      // A failure comes back as data: `{ code, message }` survives the crossing, a thrown Error's code would not.
      return session.run(task).then((result) => {
        const movable = {
          [Piscina.transferableSymbol]: outputBuffers(result),
          [Piscina.valueSymbol]: result,
        };
        return Piscina.move(movable as unknown as Parameters<typeof Piscina.move>[0]) as unknown as ExecuteResult;
      }, (err: unknown) => session.failure(err));
    case 'unload':
      await session.unload();
      return { ok: true };
  }
}
