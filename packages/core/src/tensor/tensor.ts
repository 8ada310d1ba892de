/** @module Tensors as they travel inside Triode. Triton: core/src/infer_request.h (Input), infer_response.h (Output) */
import type { DataType, TensorData } from './data-type.js';

/**
 * A named tensor. `data` holds the elements row-major; for BYTES it is the length-prefixed
 * serialization (see `serializeBytesTensor`), for FP16/BF16 the raw 16-bit words.
 */
export interface Tensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: TensorData;
  /**
   * Whether the receiver owns `data`'s buffer and may move (transfer) it to another thread, which
   * detaches it: true: owned; false: lent, leave it as it is; unset: owned only when the buffer was
   * declared with `markTransferable`. Never inferred from the buffer's size or offset (see
   * transferable.ts).
   */
  owned?: boolean;
}
