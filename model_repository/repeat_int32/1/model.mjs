// Decoupled: answers each request with one response per IN element, over time.
import { tensor, TritonModelError } from 'triode';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export default class RepeatInt32 {
  async execute(requests) {
    // Requests are answered one after another; execute returns once all are done.
    for (const r of requests) {
      const values = r.input('IN').data;
      const delays = r.input('DELAY').data;
      const wait = r.input('WAIT').data[0] ?? 0;
      if (delays.length !== values.length) {
        r.sender.send(new TritonModelError(`expected DELAY to have ${values.length} elements, got ${delays.length}`));
        continue;
      }
      for (let i = 0; i < values.length; i++) {
        await sleep(delays[i]);
        r.sender.send({ outputs: [tensor('OUT', 'INT32', [1], [values[i]]), tensor('IDX', 'UINT32', [1], [i])] });
      }
      await sleep(wait);
      r.sender.close();
    }
  }
}
