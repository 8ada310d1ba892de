import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Backend } from '../backend-api.js';
import { echoBackend } from '../echo-backend.case.js';
import { TriodeError } from '../errors.js';
import type { ModelConfig } from '../model-config/model-config.js';
import { InferenceServer } from '../server.js';
import { readAutoCompletedConfig } from './autocomplete-result.js';

const GOOD = 'backend: "echo"\nmax_batch_size: 4\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n';
const IO = {
  input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: [-1] }],
  output: [{ name: 'OUTPUT0', data_type: 'TYPE_INT32', dims: [-1] }],
};

/** What a model's `autoCompleteConfig` may leave behind (the reviewer's shapes). */
const GARBAGE: Record<string, (c: Record<string, unknown>) => void> = {
  'ensemble steps not an array': (c) => Object.assign(c, IO, { platform: 'ensemble', backend: '', ensemble_scheduling: { step: 'x' } }),
  'dims not an array': (c) => Object.assign(c, IO, { input: [{ name: 'INPUT0', data_type: 'TYPE_INT32', dims: 'abc' }] }),
  'a parameter not a message': (c) => Object.assign(c, IO, { parameters: { a: 5, b: null } }),
  'an input name not a string': (c) => Object.assign(c, IO, { input: [{ name: 42, data_type: 'TYPE_INT32', dims: [1] }] }),
  'max_batch_size NaN': (c) => Object.assign(c, IO, { max_batch_size: NaN }),
  'input not an array': (c) => Object.assign(c, IO, { input: 5 }),
  'preferred_batch_size not an array': (c) => Object.assign(c, IO, { max_batch_size: 4, dynamic_batching: { preferred_batch_size: 'x' } }),
  'an unknown field': (c) => Object.assign(c, IO, { no_such_field: 1 }),
  'an own __proto__ key': (c) => Object.defineProperty(Object.assign(c, IO), '__proto__', { value: { max_batch_size: 8 }, enumerable: true }),
};

/** A backend whose auto-completion runs `complete` on the config (as a model's own code would). */
function garbageBackend(complete: (c: Record<string, unknown>) => void): Backend {
  return {
    ...echoBackend,
    name: 'garbage',
    async autoCompleteConfig(config: ModelConfig) {
      complete(config as unknown as Record<string, unknown>);
    },
  };
}

function repository(): string {
  const root = mkdtempSync(join(tmpdir(), 'triode-ac-'));
  for (const [name, text] of [['good', GOOD], ['ac_bad', 'name: "ac_bad"\nbackend: "garbage"\n']]) {
    mkdirSync(join(root, name!, '1'), { recursive: true });
    writeFileSync(join(root, name!, 'config.pbtxt'), text!);
  }
  return root;
}

function expectClearError(err: unknown): asserts err is TriodeError {
  expect(err).toBeInstanceOf(TriodeError);
  const e = err as TriodeError;
  expect(e.code).toBe('INVALID_ARG');
  expect(e.message).toContain("auto-complete of model 'ac_bad' returned an invalid config: ");
  expect(e.message).not.toMatch(/is not a function|is not iterable|Cannot read prop/);
}

describe('readAutoCompletedConfig()', () => {
  it('reads a well-formed config into a fresh object of schema fields only', () => {
    const given = { name: 'm', max_batch_size: 4, ...IO };
    const read = readAutoCompletedConfig(given, 'm');
    expect(read).toEqual(given);
    expect(read).not.toBe(given);
    expect(Object.getPrototypeOf(read)).toBe(Object.prototype);
  });

  it('treats a field left undefined as absent', () => {
    expect(readAutoCompletedConfig({ name: 'm', platform: undefined }, 'm')).toEqual({ name: 'm' });
  });

  for (const [what, complete] of Object.entries(GARBAGE)) {
    it(`refuses ${what} with INVALID_ARG naming the model`, () => {
      const c: Record<string, unknown> = { name: 'ac_bad' };
      complete(c);
      let thrown: unknown;
      try {
        readAutoCompletedConfig(c, 'ac_bad');
      } catch (err) {
        thrown = err;
      }
      expectClearError(thrown);
    });
  }

  it('refuses a value that is not an object', () => {
    for (const v of [5, 'abc', null, [], undefined]) expect(() => readAutoCompletedConfig(v, 'ac_bad')).toThrow(/auto-complete of model 'ac_bad' returned an invalid config: /);
  });
});

describe('a backend auto-completion that returns garbage fails only that model', () => {
  for (const [what, complete] of Object.entries(GARBAGE)) {
    it(`${what}: the server starts, serves the good model, lists the bad one UNAVAILABLE; its explicit load answers INVALID_ARG`, async () => {
      const root = repository();
      const backends = [echoBackend, garbageBackend(complete)];
      const s = await InferenceServer.create({ modelRepositories: [root], backends });
      try {
        expect(s.modelReady('good')).toBe(true);
        const res = await s.infer({ modelName: 'good', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(3) }] });
        expect(Array.from(res.outputs[0]!.data as Int32Array)).toEqual([3]);
        const row = s.repositoryIndex().find((r) => r.name === 'ac_bad');
        expect(row?.state).toBe('UNAVAILABLE');
        expect(row?.reason).toContain("auto-complete of model 'ac_bad' returned an invalid config: ");
      } finally {
        await s.stop();
      }
      const e = await InferenceServer.create({ modelRepositories: [root], backends, modelControlMode: 'explicit', startupModels: ['good'] });
      try {
        const thrown = await e.loadModel('ac_bad').then(() => undefined, (err: unknown) => err);
        expect(thrown).toBeInstanceOf(TriodeError);
        expect((thrown as TriodeError).code).toBe('INVALID_ARG');
        expect((thrown as TriodeError).message).toContain("auto-complete of model 'ac_bad' returned an invalid config: ");
        expect((thrown as TriodeError).message).not.toMatch(/is not a function|is not iterable/);
        expect(e.modelReady('good')).toBe(true);
      } finally {
        await e.stop();
      }
    });
  }
});
