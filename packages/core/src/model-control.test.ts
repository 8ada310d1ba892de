import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Backend } from './backend-api.js';
import type { Logger } from './logger.js';
import { echoBackend } from './echo-backend.case.js';
import { TriodeError } from './errors.js';
import { InferenceServer } from './server.js';
import { instanceCountOf } from './model-repository/model-repository-manager.js';

const echo = echoBackend;

const config = (mbs: number) => `backend: "echo"\nmax_batch_size: ${mbs}\ninput { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }\n`;

function addModel(root: string, name: string, text: string): void {
  mkdirSync(join(root, name, '1'), { recursive: true });
  writeFileSync(join(root, name, 'config.pbtxt'), text);
}


/** Polls `s`'s repositories, checking that the poll lets the event loop turn before it ends. */
async function pollYielding(s: InferenceServer): Promise<void> {
  let polled = false;
  const poll = s.pollRepository().then(() => { polled = true; });
  await new Promise((r) => setImmediate(r));
  expect(polled).toBe(false);
  await poll;
}
describe('explicit mode: an ensemble brings the models of its steps (as Triton)', () => {
  const ensemble = (name: string, steps: string[]) => `name: "${name}"\nplatform: "ensemble"\nmax_batch_size: 4\ninput { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n` +
    `ensemble_scheduling { step [ ${steps.map((m, k) => {
      // An ensemble step's tensors are its X and Y; the echo models' IN and OUT.
      const [i, o] = m === 'inner' ? ['X', 'Y'] : ['IN', 'OUT'];
      return `{ model_name: "${m}" model_version: -1 input_map { key: "${i}" value: "${k === 0 ? 'X' : `T${k}`}" } output_map { key: "${o}" value: "${k === steps.length - 1 ? 'Y' : `T${k + 1}`}" } }`;
    }).join(', ')} ] }\n`;
  const repo = () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-ens-load-'));
    addModel(root, 'a', config(4));
    addModel(root, 'b', config(4));
    addModel(root, 'broken', 'max_batch_size: oops');
    addModel(root, 'inner', ensemble('inner', ['a', 'b']));
    addModel(root, 'outer', ensemble('outer', ['inner', 'b']));
    addModel(root, 'bad', ensemble('bad', ['a', 'broken']));
    return root;
  };
  const x = { modelName: 'outer', inputs: [{ name: 'X', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(5) }] };

  it('ensembles nested deeper than MAX_BLS_DEPTH answer (review: 17 levels loaded READY, then every request failed with a BLS message)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-ens-deep-'));
    addModel(root, 'a', config(4));
    const wrap = (name: string, inner: string, io: [string, string]) => `name: "${name}"\nplatform: "ensemble"\nmax_batch_size: 4\ninput { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n`
      + `ensemble_scheduling { step [ { model_name: "${inner}" model_version: -1 input_map { key: "${io[0]}" value: "X" } output_map { key: "${io[1]}" value: "Y" } } ] }\n`;
    addModel(root, 'd0', wrap('d0', 'a', ['IN', 'OUT']));
    for (let k = 1; k <= 20; k++) addModel(root, `d${k}`, wrap(`d${k}`, `d${k - 1}`, ['X', 'Y']));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'explicit', startupModels: ['d20'] });
    try {
      const res = await s.infer({ modelName: 'd20', inputs: [{ name: 'X', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(7) }] });
      expect(Array.from(res.outputs[0]!.data as Int32Array)).toEqual([7]);
    } finally {
      await s.stop();
    }
  });

  it('load of an ensemble loads the models of its steps first, recursively; one that fails fails it with Triton\'s words', async () => {
    const s = await InferenceServer.create({ modelRepositories: [repo()], backends: [echo], modelControlMode: 'explicit' });
    try {
      // Before: "ensemble outer contains model 'inner' (step 0) which is not loaded or not ready".
      await s.loadModel('outer');
      expect(['a', 'b', 'inner', 'outer'].map((m) => s.modelReady(m))).toEqual([true, true, true, true]);
      expect(Array.from((await s.infer(x)).outputs[0]!.data as Int32Array)).toEqual([5]);
      // The step's reason as Triton's lifecycle gives it, without a 'load failed for model' line of its own.
      await expect(s.loadModel('bad')).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/^load failed for model 'bad': ensemble 'bad' depends on 'broken' which has no loaded version\. Model 'broken' loading failed with error: (?!load failed)[^\n]*\n$/) });
      expect(s.modelReady('bad')).toBe(false);
      // Its index row and not-ready text carry the reason alone, as Triton's node status (review:
      // they repeated the 'load failed for model' line).
      const row = s.repositoryIndex().find((r) => r.name === 'bad');
      expect(row).toMatchObject({ state: 'UNAVAILABLE', reason: expect.stringMatching(/^ensemble 'bad' depends on 'broken' which has no loaded version\./) });
      expect(() => s.modelConfig('bad')).toThrow(/^Request for unknown model: 'bad' .*: ensemble 'bad' depends on 'broken'/);
      expect(() => s.modelConfig('bad')).not.toThrow(/load failed for model/);
    } finally {
      await s.stop(1000);
    }
  });

  it('attack: two ensembles naming each other, loaded at once, both fail (they waited on each other for good); unload still answers', async () => {
    const root = repo();
    addModel(root, 'e1', ensemble('e1', ['inner2']).replace(/inner2/g, 'e2').replace('key: "IN"', 'key: "X"').replace('key: "OUT"', 'key: "Y"'));
    addModel(root, 'e2', ensemble('e2', ['e1']).replace('key: "IN"', 'key: "X"').replace('key: "OUT"', 'key: "Y"'));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'explicit' });
    try {
      const hung = new Promise((r) => setTimeout(() => r('hung'), 5000));
      const both = Promise.allSettled([s.loadModel('e1'), s.loadModel('e2')]);
      const out = await Promise.race([both, hung]);
      expect(out).not.toBe('hung');
      expect((out as PromiseSettledResult<void>[]).map((r) => r.status)).toEqual(['rejected', 'rejected']);
      await expect(Promise.race([s.unloadModel('e1'), hung])).resolves.toBeUndefined();
    } finally {
      await s.stop(1000);
    }
  });

  it('a step being loaded (with an override) when its ensemble loads is not loaded again over it', async () => {
    const s = await InferenceServer.create({ modelRepositories: [repo()], backends: [echo], modelControlMode: 'explicit' });
    try {
      const override = { backend: 'echo', max_batch_size: 4, input: [{ name: 'IN', data_type: 'TYPE_INT32' as const, dims: [1] }], output: [{ name: 'OUT', data_type: 'TYPE_INT32' as const, dims: [1] }], parameters: { mark: { string_value: 'override' } } };
      const a = s.loadModel('a', { config: override as never });
      const inner = s.loadModel('inner');
      await Promise.all([a, inner]);
      expect(s.modelConfig('a')['parameters']).toMatchObject({ mark: { string_value: 'override' } });
      expect(s.modelReady('inner')).toBe(true);
    } finally {
      await s.stop(1000);
    }
  });

  it('unload follows Triton\'s dependency graph: an ensemble whose step goes goes too; unload_dependents also unloads the steps it brought that nothing else uses (review: it unloaded the ensembles using the model instead)', async () => {
    const ready = (s: InferenceServer) => ['a', 'b', 'inner', 'outer'].filter((m) => s.modelReady(m));
    for (const startup of [[], ['outer']]) {
      const s = await InferenceServer.create({ modelRepositories: [repo()], backends: [echo], modelControlMode: 'explicit', startupModels: startup });
      try {
        if (startup.length === 0) await s.loadModel('outer');
        // Without unload_dependents the steps stay.
        await s.unloadModel('outer');
        expect(ready(s), 'plain unload').toEqual(['a', 'b', 'inner']);
        await s.loadModel('outer');
        // With it, the steps loaded only for it go, down the chain; one asked for ('a') stays.
        await s.loadModel('a');
        await s.unloadModel('outer', { unloadDependents: true });
        expect(ready(s), 'unload_dependents').toEqual(['a']);
        expect(s.repositoryIndex().filter((r) => r.name === 'b' || r.name === 'inner')).toEqual([
          { name: 'b', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
          { name: 'inner', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
        ]);
        // A step unloaded takes the ensembles using it with it, whatever unload_dependents says.
        await s.loadModel('outer');
        await s.unloadModel('b');
        expect(ready(s), 'step unloaded').toEqual(['a']);
      } finally {
        await s.stop(1000);
      }
    }
  });

  it('modelsAffectedBy: a load reaches its steps down the chain (from the override config too), an unload the ensembles loaded that use the model, with unload_dependents its steps too', async () => {
    const s = await InferenceServer.create({ modelRepositories: [repo()], backends: [echo], modelControlMode: 'explicit' });
    const sorted = (names: string[]) => [...names].sort();
    try {
      expect(sorted(s.modelsAffectedBy('outer', { steps: true }))).toEqual(['a', 'b', 'inner', 'outer']);
      expect(sorted(s.modelsAffectedBy('a', { steps: true }))).toEqual(['a']);
      // Nothing loaded uses 'a' yet: its unload changes 'a' alone.
      expect(s.modelsAffectedBy('a')).toEqual(['a']);
      const override = { name: 'inner', platform: 'ensemble', max_batch_size: 4, ensemble_scheduling: { step: [{ model_name: 'b' }] } };
      expect(sorted(s.modelsAffectedBy('inner', { steps: true, config: override as never }))).toEqual(['a', 'b', 'inner']);
      // An override not yet read names junk where steps should be: skipped.
      expect(s.modelsAffectedBy('x', { steps: true, config: { platform: 'ensemble', ensemble_scheduling: { step: [null, { model_name: 5 }, { model_name: '../b' }, { model_name: 'a' }] } } as never })).toEqual(['x', 'a']);
      await s.loadModel('outer');
      expect(sorted(s.modelsAffectedBy('a'))).toEqual(['a', 'inner', 'outer']);
      expect(sorted(s.modelsAffectedBy('inner', { steps: true }))).toEqual(['a', 'b', 'inner', 'outer']);
      // Names that are not names are looked up nowhere.
      expect(s.modelsAffectedBy('../a', { steps: true })).toEqual(['../a']);
    } finally {
      await s.stop(1000);
    }
  });

  it('--load-model of an ensemble at start loads the models of its steps too', async () => {
    const s = await InferenceServer.create({ modelRepositories: [repo()], backends: [echo], modelControlMode: 'explicit', startupModels: ['outer'] });
    try {
      expect(['a', 'b', 'inner', 'outer', 'broken', 'bad'].map((m) => s.modelReady(m))).toEqual([true, true, true, true, false, false]);
      expect(s.repositoryIndex().find((r) => r.name === 'broken')).toMatchObject({ reason: 'unloaded' });
      expect(Array.from((await s.infer(x)).outputs[0]!.data as Int32Array)).toEqual([5]);
    } finally {
      await s.stop(1000);
    }
  });
});

