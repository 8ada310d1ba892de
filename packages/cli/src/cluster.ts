/**
 * @module `triode gateway` and `triode worker`: cluster mode. Gateways are stateless HTTP frontends
 * over Redis; workers load the model repository and serve the requests Redis hands them.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command, Option } from 'commander';
import { JavaScriptBackend, OnnxRuntimeBackend } from '@triode/backends';
import { InferenceServer, LogSettings, createLogger, queryGpus, selectGpus, type Logger } from '@triode/core';
import { DecompressionBudget, HttpLifecycle, MeasuredBackplane, SystemSharedMemory, TraceSettings, Tracer, TRACE_FLUSH_AT_EXIT_MS, headerPattern, createHttpApp, serverExtensions, startHttpServer, startMetricsServer, type MetricsSource } from '@triode/frontends';
import { addGrpcFlags, startGrpc, toGrpcFlags } from './grpc-options.js';
import { AsyncJobs, DEFAULT_ASYNC_MAX_REQUEST_BYTES, GpuSupervisor, RedisBackplane, StreamConsumer, perGpuChildren, redactRedisUrl } from '@triode/cluster';
import { modelTable } from './model-table.js';
import { ALLOW_CLIENT_SHM_HELP, cacheBytesFrom, maxDecompressedRequestBytesOption, gpuQueryFrom, httpRestrictionsFrom, metricsConfigFrom, oneOf, parseBackendConfig, parseBool, parseDuration, parseInteger, parseLogVerbose, parsePort, parseRateLimitResources, rateLimitResource, traceConfigFrom, traceConfigOption } from './serve-options.js';
import { logStream } from './log-file.js';
import { findGpus } from './serve.js';

/** The `triode` bin that per-GPU workers run (beside this module's package, whether built or source). */
const TRIODE_BIN = fileURLToPath(new URL('../bin/triode.js', import.meta.url));

/**
 * `triode worker --gpus all|0,2`: this process only supervises one worker per listed GPU (each
 * with the same flags, its GPU alone visible, device `gpu:<index>`) until SIGTERM.
 */
async function superviseGpuWorkers(o: Record<string, unknown>, cmd: Command, logger: Logger): Promise<void> {
  const query = gpuQueryFrom();
  const found = await queryGpus(query);
  const gpus = selectGpus(o['gpus'] as string, found.gpus, found.reason);
  // Commander keeps the arguments it parsed (untyped `rawArgs`); the children get the same ones.
  const raw = (cmd.parent as (Command & { rawArgs?: string[] }) | null)?.rawArgs ?? [];
  const workerArgs = raw[0] === 'worker' ? raw.slice(1) : raw;
  const children = perGpuChildren(gpus, workerArgs, {
    ...(o['workerId'] ? { workerId: o['workerId'] as string } : {}),
    metricsPort: o['allowMetrics'] ? o['metricsPort'] as number : 0,
  });
  const supervisor = new GpuSupervisor(children, { prefixArgs: [TRIODE_BIN], logger, stopGraceMs: ((o['exitTimeoutSecs'] as number) + 5) * 1000 });
  supervisor.start();
  logger.info(`Started ${children.length} per-GPU workers (${children.map((c) => c.id).join(', ')})`);
  onSignals(() => supervisor.stop());
}

const collect = (v: string, prev: string[] = []) => [...prev, v];

/**
 * `--redis <url>`, or the environment's TRIODE_REDIS_URL: a URL with a password (or a `rediss://`
 * one) can then come from a secret instead of the command line, where `ps` shows it.
 */
function redisOption(): Option {
  return new Option('--redis <url>', 'Redis URL, e.g. redis://127.0.0.1:6379, redis://user:password@host:6379/0, rediss://... (default: env TRIODE_REDIS_URL)')
    .env('TRIODE_REDIS_URL').makeOptionMandatory();
}

/** The name prefix of a gateway's metric families (Triton's `nv_inference_*` are the workers'). */
const GATEWAY_METRICS_PREFIX = 'triode_gateway_';

