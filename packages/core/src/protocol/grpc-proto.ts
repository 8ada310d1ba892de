/**
 * @module Triton's gRPC protocol loaded from Triode's `.proto` files (protobufjs reflection,
 * field names as in the proto: snake_case), and the grpc-js service definitions built from it.
 * Hand-built definitions (instead of @grpc/proto-loader) let the infer path decode straight into
 * protobufjs messages, with `bytes` fields as views of the received buffer (no copies).
 */
import { join } from 'node:path';
import protobuf from 'protobufjs';
import { PROTO_DIR, PROTO_FILES } from '../proto-files.js';

/** One method as @grpc/grpc-js wants it in a service definition (structurally its MethodDefinition). */
export interface GrpcMethodDefinition {
  path: string;
  requestStream: boolean;
  responseStream: boolean;
  requestSerialize: (m: object) => Buffer;
  requestDeserialize: (b: Buffer) => protobuf.Message;
  responseSerialize: (m: object) => Buffer;
  responseDeserialize: (b: Buffer) => protobuf.Message;
  originalName: string;
}

let root: protobuf.Root | undefined;

/** The protobuf root with Triton's `inference` package and `grpc.health.v1`. */
export function protoRoot(): protobuf.Root {
  if (!root) {
    const r = new protobuf.Root();
    r.resolvePath = (_origin, target) => join(PROTO_DIR, target.replace(/^.*[\\/]/, ''));
    r.loadSync([...PROTO_FILES], { keepCase: true });
    r.resolveAll();
    root = r;
  }
  return root;
}

const types = new Map<string, protobuf.Type>();

/** A message type of the `inference` package (e.g. `ModelInferRequest`); looked up once. */
export function messageType(name: string): protobuf.Type {
  let t = types.get(name);
  if (!t) {
    t = protoRoot().lookupType(name.includes('.') ? name : `inference.${name}`);
    types.set(name, t);
  }
  return t;
}

/** A grpc-js service definition for a service of the root (`inference.GRPCInferenceService`). */
export function serviceDefinition(fullName: string): Record<string, GrpcMethodDefinition> {
  const service = protoRoot().lookupService(fullName);
  const def: Record<string, GrpcMethodDefinition> = {};
  for (const method of Object.values(service.methods)) {
    method.resolve();
    const req = method.resolvedRequestType!;
    const res = method.resolvedResponseType!;
    def[method.name] = {
      path: `/${fullName}/${method.name}`,
      requestStream: method.requestStream === true,
      responseStream: method.responseStream === true,
      requestSerialize: (m: object) => Buffer.from(req.encode(m).finish()),
      requestDeserialize: (b: Buffer) => req.decode(b),
      responseSerialize: (m: object) => Buffer.from(res.encode(m).finish()),
      responseDeserialize: (b: Buffer) => res.decode(b),
      originalName: method.name,
    };
  }
  return def;
}

/** A protobuf int64/uint64 as a JS number (protobufjs gives Long objects for 64-bit fields). */
export function toNumber(v: number | { toNumber(): number } | string | null | undefined): number {
  if (v === null || v === undefined) return 0;
  if (typeof v === 'number') return v;
  if (typeof v === 'string') return Number(v);
  return v.toNumber();
}

/** The plain-object form of a decoded message (enums as names, 64-bit ints as numbers). */
export function toPlain(type: protobuf.Type, message: protobuf.Message): Record<string, unknown> {
  return type.toObject(message, { longs: Number, enums: String, bytes: Buffer, defaults: false, oneofs: false });
}