describe('model control mode POLL', () => {
  it('follows the repository: new models load, changed ones reload (a broken change keeps the old one), removed ones unload', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-poll-'));
    addModel(root, 'a', config(4));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'poll', repositoryPollMs: 3_600_000 });
    try {
      expect(s.modelReady('a')).toBe(true);
      addModel(root, 'b', config(2));
      await s.pollRepository();
      expect(s.modelReady('b')).toBe(true);
      // mtime granularity: make sure the rewrite is seen as a change.
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', 'config.pbtxt'), config(8));
      await s.pollRepository();
      expect(s.modelConfig('a')['max_batch_size']).toBe(8);
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', 'config.pbtxt'), 'max_batch_size: oops');
      await s.pollRepository();
      expect(s.modelReady('a')).toBe(true);
      expect(s.modelConfig('a')['max_batch_size']).toBe(8);
      rmSync(join(root, 'b'), { recursive: true });
      await s.pollRepository();
      expect(s.modelReady('b')).toBe(false);
      // Gone from the repository directories, gone from the index (Triton's RepositoryIndex lists their subdirectories).
      expect(s.repositoryIndex().map((r) => r.name)).toEqual(['a']);
      await expect(s.loadModel('a')).rejects.toThrow(expect.objectContaining({ code: 'UNAVAILABLE', message: 'explicit model load / unload is not allowed if polling is enabled' }));
    } finally {
      await s.stop(1000);
    }
  });

  it('reads one model directory at a time, serving the event loop between them (review: 20 models of 10,000 files held it ~1 s a poll)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-poll-yield-'));
    for (const n of ['a', 'b', 'c']) addModel(root, n, config(4));
    const made: string[] = [];
    const counting: Backend = { name: 'echo', async modelInitialize(ctx) { made.push(ctx.name); return echo.modelInitialize(ctx); } };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [counting], modelControlMode: 'poll', repositoryPollMs: 3_600_000 });
    try {
      // Nothing changed: before, the whole poll ran before anything else could.
      await pollYielding(s);
      expect(['a', 'b', 'c'].every((n) => s.modelReady(n))).toBe(true);
      // A poll under way when the server stops reads no further.
      addModel(root, 'd', config(4));
      const last = s.pollRepository();
      await s.stop(1000);
      await last;
      expect(made.sort()).toEqual(['a', 'b', 'c']);
    } finally {
      await s.stop(1000);
    }
  });

  it('does not wait for the unload of a removed model, as Triton (review: one request that never ended held every poll up to the load timeout)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-poll-unload-'));
    addModel(root, 'hung', config(1));
    let release = (): void => undefined;
    const gate = new Promise<void>((r) => { release = r; });
    const hanging: Backend = {
      name: 'echo',
      async modelInitialize() {
        return {
          async instanceInitialize() {
            return { async execute(requests) { await gate; return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) }; }, async finalize() {} };
          },
          async finalize() {},
        };
      },
    };
    const infos: string[] = [];
    const logger: Logger = { error() {}, warning() {}, info: (m: string) => { infos.push(m); }, verbose() {} };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [hanging], modelControlMode: 'poll', repositoryPollMs: 3_600_000, modelLoadTimeoutMs: 3_600_000, logger });
    try {
      const stuck = s.infer({ modelName: 'hung', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] });
      while (s.inflightCount() === 0) await new Promise((r) => setTimeout(r, 5));
      rmSync(join(root, 'hung'), { recursive: true });
      addModel(root, 'b', config(4));
      // Before: this poll waited for the request, up to --model-load-timeout-secs.
      await s.pollRepository();
      expect(s.modelReady('b')).toBe(true);
      expect(s.modelReady('hung')).toBe(false);
      // Back in the repository while its unload still waits: left for a poll after the unload.
      addModel(root, 'hung', config(1));
      await s.pollRepository();
      await s.pollRepository();
      expect(s.modelReady('hung')).toBe(false);
      release();
      await stuck;
      for (let k = 0; k < 200 && !infos.includes("successfully unloaded 'hung'"); k++) await new Promise((r) => setTimeout(r, 10));
      await s.pollRepository();
      expect(s.modelReady('hung')).toBe(true);
      expect(infos.filter((m) => m === "successfully unloaded 'hung'")).toHaveLength(1);
    } finally {
      release();
      await s.stop(1000);
    }
  });

  it('scans a repository of many entries a batch at a time, serving the event loop between them (review: 100,000 entries held it 330 ms a poll)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-poll-scan-'));
    for (let i = 0; i < 2500; i++) writeFileSync(join(root, `f${i}`), '');
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'poll', repositoryPollMs: 3_600_000 });
    try {
      // No model at all: before, the whole scan ran before anything else could.
      await pollYielding(s);
      addModel(root, 'a', config(4));
      await s.pollRepository();
      expect(s.modelReady('a')).toBe(true);
    } finally {
      await s.stop(1000);
    }
  });
});