function settingsFrom(o: Record<string, unknown>): LogSettings {
  return new LogSettings({ verboseLevel: o['logVerbose'] as number, info: o['logInfo'] as boolean, ...(o['logFile'] ? { file: o['logFile'] as string } : {}) });
}

function loggerFrom(o: Record<string, unknown>, settings = settingsFrom(o)): Logger {
  return createLogger(logStream(o['logFile'] as string | undefined), settings);
}

function onSignals(stop: () => Promise<void>): void {
  let stopping = false;
  const go = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`Received ${signal}, shutting down\n`);
    stop().then(() => process.exit(0), (err: unknown) => {
      process.stderr.write(`shutdown failed: ${String(err)}\n`);
      process.exit(1);
    });
  };
  process.once('SIGTERM', () => go('SIGTERM'));
  process.once('SIGINT', () => go('SIGINT'));
}

/** The metrics and log flags gateways and workers share (`whose`: whose metrics they serve). */
function addProcessFlags(cmd: Command, whose: string): Command {
  return cmd
    .option('--allow-metrics <bool>', `serve this ${whose} metrics on --metrics-port`, parseBool, true)
    .option('--metrics-port <port>', 'metrics port (GET /metrics)', parsePort, 8002)
    .option('--metrics-address <addr>', 'metrics address (gateway default: --http-address; worker: 0.0.0.0)')
    .option('--metrics-config <key=value>', 'as triode serve (repeatable)', collect, [])
    .option('--metrics-interval-ms <ms>', 'how often CPU and memory metrics are sampled', parseDuration(1, 'ms'), 2000)
    .option('--log-verbose <level>', 'verbose log level (or true / false, as triode serve)', parseLogVerbose, 0)
    .option('--log-info <bool>', 'log info messages', parseBool, true)
    .option('--log-file <file>', 'write log lines to this file (appended) instead of stderr');
}

/**
 * `--cluster-secret`, else the environment's TRIODE_CLUSTER_SECRET (the only place env is read:
 * a secret in the environment does not show in the process list).
 */
function clusterSecret(o: Record<string, unknown>): string | undefined {
  const s = (o['clusterSecret'] as string | undefined) ?? process.env['TRIODE_CLUSTER_SECRET'];
  return s ? s : undefined;
}

const CLUSTER_SECRET_HELP = 'shared secret with which gateways and workers sign (HMAC-SHA256) what they send through Redis and drop what is not signed with it (default: env TRIODE_CLUSTER_SECRET; none: nothing signed)';

