/** @module @triode/gateway: the frontends (HTTP now; gRPC and the Redis backplane follow). */
export { createHttpApp, HTTP_EXTENSIONS } from './http/http-server.js';
export { DEFAULT_HTTP_MAX_INPUT_SIZE, type HttpOptions } from './http/http-options.js';
export { HTTP_STATUS, httpError } from './error-mapping.js';
export { parseInferRequest, encodeInferResponse, type OutputEncoding, type ParsedInfer, type EncodedResponse } from './http/infer-codec.js';
export { jsonToTensorData, tensorDataToJson } from './http/json-tensor.js';
export { startHttpServer, type HttpServerHandle } from './http/listen.js';
export { HttpLifecycle } from './http/lifecycle.js';
export { RedisBackplane, type RedisBackplaneOptions } from './redis/redis-backplane.js';
export { AsyncJobs, type AsyncJobsOptions, type JobStatus } from './async/async-jobs.js';
export { createMetricsRegistry, startMetricsServer, type MetricsSource, type MetricsServerHandle } from './metrics/metrics.js';
