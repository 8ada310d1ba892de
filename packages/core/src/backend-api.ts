/**
 * @module The seam between the core and the code that runs models: Triton's TRITONBACKEND_* lifecycle.
 * Rules kept from Triton: no concurrent `execute` on one instance; if `execute` throws, the core
 * answers every request of the batch with that error. Triode's own: an instance that can run nothing
 * more (its GPU was lost) says so with `TriodeError.instanceLost` (`Errors.instanceLost`), thrown or
 * as a response's error; the core then marks the model version not ready until it is loaded again.
 * Triton: core/include/triton/core/tritonbackend.h
 */
import type { TriodeError } from './errors.js';
import type { ModelConfig, ModelInstanceGroup } from './model-config/model-config.js';
import type { CancelSignal, InferenceRequest, InferenceResponse, ParameterValue } from './infer-request.js';
import type { Tensor } from './tensor/tensor.js';

/** What a backend knows of the model it loads. */
export interface ModelContext {
  name: string;
  version: number;
  /** Absolute path of the model directory. */
  modelPath: string;
  /** Absolute path of the version folder. */
  versionPath: string;
  /** The normalized, validated config. */
  config: ModelConfig;
  /** `--backend-config=<backend>,<key>=<value>` settings for this backend. */
  backendConfig: Record<string, string>;
  /**
   * Runs a request on any loaded model of the server (business logic scripting, BLS). Absent
   * when the model is loaded outside a server.
   */
  infer?: (request: InferenceRequest) => Promise<InferenceResponse>;
  /**
   * Aborts when the load is given up (`--model-load-timeout-secs`, an unload, a shutdown). The core
   * then stops waiting and finalizes what it got; a backend should stop initializing too (a
   * thread stuck in a model's initialize() is terminated).
   */
  signal?: AbortSignal;
}

/** Arguments of `Backend.autoCompleteConfig`. */
export interface AutoCompleteContext {
  name: string;
  modelPath: string;
  /** Version folder to read the model from (the newest the version policy loads), if any. */
  versionPath: string | undefined;
  backendConfig: Record<string, string>;
  /** Aborts when the load's time (`--model-load-timeout-secs`) is up: stop, and free what was started. */
  signal?: AbortSignal;
}

/** One request as an instance executes it (already normalized by the core). */
export interface ExecuteRequest {
  /**
   * Owned or lent (`Tensor.owned`, `isOwned`): a backend may move (transfer) the buffer of an owned
   * input to its thread and must copy or leave a lent one, whatever the buffer's size or offset.
   */
  inputs: Tensor[];
  /** Names of the outputs to produce. */
  outputNames: string[];
  /** First dim of the inputs when the model batches, else 0. */
  batchSize: number;
  /**
   * The request's custom parameters (none of TRITON_REQUEST_PARAMETERS, which the core acts on).
   * Read only: requests without any share one frozen object.
   */
  parameters: Record<string, ParameterValue>;
  /** The request's id, when the client gave one. */
  id?: string;
  /**
   * The request's correlation id (`sequence_id`: a uint64 as a bigint, or a string), whatever the
   * model's scheduler; absent when it has none (TRITONBACKEND_RequestCorrelationId(String)).
   */
  correlationId?: bigint | string;
  /**
   * REQUEST_FLAG_SEQUENCE_START / REQUEST_FLAG_SEQUENCE_END bits (`sequence_start`,
   * `sequence_end`); absent when none is set (TRITONBACKEND_RequestFlags).
   */
  flags?: number;
  /** The request's `timeout` in µs; absent when it gave none (TRITONBACKEND_InferenceRequestTimeoutMicroseconds). */
  timeoutUs?: number;
  /** How many BLS calls deep this request is (0: it came from a client). */
  blsDepth?: number;
  /**
   * The models of the BLS call chain that led to this request, this model last. Read only: a
   * client's requests share one frozen array.
   */
  blsChain?: string[];
  /**
   * Decoupled models only (`model_transaction_policy { decoupled: true }`): where the backend
   * sends this request's 0..N responses, the last with `final` (or a final call with no response).
   * `execute` then returns no responses for the request. A promise back means the request's client
   * is not ready for more: a backend that can, waits for it before sending this request's next.
   */
  respond?: (response: ExecuteResponse | undefined, final: boolean) => void | Promise<void>;
  /**
   * The client's cancellation (a cancelled gRPC call or stream, a client that went away): a
   * backend may stop the request early (a decoupled model's responses after it are dropped).
   */
  signal?: CancelSignal;
}

/**
 * One request's outcome: its outputs, or an error that fails only that request. An output made for
 * this response alone says `owned: true` (its receiver may move it on); one whose buffer other
 * responses or the backend still use is lent (`owned` false or unset).
 */
export type ExecuteResponse = { outputs: Tensor[]; error?: undefined } | { outputs?: undefined; error: TriodeError };

/** Durations of one execution, for the statistics extension (nanoseconds). */
export interface ExecuteTimings {
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

/** The result of executing a batch: one response per request, in order. */
export interface ExecuteResult {
  responses: ExecuteResponse[];
  timings?: ExecuteTimings;
}

/** One instance of a model: an execution context (for onnxruntime, a thread with a session). */
export interface BackendModelInstance {
  /**
   * Executes a batch. With the default `pipelineDepth` of 1 it is never called while a previous
   * call on this instance is running. An error with `instanceLost` makes the version not ready:
   * no instance of it is given work again.
   */
  execute(requests: ExecuteRequest[]): Promise<ExecuteResult>;
  /**
   * How many batches the scheduler may hand this instance at once. An instance that runs its
   * batches one after another in order on its own thread can take 2: the next batch then waits in
   * the thread's inbox instead of a round trip away, so the thread never idles between batches.
   * Still, no two executions of one instance ever overlap. @default 1
   */
  readonly pipelineDepth?: number;
  /**
   * Releases the instance. `signal` aborts when the core stops waiting (the unload's time is up):
   * what still runs (a model's code that never returns) must be ended then, not left running.
   */
  finalize(signal?: AbortSignal): Promise<void>;
}

/** A loaded model (TRITONBACKEND_Model). */
export interface BackendModel {
  /**
   * How many instances `group` gets. Absent: `group.count`. A backend that places instances on
   * GPUs answers Triton's rule for KIND_GPU: `count` on each GPU the group lists (all when none).
   * @throws TriodeError when the group cannot be placed (a listed GPU that is not there)
   */
  instanceCount?(group: ModelInstanceGroup): Promise<number>;
  /** Creates instance `index` (0-based within the model) of `group`. */
  instanceInitialize(group: ModelInstanceGroup, index: number): Promise<BackendModelInstance>;
  finalize(): Promise<void>;
}

/** A backend (TRITONBACKEND_Backend), registered under the name used in `config.backend`. */
export interface Backend {
  readonly name: string;
  /**
   * Whether the backend implements ragged batching, as Triton's backend utilities do
   * (BackendInputCollector, BackendOutputResponder): it gives an `allow_ragged_batch` input to the
   * model as its own way of joining requests of different shapes, makes the `batch_input` tensors
   * and splits the `batch_output`s. A model whose config uses any of them does not load on a backend
   * without it (UNSUPPORTED). @default false
   */
  readonly raggedBatching?: boolean;
  /** Fills what the config leaves out from the model file itself (Triton's auto-complete). */
  autoCompleteConfig?(config: ModelConfig, ctx: AutoCompleteContext): Promise<void>;
  modelInitialize(ctx: ModelContext): Promise<BackendModel>;
  finalize?(): Promise<void>;
}
