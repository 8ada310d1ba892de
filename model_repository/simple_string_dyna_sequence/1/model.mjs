// One INT32 accumulator per correlation id, kept by the model itself (explicit state).
import { strings, tensor, TritonModelError } from 'triode';

export default class StringDynaSequence {
  initialize() {
    this.accumulators = new Map();
  }

  execute(requests) {
    return requests.map((r) => {
      const value = r.input('INPUT').data[0];
      const start = r.input('START').data[0] === 1;
      const end = r.input('END').data[0] === 1;
      const ready = r.input('READY').data[0] === 1;
      const id = strings(r.input('CORRID'))[0];
      if (!ready) return { outputs: [tensor('OUTPUT', 'INT32', [1, 1], [0])] };
      if (!/^-?\d+$/.test(id)) {
        return new TritonModelError('dyna sequence backend expects correlation ID to be decodable into an integer');
      }
      let acc = start ? value : (this.accumulators.get(id) ?? 0) + value;
      if (end) {
        acc += Number.parseInt(id, 10);
        this.accumulators.delete(id);
      } else {
        this.accumulators.set(id, acc);
      }
      return { outputs: [tensor('OUTPUT', 'INT32', [1, 1], [acc])] };
    });
  }
}
