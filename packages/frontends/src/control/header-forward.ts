/**
 * @module `--http-header-forward-pattern` / `--grpc-header-forward-pattern`: request headers (gRPC
 * metadata) whose names match the pattern are passed to the model as request parameters (string
 * values; a parameter the request sets itself wins). Triton: http_server.cc, grpc/infer_handler.cc
 */
import { TRITON_REQUEST_PARAMETERS, type InferenceRequest } from '@triode/core';

/**
 * Adds the matching headers to the request's parameters. A header named as a parameter the core
 * acts on (`sequence_id`, `priority`, `timeout`, ...: TRITON_REQUEST_PARAMETERS) is never
 * forwarded: in Triton a forwarded header is only ever a custom string parameter, while Triode's
 * core would read it as the request's correlation id, priority or timeout (review: a `priority`
 * header, which RFC 9218 has browsers and curl send, failed every request as a bad priority).
 */
export function forwardHeaders(request: InferenceRequest, headers: Iterable<[string, string]>, pattern: RegExp): void {
  const params = (request.parameters ??= {});
  for (const [name, value] of headers) {
    if (name.startsWith(':') || !pattern.test(name) || name in params || TRITON_REQUEST_PARAMETERS.has(name.toLowerCase())) continue;
    params[name] = value;
  }
}

/** A pattern flag compiled (case-insensitive: header names are). */
export function headerPattern(source: string | undefined): RegExp | undefined {
  return source ? new RegExp(source, 'i') : undefined;
}
