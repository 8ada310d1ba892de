/**
 * @module `triode serve`: the embedded mode. One process: the HTTP frontend over a LocalBackplane,
 * the core InferenceServer, one thread per model instance.
 * Triton: server/src/main.cc
 */
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LocalBackplane, LogSettings, MAX_LOAD_CALLS, createLogger, queryGpus, type GpuInventory, type Logger } from '@triode/core';
import {
  DecompressionBudget, HttpLifecycle, SystemSharedMemory, serverExtensions, TraceSettings, Tracer, TRACE_FLUSH_AT_EXIT_MS, createHttpApp, headerPattern, startHttpServer, startMetricsServer,
  type GrpcServerHandle, type HttpServerHandle, type MetricsServerHandle, type MetricsSource,
} from '@triode/frontends';
import { startGrpc } from './grpc-options.js';
import { logStream } from './log-file.js';
import { gpuTable, modelTable } from './model-table.js';
import { httpRestrictionsFrom, type ServeOptions } from './serve-options.js';

/** A running embedded server. */
export interface RunningServer {
  server: InferenceServer;
  http?: HttpServerHandle;
  grpc?: GrpcServerHandle;
  /** Drains in-flight requests (up to the exit timeout) and closes everything. */
  shutdown(): Promise<void>;
}

/**
 * The GPUs at start: their table on stderr (before the models'), or why there are none (a log
 * line at info when `--allow-gpu-metrics=true` was asked for, verbose otherwise).
 */
export async function findGpus(opts: Pick<ServeOptions, 'gpuQuery' | 'allowGpuMetrics'>, logger: Logger): Promise<GpuInventory> {
  const found = await queryGpus(opts.gpuQuery);
  if (found.gpus.length > 0) process.stderr.write(gpuTable(found.gpus) + '\n');
  else if (opts.allowGpuMetrics === true) logger.info(`--allow-gpu-metrics=true: no nv_gpu_* metrics: ${found.reason ?? 'no GPU found'}`);
  else logger.verbose(1, found.reason ?? 'no GPU found');
  return found;
}

