import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ModelMetadata } from '@triode/core';
import { inputTensorData } from '../tensor-data.js';
import { perfInputs } from './perf-inputs.js';

describe('perfInputs', () => {
  it('b64 data of a numeric input becomes a typed array of its datatype, which the clients take', () => {
    const file = join(mkdtempSync(join(tmpdir(), 'perf-inputs-')), 'data.json');
    writeFileSync(file, JSON.stringify({ data: [{ X: { b64: Buffer.from(Int32Array.of(7, -1).buffer).toString('base64') }, Y: { b64: 'AQI=' } }] }));
    const meta = { name: 'm', versions: ['1'], platform: '', inputs: [{ name: 'X', datatype: 'INT32', shape: [2] }, { name: 'Y', datatype: 'INT32', shape: [1] }], outputs: [] } as unknown as ModelMetadata;
    const [x] = perfInputs({ ...meta, inputs: meta.inputs.slice(0, 1) }, 0, 1, { file }, {})[0]!;
    expect(inputTensorData(x!)).toEqual(Int32Array.of(7, -1));
    expect(() => perfInputs(meta, 0, 1, { file }, {})).toThrow(/2 bytes of b64 are not whole INT32 elements/);
  });
});
