/**
 * @module Per-sequence data the sequence batcher adds to each request: control tensors (START, END,
 * READY, CORRID) and implicit state (the output of request i fed as the input of request i+1).
 * Triton: core/src/sequence_state.cc, sequence_batch_scheduler.cc (SetControlTensors)
 */
import { Errors } from '../errors.js';
import type { ModelSequenceBatching, SequenceControl } from '../model-config/model-config.js';
import { serializeBytesTensor } from '../tensor/bytes-tensor.js';
import { configTypeToDataType, dataTypeByteSize, elementCount, typedArrayView, type DataType } from '../tensor/data-type.js';
import type { Tensor } from '../tensor/tensor.js';
import type { SequenceInfo } from './sequence-batch-scheduler.js';

type Flag = 'CONTROL_SEQUENCE_START' | 'CONTROL_SEQUENCE_END' | 'CONTROL_SEQUENCE_READY';

function flagTensor(name: string, c: SequenceControl, on: boolean, shape: number[], model: string): Tensor {
  const i = on ? 1 : 0;
  if (c.int32_false_true?.length) {
    if (c.int32_false_true.length !== 2) throw Errors.invalidArg(`sequence batching control 'int32_false_true' must have exactly 2 entries for ${c.kind ?? ''} for ${model}`);
    return { name, datatype: 'INT32', shape, data: Int32Array.of(c.int32_false_true[i]!) };
  }
  if (c.fp32_false_true?.length) {
    if (c.fp32_false_true.length !== 2) throw Errors.invalidArg(`sequence batching control 'fp32_false_true' must have exactly 2 entries for ${c.kind ?? ''} for ${model}`);
    return { name, datatype: 'FP32', shape, data: Float32Array.of(c.fp32_false_true[i]!) };
  }
  if (c.bool_false_true?.length) {
    if (c.bool_false_true.length !== 2) throw Errors.invalidArg(`sequence batching control 'bool_false_true' must have exactly 2 entries for ${c.kind ?? ''} for ${model}`);
    return { name, datatype: 'BOOL', shape, data: Uint8Array.of(c.bool_false_true[i] ? 1 : 0) };
  }
  throw Errors.invalidArg(`sequence batching must specify either 'int32_false_true', 'fp32_false_true' or 'bool_false_true' for ${c.kind ?? ''} for ${model}`);
}

function corridTensor(name: string, c: SequenceControl, id: bigint | string, shape: number[], model: string): Tensor {
  const dt = configTypeToDataType(c.data_type ?? 'TYPE_UINT64') ?? 'UINT64';
  if (dt === 'BYTES') return { name, datatype: dt, shape, data: serializeBytesTensor([String(id)]) };
  if (typeof id === 'string') {
    throw Errors.invalidArg(`inference request to model '${model}' has a string correlation ID, but the model expects a ${dt} CORRID`);
  }
  switch (dt) {
    case 'UINT64': return { name, datatype: dt, shape, data: BigUint64Array.of(BigInt.asUintN(64, id)) };
    case 'INT64': return { name, datatype: dt, shape, data: BigInt64Array.of(BigInt.asIntN(64, id)) };
    case 'UINT32': return { name, datatype: dt, shape, data: Uint32Array.of(Number(BigInt.asUintN(32, id))) };
    case 'INT32': return { name, datatype: dt, shape, data: Int32Array.of(Number(BigInt.asIntN(32, id))) };
    default: throw Errors.invalidArg(`sequence batching CORRID data type ${dt} is not supported for ${model}`);
  }
}

/**
 * Refuses a correlation id the model's CORRID control cannot carry (a string id for a numeric
 * CORRID), when the request arrives: found only when its batch is built, it failed every other
 * sequence's request in that batch too.
 */