describe('model loading', () => {
  it("takes version folders as Triton's VersionsToLoad does and logs its warning for those it ignores (review: 3.0 was ignored, and 01 and abc without a word)", async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-version-names-'));
    addModel(root, 'm', `${config(4)}version_policy { all { } }\n`);
    for (const v of ['3.0', '01', 'abc', 'warmup']) mkdirSync(join(root, 'm', v));
    const warnings: string[] = [];
    const logger: Logger = { error() {}, warning: (m: string) => { warnings.push(m); }, info() {}, verbose() {} };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], logger });
    try {
      // Version 3's files are read from '3', as Triton reads them (the echo backend reads none).
      expect(s.repositoryIndex()).toEqual([{ name: 'm', version: '1', state: 'READY', reason: '' }, { name: 'm', version: '3', state: 'READY', reason: '' }]);
      expect(warnings.filter((w) => w.startsWith('ignore version directory')).sort()).toEqual([
        "ignore version directory '01' which contains leading zeros in its directory name",
        "ignore version directory 'abc' which fails to convert to integral number",
      ]);
    } finally {
      await s.stop(1000);
    }
  });

  it('tries a failed load again --model-load-retry-count times, and loads at most --model-load-thread-count at once', async () => {
    let attempts = 0;
    let active = 0;
    let peak = 0;
    const flaky: Backend = {
      name: 'echo',
      async modelInitialize(ctx) {
        active++;
        peak = Math.max(peak, active);
        await new Promise((r) => setTimeout(r, 20));
        active--;
        if (ctx.name === 'flaky' && attempts++ < 2) throw new Error('not yet');
        return echo.modelInitialize(ctx);
      },
    };
    const root = mkdtempSync(join(tmpdir(), 'triode-retry-'));
    for (const n of ['flaky', 'm1', 'm2', 'm3']) addModel(root, n, config(1));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [flaky], modelLoadRetryCount: 2, modelLoadThreadCount: 2 });
    try {
      expect(s.modelReady('flaky')).toBe(true);
      expect(attempts).toBe(3);
      expect(peak).toBeLessThanOrEqual(2);
    } finally {
      await s.stop(1000);
    }
    attempts = 0;
    const s2 = await InferenceServer.create({ modelRepositories: [root], backends: [flaky], modelLoadRetryCount: 1 });
    try {
      expect(s2.repositoryIndex().find((r) => r.name === 'flaky')).toMatchObject({ state: 'UNAVAILABLE', reason: 'Internal: not yet' });
    } finally {
      await s2.stop(1000);
    }
  });
});

describe('a load where one version fails (Triton\'s OnLoadFinal)', () => {
  // Version v fails to initialize while <model>/<v>/broken exists.
  const picky: Backend = {
    name: 'echo',
    async modelInitialize(ctx) {
      const files = readdirSync(join(ctx.modelPath, String(ctx.version)));
      if (files.includes('broken')) throw new Error(`broken v${ctx.version}`);
      // As a backend that cannot find its model file answers (the onnxruntime backend's UNAVAILABLE).
      if (files.includes('missing')) throw new TriodeError('UNAVAILABLE', `unable to find model file for v${ctx.version}`);
      return echo.modelInitialize(ctx);
    },
  };
  const repo = () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-partial-'));
    addModel(root, 'm', `${config(1)}version_policy { all { } }\n`);
    mkdirSync(join(root, 'm', '2'));
    return root;
  };

  it('fails the whole load with INVALID_ARG, and a reload keeps every version that served before (before, v1 was lost and the load said 200)', async () => {
    const root = repo();
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [picky], modelControlMode: 'explicit', startupModels: ['m'] });
    try {
      expect([s.modelReady('m', 1), s.modelReady('m', 2)]).toEqual([true, true]);
      writeFileSync(join(root, 'm', '1', 'broken'), '');
      await expect(s.loadModel('m')).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining("load failed for model 'm': version 1 is at UNAVAILABLE state: Internal: broken v1;\n") });
      expect([s.modelReady('m', 1), s.modelReady('m', 2)]).toEqual([true, true]);
      expect(s.repositoryIndex().filter((r) => r.name === 'm').map((r) => `${r.version}:${r.state}`)).toEqual(['1:READY', '2:READY']);
    } finally {
      await s.stop(1000);
    }
  });

  it('a first load with a failed version serves none of them; a model file that is missing is INVALID_ARG too (it was 503)', async () => {
    const root = repo();
    writeFileSync(join(root, 'm', '2', 'broken'), '');
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [picky], modelControlMode: 'explicit' });
    try {
      await expect(s.loadModel('m')).rejects.toMatchObject({ code: 'INVALID_ARG' });
      expect([s.modelReady('m', 1), s.modelReady('m', 2)]).toEqual([false, false]);
      rmSync(join(root, 'm', '2', 'broken'));
      writeFileSync(join(root, 'm', '1', 'missing'), '');
      writeFileSync(join(root, 'm', '2', 'missing'), '');
      // Triton's OnLoadFinal text: each version's status with its code, back to back; LoadUnloadModels ends the line.
      await expect(s.loadModel('m')).rejects.toMatchObject({
        code: 'INVALID_ARG',
        message: "load failed for model 'm': version 1 is at UNAVAILABLE state: Unavailable: unable to find model file for v1;version 2 is at UNAVAILABLE state: Unavailable: unable to find model file for v2;\n",
      });
    } finally {
      await s.stop(1000);
    }
  });
});

describe('instance-count-only changes', () => {
  /** An echo backend that counts live instances and delays each execution. */
  function countingBackend(live: { n: number; inits: number }, delayMs = 5): Backend {
    return {
      name: 'echo',
      async modelInitialize() {
        return {
          async instanceInitialize() {
            live.n++;
            live.inits++;
            return {
              async execute(requests) {
                await new Promise((r) => setTimeout(r, delayMs));
                return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) };
              },
              async finalize() { live.n--; },
            };
          },
          async finalize() {},
        };
      },
    };
  }
  const withCount = (n: number, mbs = 4) => `${config(mbs)}instance_group [ { count: ${n} kind: KIND_CPU } ]\n`;
  const req = (v: number) => ({ modelName: 'a', inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(v) }] });

  it('explicit load with only the instance count changed updates instances in place: no reload, no failed request', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-instances-'));
    addModel(root, 'a', withCount(1));
    const live = { n: 0, inits: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [countingBackend(live)], modelControlMode: 'explicit', startupModels: ['a'] });
    try {
      let stop = false;
      let failed = 0;
      let done = 0;
      const client = (async () => {
        while (!stop) {
          await s.infer(req(done)).then(() => { done++; }, () => { failed++; });
          await new Promise((r) => setImmediate(r));
        }
      })();
      await new Promise((r) => setTimeout(r, 30));
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(3));
      await s.loadModel('a');
      expect(live.n).toBe(3);
      expect(live.inits).toBe(3); // 1 + 2 new: the first instance was kept
      expect(s.modelConfig('a')['instance_group']).toMatchObject([{ count: 3 }]);
      await new Promise((r) => setTimeout(r, 30));
      await s.loadModel('a', { config: { ...s.modelConfig('a'), instance_group: [{ count: 2, kind: 'KIND_CPU' }] } as never });
      expect(live.n).toBe(2);
      await new Promise((r) => setTimeout(r, 30));
      stop = true;
      await client;
      expect(failed).toBe(0);
      // Statistics survive: the version was never replaced.
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(done);
      // Any other change still reloads (a new version object: statistics start again).
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(2, 8));
      await s.loadModel('a');
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(0);
      expect(live.inits).toBe(5);
    } finally {
      await s.stop(1000);
    }
  });

  it('poll mode does the same when only the count changed, and reloads when a model file changed too', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-instances-poll-'));
    addModel(root, 'a', withCount(2));
    const live = { n: 0, inits: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [countingBackend(live)], modelControlMode: 'poll', repositoryPollMs: 3_600_000 });
    try {
      await s.infer(req(1));
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(1));
      await s.pollRepository();
      expect(live.n).toBe(1);
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(1);
      await new Promise((r) => setTimeout(r, 20));
      writeFileSync(join(root, 'a', '1', 'weights.bin'), 'new');
      writeFileSync(join(root, 'a', 'config.pbtxt'), withCount(2));
      await s.pollRepository();
      expect(s.modelStatistics('a')[0]!.inference_count).toBe(0);
      await new Promise((r) => setTimeout(r, 50));
      expect(live.n).toBe(2);
    } finally {
      await s.stop(1000);
    }
  });
});

