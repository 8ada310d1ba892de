/**
 * @module @triode/cluster: cluster mode over Redis, both ends of it. The gateway side
 * (`RedisBackplane`: a core `Backplane` that puts requests on Redis Streams and gathers the
 * replies; `AsyncJobs`: async inference on BullMQ), the worker side (`StreamConsumer`: reads the
 * streams and feeds an `InferenceServer`), and what they share: the envelope codec, key names, the
 * registry, the cluster secret's signatures, the direct reply channel's frames and the Redis
 * connections. Frontends and core know nothing of it.
 */
export { RedisBackplane, type RedisBackplaneOptions, type DirectReplyOptions } from './gateway/redis-backplane.js';
export { AsyncJobs, DEFAULT_ASYNC_MAX_REQUEST_BYTES, type AsyncJobsOptions } from './async/async-jobs.js';
export { StreamConsumer, MAX_DELIVERIES, type StreamConsumerOptions } from './worker/stream-consumer.js';
export { ClusterAuth, redactRedisUrl, MAC_BYTES, type SignedKind } from './cluster-auth.js';
export { ClusterKeys } from './keys.js';
export { clusterWorkerInfo, type RegistryModel, type WorkerRecord } from './registry.js';
export { encodeRequest, encodeRequestParts, decodeRequest, decodeRequestParts, encodeReply, decodeReply, type WireEnvelope, type WireReply } from './envelope/envelope-codec.js';
export { frame, framed, FrameReader, MAX_AUTH_FRAME_BYTES } from './reply-frames.js';
export { openRedis, parseRedisUrl, redisOptions, type RedisEndpoint, type RedisRole } from './redis/redis-connection.js';
export { GpuSupervisor, perGpuChildren, withoutGpusFlag, type GpuSupervisorOptions, type PerGpuOptions, type SupervisedChild } from './worker/gpu-supervisor.js';
