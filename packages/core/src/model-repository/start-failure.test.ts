import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Backend } from '../backend-api.js';
import { echoBackend } from '../echo-backend.case.js';
import type { Logger } from '../logger.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { InferenceServer } from '../server.js';
import { ModelLifecycle } from './model-lifecycle.js';

// A hole in the schema read, made on purpose: the auto-completed config goes on as the backend
// left it, as before the read existed. What is tested is what stands behind that read.
const hole = vi.hoisted(() => ({ open: false }));
vi.mock('./autocomplete-result.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('./autocomplete-result.js')>();
  return { readAutoCompletedConfig: (c: unknown, name: string) => (hole.open ? c as ModelConfig : real.readAutoCompletedConfig(c, name)) };
});

const GOOD = 'backend: "echo"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n';

/** Auto-completes model `ac_ens` into an ensemble whose `step` is not a list (the reviewer's repro). */
const garbage: Backend = {
  ...echoBackend,
  name: 'garbage',
  async autoCompleteConfig(config: ModelConfig) {
    Object.assign(config, {
      input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [-1] }],
      output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [-1] }],
      platform: 'ensemble',
      ensemble_scheduling: { step: 'x' },
    });
  },
};

function repository(): string {
  const root = mkdtempSync(join(tmpdir(), 'triode-start-failure-'));
  for (const [name, text] of [['good', GOOD], ['ac_ens', 'name: "ac_ens"\nbackend: "garbage"\n']]) {
    mkdirSync(join(root, name!, '1'), { recursive: true });
    writeFileSync(join(root, name!, 'config.pbtxt'), text!);
  }
  return root;
}

function recordingLogger(): Logger & { errors: string[] } {
  const errors: string[] = [];
  return { errors, error: (m: string) => { errors.push(m); }, warning() {}, info() {}, verbose() {} };
}

async function servesGood(s: InferenceServer): Promise<void> {
  const res = await s.infer({ modelName: 'good', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(9) }] });
  expect(Array.from(res.outputs[0]!.data as Int32Array)).toEqual([9]);
}

afterEach(() => {
  hole.open = false;
  vi.restoreAllMocks();
});

describe('one model never fails the start', () => {
  it('an ensemble config whose steps are not a list (past the schema read) does not reject start(); unload_dependents copes with it', async () => {
    hole.open = true;
    const root = repository();
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echoBackend, garbage], modelControlMode: 'explicit', startupModels: ['*'] });
    try {
      await servesGood(s);
      expect(s.repositoryIndex().find((r) => r.name === 'ac_ens')?.state).toBe('UNAVAILABLE');
      // The failed ensemble keeps its config in the index: the dependents' scan reads its steps.
      await s.unloadModel('good', { unloadDependents: true });
      expect(s.modelReady('good')).toBe(false);
    } finally {
      await s.stop();
    }
  });

  it('a throw no check foresaw while one model loads makes that model UNAVAILABLE, named, and logged; the others are served', async () => {
    const real = ModelLifecycle.prototype.loadVersions;
    vi.spyOn(ModelLifecycle.prototype, 'loadVersions').mockImplementation(async function (this: ModelLifecycle, entry, versions, signal) {
      if (entry.name === 'bad') throw new TypeError('x.map is not a function');
      return real.call(this, entry, versions, signal);
    });
    const root = repository();
    mkdirSync(join(root, 'bad', '1'), { recursive: true });
    writeFileSync(join(root, 'bad', 'config.pbtxt'), GOOD);
    const logger = recordingLogger();
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echoBackend, garbage], logger });
    try {
      await servesGood(s);
      const row = s.repositoryIndex().find((r) => r.name === 'bad');
      expect(row?.state).toBe('UNAVAILABLE');
      expect(row?.reason).toBe("failed to load 'bad': an unexpected error occurred (see the server log)");
      expect(logger.errors.some((m) => m.includes("failed to load 'bad'") && m.includes('x.map is not a function'))).toBe(true);
    } finally {
      await s.stop();
    }
  });
});
