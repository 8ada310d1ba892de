/**
 * @module `triode perf`: perf_analyzer's main flags over @triode/client's load generator.
 * Triton: perf_analyzer docs/cli.md
 */
import { writeFileSync } from 'node:fs';
import { Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_OUTPUT_SHARED_MEMORY_SIZE, GrpcClient, HttpClient, perfCsv, perfTable, runPerf, type InputDataSource, type PerfOptions } from '@triode/client';
import { parseInteger } from './serve-options.js';

/** `start:end:step` of whole numbers (concurrency levels). */
export const parseIntegerRange = (v: string): number[] => rangeOf(v, true);

/** `start:end:step` (end and step optional) into the values it stands for. */
export const parseRange = (v: string): number[] => rangeOf(v, false);

function rangeOf(v: string, integers: boolean): number[] {
  const parts = v.split(':').map(Number);
  const [start, end = start, step = 1] = parts;
  if (parts.length > 3 || [start, end, step].some((x) => x === undefined || !Number.isFinite(x) || x <= 0 || (integers && !Number.isInteger(x))) || end! < start!) {
    throw new InvalidArgumentError(`expected <start>[:<end>[:<step>]] of positive ${integers ? 'integers' : 'numbers'}, got '${v}'`);
  }
  const out: number[] = [];
  for (let x = start!; x <= end! + 1e-9; x += step!) out.push(Number(x.toFixed(6)));
  return out;
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

/** Adds the `perf` command; `setExit` receives the exit code. */
export function addPerfCommand(program: Command, setExit: (code: number) => void): void {
  program.command('perf')
    .description('measure a model\'s throughput and latency over HTTP or gRPC (perf_analyzer-like)')
    .requiredOption('-m, --model-name <name>', 'model to measure')
    .option('-x, --model-version <version>', 'model version (default: the server\'s choice)')
    .option('-u, --url <url>', 'server address (default localhost:8000 for HTTP, localhost:8001 for gRPC)')
    .addOption(new Option('-i, --protocol <protocol>', 'protocol').choices(['http', 'grpc']).default('http'))
    .option('--concurrency-range <start:end:step>', 'concurrency levels (closed loop)', parseIntegerRange, [1])
    .option('--request-rate-range <start:end:step>', 'request rates per second (open loop)', parseRange)
    .option('-b, --batch-size <n>', 'batch size of each request', parseInteger(1), 1)
    .option('--input-data <source>', 'random, zero, or a JSON file in perf_analyzer\'s format', 'random')
    .option('--shape <name:dims>', 'shape of a variable input without the batch dim, e.g. IN:3,224,224 (repeatable)', collect, [])
    .addOption(new Option('--shared-memory <type>', 'put the input and output tensors in shared memory (system: POSIX shm objects in /dev/shm, registered with a server on this host started with --allow-client-shm=true; cuda is not supported)').choices(['none', 'system', 'cuda']).default('none'))
    .option('--output-shared-memory-size <bytes>', 'with --shared-memory system: room per output (times the batch size) when its size is not known from the model (BYTES, variable dims)', parseInteger(1), DEFAULT_OUTPUT_SHARED_MEMORY_SIZE)
    .addOption(new Option('--input-tensor-format <format>', 'HTTP: tensors as binary (extension) or JSON').choices(['binary', 'json']).default('binary'))
    .option('-p, --measurement-interval <ms>', 'length of one measurement window', parseInteger(100), 5000)
    .option('-s, --stability-percentage <pct>', 'windows agree within this percentage', parseInteger(1), 10)
    .option('-r, --max-trials <n>', 'windows measured at most per level', parseInteger(3), 10)
    .option('--warmup-request-count <n>', 'requests per concurrency slot before measuring', parseInteger(0), 100)
    .option('--sequence-length <n>', 'sequence models: requests per sequence', parseInteger(1), 20)
    .option('--max-threads <n>', 'open loop: most requests outstanding', parseInteger(1), 1000)
    .option('--request-timeout <ms>', 'fail a request that has no answer after this long (0: wait forever)', parseInteger(0), 60000)
    .option('-H, --header <name:value>', 'header (HTTP) or metadata (gRPC) sent with every request (repeatable)', collect, [])
    .option('-f, --latency-report-file <file>', 'write the results as CSV')
    .option('--json <file>', 'write the results as JSON')
    .action(async (o: Record<string, unknown>) => {
      if (o['sharedMemory'] === 'cuda') {
        // Refused before any client is made: nothing to release.
        process.stderr.write('triode perf: --shared-memory cuda is not supported: Triode has no CUDA shared memory (use --shared-memory system, or none)\n');
        setExit(1);
        return;
      }
      const grpc = o['protocol'] === 'grpc';
      const url = (o['url'] as string | undefined) ?? (grpc ? 'localhost:8001' : 'localhost:8000');
      const headers: Record<string, string> = {};
      for (const h of o['header'] as string[]) {
        const i = h.indexOf(':');
        if (i <= 0) throw new InvalidArgumentError(`-H expects <name>:<value>, got '${h}'`);
        headers[h.slice(0, i).trim().toLowerCase()] = h.slice(i + 1).trim();
      }
      // A deadline per request: a server that stops answering fails requests (counted as errors)
      // instead of holding the run forever.
      const timeoutMs = o['requestTimeout'] as number;
      const client = grpc
        ? new GrpcClient(url.replace(/^\w+:\/\//, ''), { metadata: headers, timeoutMs })
        : new HttpClient(url, { headers, binary: o['inputTensorFormat'] !== 'json', maxSockets: 1024, timeoutMs, idleTimeoutMs: timeoutMs });
      const shapes: Record<string, number[]> = {};
      for (const s of o['shape'] as string[]) {
        const i = s.lastIndexOf(':');
        if (i <= 0) throw new InvalidArgumentError(`--shape expects <name>:<d1>,<d2>..., got '${s}'`);
        shapes[s.slice(0, i)] = s.slice(i + 1).split(',').map(Number);
      }
      const source = o['inputData'] as string;
      const inputData: InputDataSource = source === 'random' || source === 'zero' ? source : { file: source };
      const options: PerfOptions = {
        model: o['modelName'] as string,
        ...(o['modelVersion'] ? { version: o['modelVersion'] as string } : {}),
        concurrency: o['concurrencyRange'] as number[],
        ...(o['requestRateRange'] ? { requestRates: o['requestRateRange'] as number[] } : {}),
        batchSize: o['batchSize'] as number,
        inputData,
        shapes,
        measurementIntervalMs: o['measurementInterval'] as number,
        stabilityPercentage: o['stabilityPercentage'] as number,
        maxTrials: o['maxTrials'] as number,
        warmupRequests: o['warmupRequestCount'] as number,
        sequenceLength: o['sequenceLength'] as number,
        maxOutstanding: o['maxThreads'] as number,
        sharedMemory: o['sharedMemory'] as 'none' | 'system',
        outputSharedMemorySize: o['outputSharedMemorySize'] as number,
      };
      // Ctrl-C ends the run the way an error does: the workers stop and this run's shared memory
      // regions are unregistered and removed before the process exits (a second Ctrl-C kills it).
      const interrupt = new AbortController();
      options.signal = interrupt.signal;
      const onSigint = () => {
        process.stderr.write('triode perf: interrupted, stopping (Ctrl-C again to kill)\n');
        interrupt.abort(new Error('interrupted (SIGINT)'));
      };
      process.once('SIGINT', onSigint);
      process.stdout.write(`*** Measurement Settings ***\n  Model: ${options.model}  Protocol: ${grpc ? 'gRPC' : `HTTP (${o['inputTensorFormat'] as string})`}  Batch size: ${options.batchSize}  Shared memory: ${options.sharedMemory}\n  Window: ${options.measurementIntervalMs} ms, stable when 3 windows agree within ${options.stabilityPercentage}% (at most ${options.maxTrials})\n\n`);
      try {
        const results = await runPerf(client, options, (line) => process.stdout.write(line + '\n'));
        process.stdout.write('\n' + perfTable(results) + '\n');
        for (const r of results) if (r.errors > 0) process.stdout.write(`errors at ${r.concurrency ?? r.requestRate}: ${r.errors} (first: ${r.firstError})\n`);
        if (o['latencyReportFile']) writeFileSync(o['latencyReportFile'] as string, perfCsv(results));
        if (o['json']) writeFileSync(o['json'] as string, JSON.stringify(results, null, 2));
        // As perf_analyzer, a run in which requests failed is a failed run (exit 1), though its
        // figures are still printed and written.
        setExit(results.some((r) => r.requests === 0 || r.errors > 0) ? 1 : 0);
      } catch (err) {
        process.stderr.write(`triode perf: ${(err as Error).message}\n`);
        setExit(interrupt.signal.aborted ? 130 : 1);
      } finally {
        process.removeListener('SIGINT', onSigint);
        client.close();
      }
    });
}