/** Adds the `gateway` and `worker` commands. */
export function addClusterCommands(program: Command): void {
  addProcessFlags(addGrpcFlags(program.command('gateway')
    .description('serve HTTP and gRPC in front of a cluster of workers (cluster mode)')), 'gateway\'s frontend')
    .addOption(redisOption())
    .option('--redis-prefix <prefix>', 'key prefix of the cluster', 'triode')
    .option('--http-port <port>', 'HTTP port', parsePort, 8000)
    .option('--http-address <addr>', 'HTTP address', '0.0.0.0')
    .option('--http-max-input-size <bytes>', 'largest request body', parseInteger(1), 64 * 1024 * 1024)
    .addOption(maxDecompressedRequestBytesOption())
    .option('--http-restricted-api <apis:key=value>', 'as triode serve (repeatable)', collect, [])
    .option('--http-header-forward-pattern <regex>', 'request headers whose names match become request parameters')
    .option('--id <name>', 'server name in the server metadata', 'triton')
    .option('--strict-readiness <bool>', 'ready only when every model is ready on some worker', parseBool, true)
    .option('--request-timeout-secs <n>', 'how long a request waits for a worker', parseDuration(1, 's'), 30)
    .option('--async-result-ttl-secs <n>', 'how long async job results are kept', parseInteger(1), 3600)
    .option('--direct-replies <bool>', 'workers send replies straight to this gateway over TCP (Redis is the fallback)', parseBool, true)
    .option('--reply-address <addr>', 'address the direct reply channel listens on (default: the advertise address)')
    .option('--reply-port <port>', 'port of the direct reply channel (0: any free one)', parsePort, 0)
    .option('--advertise-address <host>', 'host workers use to reach this gateway\'s reply channel (default: its first non-loopback IPv4)')
    .option('--reply-max-connections <n>', 'connections the direct reply channel holds at once (at the limit, a new one replaces the oldest that has not authenticated)', parseInteger(1), 256)
    .option('--reply-auth-timeout-ms <ms>', 'a reply channel connection that has not authenticated this long is closed', parseDuration(1, 'ms'), 5000)
    .option('--reply-idle-timeout-secs <n>', 'an idle reply channel connection is closed (workers reopen it)', parseDuration(1, 's'), 300)
    .option('--reply-tls-cert <file>', 'PEM certificate: the direct reply channel speaks TLS (with --reply-tls-key)')
    .option('--reply-tls-key <file>', 'PEM private key of --reply-tls-cert')
    .option('--reply-stream-ttl-secs <n>', 'this gateway\'s Redis reply stream expires this long after its last refresh (a dead gateway\'s goes away)', parseDuration(1, 's'), 60)
    .option('--tensor-fetch-min-bytes <bytes>', 'requests with at least this many bytes of tensors keep them off Redis: the worker fetches them from this gateway over the direct channel (0: all through Redis)', parseInteger(0), 65536)
    .option('--async-max-request-bytes <bytes>', 'largest async job request (and result)', parseInteger(1), DEFAULT_ASYNC_MAX_REQUEST_BYTES)
    .option('--async-max-jobs <n>', 'async jobs kept in Redis at once (waiting, running, finished); more are refused with 503', parseInteger(1), 256)
    .option('--cluster-secret <secret>', CLUSTER_SECRET_HELP)
    .option('--exit-timeout-secs <n>', 'how long shutdown waits for requests in flight', parseDuration(0, 's'), 30)
    .option('--allow-client-shm <bool>', `${ALLOW_CLIENT_SHM_HELP} (regions on this gateway's host)`, parseBool, false)
    .addOption(traceConfigOption())
    .action(async (o: Record<string, unknown>) => {
      // Read before anything starts: a bad --trace-config fails the command, as it does serve.
      const traceSettings = new TraceSettings(traceConfigFrom(o));
      const logSettings = settingsFrom(o);
      const logger = loggerFrom(o, logSettings);
      if (Boolean(o['replyTlsCert']) !== Boolean(o['replyTlsKey'])) throw new Error('--reply-tls-cert and --reply-tls-key go together');
      const secret = clusterSecret(o);
      const backplane = new RedisBackplane({
        redis: o['redis'] as string,
        prefix: o['redisPrefix'] as string,
        requestTimeoutMs: (o['requestTimeoutSecs'] as number) * 1000,
        id: o['id'] as string,
        extensions: serverExtensions({ systemSharedMemory: o['allowClientShm'] === true }),
        strictReadiness: o['strictReadiness'] as boolean,
        directReplies: o['directReplies'] === false ? false : {
          ...(o['replyAddress'] ? { host: o['replyAddress'] as string } : {}),
          port: o['replyPort'] as number,
          ...(o['advertiseAddress'] ? { advertise: o['advertiseAddress'] as string } : {}),
          maxConnections: o['replyMaxConnections'] as number,
          authTimeoutMs: o['replyAuthTimeoutMs'] as number,
          idleTimeoutMs: (o['replyIdleTimeoutSecs'] as number) * 1000,
          ...(o['replyTlsCert'] ? { tls: { cert: readFileSync(o['replyTlsCert'] as string), key: readFileSync(o['replyTlsKey'] as string) } } : {}),
        },
        replyStreamTtlMs: (o['replyStreamTtlSecs'] as number) * 1000,
        tensorFetchMinBytes: (o['tensorFetchMinBytes'] as number) || Number.POSITIVE_INFINITY,
        ...(secret ? { clusterSecret: secret } : {}),
        logger,
      });
      await backplane.start();
      const asyncJobs = new AsyncJobs(backplane, {
        redis: o['redis'] as string, prefix: o['redisPrefix'] as string, resultTtlSecs: o['asyncResultTtlSecs'] as number,
        maxRequestBytes: o['asyncMaxRequestBytes'] as number, maxJobs: o['asyncMaxJobs'] as number, auth: backplane.auth, logger,
      });
      asyncJobs.start();
      // The gateway's own view of the requests it relays (its "frontend" metrics); workers serve theirs.
      const measured = new MeasuredBackplane(backplane);
      const source: MetricsSource = {
        metricsSnapshot: () => measured.metricsSnapshot(),
        observeLatencies: (listener) => measured.observeLatencies(listener),
        clusterRejected: () => backplane.auth.rejected,
        clusterBacklog: () => backplane.backlog(),
        asyncJobCounts: () => asyncJobs.counts(),
      };
      // Under its own names (triode_gateway_*): a sum over gateways and workers counts each request once.
      // As triode serve (Triton): the HTTP address unless given, so --http-address 127.0.0.1 keeps metrics local too.
      const metricsAddress = (o['metricsAddress'] as string | undefined) ?? (o['httpAddress'] as string);
      const metrics = o['allowMetrics'] ? await startMetricsServer(source, o['metricsPort'] as number, metricsAddress, { ...metricsConfigFrom(o), familyPrefix: GATEWAY_METRICS_PREFIX }) : undefined;
      if (metrics) logger.info(`Started Metrics Service at ${metricsAddress}:${metrics.port}`);
      const lifecycle = new HttpLifecycle();
      // As triode serve: the gateway samples and writes the traces; its workers add the core's
      // timestamps to the requests it marks traced (README, Cluster mode: tracing).
      const tracer = new Tracer(traceSettings, { logger });
      const restrictions = httpRestrictionsFrom(o['httpRestrictedApi'] as string[]);
      // Regions live on the gateway's host: a client names them there, and the gateway reads the
      // inputs and writes the outputs; workers see ordinary tensors.
      const sharedMemory = o['allowClientShm'] === true ? new SystemSharedMemory() : undefined;
      // As triode serve: one budget of decompressed request bytes for both frontends.
      const decompressionBudget = new DecompressionBudget(o['maxDecompressedRequestBytes'] as number);
      const http = await startHttpServer(createHttpApp(measured, {
        maxInputSize: o['httpMaxInputSize'] as number, lifecycle, asyncJobs, logSettings, traceSettings, tracer, logger, decompressionBudget,
        ...(restrictions ? { restrictions } : {}),
        ...(sharedMemory ? { sharedMemory } : {}),
        ...(o['httpHeaderForwardPattern'] ? { headerForwardPattern: headerPattern(o['httpHeaderForwardPattern'] as string)! } : {}),
      }), o['httpPort'] as number, o['httpAddress'] as string);
      const grpc = await startGrpc(measured, toGrpcFlags(o), logSettings, traceSettings, logger, { tracer, decompressionBudget, ...(sharedMemory ? { sharedMemory } : {}) });
      logger.info(`gateway ${backplane.gatewayId} on Redis ${redactRedisUrl(o['redis'] as string)}${backplane.directAddress ? `, direct replies at ${backplane.directAddress}` : ''}${secret ? ', cluster secret set' : ''}`);
      if (!secret) logger.warning('no --cluster-secret: anyone who can write to this Redis can forge replies and control messages (README, Security)');
      logger.info(`Started HTTPService at ${o['httpAddress'] as string}:${http.port}`);
      onSignals(async () => {
        backplane.beginExit();
        asyncJobs.beginExit();
        const timeoutMs = (o['exitTimeoutSecs'] as number) * 1000;
        const deadline = Date.now() + timeoutMs;
        // As triode serve (Triton's main keeps its endpoints up until ServerStop returns): new
        // requests are refused in the stopping schedulers' words and health, readiness, metadata,
        // statistics and the repository extension answer as an exiting server, over HTTP and gRPC,
        // while the requests in flight finish; only then do the endpoints close (before, they
        // refused at once: POSTs in the frontend's own words, gRPC connections not at all).
        const left = await backplane.drain(timeoutMs);
        if (left > 0) logger.warning(`${left} requests were still in flight at exit`);
        const rest = Math.max(0, deadline - Date.now());
        await Promise.all([lifecycle.shutdown(rest), grpc?.close(rest)]);
        await http.close(Math.max(0, deadline - Date.now()));
        await asyncJobs.stop();
        await metrics?.close();
        await backplane.stop();
        sharedMemory?.close();
        if (!(await tracer.flush(Math.max(TRACE_FLUSH_AT_EXIT_MS, deadline - Date.now())))) logger.warning('trace files were still being written at exit; the traces not yet written are lost');
      });
    });

  addProcessFlags(program.command('worker')
    .description('load a model repository and serve requests from Redis (cluster mode)'), 'worker\'s Prometheus')
    .addOption(redisOption())
    .option('--redis-prefix <prefix>', 'key prefix of the cluster', 'triode')
    .requiredOption('--model-repository <path>', 'model repository path (repeatable)', collect)
    .option('--worker-id <id>', 'this worker\'s name in the cluster (default: random)')
    .option('--max-inflight <n>', 'requests this worker runs at once', parseInteger(1), 256)
    .option('--claim-idle-ms <ms>', 'take over the unacknowledged requests of a worker whose heartbeat expired once they have waited this long (a live worker\'s are never taken)', parseDuration(100, 'ms'), 5000)
    .option('--disable-auto-complete-config', 'require complete config.pbtxt files')
    .addOption(new Option('--model-control-mode <mode>', 'none: load all at start; explicit: --load-model at start, then load/unload through any gateway; poll: each worker follows the (shared) repository').argParser(oneOf(['none', 'explicit', 'poll'])).default('none'))
    .option('--repository-poll-secs <n>', 'poll mode: how often the repository is re-read', parseDuration(1, 's'), 15)
    .option('--load-model <name>', 'explicit mode: a model to load at start (repeatable; * for all)', collect, [])
    .option('--model-config-name <name>', 'use <model>/configs/<name>.pbtxt when present')
    .option('--backend-config <backend,key=value>', 'backend setting (repeatable)', collect, [])
    .option('--cache-config <local,size=bytes>', 'this worker\'s response cache (models opt in with response_cache { enable: true })')
    .option('--max-instances-per-model <n>', 'most instances of one model version, over all its instance groups (default: max(16, 4 x CPUs))', parseInteger(1))
    .option('--model-load-timeout-secs <n>', 'a model version still loading after this fails UNAVAILABLE', parseDuration(1, 's'), 300)
    .addOption(new Option('--rate-limit <mode>', 'this worker\'s rate limiter, as serve\'s: off, or execution_count (instances execute only while they hold the resources their rate_limiter lists, by priority)').argParser(oneOf(['off', 'execution_count'])).default('off'))
    .addOption(new Option('--rate-limit-resource <name:count[:device]>', 'available count of a rate limiter resource on this worker, on one device or all (repeatable; default: the largest count an instance needs)').argParser(rateLimitResource))
    .option('--exit-timeout-secs <n>', 'how long shutdown waits for requests in flight', parseDuration(0, 's'), 30)
    .option('--cluster-secret <secret>', CLUSTER_SECRET_HELP)
    .option('--reply-tls-ca <file>', 'PEM CA that gateways\' TLS reply channel certificates chain to (default: the system CAs)')
    .option('--direct-replies <bool>', 'connect to gateways\' direct channels to reply and fetch tensors (false: everything through Redis, and no request makes this worker connect where its envelope says)', parseBool, true)
    .option('--gpus <all|0,2>', 'run one worker process per listed GPU (nvidia-smi indices), each seeing only its GPU and registering device gpu:<index>; a crashed one is started again')
    .option('--allow-gpu-metrics <bool>', 'report the nv_gpu_* gauges of this worker\'s GPUs', parseBool)
    .addOption(new Option('--worker-device <device>', 'the device this worker registers (set by --gpus)').default('cpu').hideHelp())
    .action(async (o: Record<string, unknown>, cmd: Command) => {
      const logger = loggerFrom(o);
      if (o['gpus'] !== undefined) {
        await superviseGpuWorkers(o, cmd, logger);
        return;
      }
      const secret = clusterSecret(o);
      const gpuQuery = gpuQueryFrom();
      const gpus = await findGpus({ gpuQuery, ...(o['allowGpuMetrics'] !== undefined ? { allowGpuMetrics: o['allowGpuMetrics'] as boolean } : {}) }, logger);
      const server = await InferenceServer.create({
        modelRepositories: o['modelRepository'] as string[],
        backends: [new OnnxRuntimeBackend({ gpus, logger }), new JavaScriptBackend({ logger })],
        autoCompleteConfig: o['disableAutoCompleteConfig'] !== true,
        modelControlMode: o['modelControlMode'] as 'none' | 'explicit' | 'poll',
        repositoryPollMs: (o['repositoryPollSecs'] as number) * 1000,
        startupModels: o['loadModel'] as string[],
        ...(o['modelConfigName'] ? { modelConfigName: o['modelConfigName'] as string } : {}),
        backendConfig: parseBackendConfig(o['backendConfig'] as string[]),
        responseCacheBytes: cacheBytesFrom(o),
        ...(o['maxInstancesPerModel'] !== undefined ? { maxInstancesPerModel: o['maxInstancesPerModel'] as number } : {}),
        modelLoadTimeoutMs: (o['modelLoadTimeoutSecs'] as number) * 1000,
        rateLimit: o['rateLimit'] as 'off' | 'execution_count',
        rateLimitResources: parseRateLimitResources(o['rateLimitResource'] as string[] | undefined),
        logger,
      });
      process.stderr.write(modelTable(server.repositoryIndex()) + '\n');
      const consumer = new StreamConsumer(server, {
        redis: o['redis'] as string,
        prefix: o['redisPrefix'] as string,
        maxInflight: o['maxInflight'] as number,
        claimIdleMs: o['claimIdleMs'] as number,
        ...(o['workerId'] ? { workerId: o['workerId'] as string } : {}),
        ...(secret ? { clusterSecret: secret } : {}),
        ...(o['replyTlsCa'] ? { replyTlsCa: readFileSync(o['replyTlsCa'] as string) } : {}),
        directReplies: o['directReplies'] !== false,
        device: o['workerDevice'] as string,
        logger,
      });
      await consumer.start();
      // Each worker serves its own metrics: Prometheus scrapes every worker (README, Scaling out).
      const source: MetricsSource = {
        metricsSnapshot: () => server.metricsSnapshot(),
        observeLatencies: (listener) => server.observeLatencies(listener),
        responseCacheStats: () => server.responseCacheStats(),
        clusterRejected: () => consumer.auth.rejected,
        ...(gpus.gpus.length > 0 ? { gpuStatus: async () => (await queryGpus(gpuQuery)).gpus } : {}),
      };
      const metricsAddress = (o['metricsAddress'] as string | undefined) ?? '0.0.0.0';
      const metrics = o['allowMetrics'] ? await startMetricsServer(source, o['metricsPort'] as number, metricsAddress, metricsConfigFrom(o)) : undefined;
      if (metrics) logger.info(`Started Metrics Service at ${metricsAddress}:${metrics.port}`);
      logger.info(`Started worker ${consumer.workerId} on Redis ${redactRedisUrl(o['redis'] as string)}${secret ? ', cluster secret set' : ''}`);
      if (!secret) logger.warning('no --cluster-secret: anyone who can write to this Redis can make this worker load models and run requests (README, Security)');
      onSignals(async () => {
        await metrics?.close();
        const timeoutMs = (o['exitTimeoutSecs'] as number) * 1000;
        const deadline = Date.now() + timeoutMs;
        await consumer.stop(timeoutMs);
        // The worker has left its streams: no continuation of a live sequence can reach it, so
        // the core waits for what it holds, not for sequences to end (their idle timeout), and
        // only for what is left of the exit timeout.
        await server.stop(Math.max(0, deadline - Date.now()), { waitForSequences: false });
      });
    });
}
