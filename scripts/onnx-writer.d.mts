/** Types of onnx-writer.mjs: protobuf fragments are arrays of bytes. */
export type Bytes = number[];
export declare function int(field: number, n: number | bigint): Bytes;
export declare function bytes(field: number, b: Bytes): Bytes;
export declare function str(field: number, s: string): Bytes;
export declare function msg(field: number, parts: Bytes[]): Bytes;
export declare const T: { FLOAT: 1; UINT8: 2; INT8: 3; INT32: 6; INT64: 7; STRING: 8; BOOL: 9; UINT64: 13 };
export declare function valueInfo(field: 11 | 12, name: string, elemType: number, dims: (number | string)[]): Bytes;
export declare function node(op: string, inputs: string[], outputs: string[], name: string, attrs?: Bytes[]): Bytes;
export declare function castTo(t: number): Bytes;
export declare function int64Initializer(name: string, dims: number[], values: number[]): Bytes;
export declare function model(graphName: string, nodes: Bytes[], inputs: Bytes[], outputs: Bytes[], initializers?: Bytes[]): Uint8Array;
