/**
 * @module `--http-header-forward-pattern` / `--grpc-header-forward-pattern`: request headers (gRPC
 * metadata) whose names match the pattern are passed to the model as request parameters (string
 * values; a parameter the request sets itself wins). Triton: http_server.cc, grpc/infer_handler.cc
 */
import type { InferenceRequest } from '@triode/core';

/** Adds the matching headers to the request's parameters. */
export function forwardHeaders(request: InferenceRequest, headers: Iterable<[string, string]>, pattern: RegExp): void {
  const params = (request.parameters ??= {});
  for (const [name, value] of headers) {
    if (name.startsWith(':') || !pattern.test(name) || name in params) continue;
    params[name] = value;
  }
}

/** A pattern flag compiled (case-insensitive: header names are). */
export function headerPattern(source: string | undefined): RegExp | undefined {
  return source ? new RegExp(source, 'i') : undefined;
}
