/**
 * @module @triode/client: HTTP and gRPC clients for any KServe v2 / Triton inference server, with
 * typed tensors in and out, and the `perf` load tool behind `triode perf`.
 */
export { HttpClient, decodeInferResponse, type HttpClientOptions } from './http-client.js';
export { GrpcClient, type GrpcClientOptions, type InferStream } from './grpc-client.js';
export { InferenceServerError } from './errors.js';
export {
  InferResult, splitBytes,
  type InferenceClient, type InferInput, type InferInputInSharedMemory, type InferInputWithData, type InferOptions, type InputData, type LoadModelOptions,
  type OutputTensor, type PreparedInfer, type RequestedOutput, type SequenceOptions, type SharedMemoryWindow, type SystemSharedMemoryRegionStatus,
  type DataType, type ModelIndexEntry, type ModelMetadata, type ModelStatistics, type ParameterValue, type ServerMetadata, type TensorData,
} from './types.js';
export { inputTensorData } from './tensor-data.js';
export { SharedMemoryError, SystemSharedMemoryRegion, sharedMemoryObjectName, type SystemSharedMemoryRegionOptions } from './system-shared-memory.js';
export { runPerf, type PerfOptions, type PerfResult } from './perf/perf-runner.js';
export { perfInputs, type InputDataSource } from './perf/perf-inputs.js';
export { perfTable, perfCsv } from './perf/perf-report.js';
export { DEFAULT_OUTPUT_SHARED_MEMORY_SIZE } from './perf/perf-shared-memory.js';
