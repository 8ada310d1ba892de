import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { echoBackend } from '../echo-backend.case.js';
import { silentLogger } from '../logger.js';
import { InferenceServer } from '../server.js';
import { CONFIG_WARNINGS_PARAMETER, withConfigWarnings } from './config-warnings.js';

const echo = echoBackend;

const IO = 'backend: "echo"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n';

describe('config warnings in the config response', () => {
  it('a hint Triode does not apply is named in the model\'s config response as well as the log; a clean config has none, and reloads keep them current', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-config-warnings-'));
    for (const [name, extra] of [['hinted', 'optimization { eager_batching: true }\ninstance_group { count: 1 kind: KIND_CPU passive: true }\nparameters { key: "mine" value: { string_value: "kept" } }\nmodel_metrics { metric_control { metric_identifier { family: "nv_inference_queue_duration_us" } histogram_options { buckets: [ 1 ] } } }\n'], ['clean', '']]) {
      mkdirSync(join(root, name!, '1'), { recursive: true });
      writeFileSync(join(root, name!, 'config.pbtxt'), IO + extra);
    }
    const logged: string[] = [];
    const logger = { ...silentLogger, warning: (m: string) => { logged.push(m); } };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'explicit', startupModels: ['*'], logger });
    try {
      const params = s.modelConfig('hinted')['parameters'] as Record<string, { string_value: string }>;
      const lines = params[CONFIG_WARNINGS_PARAMETER]!.string_value.split('\n');
      expect(lines).toHaveLength(3);
      expect(lines.some((l) => l.includes("metric family 'nv_inference_queue_duration_us' in 'metric_identifier' is not a customizable metric"))).toBe(true);
      expect(lines.some((l) => l.includes('optimization.eager_batching is not implemented by Triode and is ignored'))).toBe(true);
      expect(lines.some((l) => l.includes('instance_group[0].passive is not implemented by Triode and is ignored'))).toBe(true);
      // The same words as the log; the model's own parameters are untouched.
      for (const l of lines) expect(logged).toContain(l);
      expect(params['mine']).toEqual({ string_value: 'kept' });
      expect(s.modelConfig('clean')['parameters']).not.toHaveProperty([CONFIG_WARNINGS_PARAMETER]);
      // A reload without the hints answers none.
      writeFileSync(join(root, 'hinted', 'config.pbtxt'), IO);
      await s.loadModel('hinted');
      expect(s.modelConfig('hinted')['parameters']).not.toHaveProperty([CONFIG_WARNINGS_PARAMETER]);
    } finally {
      await s.stop(1000);
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('leaves a response without warnings as it is', () => {
    const json = { name: 'x' };
    expect(withConfigWarnings(json, {})).toBe(json);
  });
});
