/**
 * @module The seam between frontends and execution. `LocalBackplane` calls an in-process
 * InferenceServer (embedded mode); the gateway's RedisBackplane reaches workers through Redis
 * (cluster mode). Frontends only ever talk to a Backplane.
 */
import { Errors } from './errors.js';
import type { InferenceRequest, InferenceResponse, InferStreamOptions, ResponseHandler } from './infer-request.js';
import type { InferenceServer, LoadOptions, ModelIndexEntry, ModelMetadata, ServerMetadata } from './server.js';
import type { ModelStatistics } from './stats/infer-stats.js';

/** A live worker as `GET /v2/cluster/workers` lists it (snake_case, as Triton's JSON). */
export interface ClusterWorkerInfo {
  id: string;
  host: string;
  pid: number | null;
  device: string;
  inflight: number;
  started_ms: number | null;
  heartbeat_ms: number;
  models: { name: string; version?: string; state: string }[];
}

/** A model's request stream as the backlog metrics report it (what an autoscaler reads). */
export interface StreamBacklog {
  model: string;
  /** Entries in the stream (waiting, read and not acknowledged). */
  entries: number;
  /** Entries not yet read by any worker. */
  waiting: number;
  /** Entries read by a worker and not acknowledged (running, or held by a dead worker). */
  pending: number;
  /** Age of the oldest pending entry, in seconds (0 when none). */
  oldestPendingAgeSeconds: number;
}

/** Options of `Backplane.unloadModel`. */
export interface UnloadOptions {
  /** Also unload the models of its steps that nothing else uses (`unload_dependents`). @default false */
  unloadDependents?: boolean;
  /** Aborted when the client that asked has left. @default none */
  signal?: AbortSignal;
}

/** What a frontend needs from the server behind it. Every method may reject with a TriodeError. */
export interface Backplane {
  isLive(): Promise<boolean>;
  isReady(): Promise<boolean>;
  serverMetadata(): Promise<ServerMetadata>;
  modelReady(name: string, version?: number): Promise<boolean>;
  modelMetadata(name: string, version?: number): Promise<ModelMetadata>;
  modelConfig(name: string, version?: number): Promise<Record<string, unknown>>;
  modelStatistics(name?: string, version?: number): Promise<ModelStatistics[]>;
  repositoryIndex(readyOnly?: boolean): Promise<ModelIndexEntry[]>;
  infer(request: InferenceRequest): Promise<InferenceResponse>;
  /** Streams a request's responses (0..N for decoupled models); resolves after the last. */
  inferStream(request: InferenceRequest, onResponse: ResponseHandler, options?: InferStreamOptions): Promise<void>;
  /** Loads or reloads a model (explicit model control); `config` / `files` override its files. */
  loadModel(name: string, options?: LoadOptions): Promise<void>;
  /**
   * Unloads a model (explicit model control). `signal`: its client has left; a cluster gateway
   * then gives up an unload still waiting for its turn there (one already sent goes on).
   */
  unloadModel(name: string, options?: UnloadOptions): Promise<void>;
  /** Cluster mode: the live workers (`GET /v2/cluster/workers`); absent in embedded mode. */
  clusterWorkers?(): Promise<ClusterWorkerInfo[]>;
  /**
   * Cluster mode: takes back a request sent with `infer` (this very object) and still waiting for
   * a worker to take it: no worker will run it, and its `infer` fails CANCELLED. Resolves true if
   * it was taken back; false, and the request goes on, once a worker has taken it, or when it is
   * no longer waiting (or was never sent here). Absent in embedded mode.
   */
  withdraw?(request: InferenceRequest): Promise<boolean>;
}

/** The embedded mode's backplane: direct calls into an InferenceServer, nothing serialized. */
export class LocalBackplane implements Backplane {
  readonly server: InferenceServer;

  constructor(server: InferenceServer) {
    this.server = server;
  }

  // While the server exits, Triton's IsLive and IsReady answer UNAVAILABLE "Server exiting" (HTTP
  // 503 with it as the error, gRPC UNAVAILABLE), not false. Triton: core/src/server.cc.
  async isLive(): Promise<boolean> {
    if (this.server.exiting) throw Errors.serverExiting();
    return this.server.isLive();
  }

  async isReady(): Promise<boolean> {
    if (this.server.exiting) throw Errors.serverExiting();
    return this.server.isReady();
  }

  async serverMetadata(): Promise<ServerMetadata> {
    return this.server.metadata();
  }

  // While the server exits, Triton's ModelIsReady and ModelReadyVersions (which its model metadata
  // and statistics call) answer UNAVAILABLE "Server not ready"; GetModel, and so the config, still
  // answers. Triton: core/src/server.cc InferenceServer::ModelIsReady, ModelReadyVersions.
  async modelReady(name: string, version?: number): Promise<boolean> {
    if (this.server.exiting) throw Errors.serverNotReady();
    return this.server.modelReady(name, version);
  }

  async modelMetadata(name: string, version?: number): Promise<ModelMetadata> {
    // The model is looked up first (an unknown one is NOT_FOUND), then its ready versions.
    const metadata = this.server.modelMetadata(name, version);
    if (this.server.exiting) throw Errors.serverNotReady();
    return metadata;
  }

  async modelConfig(name: string, version?: number): Promise<Record<string, unknown>> {
    return this.server.modelConfig(name, version);
  }

  async modelStatistics(name?: string, version?: number): Promise<ModelStatistics[]> {
    if (this.server.exiting) throw Errors.serverNotReady();
    return this.server.modelStatistics(name, version);
  }

  // The repository extension too: Triton's RepositoryIndex, LoadModel and UnloadModel answer
  // UNAVAILABLE "Server not ready" once the server is not SERVER_READY (core/src/server.cc), so no
  // load starts while the models are being stopped.
  async repositoryIndex(readyOnly = false): Promise<ModelIndexEntry[]> {
    if (this.server.exiting) throw Errors.serverNotReady();
    return this.server.repositoryIndex(readyOnly);
  }

  infer(request: InferenceRequest): Promise<InferenceResponse> {
    return this.server.infer(request);
  }

  inferStream(request: InferenceRequest, onResponse: ResponseHandler, options?: InferStreamOptions): Promise<void> {
    return this.server.inferStream(request, onResponse, options);
  }

  async loadModel(name: string, options?: LoadOptions): Promise<void> {
    if (this.server.exiting) throw Errors.serverNotReady();
    return this.server.loadModel(name, options);
  }

  async unloadModel(name: string, options?: UnloadOptions): Promise<void> {
    if (this.server.exiting) throw Errors.serverNotReady();
    // Nothing waits for a turn here: the signal is not needed.
    return this.server.unloadModel(name, { unloadDependents: options?.unloadDependents === true });
  }
}
