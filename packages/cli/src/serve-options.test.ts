import { describe, expect, it } from 'vitest';
import { Command } from 'commander';
import { MAX_TIMER_MS, addServeFlags, parseBackendConfig, parseDuration, parseTraceConfig, toServeOptions, traceConfigFrom, type ServeOptions } from './serve-options.js';

/** `triode serve <args>` parsed as main() does (without starting anything). */
const parse = (args: string[]): ServeOptions => {
  const cmd = addServeFlags(new Command().exitOverride().configureOutput({ writeErr: () => undefined }));
  cmd.parse(args, { from: 'user' });
  return toServeOptions(cmd.opts());
};

describe('tritonserver flags on triode serve (issue #15)', () => {
  it('--model-store alone is the repository; with none at all the error names the flag', () => {
    expect(parse(['--model-store', '/models']).modelRepositories).toEqual(['/models']);
    expect(parse(['--model-repository=/a', '--model-store=/b']).modelRepositories).toEqual(['/a', '/b']);
    expect(() => parse([])).toThrow('--model-repository (or --model-store) is required');
  });

  it('--backend-config: the global form applies to every backend, a backend\'s own setting wins whatever the order', () => {
    expect(parseBackendConfig(['default-max-batch-size=8'])).toEqual({ onnxruntime: { 'default-max-batch-size': '8' }, javascript: { 'default-max-batch-size': '8' } });
    expect(parseBackendConfig(['onnxruntime,default-max-batch-size=2', 'default-max-batch-size=8'])).toEqual({
      onnxruntime: { 'default-max-batch-size': '2' }, javascript: { 'default-max-batch-size': '8' },
    });
    expect(parseBackendConfig(['onnxruntime,enable-global-threadpool=1'])).toEqual({ onnxruntime: { 'enable-global-threadpool': '1' } });
    expect(parse(['--model-repository=/m', '--backend-config=default-max-batch-size=8']).backendConfig['onnxruntime']).toEqual({ 'default-max-batch-size': '8' });
    expect(() => parseBackendConfig([',x=1'])).toThrow(/--backend-config must be/);
    expect(() => parseBackendConfig(['onnxruntime,x='])).toThrow(/--backend-config must be/);
    expect(() => parseBackendConfig(['default-max-batch-size=eight'])).toThrow(/default-max-batch-size: expected an integer/);
  });

  it('--metrics-address defaults to --http-address; --allow-cpu-metrics=false drops the CPU gauges', () => {
    const d = parse(['--model-repository=/m', '--http-address=127.0.0.1']);
    expect(d.metricsAddress).toBe('127.0.0.1');
    expect(d.metricsConfig.cpuMetrics).toBeUndefined();
    const o = parse(['--model-repository=/m', '--http-address=127.0.0.1', '--metrics-address=0.0.0.0', '--allow-cpu-metrics=false']);
    expect(o.metricsAddress).toBe('0.0.0.0');
    expect(o.metricsConfig.cpuMetrics).toBe(false);
  });

  it('--pinned-memory-pool-byte-size is the size nv_pinned_memory_pool_total_bytes reports (Triton\'s default without it)', () => {
    expect(parse(['--model-repository=/m']).metricsConfig.pinnedMemoryPoolBytes).toBeUndefined();
    expect(parse(['--model-repository=/m', '--pinned-memory-pool-byte-size=1048576']).metricsConfig.pinnedMemoryPoolBytes).toBe(1048576);
  });

  it('--model-namespacing=false is accepted; true, --allow-sagemaker=true, --allow-vertex-ai=true are refused with the reason', () => {
    expect(parse(['--model-repository=/m', '--model-namespacing=false', '--allow-sagemaker=false', '--allow-vertex-ai=false']).notes).toEqual([]);
    expect(() => parse(['--model-repository=/m', '--model-namespacing=true'])).toThrow(/--model-namespacing=true is not supported: Triode needs model names unique/);
    expect(() => parse(['--model-repository=/m', '--allow-sagemaker=true'])).toThrow(/no SageMaker frontend/);
    expect(() => parse(['--model-repository=/m', '--allow-vertex-ai=true'])).toThrow(/no Vertex AI frontend/);
  });

  it('the old --trace-* flags are read as --trace-config (which wins), each with a deprecation note', () => {
    const o = parse(['--model-repository=/m', '--trace-file=/tmp/t.json', '--trace-level=timestamps', '--trace-level=TENSORS', '--trace-rate=10', '--trace-count=5', '--trace-log-frequency=100', '--trace-config', 'count=7']);
    expect(o.traceConfig).toEqual({ trace_file: '/tmp/t.json', trace_level: ['TIMESTAMPS', 'TENSORS'], trace_rate: '10', trace_count: '7', log_frequency: '100' });
    expect(o.notes.map((n) => n.text)).toEqual([
      '--trace-file is deprecated (in Triton too): it is read as --trace-config triton,file=<value>',
      '--trace-rate is deprecated (in Triton too): it is read as --trace-config rate=<value>',
      '--trace-count is deprecated (in Triton too): it is read as --trace-config count=<value>',
      '--trace-log-frequency is deprecated (in Triton too): it is read as --trace-config triton,log-frequency=<value>',
      '--trace-level is deprecated (in Triton too): it is read as --trace-config level=<value>',
    ]);
    // An explicit OFF turns tracing off, as in Triton; levels are read in any case.
    expect(traceConfigFrom({ traceLevel: ['TIMESTAMPS', 'off'] })).toEqual({ trace_level: ['OFF'] });
    expect(() => traceConfigFrom({ traceLevel: ['everything'] })).toThrow("--trace-level: invalid value for trace level: 'everything'");
  });

  it("--trace-config takes Triton's spellings: log-frequency, mode=triton, lower-case levels; OpenTelemetry is refused", () => {
    expect(parseTraceConfig(['triton,log-frequency=50', 'mode=triton', 'level=timestamps', 'level=tensors'])).toEqual({ log_frequency: '50', trace_level: ['TIMESTAMPS', 'TENSORS'] });
    expect(() => parseTraceConfig(['opentelemetry,url=localhost:4318/v1/traces'])).toThrow(/OpenTelemetry tracing is not supported/);
    expect(() => parseTraceConfig(['mode=opentelemetry'])).toThrow(/OpenTelemetry tracing is not supported/);
    expect(() => parseTraceConfig(['rate=often'])).toThrow(/--trace-config rate: expected an integer/);
  });

  it('flags with no effect here are accepted, each given one logged with its reason; values Triode matches are not logged', () => {
    const o = parse(['--model-repository=/m', '--pinned-memory-pool-byte-size=268435456', '--cuda-memory-pool-byte-size=0:67108864', '--cuda-memory-pool-byte-size=1:67108864',
      '--rate-limit=execution_count', '--rate-limit-resource=R1:10:0', '--backend-directory=/opt/tritonserver/backends', '--allow-gpu-metrics=false', '--reuse-http-port=false',
      '--http-thread-count=8', '--allow-client-shm=true']);
    expect(o.notes).toEqual([
      { level: 'info', text: '--pinned-memory-pool-byte-size=268435456: accepted, no effect here because Triode keeps no CUDA memory pools: GPU instances run through the onnxruntime execution providers, which allocate device memory themselves; tensors stay in ordinary host memory' },
      { level: 'info', text: '--cuda-memory-pool-byte-size=0:67108864 --cuda-memory-pool-byte-size=1:67108864: accepted, no effect here because Triode keeps no CUDA memory pools: GPU instances run through the onnxruntime execution providers, which allocate device memory themselves' },
      { level: 'info', text: '--backend-directory=/opt/tritonserver/backends: accepted, no effect here because the backends (onnxruntime, javascript) are built in; no backend libraries are loaded' },
      { level: 'info', text: '--http-thread-count=8: accepted, no effect here because HTTP is served on the event loop (model instances have their own threads: instance_group count)' },
    ]);
    expect(parse(['--model-repository=/m', '--rate-limit=OFF']).notes).toEqual([]);
  });

  it('--allow-client-shm is served, off by default as in Triton 26.04+ (before: accepted with no effect, true logged as a warning)', () => {
    expect(parse(['--model-repository=/m']).allowClientShm).toBe(false);
    expect(parse(['--model-repository=/m', '--allow-client-shm=true'])).toMatchObject({ allowClientShm: true, notes: [] });
    expect(parse(['--model-repository=/m', '--allow-client-shm=off']).allowClientShm).toBe(false);
  });

  it('--max-decompressed-request-bytes (Triode\'s own) is 1 GiB unless given, a positive integer, with no note', () => {
    expect(parse(['--model-repository=/m']).maxDecompressedRequestBytes).toBe(1 << 30);
    expect(parse(['--model-repository=/m', '--max-decompressed-request-bytes=268435456'])).toMatchObject({ maxDecompressedRequestBytes: 268435456, notes: [] });
    for (const v of ['0', '-1', '1e9', '']) expect(() => parse(['--model-repository=/m', '--max-decompressed-request-bytes', v]), v).toThrow(/expected an integer >= 1/);
  });

  it('--rate-limit and --rate-limit-resource become the rate limiter options, with no note', () => {
    const o = parse(['--model-repository=/m', '--rate-limit=execution_count', '--rate-limit-resource=R1:10', '--rate-limit-resource=R2:5:0', '--rate-limit-resource=R2:8:1']);
    expect([o.rateLimit, o.rateLimitResources, o.notes]).toEqual(['execution_count', [{ name: 'R1', count: 10 }, { name: 'R2', count: 5, device: 0 }, { name: 'R2', count: 8, device: 1 }], []]);
    const off = parse(['--model-repository=/m', '--rate-limit=off']);
    expect([off.rateLimit, off.rateLimitResources, off.notes]).toEqual(['off', [], []]);
    expect(parse(['--model-repository=/m']).rateLimit).toBe('off');
  });

  it("values are checked in Triton's formats", () => {
    const bad = (flag: string) => expect(() => parse(['--model-repository=/m', flag]), flag).toThrow();
    bad('--cuda-memory-pool-byte-size=64MB');
    bad('--model-load-gpu-limit=0');
    bad('--rate-limit=sometimes');
    bad('--rate-limit-resource=R1');
    // Past the rate limiter's uint32 (review: 2^64 reached the core and printed its internal message).
    expect(() => parse(['--model-repository=/m', '--rate-limit-resource=R:99999999999999999999'])).toThrow(/count and device of at most 4294967295/);
    expect(() => parse(['--model-repository=/m', '--rate-limit-resource=R:1:4294967296'])).toThrow(/count and device of at most 4294967295/);
    expect(parse(['--model-repository=/m', '--rate-limit-resource=R:4294967295']).rateLimitResources).toEqual([{ name: 'R', count: 4294967295 }]);
    bad('--host-policy=numa-node=0');
    bad('--sagemaker-safe-port-range=8000');
    bad('--min-supported-compute-capability=six');
    bad('--allow-gpu-metrics=maybe');
    bad('--model-control-mode=sometimes');
    // Mode names in any case, as tritonserver lower-cases them.
    const modes = parse(['--model-repository=/m', '--model-control-mode=EXPLICIT', '--grpc-infer-response-compression-level=High', '--rate-limit=Execution_Count']);
    expect([modes.modelControlMode, modes.grpc.responseCompression, modes.rateLimit]).toEqual(['explicit', 'high', 'execution_count']);
    expect([parse(['--model-repository=/m', '--log-verbose=true']).logVerbose, parse(['--model-repository=/m', '--log-verbose=2']).logVerbose]).toEqual([1, 2]);
    expect(parse(['--model-repository=/m', '--model-load-gpu-limit=0:0.8', '--host-policy=gpu_0,numa-node=0', '--sagemaker-safe-port-range=8000-8999',
      '--min-supported-compute-capability=6.0']).notes.map((n) => n.text.split(':')[0])).toEqual([
      '--min-supported-compute-capability=6.0', '--model-load-gpu-limit=0', '--host-policy=gpu_0,numa-node=0', '--sagemaker-safe-port-range=8000-8999',
    ]);
  });

  it('gRPC: --grpc-max-connection-age(-grace) reach the server options; the pool/thread flags and --reuse-grpc-port are noted', () => {
    const o = parse(['--model-repository=/m', '--grpc-max-connection-age=60000', '--grpc-max-connection-age-grace=5000', '--grpc-infer-thread-count=2',
      '--grpc-max-response-pool-size=8', '--reuse-grpc-port=true']);
    expect(o.grpc.server.keepalive).toMatchObject({ maxConnectionAgeMs: 60000, maxConnectionAgeGraceMs: 5000 });
    expect(o.grpc.notes.map((n) => [n.level, n.text.split(':')[0]])).toEqual([
      ['info', '--grpc-infer-thread-count=2'], ['info', '--grpc-max-response-pool-size=8'], ['warning', '--reuse-grpc-port=true'],
    ]);
    expect(parse(['--model-repository=/m']).grpc.server.keepalive).not.toHaveProperty('maxConnectionAgeMs');
  });
});

