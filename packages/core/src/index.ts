/**
 * @module @triode/core: the transport-free heart of Triode (Triton's core). What is exported here
 * is the package's surface, on purpose: the server and its options, the seams (Backend, Backplane,
 * AsyncInference, Model, Scheduler), requests, tensors, configs, errors and logging, and the few
 * helpers the frontends, backends and cluster share. Everything else is internal.
 */

// Errors, clocks, logging.
export { TriodeError, Errors, echo, isErrorCode, toWireError, fromWireError, thrownText, MAX_ECHO_CHARS, type ErrorCode, type WireError } from './errors.js';
export { setOwn } from './own-property.js';
export { MAX_TIMER_MS, monotonicNs, systemClock, settleWithin, abortable, timerMs, type Clock } from './clock.js';
export { createLogger, silentLogger, LogSettings, type Logger, type LoggerOptions, type LogLevel } from './logger.js';
export { RateLimitedWarning } from './rate-limited-warning.js';

// The server, its models and their lifecycle.
export {
  InferenceServer, parseModelVersion, CORE_EXTENSIONS, MAX_BLS_DEPTH, DEFAULT_MODEL_LOAD_TIMEOUT_MS, MAX_LOAD_CALLS, defaultMaxInstancesPerModel,
  onlyLastInstanceCountDiffers, instanceCountOf,
  type ServerOptions, type ServerMetadata, type ModelMetadata, type LoadedModel, type ModelReadyState, type LoadOptions, type ModelIndexEntry,
} from './server.js';
export type { Model } from './model.js';
export { ModelVersion } from './backend-model.js';
export { EnsembleModel, validateEnsemble, type ComposingModel } from './ensemble-model.js';
export { MAX_WARMUP_INPUT_BYTES, MAX_WARMUP_SAMPLE_BYTES } from './model-warmup.js';

// Requests and responses.
export {
  normalizeRequest, applyReshape, schedulePolicyParams, sequenceParams, requestControls, MAX_CORRELATION_ID_BYTES,
  REQUEST_FLAG_SEQUENCE_START, REQUEST_FLAG_SEQUENCE_END, TRITON_REQUEST_PARAMETERS, type RequestControls,
  type InferenceRequest, type InferenceResponse, type ParameterValue, type RequestedOutput, type RequestTrace, type CancelSignal, type ResponseHandler, type InferStreamOptions, CancelToken,
} from './infer-request.js';
export { classify } from './classification.js';

// The seams: backends, backplanes, async inference, schedulers.
export type { Backend, BackendModel, BackendModelInstance, ModelContext, AutoCompleteContext, ExecuteRequest, ExecuteResponse, ExecuteResult, ExecuteTimings } from './backend-api.js';
export { LocalBackplane, type Backplane, type ClusterWorkerInfo, type StreamBacklog, type UnloadOptions } from './backplane.js';
export type { AsyncInference, JobStatus, OutputEncoding } from './async-inference.js';
export type { Scheduler, Schedulable, BatchRunner, InstanceGate, RejectHandler } from './scheduler/scheduler.js';
export { createScheduler } from './scheduler/create-scheduler.js';
export { DeadlineHeap, type Deadline } from './scheduler/deadline-heap.js';
export { DynamicBatchScheduler, type DynamicBatchSchedulerOptions } from './scheduler/dynamic-batch-scheduler.js';
export { RateLimiter, type RateLimitResource, type RateLimiterOptions, type RateLimitedInstance, type RateLimitedInstanceSpec } from './scheduler/rate-limiter.js';

// Tensors and their ownership.
export type { Tensor } from './tensor/tensor.js';
export {
  DATA_TYPES, isDataType, isDataOf, arrayClassName, dataTypeByteSize, typedArrayView, viewBytesAs, dataBytes, configTypeToDataType, dataTypeToConfigType, elementCount, elementCountExact,
  type DataType, type TensorData,
} from './tensor/data-type.js';
export { serializeBytesTensor, deserializeBytesTensor, countBytesElements, checkBytesElements } from './tensor/bytes-tensor.js';
export { markTransferable, isTransferable, isOwned, lend, give, transferList, claimOwnership, copyTensorData, releaseOwnedBuffers } from './tensor/transferable.js';

// Model configuration.
export type {
  ModelConfig, ConfigDataType, ModelTensorReshape, ModelInput, ModelOutput, BatchInputKind, BatchInput, BatchOutput, ModelVersionPolicy, InstanceKind,
  ModelInstanceGroup, ModelQueuePolicy, ModelDynamicBatching, SequenceControl, SequenceState, ModelSequenceBatching, EnsembleStep, ModelEnsembling,
  ModelWarmup, ModelOptimizationPolicy,
} from './model-config/model-config.js';
export { parsePbtxt, PbtxtSyntaxError } from './model-config/pbtxt-parser.js';
export { modelConfigToJson, modelConfigFromJson } from './model-config/model-config-json.js';
export { normalizeModelConfig, autoCompleteBackendFields, PLATFORMS, DEFAULT_MODEL_FILENAMES } from './model-config/normalize-model-config.js';
export { validateModelConfig } from './model-config/validate-model-config.js';
export { modelMetricSettings, checkMetricReporterConfig, CUSTOMIZABLE_HISTOGRAM_FAMILIES, METRIC_CONFIG_LIMITS, type ModelMetricSettings, type ModelMetrics } from './model-config/metric-reporter-config.js';
export { CONFIG_WARNINGS_PARAMETER } from './model-config/config-warnings.js';

// Model repositories.
export { MAX_LABELS, MAX_LABEL_BYTES, type Labels } from './model-repository/label-provider.js';
export { scanRepositories, readModelConfig, readRepositoryFile, resolveInside, MAX_CONFIG_BYTES, type RepositoryModel } from './model-repository/repository-fs.js';
export { checkModelName, compareModelNames, modelNameProblem, MAX_MODEL_NAME_BYTES } from './model-repository/model-name.js';
export { FILE_OVERRIDE_PREFIX, MAX_OVERRIDE_FILES, overrideFilesToJson, overrideFilesFromJson } from './model-repository/load-override.js';
export { readAutoCompletedConfig } from './model-repository/autocomplete-result.js';
export { cancelledByUnload } from './model-repository/model-repository-manager.js';

// Statistics and the response cache.
export { InferStats, type ModelStatistics, type StatDuration, type FailureReason, type LatencyObservation, type RequestLatencies, type CacheMissLatency } from './stats/infer-stats.js';
export type { ResponseCacheStats } from './cache/response-cache.js';

// The protocol definitions both frontends and the client use.
export { PROTO_DIR, PROTO_FILES } from './proto-files.js';
export { messageType, serviceDefinition, protoRoot, toNumber, toPlain, type GrpcMethodDefinition } from './protocol/grpc-proto.js';
export { ProtoWire, contentsElements, countVarints } from './protocol/proto-wire.js';
export { parameterValue, parameterKind, parametersFromMessage, parametersToMessage, inferParameter, longValue, type InferParameterMessage, type ProtoLong } from './protocol/grpc-parameters.js';

// GPUs: discovery, placement, execution providers.
export * from './gpu/index.js';
