// Issue #5 benchmark: the ensemble overhead at c=1, in-process (no HTTP), median p50 of
// alternating 1 s windows:
//   node bench/ensemble.mjs [--rounds 10]
// - one identity model (custom_identity_int32, a JavaScript model in its thread),
// - the same model called twice in a row by the caller,
// - the ensemble identity_chain (the same two steps, chained by the server).
// The ensemble's own cost is its p50 minus the two back-to-back calls.
import { join } from 'node:path';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { InferenceServer } from '@triode/core';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({ options: { rounds: { type: 'string', default: '10' } } });
const repo = mkdtempSync(join(tmpdir(), 'triode-bench-'));
for (const m of ['custom_identity_int32', 'identity_chain']) cpSync(join(ROOT, 'model_repository', m), join(repo, m), { recursive: true });
const s = await InferenceServer.create({ modelRepositories: [repo], backends: [new OnnxRuntimeBackend(), new JavaScriptBackend()] });
const input = () => [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: new Int32Array(16).fill(7) }];
const cases = {
  single: () => s.infer({ modelName: 'custom_identity_int32', inputs: input() }),
  twice: async () => {
    const r = await s.infer({ modelName: 'custom_identity_int32', inputs: input() });
    return s.infer({ modelName: 'custom_identity_int32', inputs: [{ ...r.outputs[0], name: 'INPUT0' }] });
  },
  ensemble: () => s.infer({ modelName: 'identity_chain', inputs: input() }),
};
const p50 = async (f, ms) => {
  const xs = [];
  const end = performance.now() + ms;
  while (performance.now() < end) { const t = performance.now(); await f(); xs.push((performance.now() - t) * 1000); }
  xs.sort((a, b) => a - b);
  return xs[xs.length >> 1];
};
for (const f of Object.values(cases)) await p50(f, 500);
const got = { single: [], twice: [], ensemble: [] };
for (let i = 0; i < Number(args.rounds); i++) for (const [k, f] of Object.entries(cases)) got[k].push(await p50(f, 1000));
await s.stop();
const med = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const [a, b, c] = [med(got.single), med(got.twice), med(got.ensemble)];
console.log('| case (c=1, in-process) | p50 µs |');
console.log('|---|---|');
console.log(`| one identity model | ${a.toFixed(1)} |`);
console.log(`| the identity model twice, chained by the caller | ${b.toFixed(1)} |`);
console.log(`| ensemble of the two identity steps | ${c.toFixed(1)} |`);
console.log(`\nEnsemble machinery: **${(c - b).toFixed(1)} µs** over the caller chaining the same two steps (target <= 50); ${(c - a).toFixed(1)} µs over one identity model (one more step execution).`);
