// OUTPUT0 = INPUT0. BYTES tensors travel in their length-prefixed form, so returning the input's
// data returns every byte unchanged.
import { tensor } from 'triode';

export default class SimpleIdentity {
  execute(requests) {
    return requests.map((request) => {
      const input = request.input('INPUT0');
      return { outputs: [tensor('OUTPUT0', 'BYTES', input.shape, input.data)] };
    });
  }
}
