/**
 * Issue #15: every one of tritonserver's 91 flags starts `triode serve` (values from Triton's
 * docs), which then serves; flags with no effect here are logged with the reason; refused values
 * (model namespacing, the SageMaker/Vertex AI frontends) stop it with the reason. Also the global
 * `--backend-config default-max-batch-size=N` at auto-complete, and `--model-store` alone.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GrpcClient } from '@triode/client';
import { EXAMPLES, ROOT, makeRepository } from './helpers/repository.js';
import { TRIODE_BIN, freePort, startTriode, until, type Child } from './helpers/process.js';

/** tritonserver's flags (server/src/command_line_parser.cc at its main branch). */
const TRITON_FLAGS = [
  'allow-client-shm', 'allow-cpu-metrics', 'allow-gpu-metrics', 'allow-grpc', 'allow-http', 'allow-metrics', 'allow-sagemaker', 'allow-vertex-ai',
  'backend-config', 'backend-directory', 'buffer-manager-thread-count', 'cache-config', 'cache-directory', 'cuda-memory-pool-byte-size',
  'cuda-virtual-address-size', 'disable-auto-complete-config', 'enable-peer-access', 'exit-on-error', 'exit-timeout-secs', 'grpc-address',
  'grpc-header-forward-pattern', 'grpc-http2-max-ping-strikes', 'grpc-http2-max-pings-without-data', 'grpc-http2-min-recv-ping-interval-without-data',
  'grpc-infer-allocation-pool-size', 'grpc-infer-response-compression-level', 'grpc-infer-thread-count', 'grpc-keepalive-permit-without-calls',
  'grpc-keepalive-time', 'grpc-keepalive-timeout', 'grpc-max-connection-age', 'grpc-max-connection-age-grace', 'grpc-max-response-pool-size',
  'grpc-port', 'grpc-restricted-protocol', 'grpc-root-cert', 'grpc-server-cert', 'grpc-server-key', 'grpc-use-ssl', 'grpc-use-ssl-mutual', 'help',
  'host-policy', 'http-address', 'http-header-forward-pattern', 'http-max-input-size', 'http-port', 'http-restricted-api', 'http-thread-count', 'id',
  'load-model', 'log-error', 'log-file', 'log-format', 'log-info', 'log-verbose', 'log-warning', 'metrics-address', 'metrics-config',
  'metrics-interval-ms', 'metrics-port', 'min-supported-compute-capability', 'model-config-name', 'model-control-mode', 'model-load-gpu-limit',
  'model-load-retry-count', 'model-load-thread-count', 'model-namespacing', 'model-repository', 'model-store', 'pinned-memory-pool-byte-size',
  'rate-limit', 'rate-limit-resource', 'repoagent-directory', 'repository-poll-secs', 'response-cache-byte-size', 'reuse-grpc-port',
  'reuse-http-port', 'sagemaker-port', 'sagemaker-safe-port-range', 'sagemaker-thread-count', 'strict-model-config', 'strict-readiness',
  'trace-config', 'trace-count', 'trace-file', 'trace-level', 'trace-log-frequency', 'trace-rate', 'vertex-ai-default-model', 'vertex-ai-port',
  'vertex-ai-thread-count',
];

const run = promisify(execFile);
const tls = (f: string) => join(ROOT, 'test', 'fixtures', 'tls', f);
const tmp = mkdtempSync(join(tmpdir(), 'triode-flags-'));
const logFile = join(tmp, 'server.log');
const traceFile = join(tmp, 'trace.json');
let triode: Child;
let ports: { http: number; grpc: number; metrics: number };
let args: string[];
const simpleBody = JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(2) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: new Array(16).fill(1) },
  ],
});

