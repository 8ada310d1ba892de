/**
 * @module @triode/client. Reserved: the TypeScript HTTP/gRPC client and `triode perf` land with issue #7.
 */
export const PACKAGE_NAME = '@triode/client';
