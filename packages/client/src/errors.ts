/** @module The one error type of @triode/client. */

/** An error answered by the server (or a transport failure), with what the protocol said. */
export class InferenceServerError extends Error {
  /** HTTP status code, when the call went over HTTP and the server answered. */
  readonly httpStatus?: number;
  /** gRPC status code (`@grpc/grpc-js` `status`), when the call went over gRPC. */
  readonly grpcCode?: number;

  constructor(message: string, options: { httpStatus?: number; grpcCode?: number; cause?: unknown } = {}) {
    super(message, options.cause !== undefined ? { cause: options.cause } : undefined);
    this.name = 'InferenceServerError';
    if (options.httpStatus !== undefined) this.httpStatus = options.httpStatus;
    if (options.grpcCode !== undefined) this.grpcCode = options.grpcCode;
  }
}
