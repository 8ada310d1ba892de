/** @module @triode/worker: the cluster-mode worker (Redis Streams consumer feeding an InferenceServer). */
export { StreamConsumer, type StreamConsumerOptions } from './stream-consumer.js';