describe('model names and file overrides (issue #14)', () => {
  /** A sandbox temp directory holding canary files, with TMPDIR pointed at it for the test. */
  /**
   * Runs `f` with an explicit-mode server over a new repository (`setup` adds its models first) and
   * a sandboxed temp directory; the server is stopped and the temp directory restored afterwards.
   */
  async function withControlledServer(prefix: string, f: (s: InferenceServer, box: ReturnType<typeof sandbox>) => Promise<void>, setup?: (root: string) => void): Promise<void> {
    const root = mkdtempSync(join(tmpdir(), prefix));
    setup?.(root);
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'explicit' });
    const box = sandbox();
    try {
      await f(s, box);
    } finally {
      box.restore();
      await s.stop(1000);
    }
  }

  function sandbox(): { dir: string; listing: () => string[]; restore: () => void } {
    const outer = mkdtempSync(join(tmpdir(), 'triode-sandbox-'));
    const dir = join(outer, 'tmp');
    mkdirSync(dir);
    writeFileSync(join(outer, 'canary-outer'), 'x');
    writeFileSync(join(dir, 'canary'), 'x');
    const saved = process.env['TMPDIR'];
    process.env['TMPDIR'] = dir;
    const walk = (d: string, prefix = ''): string[] => readdirSync(d, { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? [`${prefix}${e.name}/`, ...walk(join(d, e.name), `${prefix}${e.name}/`)] : [`${prefix}${e.name}`]));
    return {
      dir,
      listing: () => walk(outer).sort(),
      restore: () => {
        if (saved === undefined) delete process.env['TMPDIR'];
        else process.env['TMPDIR'] = saved;
        rmSync(outer, { recursive: true, force: true });
      },
    };
  }

  const overrideConfig = { backend: 'echo', max_batch_size: 1, input: [{ name: 'IN', data_type: 'TYPE_INT32' as const, dims: [1] }], output: [{ name: 'OUT', data_type: 'TYPE_INT32' as const, dims: [1] }] };
  const HOSTILE = ['..', '.', '', '../escaped', '..%2Fescaped'.replace('%2F', '/'), 'a/b', 'a\\b', 'x\u0000y', 'new\nline', 'a'.repeat(256), 'é'.repeat(128)];

  it('refuses hostile model names for load and unload with INVALID_ARG, and creates or removes nothing', async () => {
    await withControlledServer('triode-names-', async (s, box) => {
      const before = box.listing();
      for (const name of HOSTILE) {
        await expect(s.loadModel(name), JSON.stringify(name)).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/^(invalid model name '|model name must not be empty$)/) });
        await expect(s.loadModel(name, { config: overrideConfig, files: { '1/x': new Uint8Array(1) } })).rejects.toMatchObject({ code: 'INVALID_ARG' });
        await expect(s.unloadModel(name)).rejects.toMatchObject({ code: 'INVALID_ARG' });
      }
      expect(box.listing()).toEqual(before);
      // A name of exactly 255 bytes is a name.
      await s.loadModel('b'.repeat(255), { config: overrideConfig, files: { '1/x': new Uint8Array(1) } });
      expect(s.modelReady('b'.repeat(255))).toBe(true);
    }, (root) => addModel(root, 'a', config(1)));
  });

  it('unloading a name no repository has succeeds and changes nothing, as Triton (it was INVALID_ARG)', async () => {
    await withControlledServer('triode-unload-unknown-', async (s) => {
      const before = s.repositoryIndex();
      await expect(s.unloadModel('nope')).resolves.toBeUndefined();
      expect(s.repositoryIndex()).toEqual(before);
      expect(s.repositoryIndex().some((r) => r.name === 'nope')).toBe(false);
    }, (root) => addModel(root, 'a', config(1)));
  });

  it('lists models in byte order, as Triton (a std::set): upper case before lower case (it was locale order)', async () => {
    await withControlledServer('triode-order-', async (s) => {
      await s.loadModel('b');
      await s.loadModel('B');
      await s.loadModel('a');
      expect(s.repositoryIndex().map((r) => r.name)).toEqual(['B', 'a', 'b']);
      expect(s.modelStatistics().map((m) => m.name)).toEqual(['B', 'a', 'b']);
    }, (root) => { for (const n of ['a', 'b', 'B']) addModel(root, n, config(1)); });
  });

  it('refuses override paths that leave the model directory; a component over 255 bytes gets Triton\'s INTERNAL answer', async () => {
    await withControlledServer('triode-overrides-', async (s, box) => {
      const before = box.listing();
      for (const rel of ['../x', '/abs', '1/../../x', '1/../x', '1//x', './1/x', '1/./x', '1\\x', '', '1/x/', 'a\u0000b']) {
        await expect(s.loadModel('m', { config: overrideConfig, files: { [rel]: new Uint8Array(1) } }), JSON.stringify(rel))
          .rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining("failed to load 'm': invalid file override path") });
      }
      expect(box.listing()).toEqual(before);
      const long = s.loadModel('m', { config: overrideConfig, files: { [`1/${'a'.repeat(256)}`]: new Uint8Array(1) } });
      await expect(long).rejects.toMatchObject({ code: 'INTERNAL', message: "failed to load 'm', failed to poll from model repository" });
      expect(box.listing()).toEqual(before);
      expect(s.isLive()).toBe(true);
    });
  });

  it('writes overrides into one mkdtemp directory and removes exactly that one, on unload and on a failed load', async () => {
    await withControlledServer('triode-overrides-', async (s, box) => {
      const before = box.listing();
      await s.loadModel('m', { config: overrideConfig, files: { '1/weights.bin': new Uint8Array(4), '1/sub/dir/file': new Uint8Array(1) } });
      const made = box.listing().filter((p) => !before.includes(p));
      expect(made.filter((p) => /^tmp\/triode-override-[^/]+\/$/.test(p))).toHaveLength(1);
      expect(made.every((p) => p.startsWith(made[0]!))).toBe(true);
      expect(made).toContain(`${made[0]}m/1/sub/dir/file`);
      await s.unloadModel('m');
      expect(box.listing()).toEqual(before);
      // A load that fails removes its override directory, and nothing else.
      await expect(s.loadModel('m', { config: { ...overrideConfig, backend: 'nope' }, files: { '1/x': new Uint8Array(1) } })).rejects.toMatchObject({ code: 'INVALID_ARG' });
      expect(box.listing()).toEqual(before);
    });
  });

  it('an unload forgets a model that exists only through file overrides; one of the repository stays listed as unloaded (review: 3,000 override loads left 3,000 rows)', async () => {
    await withControlledServer('triode-overrides-forget-', async (s) => {
      const before = s.repositoryIndex();
      for (const name of ['o1', 'o2', 'a']) await s.loadModel(name, { config: overrideConfig, files: { '1/weights.bin': new Uint8Array(4) } });
      expect(s.repositoryIndex().map((r) => r.name)).toEqual(['a', 'o1', 'o2']);
      for (const name of ['o1', 'o2', 'a']) await s.unloadModel(name);
      // As Triton's index: the models of the repository directories; one unloaded lists the versions it had.
      expect(s.repositoryIndex()).toEqual([{ name: 'a', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' }]);
      expect(before).toEqual([{ name: 'a', state: 'UNAVAILABLE', reason: 'unloaded' }]);
      expect(() => s.getModel('o1')).toThrow(expect.objectContaining({ code: 'NOT_FOUND' }));
      expect(s.modelStatistics().map((m) => m.name)).toEqual([]);
      // The repository's own model loads from its directory again, the forgotten one by override again.
      await s.loadModel('a');
      await s.loadModel('o1', { config: overrideConfig, files: { '1/weights.bin': new Uint8Array(4) } });
      expect(s.repositoryIndex().map((r) => [r.name, r.state])).toEqual([['a', 'READY'], ['o1', 'READY']]);
    }, (root) => addModel(root, 'a', config(1)));
  });

  it('a shutdown removes the override directories of the models still loaded', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-overrides-stop-'));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'explicit' });
    const box = sandbox();
    try {
      const before = box.listing();
      await s.loadModel('m', { config: overrideConfig, files: { '1/weights.bin': new Uint8Array(4) } });
      expect(box.listing().length).toBeGreaterThan(before.length);
      await s.stop(1000);
      expect(box.listing()).toEqual(before);
    } finally {
      box.restore();
      await s.stop(1000);
    }
  });

  it('attack: too many override files, paths too deep or too many directories are refused before anything is written', async () => {
    await withControlledServer('triode-overrides-many-', async (s, box) => {
      const before = box.listing();
      const many = Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`1/f${i}`, new Uint8Array(0)]));
      await expect(s.loadModel('m', { config: overrideConfig, files: many })).rejects.toMatchObject({ code: 'INVALID_ARG', message: "failed to load 'm': 10001 file overrides, more than the 10000 a load may carry" });
      const deep = { [`1/${'d/'.repeat(20)}f`]: new Uint8Array(1) };
      await expect(s.loadModel('m', { config: overrideConfig, files: deep })).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/is deeper than 16 components$/) });
      // Within both limits, files each at the bottom of its own 14-deep chain of directories made
      // 150,000 directories from ~500 KB, and their removal blocked the server for 15 s.
      const chains = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`1/d${i}/${'a/'.repeat(13)}f`, new Uint8Array(0)]));
      await expect(s.loadModel('m', { config: overrideConfig, files: chains })).rejects.toMatchObject({ code: 'INVALID_ARG', message: "failed to load 'm': the file overrides need more than the 1000 directories a load may make" });
      // Shared directories count once: 5,000 files in 100 directories load.
      const shared = Object.fromEntries(Array.from({ length: 5_000 }, (_, i) => [`1/d${i % 99}/f${i}`, new Uint8Array(0)]));
      await expect(s.loadModel('m', { config: overrideConfig, files: shared })).resolves.toBeUndefined();
      await s.unloadModel('m');
      expect(box.listing()).toEqual(before);
    });
  });

  it('answers a model that is not in the repository as Triton does: INTERNAL "failed to poll from model repository"', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-unknown-'));
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'explicit' });
    try {
      await expect(s.loadModel('nope')).rejects.toMatchObject({ code: 'INTERNAL', message: "failed to load 'nope', failed to poll from model repository" });
    } finally {
      await s.stop(1000);
    }
  });

  it('shows no absolute path or stack fragment in a load failure (the detail goes to the log)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-paths-'));
    addModel(root, 'm', config(1));
    const logged: string[] = [];
    const logger = { error: (m: string) => logged.push(m), warning() {}, info() {}, verbose() {} };
    const failing: Backend = {
      name: 'echo',
      async modelInitialize(ctx) {
        throw new Error(`cannot open ${ctx.versionPath}/model.bin: no such file\n    at open (/usr/lib/node/fs.js:10:3)\n    at load (file:///opt/x/loader.js:1:2)`);
      },
    };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [failing], modelControlMode: 'explicit', logger });
    try {
      const err = await s.loadModel('m').catch((e: unknown) => e as TriodeError);
      expect(err).toMatchObject({ code: 'INVALID_ARG', message: "load failed for model 'm': version 1 is at UNAVAILABLE state: Internal: cannot open m/1/model.bin: no such file;\n" });
      expect(logged.join('\n')).toContain(`${root}/m/1/model.bin`);
    } finally {
      await s.stop(1000);
    }
  });
});

