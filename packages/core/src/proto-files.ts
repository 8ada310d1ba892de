/**
 * @module Where Triode's copies of Triton's protobuf files live (`grpc_service.proto`,
 * `model_config.proto`, `health.proto`), for the gRPC server and the client.
 */
import { fileURLToPath } from 'node:url';

/** The directory holding the `.proto` files (shipped in the package's `proto/` folder). */
export const PROTO_DIR: string = fileURLToPath(new URL('../proto/', import.meta.url));

/** The files that define the gRPC protocol (imports resolve inside PROTO_DIR). */
export const PROTO_FILES = ['grpc_service.proto', 'health.proto'] as const;