beforeAll(async () => {
  ports = { http: await freePort(), grpc: await freePort(), metrics: await freePort() };
  // A model that fails to load beside one that loads (--exit-on-error=false keeps serving it), and
  // a second repository given with --model-store.
  const repo = makeRepository(['simple'], { 'broken/config.pbtxt': 'name: "broken"\nplatform: "no_such_platform"\n', 'broken/1/model.onnx': '' });
  const store = makeRepository(['custom_identity_int32']);
  args = [
    'serve',
    '--model-repository', repo,
    `--model-store=${store}`,
    '--model-control-mode=explicit', '--load-model=*', '--repository-poll-secs=15',
    '--disable-auto-complete-config', '--strict-model-config=false', '--model-config-name=production',
    '--model-load-thread-count=4', '--model-load-retry-count=0', '--model-namespacing=false',
    '--exit-on-error=false', '--strict-readiness=false', '--exit-timeout-secs=30', '--id=triton-flags',
    '--allow-http=true', `--http-port=${ports.http}`, '--http-address=127.0.0.1', '--http-thread-count=8', '--reuse-http-port=false',
    '--http-max-input-size=67108864', '--http-header-forward-pattern=triton-.*', '--http-restricted-api=model-repository:admin-key=admin-value',
    '--allow-grpc=true', `--grpc-port=${ports.grpc}`, '--grpc-address=127.0.0.1', '--reuse-grpc-port=false', '--grpc-header-forward-pattern=triton-.*',
    '--grpc-infer-allocation-pool-size=8', '--grpc-infer-thread-count=2', '--grpc-max-response-pool-size=8', '--grpc-infer-response-compression-level=none',
    '--grpc-use-ssl=false', '--grpc-use-ssl-mutual=false', `--grpc-server-cert=${tls('server.crt')}`, `--grpc-server-key=${tls('server.key')}`, `--grpc-root-cert=${tls('server.crt')}`,
    '--grpc-keepalive-time=7200000', '--grpc-keepalive-timeout=20000', '--grpc-keepalive-permit-without-calls=false', '--grpc-http2-max-pings-without-data=2',
    '--grpc-http2-min-recv-ping-interval-without-data=300000', '--grpc-http2-max-ping-strikes=2', '--grpc-max-connection-age=3600000',
    '--grpc-max-connection-age-grace=30000', '--grpc-restricted-protocol=model-repository:admin-key=admin-value',
    '--allow-sagemaker=false', '--sagemaker-port=8080', '--sagemaker-safe-port-range=8000-8999', '--sagemaker-thread-count=8',
    '--allow-vertex-ai=false', '--vertex-ai-port=8080', '--vertex-ai-thread-count=8', '--vertex-ai-default-model=simple',
    '--allow-metrics=true', `--metrics-port=${ports.metrics}`, '--metrics-address=127.0.0.1', '--allow-gpu-metrics=true', '--allow-cpu-metrics=false',
    '--metrics-interval-ms=2000', '--metrics-config=summary_latencies=true',
    '--log-verbose=0', '--log-info=true', '--log-warning=true', '--log-error=true', '--log-format=default', `--log-file=${logFile}`,
    `--trace-file=${traceFile}`, '--trace-level=OFF', '--trace-rate=500', '--trace-count=10', '--trace-log-frequency=0', '--trace-config=count=20',
    '--backend-config=onnxruntime,default-max-batch-size=8', '--backend-directory=/opt/tritonserver/backends',
    '--repoagent-directory=/opt/tritonserver/repoagents', '--cache-directory=/opt/tritonserver/caches',
    '--cache-config=local,size=1048576', '--response-cache-byte-size=1048576',
    '--rate-limit=execution_count', '--rate-limit-resource=R1:10:0',
    '--pinned-memory-pool-byte-size=268435456', '--cuda-memory-pool-byte-size=0:67108864', '--cuda-virtual-address-size=0:1073741824',
    '--enable-peer-access=true', '--min-supported-compute-capability=6.0', '--buffer-manager-thread-count=0', '--host-policy=gpu_0,numa-node=0',
    '--model-load-gpu-limit=0:0.8', '--allow-client-shm=false',
  ];
  // Log lines go to --log-file; the model table still goes to stderr.
  triode = await startTriode(args, /\| simple +\| 1 +\| READY/);
  await until(async () => (await fetch(`http://127.0.0.1:${ports.http}/v2/health/live`)).status === 200);
});

