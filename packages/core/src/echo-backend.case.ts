/** Test helper (not published): a backend whose models answer input 0 as output `OUT`. */
import type { Backend } from './backend-api.js';

export const echoBackend: Backend = {
  name: 'echo',
  async modelInitialize() {
    return {
      async instanceInitialize() {
        return { async execute(requests) { return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) }; }, async finalize() {} };
      },
      async finalize() {},
    };
  },
};
