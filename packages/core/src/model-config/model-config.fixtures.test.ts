/**
 * Table-driven compatibility cases in Triton's qa/L0_model_config layout:
 * test/fixtures/model-config/<case>/config.pbtxt and `expected` (a substring of the load error,
 * or READY). Each case is loaded as model `<case>` next to a good model that must stay READY.
 */
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { Backend, BackendModel } from '../backend-api.js';
import { InferenceServer } from '../server.js';

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test', 'fixtures', 'model-config');

/** A test-only backend named onnxruntime whose instances echo their inputs. */
const echoBackend: Backend = {
  name: 'onnxruntime',
  async modelInitialize(): Promise<BackendModel> {
    return {
      async instanceInitialize() {
        return {
          async execute(requests) { return { responses: requests.map((r) => ({ outputs: r.inputs })) }; },
          async finalize() {},
        };
      },
      async finalize() {},
    };
  },
};

describe('model config compatibility fixtures', () => {
  const cases = readdirSync(FIXTURES).sort();
  const repo = mkdtempSync(join(tmpdir(), 'triode-fixtures-'));
  for (const c of cases) {
    cpSync(join(FIXTURES, c, 'config.pbtxt'), join(repo, c, 'config.pbtxt'));
    mkdirSync(join(repo, c, '1'), { recursive: true });
    writeFileSync(join(repo, c, '1', 'model.onnx'), '');
  }
  const server = InferenceServer.create({ modelRepositories: [repo], backends: [echoBackend], strictReadiness: false });

  it.each(cases)('%s', async (c) => {
    const expected = readFileSync(join(FIXTURES, c, 'expected'), 'utf8').trim();
    const rows = (await server).repositoryIndex().filter((r) => r.name === c);
    expect(rows.length).toBeGreaterThan(0);
    if (expected === 'READY') {
      expect(rows.every((r) => r.state === 'READY')).toBe(true);
    } else {
      expect(rows[0]!.state).toBe('UNAVAILABLE');
      expect(rows[0]!.reason).toContain(expected);
    }
    expect((await server).modelReady('valid')).toBe(true);
  });
});