afterAll(async () => {
  await triode?.stop();
});

describe("triode serve with every one of tritonserver's flags", () => {
  it('the command line names all 91 (--help is tried on its own below: it prints the usage and exits)', () => {
    expect(TRITON_FLAGS).toHaveLength(91);
    const given = new Set(args.filter((a) => a.startsWith('--')).map((a) => a.slice(2).split('=')[0]));
    expect(TRITON_FLAGS.filter((f) => f !== 'help' && !given.has(f))).toEqual([]);
  });

  it('serves: HTTP and gRPC, both repositories; the model that failed to load is UNAVAILABLE (--exit-on-error=false)', async () => {
    const base = `http://127.0.0.1:${ports.http}`;
    const r = await fetch(`${base}/v2/models/simple/infer`, { method: 'POST', body: simpleBody });
    expect(r.status).toBe(200);
    expect(((await r.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual(new Array(16).fill(3));
    const id = await fetch(`${base}/v2/models/custom_identity_int32/infer`, {
      method: 'POST', body: JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 2], datatype: 'INT32', data: [4, 5] }] }),
    });
    expect(((await id.json()) as { outputs: { data: number[] }[] }).outputs[0]!.data).toEqual([4, 5]);
    expect(((await (await fetch(`${base}/v2`)).json()) as { name: string }).name).toBe('triton-flags');
    expect((await fetch(`${base}/v2/health/ready`)).status).toBe(200); // --strict-readiness=false
    // --http-restricted-api: the repository API needs the header.
    expect((await fetch(`${base}/v2/repository/index`, { method: 'POST', body: '{}' })).status).toBe(403);
    const index = await fetch(`${base}/v2/repository/index`, { method: 'POST', body: '{}', headers: { 'admin-key': 'admin-value' } });
    const rows = (await index.json()) as { name: string; state: string }[];
    expect(rows.find((m) => m.name === 'broken')?.state).toBe('UNAVAILABLE');
    expect(rows.find((m) => m.name === 'simple')?.state).toBe('READY');
    const grpc = new GrpcClient(`127.0.0.1:${ports.grpc}`);
    try {
      expect(await grpc.isServerLive()).toBe(true);
      expect((await grpc.serverMetadata()).name).toBe('triton-flags');
    } finally {
      grpc.close();
    }
  });

  it('metrics on --metrics-address, without the CPU gauges (--allow-cpu-metrics=false), with summaries (--metrics-config)', async () => {
    const text = await (await fetch(`http://127.0.0.1:${ports.metrics}/metrics`)).text();
    expect(text).toMatch(/^nv_inference_request_success\{model="simple",version="1"\} \d+$/m);
    expect(text).toMatch(/^nv_inference_request_summary_us_count\{model="simple",version="1"\} \d+$/m);
    expect(text).not.toMatch(/nv_cpu_/);
  });

  it('the old --trace-* flags set the trace settings, --trace-config over them', async () => {
    const s = await (await fetch(`http://127.0.0.1:${ports.http}/v2/trace/setting`)).json();
    expect(s).toEqual({ trace_file: traceFile, trace_level: ['OFF'], trace_rate: '500', trace_count: '20', log_frequency: '0', trace_mode: 'triton' });
  });

  it('each flag with no effect here is logged at start with the reason', () => {
    const lines = readFileSync(logFile, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { level: string; msg: string });
    const noted = (flag: string, level = 'info') => expect(lines.some((l) => l.level === level && l.msg.startsWith(`--${flag}`)), flag).toBe(true);
    for (const f of ['allow-gpu-metrics', 'pinned-memory-pool-byte-size', 'cuda-memory-pool-byte-size', 'cuda-virtual-address-size', 'enable-peer-access',
      'min-supported-compute-capability', 'model-load-gpu-limit', 'buffer-manager-thread-count', 'host-policy', 'backend-directory', 'repoagent-directory',
      'cache-directory', 'http-thread-count', 'sagemaker-port', 'sagemaker-safe-port-range', 'sagemaker-thread-count',
      'vertex-ai-port', 'vertex-ai-thread-count', 'vertex-ai-default-model', 'grpc-infer-thread-count', 'grpc-infer-allocation-pool-size',
      'grpc-max-response-pool-size', 'trace-file', 'trace-level', 'trace-rate', 'trace-count', 'trace-log-frequency', 'strict-model-config']) noted(f);
    noted('response-cache-byte-size is ignored', 'warning');
    expect(lines.find((l) => l.msg.startsWith('--pinned-memory-pool-byte-size'))?.msg).toBe(
      '--pinned-memory-pool-byte-size=268435456: accepted, no effect here because Triode keeps no CUDA memory pools: GPU instances run through the onnxruntime execution providers, which allocate device memory themselves; tensors stay in ordinary host memory',
    );
    // Values that ask for what Triode does anyway, and implemented flags (the rate limiter), are not logged.
    for (const f of ['reuse-http-port', 'reuse-grpc-port', 'allow-client-shm', 'allow-sagemaker', 'model-namespacing', 'rate-limit']) {
      expect(lines.some((l) => l.msg.startsWith(`--${f}`)), f).toBe(false);
    }
  });
});

