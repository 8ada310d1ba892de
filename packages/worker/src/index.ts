/**
 * @module @triode/worker. Reserved: the cluster-mode worker (Redis Streams consumer feeding an InferenceServer) lands with issue #6.
 */
export const PACKAGE_NAME = '@triode/worker';
