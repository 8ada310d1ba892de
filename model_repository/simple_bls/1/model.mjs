// Calls `simple` for every request (the calls run concurrently) and returns its outputs.
import { infer, log } from 'triode';

export default class SimpleBls {
  initialize(args) {
    log.info(`${args.model_name} version ${args.model_version} ready`);
  }

  async execute(requests) {
    return Promise.all(requests.map(async (r) => {
      const result = await infer({ model: 'simple', inputs: [r.input('INPUT0'), r.input('INPUT1')] });
      if (result.error) return new Error(`simple failed: ${result.error}`);
      return { outputs: result.outputs };
    }));
  }
}
