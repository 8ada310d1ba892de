/**
 * @module The HTTP/REST frontend (KServe v2 + Triton's extensions) as a Hono app: one sub-app per
 * route group, Triton's error bodies and status codes.
 * Triton: server/src/http_server.cc
 */
import { Hono } from 'hono';
import { createLogger, type Backplane } from '@triode/core';
import { httpError } from '../error-mapping.js';
import { CONTROL_MAX_BODY_SIZE, UnsupportedEncodingError, bodyLimit } from './body.js';
import { DEFAULT_MAX_JSON_OUTPUT_SIZE } from './infer-codec.js';
import { HttpLifecycle } from './lifecycle.js';
import { httpInferFastPath, setInferFastPath } from './infer-fast-path.js';
import { restrictedApi } from './restricted-api.js';
import { DEFAULT_HTTP_MAX_INPUT_SIZE, type HttpDeps, type HttpOptions } from './http-options.js';
import { healthRoutes } from './routes/health.js';
import { asyncRoutes } from './routes/async.js';
import { clusterRoutes } from './routes/cluster.js';
import { loggingRoutes } from './routes/logging.js';
import { modelNameGuard, repositoryRoutes } from './routes/repository.js';
import { traceRoutes } from './routes/trace.js';
import { generateRoutes } from './routes/generate.js';
import { inferRoutes } from './routes/infer.js';
import { modelRoutes } from './routes/model.js';
import { modelPaths } from './routes/model-params.js';
import { statsRoutes } from './routes/stats.js';
import { SHARED_MEMORY_PATHS, sharedMemoryRoutes } from './routes/shared-memory.js';
import { RequestSharedMemory } from '../shared-memory/system-shared-memory.js';
import { DecompressionBudget } from '../decompression-budget.js';

/**
 * The extensions Triode implements, for the server metadata: Triton's list in Triton's order (less
 * the shared-memory ones), then `generate`, which Triton serves but does not list. A server that
 * lets clients use system shared memory lists it too (serverExtensions); CUDA shared memory is
 * never served. Triton: core/src/server.cc
 */
export const HTTP_EXTENSIONS = [
  'classification', 'sequence', 'model_repository', 'model_repository(unload_dependents)', 'schedule_policy', 'model_configuration',
  'binary_tensor_data', 'parameters', 'statistics', 'trace', 'logging', 'generate',
];

/** The server metadata's extensions: HTTP_EXTENSIONS, with `system_shared_memory` in Triton's place when clients may use it. */
export function serverExtensions(options: { systemSharedMemory: boolean }): string[] {
  if (!options.systemSharedMemory) return [...HTTP_EXTENSIONS];
  const at = HTTP_EXTENSIONS.indexOf('model_configuration') + 1;
  return [...HTTP_EXTENSIONS.slice(0, at), 'system_shared_memory', ...HTTP_EXTENSIONS.slice(at)];
}

/** Paths Triton routes; any other method on them is 405. */
const KNOWN_PATHS = [
  '/v2', '/v2/health/live', '/v2/health/ready', '/v2/models/stats',
  ...modelPaths(''), ...modelPaths('/ready'), ...modelPaths('/config'), ...modelPaths('/stats'), ...modelPaths('/infer'),
  ...modelPaths('/generate'), ...modelPaths('/generate_stream'), ...modelPaths('/infer_async'),
  '/v2/jobs/:id', '/v2/jobs/:id/result', '/v2/cluster/workers', '/v2/logging', '/v2/trace/setting', '/v2/models/:model/trace/setting',
  '/v2/repository/index', '/v2/repository/:repository/index', '/v2/repository/models/:model/load', '/v2/repository/models/:model/unload',
  '/v2/repository/:repository/models/:model/load', '/v2/repository/:repository/models/:model/unload',
  ...SHARED_MEMORY_PATHS.map(([, path]) => path),
];

/** The answer to HEAD: 405 on a path Triton routes (no handler takes it), 404 elsewhere. */
const headAnswer = new Hono();
for (const p of KNOWN_PATHS) headAnswer.all(p, (c) => c.json({ error: 'Method Not Allowed' }, 405));
headAnswer.notFound((c) => c.json({ error: 'Not Found' }, 404));