describe('duration flags', () => {
  it('attack: a duration past what a timer holds is clamped to it (was: fire every millisecond, or a load timeout at once)', () => {
    const o = parse(['--model-repository', '/m', '--model-load-timeout-secs', '2147484', '--repository-poll-secs', '99999999999', '--exit-timeout-secs', '9007199254740991', '--metrics-interval-ms', '3000000000']);
    expect(o.exitTimeoutSecs).toBe(2147483);
    expect(o.exitTimeoutSecs * 1000).toBeLessThanOrEqual(MAX_TIMER_MS);
    expect(JSON.stringify(o)).not.toMatch(/2147484000|99999999999|3000000000/);
    expect(parseDuration(1, 'ms')('3000000000')).toBe(MAX_TIMER_MS);
    expect(parseDuration(1, 's')('15')).toBe(15);
    expect(() => parseDuration(1, 's')('0')).toThrow('expected an integer >= 1');
  });

  it('attack: numbers are decimal integers in range: an empty port, hex, exponents, fractions and ports past 65535 are refused before anything loads', () => {
    const bad = (args: string[]) => expect(() => parse(['--model-repository=/m', ...args]), args.join(' ')).toThrow(/expected an integer/);
    // Before: Number('') is 0 (a random free port), '0x10' 16, '1e3' 1000; 99999 failed only at listen, after loading every model.
    bad(['--http-port', '']);
    bad(['--http-port', '0x10']);
    bad(['--grpc-port', '1e3']);
    bad(['--metrics-port', '99999']);
    bad(['--grpc-port', '-1']);
    bad(['--model-load-thread-count', '2.5']);
    bad(['--http-max-input-size', '  ']);
    expect(() => parse(['--model-repository=/m', '--http-port', '65536'])).toThrow("expected an integer from 0 to 65535, got '65536'");
    const o = parse(['--model-repository=/m', '--http-port', ' 8080 ', '--grpc-port', '0', '--metrics-port', '65535']);
    expect([o.httpPort, o.grpc.server.address, o.metricsPort]).toEqual([8080, '0.0.0.0:0', 65535]);
  });
});
