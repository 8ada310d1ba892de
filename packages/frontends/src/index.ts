/** @module @triode/frontends: the frontends (HTTP now; gRPC and the Redis backplane follow). */
export { createHttpApp, HTTP_EXTENSIONS, serverExtensions } from './http/http-server.js';
export { SystemSharedMemory, RequestSharedMemory, DEFAULT_MAX_SHARED_MEMORY_REGIONS, type SystemSharedMemoryOptions, type SystemSharedMemoryRegionStatus, type SharedMemoryWindow } from './shared-memory/system-shared-memory.js';
export { DEFAULT_HTTP_MAX_INPUT_SIZE, type HttpOptions } from './http/http-options.js';
export { DecompressionBudget, DEFAULT_MAX_DECOMPRESSED_REQUEST_BYTES, type DecompressionHold } from './decompression-budget.js';
export { HTTP_STATUS, httpError } from './error-mapping.js';
export { parseInferRequest, encodeInferResponse, DEFAULT_MAX_JSON_OUTPUT_SIZE, type OutputEncoding, type ParsedInfer, type EncodedResponse } from './http/infer-codec.js';
export { jsonToTensorData, tensorDataToJson } from './http/json-tensor.js';
export { startHttpServer, DEFAULT_HTTP_SERVER_OPTIONS, type HttpServerHandle, type HttpServerOptions } from './http/listen.js';
export { HttpLifecycle } from './http/lifecycle.js';
export { createMetricsRegistry, parseMetricsConfig, startMetricsServer, DEFAULT_SUMMARY_QUANTILES, type MetricsConfig, type MetricsSource, type MetricsServerHandle, type ModelMetricsEntry } from './metrics/metrics.js';
export { startGrpcServer, type GrpcServerOptions, type GrpcServerHandle, type GrpcKeepalive, type GrpcTls } from './grpc/grpc-server.js';
export { GRPC_STATUS, grpcError } from './grpc/grpc-status.js';
export { parseRestrictions, RESTRICTED_GROUPS, type Restrictions, type RestrictedGroup } from './control/restricted.js';
export { TraceSettings } from './control/trace-settings.js';
export { MeasuredBackplane } from './metrics/measured-backplane.js';
export { Tracer, TRACE_FLUSH_AT_EXIT_MS, traceNow, type ActiveTrace, type TraceRecord, type TracerOptions, type TraceFileSystem, type TraceFileHandle } from './control/tracer.js';
export { forwardHeaders, headerPattern } from './control/header-forward.js';