/** Routes that read their own body, with `--http-max-input-size` (inference). */
const INFER_ROUTE = /^\/v2\/models\/[^/]+(?:\/versions\/[^/]+)?\/(?:infer|infer_async|generate|generate_stream)$/;
/** Model load: its body may carry model files (`file:` overrides), so it gets `--http-max-input-size`. */
const LOAD_ROUTE = /^\/v2\/repository(?:\/[^/]+)?\/models\/[^/]+\/load$/;

/** The body limit of a path: undefined where the route reads the body itself. */
function bodyLimitOf(path: string, maxInputSize: number): number | undefined {
  if (INFER_ROUTE.test(path)) return undefined;
  return LOAD_ROUTE.test(path) ? maxInputSize : CONTROL_MAX_BODY_SIZE;
}

/**
 * Builds the HTTP app over a backplane. Serve it with @hono/node-server, or call `app.request()`.
 * @example const app = createHttpApp(new LocalBackplane(server)); serve({ fetch: app.fetch, port: 8000 });
 */
export function createHttpApp(backplane: Backplane, options: HttpOptions = {}): Hono {
  const maxInputSize = options.maxInputSize ?? DEFAULT_HTTP_MAX_INPUT_SIZE;
  if (!Number.isSafeInteger(maxInputSize) || maxInputSize <= 0) throw new RangeError('options.maxInputSize must be a positive integer');
  const maxJsonOutputSize = options.maxJsonOutputSize ?? DEFAULT_MAX_JSON_OUTPUT_SIZE;
  if (!Number.isSafeInteger(maxJsonOutputSize) || maxJsonOutputSize <= 0) throw new RangeError('options.maxJsonOutputSize must be a positive integer');
  const logger = options.logger ?? createLogger();
  const decompressionBudget = options.decompressionBudget ?? new DecompressionBudget();
  const deps: HttpDeps = {
    backplane, maxInputSize, maxJsonOutputSize, decompressionBudget,
    ...(options.tracer ? { tracer: options.tracer } : {}),
    ...(options.headerForwardPattern ? { headerForwardPattern: options.headerForwardPattern } : {}),
    ...(options.sseStallMs !== undefined ? { sseStallMs: options.sseStallMs } : {}),
  };
  const regions = options.sharedMemory;
  if (regions) deps.sharedMemory = () => new RequestSharedMemory(regions, maxInputSize);
  const app = new Hono();
  const lifecycle = options.lifecycle ?? new HttpLifecycle();
  app.use(lifecycle.middleware());
  if (options.restrictions?.size) app.use(restrictedApi(options.restrictions));
  // Hono serves HEAD with the GET route; Triton's handlers take only their own method (HEAD on a
  // GET path is 405, as POST is), after the restriction check.
  app.use(async (c, next) => (c.req.method === 'HEAD' ? headAnswer.fetch(c.req.raw) : next()));
  // A hostile model name in a load/unload path is refused before the body is read (issue #14).
  app.use(modelNameGuard());
  // After the restriction check: a refused request's body is never read.
  app.use(bodyLimit((path) => bodyLimitOf(path, maxInputSize), decompressionBudget));
  app.route('/', statsRoutes(deps));
  app.route('/', healthRoutes(deps));
  app.route('/', inferRoutes(deps));
  app.route('/', generateRoutes(deps));
  app.route('/', asyncRoutes(deps, options.asyncJobs));
  app.route('/', loggingRoutes(options.logSettings));
  app.route('/', traceRoutes(backplane, options.traceSettings));
  app.route('/', repositoryRoutes(deps));
  app.route('/', clusterRoutes(deps));
  app.route('/', modelRoutes(deps));
  app.route('/', sharedMemoryRoutes(regions));
  for (const p of KNOWN_PATHS) app.all(p, (c) => c.json({ error: 'Method Not Allowed' }, 405));
  app.notFound((c) => c.json({ error: 'Not Found' }, 404));
  app.onError((err, c) => {
    const { status, body } = httpError(err, logger);
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    if (err instanceof UnsupportedEncodingError) headers['Accept-Encoding'] = 'gzip, deflate';
    return c.body(body, status, headers);
  });
  // What startHttpServer serves `/infer` with: the same answers as the routes above, without Hono.
  setInferFastPath(app, httpInferFastPath(deps, { lifecycle, logger, ...(options.restrictions?.size ? { restrictions: options.restrictions } : {}) }));
  return app;
}