describe('bounded model loading (issue #14 scope 4)', () => {
  /** An echo backend counting live instances; instance `hangAt` never finishes initializing unless aborted. */
  function gatedBackend(live: { n: number; aborted: number }, hangAt = Number.POSITIVE_INFINITY): Backend {
    return {
      name: 'echo',
      async modelInitialize(ctx) {
        return {
          async instanceInitialize(_g, index) {
            if (index >= hangAt) {
              // Honours the load's signal, as the javascript backend does (it terminates the thread).
              await new Promise<never>((_r, reject) => ctx.signal?.addEventListener('abort', () => { live.aborted++; reject(new Error('aborted')); }, { once: true }));
            }
            live.n++;
            return { async execute(requests) { return { responses: requests.map((r) => ({ outputs: [{ ...r.inputs[0]!, name: 'OUT' }] })) }; }, async finalize() { live.n--; } };
          },
          async finalize() {},
        };
      },
    };
  }
  const withCount = (n: number) => `${config(1)}instance_group [ { count: ${n} kind: KIND_CPU } ]\n`;

  it('counts a KIND_GPU group\'s instances as placed: count on each GPU it lists, a GPU listed twice twice (review: count 16 on 1,000 zeros passed as 16)', () => {
    const gpu = (count: number, gpus?: number[], kind: 'KIND_GPU' | 'KIND_AUTO' | 'KIND_CPU' = 'KIND_GPU') => ({ instance_group: [{ kind, count, ...(gpus ? { gpus } : {}) }] });
    expect(instanceCountOf(gpu(16, new Array<number>(1000).fill(0)))).toBe(16_000);
    expect(instanceCountOf(gpu(2, [0, 1]))).toBe(4);
    expect(instanceCountOf(gpu(2, [1, 1]))).toBe(4);
    expect(instanceCountOf(gpu(3))).toBe(3);
    expect(instanceCountOf(gpu(2, [0, 1], 'KIND_AUTO'))).toBe(4);
    expect(instanceCountOf(gpu(2, [0, 1], 'KIND_CPU'))).toBe(2);
    expect(instanceCountOf({ instance_group: [{ kind: 'KIND_CPU', count: 2 }, { kind: 'KIND_GPU', count: 3, gpus: [0, 1] }] })).toBe(8);
    expect(instanceCountOf({})).toBe(1);
  });

  it('refuses a load override whose KIND_GPU group places more instances than maxInstancesPerModel, before writing its files', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-cap-gpu-'));
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live)], modelControlMode: 'explicit', maxInstancesPerModel: 64 });
    try {
      const config = { backend: 'echo', instance_group: [{ kind: 'KIND_GPU' as const, count: 16, gpus: new Array<number>(1000).fill(0) }] };
      await expect(s.loadModel('g', { config, files: { '1/x': new Uint8Array(1) } }))
        .rejects.toMatchObject({ code: 'INVALID_ARG', message: "failed to load 'g': model 'g' asks for 16000 instances, more than the limit of 64 instances per model (--max-instances-per-model)" });
      expect(live.n).toBe(0);
    } finally {
      await s.stop(1000);
    }
  });

  it('refuses more instances than maxInstancesPerModel with INVALID_ARG naming both, before creating any', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-cap-'));
    addModel(root, 'huge', withCount(100000));
    addModel(root, 'three', withCount(3));
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live)], modelControlMode: 'explicit', maxInstancesPerModel: 2 });
    try {
      await expect(s.loadModel('huge')).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/asks for 100000 instances, more than the limit of 2 instances per model/) });
      await expect(s.loadModel('three')).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/asks for 3 instances, more than the limit of 2/) });
      await expect(s.loadModel('o', { config: { backend: 'echo', instance_group: [{ count: 1 }, { count: 2 }] }, files: { '1/x': new Uint8Array(1) } }))
        .rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/asks for 3 instances/) });
      // Each version loads its instances: a policy of all versions counts them all (a ~40 KB load of
      // 100 versions made 200 instance threads and 3 GB).
      const versions = Object.fromEntries(Array.from({ length: 3 }, (_, i) => [`${i + 1}/x`, new Uint8Array(1)]));
      await expect(s.loadModel('v', { config: { backend: 'echo', version_policy: { all: {} } }, files: versions }))
        .rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringContaining("model 'v' asks for 3 instances (3 versions of 1), more than the limit of 2 instances per model (--max-instances-per-model)") });
      expect(live.n).toBe(0);
      await s.loadModel('v', { config: { backend: 'echo', version_policy: { latest: { num_versions: 2 } } }, files: versions });
      expect(live.n).toBe(2);
      await s.unloadModel('v');
      expect(live.n).toBe(0);
      writeFileSync(join(root, 'three', 'config.pbtxt'), withCount(2));
      await s.loadModel('three');
      expect(live.n).toBe(2);
    } finally {
      await s.stop(1000);
    }
    // The default is sized to the machine and refuses 100000.
    const d = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live)], modelControlMode: 'explicit' });
    try {
      await expect(d.loadModel('huge')).rejects.toMatchObject({ code: 'INVALID_ARG' });
    } finally {
      await d.stop(1000);
    }
    await expect(InferenceServer.create({ modelRepositories: [root], backends: [echo], maxInstancesPerModel: 0 })).rejects.toThrow(RangeError);
    await expect(InferenceServer.create({ modelRepositories: [root], backends: [echo], modelLoadTimeoutMs: 1.5 })).rejects.toThrow(RangeError);
    await expect(InferenceServer.create({ modelRepositories: [root], backends: [echo], maxLoadCalls: 0 })).rejects.toThrow(RangeError);
  });

  it('a version that never finishes loading fails UNAVAILABLE at modelLoadTimeoutMs, its partial instances released; then it unloads', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-timeout-'));
    addModel(root, 'slow', withCount(3));
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live, 2)], modelControlMode: 'explicit', modelLoadTimeoutMs: 50 });
    try {
      const err = await s.loadModel('slow').catch((e: unknown) => e as TriodeError);
      expect(err).toMatchObject({ code: 'UNAVAILABLE', message: "load failed for model 'slow': version 1 is at UNAVAILABLE state: Unavailable: version 1 did not finish loading within 50 ms (--model-load-timeout-secs);\n" });
      expect(live.aborted).toBe(1);
      expect(live.n).toBe(0);
      expect(s.modelReady('slow')).toBe(false);
      await s.unloadModel('slow');
      // The load slot was given back: another load runs.
      writeFileSync(join(root, 'slow', 'config.pbtxt'), withCount(2));
      await s.loadModel('slow');
      expect(s.modelReady('slow')).toBe(true);
    } finally {
      await s.stop(1000);
    }
  });

  it('a warmup sample cannot allocate without bound, and a huge count only runs until the load times out', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-warmup-bomb-'));
    addModel(root, 'big', `${withCount(1)}model_warmup [ { name: "w" batch_size: 1 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 1000000000000 ] zero_data: true } } } ]\n`);
    addModel(root, 'many', `${withCount(1)}model_warmup [ { name: "w" batch_size: 1 count: 1000000000 inputs { key: "IN" value: { data_type: TYPE_INT32 dims: [ 1 ] zero_data: true } } } ]\n`);
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live)], modelControlMode: 'explicit', modelLoadTimeoutMs: 100 });
    try {
      await expect(s.loadModel('big')).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/warmup sample failed: warmup sample 'w': input 'IN' of shape \[1,1000000000000\] is over the limit of 268435456 bytes/) });
      await expect(s.loadModel('many')).rejects.toMatchObject({ code: 'UNAVAILABLE', message: expect.stringMatching(/did not finish loading within 100 ms/) });
      await new Promise((r) => setTimeout(r, 20));
      expect(live.n).toBe(0);
    } finally {
      await s.stop(1000);
    }
  });

  it('attack: many inputs each under the per-input limit are refused together before any is made', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-warmup-wide-'));
    const inputs = Array.from({ length: 90 }, (_, i) => `inputs { key: "I${i}" value: { data_type: TYPE_UINT8 dims: [ 268435456 ] random_data: true } }`).join(' ');
    addModel(root, 'wide', `${withCount(1)}model_warmup [ { name: "w" batch_size: 1 ${inputs} } ]\n`);
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live)], modelControlMode: 'explicit' });
    try {
      const before = process.memoryUsage().rss;
      const t0 = performance.now();
      await expect(s.loadModel('wide')).rejects.toMatchObject({ code: 'INVALID_ARG', message: expect.stringMatching(/warmup sample 'w': its inputs \(up to 'I2'\) are over the limit of 536870912 bytes for one sample/) });
      // Before: 90 x 256 MiB of random bytes, made on the main thread (seconds per input, then out of memory).
      expect(performance.now() - t0).toBeLessThan(5000);
      expect(process.memoryUsage().rss - before).toBeLessThan(256 * 1024 * 1024);
    } finally {
      await s.stop(1000);
    }
  });

  /** A backend whose requests never end; `onFinalize` runs as each instance is finalized. */
  const neverEnding = (onFinalize: () => void = () => undefined): Backend => ({
    name: 'echo',
    async modelInitialize() {
      return {
        async instanceInitialize() {
          return { execute: () => new Promise<never>(() => undefined), async finalize() { onFinalize(); } };
        },
        async finalize() {},
      };
    },
  });
  /** A logger that keeps its warnings. */
  const warningsKept = () => {
    const warnings: string[] = [];
    return { warnings, logger: { error() {}, warning: (m: string) => { warnings.push(m); }, info() {}, verbose() {} } };
  };

  it('an unload and a shutdown are bounded too: a request that never ends does not hold them', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-hung-'));
    addModel(root, 'hung', withCount(1));
    let finalized = 0;
    const hung = neverEnding(() => { finalized++; });
    const { warnings, logger } = warningsKept();
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [hung], modelControlMode: 'explicit', startupModels: ['hung'], modelLoadTimeoutMs: 50, logger });
    void s.infer({ modelName: 'hung', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 10));
    await s.unloadModel('hung');
    expect(finalized).toBe(1);
    expect(warnings.join('\n')).toMatch(/unloading 'hung': requests or instances still busy after 50 ms were left behind/);
    await s.loadModel('hung');
    void s.infer({ modelName: 'hung', inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 10));
    // Both requests never end (the first one's version was unloaded under it): both are reported.
    expect(await s.stop(50)).toBe(2);
    expect(finalized).toBe(2);
  });

  it('an ensemble\'s unload is bounded as well: a request stuck in a step does not hold it, nor the next load of the name (review: both waited for good)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-hung-ens-'));
    addModel(root, 'hung', withCount(1));
    addModel(root, 'ens', 'name: "ens"\nplatform: "ensemble"\nmax_batch_size: 1\ninput { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n'
      + 'ensemble_scheduling { step [ { model_name: "hung" model_version: -1 input_map { key: "IN" value: "X" } output_map { key: "OUT" value: "Y" } } ] }\n');
    const { warnings, logger } = warningsKept();
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [neverEnding()], modelControlMode: 'explicit', startupModels: ['ens'], modelLoadTimeoutMs: 50, logger });
    void s.infer({ modelName: 'ens', inputs: [{ name: 'X', datatype: 'INT32', shape: [1, 1], data: Int32Array.of(1) }] }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 10));
    await s.unloadModel('ens');
    expect(warnings.join('\n')).toMatch(/unloading 'ens': requests or instances still busy after 50 ms were left behind/);
    await s.loadModel('ens');
    expect(s.modelReady('ens')).toBe(true);
    await s.stop(50);
  }, 10_000);

  it('an unload that gives up waiting answers what still waits in the queue (a sequence backlog, a dynamic batch queue)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-unload-queued-'));
    addModel(root, 'seq', `${config(1)}sequence_batching { max_sequence_idle_microseconds: 60000000 }\ninstance_group { count: 1 kind: KIND_CPU }\n`);
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [echo], modelControlMode: 'explicit', startupModels: ['seq'], modelLoadTimeoutMs: 100 });
    const req = (id: number) => ({ modelName: 'seq', parameters: { sequence_id: id, sequence_start: true }, inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(id) }] });
    // Sequence 1 holds the one slot (no END yet); sequence 2 waits in the backlog.
    await s.infer(req(1));
    const waiting = s.infer(req(2)).then(() => 'answered', (e: TriodeError) => `${e.code}: ${e.message}`);
    await new Promise((r) => setTimeout(r, 20));
    await s.unloadModel('seq');
    // Before: never answered, and counted in flight for good.
    expect(await waiting).toBe("UNAVAILABLE: model 'seq' version 1 was unloaded before the request could run");
    expect(s.inflightCount()).toBe(0);
    await s.stop(100);
  });

  it('with preserve_ordering too: the answers to what waited are not held behind the request that never ends', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-unload-ordered-'));
    addModel(root, 'ordered', `${config(1)}dynamic_batching { preserve_ordering: true }\ninstance_group { count: 1 kind: KIND_CPU }\n`);
    const hung: Backend = {
      name: 'echo',
      async modelInitialize() {
        return {
          async instanceInitialize() {
            return { execute: () => new Promise<never>(() => undefined), async finalize() {} };
          },
          async finalize() {},
        };
      },
    };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [hung], modelControlMode: 'explicit', startupModels: ['ordered'], modelLoadTimeoutMs: 100 });
    const req = () => ({ modelName: 'ordered', inputs: [{ name: 'IN', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(1) }] });
    void s.infer(req()).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 10));
    const queued = s.infer(req()).then(() => 'answered', (e: TriodeError) => e.code);
    await s.unloadModel('ordered');
    // Before (review): its UNAVAILABLE waited in the response order behind the first, for ever.
    expect(await queued).toBe('UNAVAILABLE');
    await s.stop(50);
  });

  it('an unload, or a shutdown, gives up a load in progress instead of waiting behind it', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-cancel-'));
    addModel(root, 'stuck', withCount(1));
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live, 0)], modelControlMode: 'explicit', modelLoadTimeoutMs: 3_600_000 });
    const load = s.loadModel('stuck').catch((e: unknown) => e as TriodeError);
    await new Promise((r) => setTimeout(r, 10));
    await s.unloadModel('stuck');
    expect(await load).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('the load was cancelled by an unload of the model') });
    expect(live.aborted).toBe(1);
    const again = s.loadModel('stuck').catch((e: unknown) => e as TriodeError);
    await new Promise((r) => setTimeout(r, 10));
    s.beginShutdown();
    expect(await again).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('Server is stopping') });
    expect(await s.stop(1000)).toBe(0);
    expect(live.aborted).toBe(2);
    expect(live.n).toBe(0);
  });

  it('a load still waiting for a load slot (--model-load-thread-count) that an unload or a shutdown gives up answers UNAVAILABLE, as one already loading (review: INVALID_ARG)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-cancel-queued-'));
    for (const n of ['stuck', 'queued', 'later']) addModel(root, n, withCount(1));
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live, 0)], modelControlMode: 'explicit', modelLoadThreadCount: 1, modelLoadTimeoutMs: 3_600_000 });
    const stuck = s.loadModel('stuck').catch((e: unknown) => e as TriodeError);
    const queued = s.loadModel('queued').catch((e: unknown) => e as TriodeError);
    const later = s.loadModel('later').catch((e: unknown) => e as TriodeError);
    // Both wait behind 'stuck' (their versions listed LOADING).
    while (s.repositoryIndex().filter((r) => r.state === 'LOADING' && r.version === '1').length < 3) await new Promise((r) => setTimeout(r, 5));
    await s.unloadModel('queued');
    expect(await queued).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining("failed to load 'queued': the load was cancelled by an unload of the model") });
    s.beginShutdown();
    expect(await later).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('Server is stopping') });
    expect(await stuck).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('Server is stopping') });
    await s.stop(1000);
    expect(live.n).toBe(0);
  });

  it('an unload, or a shutdown, while an ensemble\'s steps load gives the ensemble\'s load up as a plain model\'s (review: 200, then it loaded and served)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-cancel-ens-'));
    addModel(root, 'slow', config(4));
    addModel(root, 'ens', `name: "ens"\nplatform: "ensemble"\nmax_batch_size: 4\ninput { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n`
      + 'ensemble_scheduling { step [ { model_name: "slow" model_version: -1 input_map { key: "IN" value: "X" } output_map { key: "OUT" value: "Y" } } ] }\n');
    // The step's instance initializes only when the test lets it (its load does not see the unload of the ensemble).
    let release = (): void => undefined;
    const slow: Backend = {
      name: 'echo',
      async modelInitialize(ctx) {
        const inner = await echo.modelInitialize(ctx);
        return { ...inner, async instanceInitialize(...args) { await new Promise<void>((r) => { release = r; }); return inner.instanceInitialize(...args); } };
      },
    };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [slow], modelControlMode: 'explicit' });
    const x = { modelName: 'ens', inputs: [{ name: 'X', datatype: 'INT32' as const, shape: [1, 1], data: Int32Array.of(5) }] };
    try {
      const load = s.loadModel('ens').catch((e: unknown) => e as TriodeError);
      await new Promise((r) => setTimeout(r, 20));
      // Both listed LOADING while the step loads.
      expect(s.repositoryIndex().map((r) => [r.name, r.state])).toEqual([['ens', 'LOADING'], ['slow', 'LOADING']]);
      await s.unloadModel('ens');
      // The step finishes loading; the ensemble's load was given up and it stays unloaded.
      release();
      expect(await load).toMatchObject({ code: 'UNAVAILABLE', message: "failed to load 'ens': the load was cancelled by an unload of the model" });
      for (let k = 0; k < 100 && !s.modelReady('slow'); k++) await new Promise((r) => setTimeout(r, 10));
      expect(s.modelReady('slow')).toBe(true);
      await new Promise((r) => setTimeout(r, 20));
      expect(s.modelReady('ens')).toBe(false);
      expect(s.repositoryIndex().find((r) => r.name === 'ens')).toMatchObject({ state: 'UNAVAILABLE', reason: 'unloaded' });
      await expect(s.infer(x)).rejects.toMatchObject({ code: 'NOT_FOUND', message: expect.stringMatching(/^Request for unknown model: 'ens' has no available versions/) });
      // With the step ready, the ensemble loads and serves.
      await s.loadModel('ens');
      expect(Array.from((await s.infer(x)).outputs[0]!.data as Int32Array)).toEqual([5]);
    } finally {
      await s.stop(1000);
    }
    // A shutdown in the same window gives it up too.
    const t = await InferenceServer.create({ modelRepositories: [root], backends: [slow], modelControlMode: 'explicit' });
    const load = t.loadModel('ens').catch((e: unknown) => e as TriodeError);
    await new Promise((r) => setTimeout(r, 20));
    const stopped = t.stop(1000);
    release();
    expect(await load).toMatchObject({ code: 'UNAVAILABLE', message: expect.stringContaining('Server is stopping') });
    await stopped;
    expect(t.modelReady('ens')).toBe(false);
  });

  it('an ensemble\'s load whose step load an unload of the step gave up answers UNAVAILABLE, as the step\'s own load (review: INVALID_ARG)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-cancel-step-'));
    addModel(root, 'step', withCount(1));
    addModel(root, 'ens', `name: "ens"\nplatform: "ensemble"\nmax_batch_size: 1\ninput { name: "X" data_type: TYPE_INT32 dims: [ 1 ] }\noutput { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] }\n`
      + 'ensemble_scheduling { step [ { model_name: "step" model_version: -1 input_map { key: "IN" value: "X" } output_map { key: "OUT" value: "Y" } } ] }\n');
    const live = { n: 0, aborted: 0 };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [gatedBackend(live, 0)], modelControlMode: 'explicit', modelLoadTimeoutMs: 3_600_000 });
    try {
      const load = s.loadModel('ens').catch((e: unknown) => e as TriodeError);
      while (!s.repositoryIndex().some((r) => r.name === 'step' && r.state === 'LOADING')) await new Promise((r) => setTimeout(r, 5));
      await s.unloadModel('step');
      expect(await load).toMatchObject({
        code: 'UNAVAILABLE',
        message: "load failed for model 'ens': ensemble 'ens' depends on 'step' which has no loaded version. Model 'step' loading failed with error: failed to load 'step': the load was cancelled by an unload of the model\n",
      });
      // A step that fails for good still fails the ensemble INVALID_ARG.
      writeFileSync(join(root, 'step', 'config.pbtxt'), 'max_batch_size: oops');
      await expect(s.loadModel('ens')).rejects.toMatchObject({ code: 'INVALID_ARG' });
    } finally {
      await s.stop(1000);
    }
  });
});