export function checkCorrelationId(config: ModelSequenceBatching, id: bigint | string, model: string): void {
  if (typeof id !== 'string') return;
  for (const ci of config.control_input ?? []) {
    for (const c of ci.control ?? []) {
      if (c.kind !== 'CONTROL_SEQUENCE_CORRID') continue;
      const dt = configTypeToDataType(c.data_type ?? 'TYPE_UINT64') ?? 'UINT64';
      if (dt !== 'BYTES') throw Errors.invalidArg(`inference request to model '${model}' has a string correlation ID, but the model expects a ${dt} CORRID`);
    }
  }
}

/** The control tensors of one request (READY is always true: Triode does not pad batches). */
export function controlTensors(config: ModelSequenceBatching, batching: boolean, info: SequenceInfo, model: string): Tensor[] {
  const out: Tensor[] = [];
  const shape = batching ? [1, 1] : [1];
  for (const ci of config.control_input ?? []) {
    const name = ci.name ?? '';
    for (const c of ci.control ?? []) {
      const kind = c.kind ?? 'CONTROL_SEQUENCE_START';
      if (kind === 'CONTROL_SEQUENCE_CORRID') {
        out.push(corridTensor(name, c, info.correlationId, shape, model));
      } else {
        const on: Record<Flag, boolean> = { CONTROL_SEQUENCE_START: info.start, CONTROL_SEQUENCE_END: info.end, CONTROL_SEQUENCE_READY: true };
        out.push(flagTensor(name, c, on[kind], shape, model));
      }
    }
  }
  return out;
}

/** Implicit state of every live sequence of a model version. */
export class SequenceStates {
  readonly #config: ModelSequenceBatching;
  readonly #batching: boolean;
  readonly #states = new Map<string, Map<string, Tensor>>();

  constructor(config: ModelSequenceBatching, batching: boolean) {
    this.#config = config;
    this.#batching = batching;
  }

  /** Output names the backend must produce for the state. */
  outputNames(): string[] {
    return (this.#config.state ?? []).map((s) => s.output_name ?? '');
  }

  /** The state inputs of a sequence's next request: its last outputs, or the initial state. */
  inputs(key: string): Tensor[] {
    const saved = this.#states.get(key);
    return (this.#config.state ?? []).map((s) => {
      const name = s.input_name ?? '';
      const t = saved?.get(name);
      if (t) return { ...t, shape: [...t.shape], data: t.data };
      return this.#initial(s);
    });
  }

  /** Keeps a request's state outputs (copied: they may be views of a batch's shared buffer). */
  save(key: string, outputs: readonly Tensor[]): void {
    let saved = this.#states.get(key);
    if (!saved) this.#states.set(key, (saved = new Map()));
    for (const s of this.#config.state ?? []) {
      const o = outputs.find((t) => t.name === s.output_name);
      if (!o) continue;
      saved.set(s.input_name ?? '', { name: s.input_name ?? '', datatype: o.datatype, shape: [...o.shape], data: o.data.slice() });
    }
  }

  /** Forgets a sequence (END, idle timeout, restart). */
  drop(key: string): void {
    this.#states.delete(key);
  }

  #initial(s: NonNullable<ModelSequenceBatching['state']>[number]): Tensor {
    const name = s.input_name ?? '';
    const init = s.initial_state?.[0];
    const dt: DataType = configTypeToDataType(init?.data_type ?? s.data_type ?? '') ?? 'FP32';
    const dims = init?.dims ?? s.dims ?? [];
    if (dims.some((d) => d < 0)) {
      throw Errors.invalidArg(`implicit state '${name}' has variable dims; give 'initial_state' with fixed dims`);
    }
    const shape = this.#batching ? [1, ...dims] : [...dims];
    const n = elementCount(shape);
    // n empty strings: a zero length prefix each.
    if (dt === 'BYTES') return { name, datatype: dt, shape, data: new Uint8Array(4 * n) };
    // zero_data, or no initial state at all (Triton leaves it undefined; zeros are the safe choice).
    return { name, datatype: dt, shape, data: typedArrayView(dt, new ArrayBuffer(n * dataTypeByteSize(dt)), 0, n) };
  }
}
