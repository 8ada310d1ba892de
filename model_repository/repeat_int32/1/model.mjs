// Decoupled: answers each request with one response per IN element, over time. A request the
// client cancels (a cancelled gRPC stream, a closed connection) stops at once with CANCELLED.
import { tensor, TritonModelError } from 'triode';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits `ms`, or less once the request is cancelled (checked every 20 ms). */
async function wait(request, ms) {
  const end = Date.now() + ms;
  while (!request.isCancelled() && Date.now() < end) await sleep(Math.min(20, end - Date.now()));
}

export default class RepeatInt32 {
  async execute(requests) {
    // Requests are answered one after another; execute returns once all are done.
    for (const r of requests) {
      const values = r.input('IN').data;
      const delays = r.input('DELAY').data;
      const pause = r.input('WAIT').data[0] ?? 0;
      if (delays.length !== values.length) {
        r.sender.send(new TritonModelError(`expected DELAY to have ${values.length} elements, got ${delays.length}`));
        continue;
      }
      for (let i = 0; i < values.length && !r.isCancelled(); i++) {
        await wait(r, delays[i]);
        if (r.isCancelled()) break;
        r.sender.send({ outputs: [tensor('OUT', 'INT32', [1], [values[i]]), tensor('IDX', 'UINT32', [1], [i])] });
      }
      if (r.isCancelled()) {
        r.sender.send(new TritonModelError('request cancelled by the client', 'CANCELLED'));
        continue;
      }
      await wait(r, pause);
      r.sender.close();
    }
  }
}
