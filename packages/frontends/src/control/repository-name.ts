/**
 * @module A repository named in a model control request: Triton serves its repositories as one
 * and refuses the name (HTTP load/unload paths; gRPC index, load and unload; the HTTP index path
 * ignores it).
 * Triton: server/src/http_server.cc (HandleRepositoryControl), server/src/grpc/grpc_server.cc
 */
import { Errors } from '@triode/core';

/** @throws UNSUPPORTED when a repository is named */
export function refuseRepositoryName(repository: string | undefined): void {
  if (repository) throw Errors.unsupported("'repository_name' specification is not supported");
}