describe('--backend-config global form and --model-store alone', () => {
  it('default-max-batch-size=8 applies at auto-complete of a model with no config.pbtxt', async () => {
    const store = mkdtempSync(join(tmpdir(), 'triode-flags-auto-'));
    mkdirSync(join(store, 'auto', '1'), { recursive: true });
    cpSync(join(EXAMPLES, 'simple', '1', 'model.onnx'), join(store, 'auto', '1', 'model.onnx'));
    const port = await freePort();
    const child = await startTriode(['serve', '--model-store', store, '--backend-config=default-max-batch-size=8', `--http-port=${port}`, '--http-address=127.0.0.1',
      '--allow-grpc=false', '--allow-metrics=false']);
    try {
      const config = (await (await fetch(`http://127.0.0.1:${port}/v2/models/auto/config`)).json()) as { max_batch_size: number; dynamic_batching?: unknown };
      expect(config.max_batch_size).toBe(8);
      expect(config.dynamic_batching).toBeDefined();
    } finally {
      await child.stop();
    }
  });
});

describe('--help, and the values Triode refuses', () => {
  // (--allow-sagemaker=true and --allow-vertex-ai=true are refused the same way: serve-options.test.ts.)
  it('--help prints the flags; --model-namespacing=true and a --log-file it cannot open stop it (exit 1) with the reason', async () => {
    const cases: [string, RegExp][] = [
      ['--model-namespacing=true', /--model-namespacing=true is not supported: Triode needs model names unique across the repositories/],
      // Before: it started and logged nowhere (one line on stderr about the stream).
      ['--log-file=/nonexistent-triode-dir/x.log', /--log-file \/nonexistent-triode-dir\/x.log: cannot open it for writing: ENOENT/],
    ];
    const triode = (flags: string[]) => run(process.execPath, [TRIODE_BIN, 'serve', ...flags], { cwd: ROOT, timeout: 30_000 });
    const [help, ...errs] = await Promise.all([
      triode(['--help']),
      ...cases.map(([flag]) => triode([`--model-repository=${tmp}`, flag]).then(() => undefined, (e: unknown) => e as { code: number; stderr: string })),
    ]);
    for (const f of ['--model-repository <path>', '--metrics-address <addr>', '--allow-cpu-metrics <bool>', '--model-namespacing <bool>', '--grpc-max-connection-age <ms>']) {
      expect((help as { stdout: string }).stdout).toContain(f);
    }
    errs.forEach((err, i) => {
      expect(err).toMatchObject({ code: 1 });
      expect((err as { stderr: string }).stderr).toMatch(cases[i]![1]);
    });
  });

  it('triode worker reads the flags it shares with serve as serve does (mode names in any case, --log-verbose=true); a port out of range stops it before it connects', async () => {
    // The first flag commander refuses is the one named: --model-control-mode POLL and
    // --log-verbose true pass (before: 'Allowed choices are none, explicit, poll' / 'expected an integer').
    const err = await run(process.execPath, [TRIODE_BIN, 'worker', '--redis', 'redis://127.0.0.1:1', `--model-repository=${tmp}`,
      '--model-control-mode', 'POLL', '--log-verbose', 'true', '--metrics-port', '99999'], { cwd: ROOT, timeout: 30_000 }).then(() => undefined, (e: unknown) => e as { code: number; stderr: string });
    expect(err).toMatchObject({ code: 1 });
    expect(err!.stderr).toContain("option '--metrics-port <port>' argument '99999' is invalid. expected an integer from 0 to 65535");
  });

  it('triode worker takes --rate-limit and --rate-limit-resource as serve does (README said a worker had its own limiter; it took neither flag)', async () => {
    // Accepted flags lead to the first refused one; a resource past uint32 is refused with serve's words.
    const err = await run(process.execPath, [TRIODE_BIN, 'worker', '--redis', 'redis://127.0.0.1:1', `--model-repository=${tmp}`,
      '--rate-limit', 'EXECUTION_COUNT', '--rate-limit-resource', 'R1:4', '--rate-limit-resource', 'R2:99999999999'], { cwd: ROOT, timeout: 30_000 })
      .then(() => undefined, (e: unknown) => e as { code: number; stderr: string });
    expect(err).toMatchObject({ code: 1 });
    expect(err!.stderr).toContain("expected <resource_name>:<count>[:<device>] with a count and device of at most 4294967295, got 'R2:99999999999'");
    const help = await run(process.execPath, [TRIODE_BIN, 'worker', '--help'], { cwd: ROOT, timeout: 30_000 });
    expect(help.stdout).toContain('--rate-limit <mode>');
    expect(help.stdout).toContain('--rate-limit-resource <name:count[:device]>');
  });

  it('--exit-on-error=true in explicit mode counts only the loads it tried: models not asked for do not stop it', async () => {
    const repo = makeRepository(['simple', 'simple_int8']);
    // Before: simple_int8 ('unloaded', never asked for) counted as a failure and the server exited 1.
    const served = await startTriode(['serve', '--model-repository', repo, '--model-control-mode=explicit', '--load-model=simple', '--exit-on-error=true',
      '--http-port', String(await freePort()), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false']);
    expect(served.output()).toContain('Started HTTPService');
    await served.stop();
  });

  it('--exit-on-error=true stops it when a --load-model names no model in the repositories, as Triton fails to start', async () => {
    const repo = makeRepository(['simple']);
    // Before: it logged the failed load and went on serving.
    const err = await run(process.execPath, [TRIODE_BIN, 'serve', '--model-repository', repo, '--model-control-mode=explicit', '--load-model=simple', '--load-model=nosuch',
      '--exit-on-error=true', '--http-port', String(await freePort()), '--http-address', '127.0.0.1', '--allow-grpc=false', '--allow-metrics=false'], { cwd: ROOT, timeout: 60_000 })
      .then(() => undefined, (e: unknown) => e as { code: number; stderr: string });
    expect(err).toMatchObject({ code: 1 });
    expect(err!.stderr).toContain('failed to load all models (--exit-on-error=true)');
  });
});
