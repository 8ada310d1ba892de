import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TriodeError, type ModelConfig } from '@triode/core';
import { makeRepository } from '../../../../test/helpers/repository.js';
import { JavaScriptBackend } from './javascript-backend.js';

/** A model whose static autoCompleteConfig returns `body` (JavaScript source of an expression). */
const model = (body: string) => `export default class M { static autoCompleteConfig(c) { return ${body}; } execute(r) { return []; } }`;

const MODELS: Record<string, string> = {
  ok: model("Object.assign(c, { max_batch_size: 4, input: [{ name: 'A', data_type: 'TYPE_FP32', dims: [2] }] })"),
  partial: model('({ max_batch_size: 2 })'),
  proto: model('JSON.parse(\'{"__proto__": {"max_batch_size": 8}, "max_batch_size": 1}\')'),
  text: model("'abc'"),
  number: model('5'),
  list: model('[1, 2]'),
  steps: model("Object.assign(c, { platform: 'ensemble', ensemble_scheduling: { step: 'x' } })"),
  dims: model("Object.assign(c, { input: [{ name: 'A', data_type: 'TYPE_FP32', dims: 'abc' }] })"),
};

const root = makeRepository([], Object.fromEntries(Object.entries(MODELS).map(([name, src]) => [`${name}/1/model.mjs`, src])));

async function complete(name: string, config: ModelConfig = { name }): Promise<ModelConfig> {
  await new JavaScriptBackend().autoCompleteConfig(config, { name, modelPath: join(root, name), versionPath: join(root, name, '1'), backendConfig: {} });
  return config;
}

describe('JavaScriptBackend.autoCompleteConfig() takes only what the config schema reads', () => {
  it('fills the config from what the model returns', async () => {
    expect(await complete('ok')).toEqual({ name: 'ok', max_batch_size: 4, input: [{ name: 'A', data_type: 'TYPE_FP32', dims: [2] }] });
  });

  it('keeps the fields a partial result leaves out', async () => {
    expect(await complete('partial', { name: 'partial', backend: 'javascript' })).toEqual({ name: 'partial', backend: 'javascript', max_batch_size: 2 });
  });

  it('attack: an own __proto__ key is refused and does not set the config\'s prototype', async () => {
    const config: ModelConfig = { name: 'proto' };
    await expect(complete('proto', config)).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining("auto-complete of model 'proto' returned an invalid config: unknown field \"__proto__\"") });
    expect(Object.getPrototypeOf(config)).toBe(Object.prototype);
    expect(config).toEqual({ name: 'proto' });
  }, 20_000);

  for (const [name, what] of [['text', 'a string'], ['number', 'a number'], ['list', 'an array']] as const) {
    it(`attack: a result that is ${what} is refused, naming the model`, async () => {
      const config: ModelConfig = { name };
      const err = await complete(name, config).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(TriodeError);
      expect(err).toMatchObject({ code: 'INVALID_ARG', message: `auto-complete of model '${name}' returned an invalid config: autoCompleteConfig() returned ${what}, not a config object` });
      expect(config).toEqual({ name });
    }, 20_000);
  }

  for (const [name, field] of [['steps', 'ensemble_scheduling.step: expected an array'], ['dims', 'input[0].dims: expected an array']] as const) {
    it(`attack: a field of the wrong type (${name}) is refused, naming the model and the field`, async () => {
      await expect(complete(name)).rejects.toMatchObject({ code: 'INVALID_ARG', message: `auto-complete of model '${name}' returned an invalid config: ${field}` });
    }, 20_000);
  }
});
