// OUTPUT0 = INPUT0 for INT32 tensors of any shape.
import { tensor } from 'triode';

export default class CustomIdentityInt32 {
  execute(requests) {
    return requests.map((r) => {
      const x = r.input('INPUT0');
      return { outputs: [tensor('OUTPUT0', 'INT32', x.shape, x.data)] };
    });
  }
}