/** Starts the embedded server as `triode serve` does. */
export async function startServe(opts: ServeOptions, logSettings = new LogSettings({
  verboseLevel: opts.logVerbose, info: opts.logInfo, warning: opts.logWarning, error: opts.logError, format: opts.logFormat,
  ...(opts.logFile ? { file: opts.logFile } : {}),
}), logger: Logger = createLogger(logStream(opts.logFile), logSettings)): Promise<RunningServer> {
  if (opts.loadModels.includes('*') && opts.loadModels.length > 1) throw new Error("--load-model=* must be the only --load-model flag");
  for (const n of opts.notes) logger[n.level](n.text);
  const gpus = await findGpus(opts, logger);
  const server = await InferenceServer.create({
    modelRepositories: opts.modelRepositories,
    backends: [new OnnxRuntimeBackend({ gpus, logger }), new JavaScriptBackend({ logger })],
    id: opts.id,
    version: '0.1.0',
    extensions: serverExtensions({ systemSharedMemory: opts.allowClientShm }),
    strictReadiness: opts.strictReadiness,
    autoCompleteConfig: opts.autoCompleteConfig,
    modelControlMode: opts.modelControlMode,
    startupModels: opts.loadModels,
    repositoryPollMs: opts.repositoryPollSecs * 1000,
    modelLoadThreadCount: opts.modelLoadThreadCount,
    modelLoadRetryCount: opts.modelLoadRetryCount,
    ...(opts.maxInstancesPerModel !== undefined ? { maxInstancesPerModel: opts.maxInstancesPerModel } : {}),
    modelLoadTimeoutMs: opts.modelLoadTimeoutSecs * 1000,
    // Loads waiting their turn hold the files they carry: bounded as on a cluster gateway.
    maxLoadCalls: MAX_LOAD_CALLS,
    responseCacheBytes: opts.responseCacheBytes,
    rateLimit: opts.rateLimit,
    rateLimitResources: opts.rateLimitResources,
    ...(opts.modelConfigName ? { modelConfigName: opts.modelConfigName } : {}),
    backendConfig: opts.backendConfig,
    logger,
  });
  const index = server.repositoryIndex();
  process.stderr.write(modelTable(index) + '\n');
  // Models explicit mode was not asked to load are 'unloaded', not failed (Triton counts only the loads it tried).
  // A --load-model that names no model in the repositories failed too (it is in no index entry).
  const named = new Set(index.map((r) => r.name));
  const missing = opts.modelControlMode === 'explicit' ? opts.loadModels.filter((m) => m !== '*' && !named.has(m)) : [];
  if (opts.exitOnError && (missing.length > 0 || index.some((r) => r.state !== 'READY' && r.reason !== 'unloaded'))) {
    await server.stop(0);
    throw new Error('failed to load all models (--exit-on-error=true)');
  }
  let metrics: MetricsServerHandle | undefined;
  if (opts.allowMetrics) {
    // GPUs are read again every --metrics-interval-ms, only where some were found at start.
    const source: MetricsSource = {
      metricsSnapshot: () => server.metricsSnapshot(),
      observeLatencies: (listener) => server.observeLatencies(listener),
      responseCacheStats: () => server.responseCacheStats(),
      ...(gpus.gpus.length > 0 ? { gpuStatus: async () => (await queryGpus(opts.gpuQuery)).gpus } : {}),
    };
    metrics = await startMetricsServer(source, opts.metricsPort, opts.metricsAddress, opts.metricsConfig);
    logger.info(`Started Metrics Service at ${opts.metricsAddress}:${metrics.port}`);
  }
  let http: HttpServerHandle | undefined;
  const lifecycle = new HttpLifecycle();
  const restrictions = httpRestrictionsFrom(opts.httpRestrictedApi);
  const traceSettings = new TraceSettings(opts.traceConfig);
  const tracer = new Tracer(traceSettings, { logger });
  // One set of regions for both frontends, as Triton's shared memory manager.
  const sharedMemory = opts.allowClientShm ? new SystemSharedMemory() : undefined;
  // And one budget of decompressed request bytes: what compressed requests hold, over both.
  const decompressionBudget = new DecompressionBudget(opts.maxDecompressedRequestBytes);
  if (opts.allowHttp) {
    const app = createHttpApp(new LocalBackplane(server), {
      maxInputSize: opts.httpMaxInputSize, lifecycle, logSettings, traceSettings, tracer, logger, decompressionBudget,
      ...(restrictions ? { restrictions } : {}),
      ...(sharedMemory ? { sharedMemory } : {}),
      ...(opts.httpHeaderForwardPattern ? { headerForwardPattern: headerPattern(opts.httpHeaderForwardPattern)! } : {}),
    });
    http = await startHttpServer(app, opts.httpPort, opts.httpAddress);
    logger.info(`Started HTTPService at ${opts.httpAddress}:${http.port}`);
  }
  const grpc = await startGrpc(new LocalBackplane(server), opts.grpc, logSettings, traceSettings, logger, { tracer, decompressionBudget, ...(sharedMemory ? { sharedMemory } : {}) });
  let closing: Promise<void> | undefined;
  return {
    server,
    ...(http ? { http } : {}),
    ...(grpc ? { grpc } : {}),
    shutdown: () => (closing ??= (async () => {
      logger.info(`Waiting for in-flight requests to complete (timeout ${opts.exitTimeoutSecs} s)`);
      const deadline = Date.now() + opts.exitTimeoutSecs * 1000;
      server.beginShutdown();
      // The core stops first, with the HTTP and gRPC endpoints still serving, as Triton's main
      // keeps them up until ServerStop returns: its schedulers refuse new requests (UNAVAILABLE)
      // except those continuing a live sequence, and it waits until the deadline for the requests
      // in flight and for live sequences to end (their END, or their idle timeout) ...
      const left = await server.stop(Math.max(0, deadline - Date.now()));
      if (left > 0) logger.warning(`${left} requests were still in flight at exit`);
      // ... then the frontends refuse what comes and finish what they still hold (responses
      // being written, streams).
      const rest = Math.max(0, deadline - Date.now());
      await Promise.all([lifecycle.shutdown(rest), grpc?.close(rest)]);
      // Connections still busy at the deadline (a client still reading a stream) are closed.
      await http?.close(Math.max(0, deadline - Date.now()));
      await metrics?.close();
      sharedMemory?.close();
      // After everything else: the traces of the last requests are written before the process exits.
      if (!(await tracer.flush(Math.max(TRACE_FLUSH_AT_EXIT_MS, deadline - Date.now())))) logger.warning('trace files were still being written at exit; the traces not yet written are lost');
      logger.info('Server stopped');
    })()),
  };
}
