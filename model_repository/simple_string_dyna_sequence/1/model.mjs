// One INT32 accumulator per correlation id, kept by the model itself (explicit state).
import { strings, tensor, TritonModelError } from 'triode';

// The batcher holds at most max_candidate_sequences (config.pbtxt) sequences at once and drops one
// idle past max_sequence_idle_microseconds without telling the model: the accumulators of the
// sequences used least recently go beyond that many, or sequences started and never ended would
// each keep theirs for good (a review grew the server by ~300 MB with 304 such starts).
const MAX_SEQUENCES = 1024;
// And their ids at most this many characters in all: the server refuses string ids over 256 bytes,
// but a model should not rely on its caller for its memory (before that cap, 40 sequences started
// with ids of 5 MB held 500 MB here, for good).
const MAX_ID_CHARS = 1 << 20;

export default class StringDynaSequence {
  initialize() {
    this.accumulators = new Map();
    this.idChars = 0;
  }

  forget(id) {
    if (this.accumulators.delete(id)) this.idChars -= id.length;
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
      this.forget(id);
      if (end) {
        acc += Number.parseInt(id, 10);
      } else {
        // Most recently used last, so that the first is the one to drop.
        this.accumulators.set(id, acc);
        this.idChars += id.length;
        while (this.accumulators.size > MAX_SEQUENCES || this.idChars > MAX_ID_CHARS) this.forget(this.accumulators.keys().next().value);
      }
      return { outputs: [tensor('OUTPUT', 'INT32', [1, 1], [acc])] };
    });
  }
}
