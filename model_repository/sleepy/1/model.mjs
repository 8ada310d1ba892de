// Waits delay_ms per execution (a batch), then echoes INPUT0: throughput scales only with
// instances and workers, which is what a scale-out test needs.
import { tensor } from 'triode';

export default class Sleepy {
  initialize(args) {
    this.delayMs = Number(args.config.parameters?.delay_ms?.string_value ?? 20);
  }

  async execute(requests) {
    await new Promise((r) => setTimeout(r, this.delayMs));
    return requests.map((r) => {
      const x = r.input('INPUT0');
      return { outputs: [tensor('OUTPUT0', 'INT32', x.shape, x.data)] };
    });
  }
}