describe('the repository index during and after an explicit load', () => {
  it('lists a model being loaded LOADING, and one whose load failed UNAVAILABLE with the reason the startup scan gives (review: "unloaded", or not listed)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-index-load-'));
    addModel(root, 'slow', config(4));
    addModel(root, 'good', config(4));
    addModel(root, 'broken', 'max_batch_size: oops');
    addModel(root, 'failver', config(4));
    let gate: Promise<void> = Promise.resolve();
    let open = (): void => undefined;
    const close = (): void => { gate = new Promise<void>((r) => { open = r; }); };
    const backend: Backend = {
      name: 'echo',
      async modelInitialize(ctx) {
        if (ctx.name === 'failver') throw new Error('no instance for failver');
        const inner = await echo.modelInitialize(ctx);
        return { ...inner, async instanceInitialize(...args) { if (ctx.name === 'slow') await gate; return inner.instanceInitialize(...args); } };
      },
    };
    // What the startup scan shows of the same failures.
    const startup = await InferenceServer.create({ modelRepositories: [root], backends: [backend], strictReadiness: false });
    const atStart = startup.repositoryIndex().filter((r) => r.name === 'broken' || r.name === 'failver');
    await startup.stop(1000);
    expect(atStart.map((r) => r.state)).toEqual(['UNAVAILABLE', 'UNAVAILABLE']);

    const s = await InferenceServer.create({ modelRepositories: [root], backends: [backend], modelControlMode: 'explicit', modelLoadTimeoutMs: 3_600_000 });
    const row = (name: string) => s.repositoryIndex().filter((r) => r.name === name);
    try {
      close();
      const load = s.loadModel('slow');
      await new Promise((r) => setTimeout(r, 20));
      expect(row('slow')).toEqual([{ name: 'slow', version: '1', state: 'LOADING', reason: '' }]);
      expect(s.repositoryIndex(true).some((r) => r.name === 'slow')).toBe(false);
      open();
      await load;
      expect(row('slow')).toEqual([{ name: 'slow', version: '1', state: 'READY', reason: '' }]);
      // A reload of a model serving: it stays READY meanwhile.
      close();
      const reload = s.loadModel('slow', { config: { backend: 'echo', max_batch_size: 2, input: [{ name: 'IN', data_type: 'TYPE_INT32', dims: [1] }], output: [{ name: 'OUT', data_type: 'TYPE_INT32', dims: [1] }] } });
      await new Promise((r) => setTimeout(r, 20));
      expect(row('slow')).toEqual([{ name: 'slow', version: '1', state: 'READY', reason: '' }]);
      open();
      await reload;

      await expect(s.loadModel('broken')).rejects.toMatchObject({ code: 'INVALID_ARG' });
      await expect(s.loadModel('failver')).rejects.toMatchObject({ code: 'INVALID_ARG' });
      const failed = s.repositoryIndex().filter((r) => r.name === 'broken' || r.name === 'failver');
      expect(failed).toEqual(atStart);
      expect(JSON.stringify(failed)).not.toContain(root);
      // An unload makes it 'unloaded' again.
      await s.unloadModel('broken');
      expect(row('broken')).toEqual([{ name: 'broken', state: 'UNAVAILABLE', reason: 'unloaded' }]);

      // A failed reload of a model serving keeps it READY, as before.
      await s.loadModel('good');
      await expect(s.loadModel('good', { config: { backend: 'echo', max_batch_size: -3 } })).rejects.toMatchObject({ code: 'INVALID_ARG' });
      expect(row('good')).toEqual([{ name: 'good', version: '1', state: 'READY', reason: '' }]);
      // A model only of file overrides whose load fails is not listed (as an unload forgets it).
      await expect(s.loadModel('nowhere', { config: { backend: 'echo', max_batch_size: -3 }, files: { '1/x': new Uint8Array(1) } })).rejects.toMatchObject({ code: 'INVALID_ARG' });
      expect(row('nowhere')).toEqual([]);
    } finally {
      await s.stop(1000);
    }
  });
});

describe('the repository index during and after an explicit unload (Triton: the lifecycle keeps each version)', () => {
  it('lists each version UNLOADING while it finishes its requests, then UNAVAILABLE \'unloaded\' (review: the rows lost their version, and UNLOADING never showed)', async () => {
    const root = mkdtempSync(join(tmpdir(), 'triode-index-unload-'));
    addModel(root, 'm', `${config(0)}version_policy { all { } }\n`);
    mkdirSync(join(root, 'm', '2'));
    let release = (): void => undefined;
    const held = new Promise<void>((r) => { release = r; });
    const backend: Backend = {
      name: 'echo',
      async modelInitialize(ctx) {
        const inner = await echo.modelInitialize(ctx);
        return {
          ...inner,
          async instanceInitialize(...args) {
            const instance = await inner.instanceInitialize(...args);
            return { ...instance, async execute(requests) { await held; return instance.execute(requests); } };
          },
        };
      },
    };
    const s = await InferenceServer.create({ modelRepositories: [root], backends: [backend], modelControlMode: 'explicit', startupModels: ['m'] });
    try {
      const inflight = s.infer({ modelName: 'm', modelVersion: 2, inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: Int32Array.of(1) }] });
      await new Promise((r) => setTimeout(r, 20));
      const unload = s.unloadModel('m');
      await new Promise((r) => setTimeout(r, 20));
      expect(s.repositoryIndex()).toEqual([
        { name: 'm', version: '1', state: 'UNLOADING', reason: '' },
        { name: 'm', version: '2', state: 'UNLOADING', reason: '' },
      ]);
      expect(s.isReady()).toBe(true);
      release();
      await inflight;
      await unload;
      expect(s.repositoryIndex()).toEqual([
        { name: 'm', version: '1', state: 'UNAVAILABLE', reason: 'unloaded' },
        { name: 'm', version: '2', state: 'UNAVAILABLE', reason: 'unloaded' },
      ]);
      expect(s.repositoryIndex(true)).toEqual([]);
      await expect(s.infer({ modelName: 'm', modelVersion: 1, inputs: [] })).rejects.toMatchObject({ code: 'UNAVAILABLE', message: "Request for unknown model: 'm' version 1 is not at ready state" });
      // Loaded again, it serves; the rows are its own again.
      await s.loadModel('m');
      expect(s.repositoryIndex().map((r) => `${r.version}:${r.state}`)).toEqual(['1:READY', '2:READY']);
    } finally {
      release();
      await s.stop(1000);
    }
  });
});

describe('repository paths stay out of client answers', () => {
  it('attack: a model in two repositories is listed in the index without the repositories\' paths', async () => {
    const a = mkdtempSync(join(tmpdir(), 'triode-repo-a-'));
    const b = mkdtempSync(join(tmpdir(), 'triode-repo-b-'));
    addModel(a, 'twice', config(4));
    addModel(b, 'twice', config(4));
    const s = await InferenceServer.create({ modelRepositories: [a, b], backends: [echo], strictReadiness: false });
    try {
      const row = s.repositoryIndex().find((r) => r.name === 'twice')!;
      expect(row.reason).toMatch(/model 'twice' is found in multiple model repositories/);
      expect(row.reason).not.toContain(a);
      expect(row.reason).not.toContain(tmpdir());
    } finally {
      await s.stop(1000);
    }
  });
});
