/**
 * @module Per-sequence data the sequence batcher adds to each request: control tensors (START, END,
 * READY, CORRID) and implicit state (the output of request i fed as the input of request i+1).
 * Triton: core/src/sequence_state.cc, sequence_batch_scheduler.cc (SetControlTensors)
 */
import { join } from 'node:path';
import { Errors } from '../errors.js';
import { readRepositoryFile, resolveInside } from '../model-repository/repository-fs.js';
import type { ModelSequenceBatching, SequenceControl } from '../model-config/model-config.js';
import { MAX_STATE_BYTES } from '../model-config/validate-model-config.js';
import { deserializeBytesTensor, serializeBytesTensor } from '../tensor/bytes-tensor.js';
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

/**
 * Checks a sequence model's controls at load (each START/END/READY with its true/false values,
 * CORRID of a type it can carry), as Triton does when it makes its control tensors: a bad one
 * loaded READY and failed every batch.
 * @throws TriodeError INVALID_ARG with Triton's text
 */
export function checkSequenceControls(config: ModelSequenceBatching, batching: boolean, model: string, inputNames: readonly string[] = []): void {
  // Triton's GetBooleanSequenceControlProperties / GetTypedSequenceControlProperties rules, with
  // their messages: each control tensor named once, each kind once, one kind of true/false values.
  const names = new Set<string>();
  const kinds = new Set<string>();
  for (const ci of config.control_input ?? []) {
    const name = ci.name ?? '';
    if (!name) throw Errors.invalidArg(`sequence batching control tensor must have a name for ${model}`);
    if (names.has(name)) throw Errors.invalidArg(`sequence batching control tensor '${name}' is specified for multiple control kinds for ${model}`);
    names.add(name);
    // Triode's own rule: a control tensor is added to each request under its name, so one named
    // like a model input would replace the client's tensor (review: a JavaScript model then
    // failed every request with a TypeError).
    if (inputNames.includes(name)) throw Errors.invalidArg(`sequence batching control input '${name}' of model '${model}' has the name of a model input`);
    for (const c of ci.control ?? []) {
      const kind = c.kind ?? 'CONTROL_SEQUENCE_START';
      if (kinds.has(kind)) throw Errors.invalidArg(`sequence batching specifies multiple ${kind} tensors for ${model}`);
      kinds.add(kind);
      const values = (['int32_false_true', 'fp32_false_true', 'bool_false_true'] as const).filter((k) => (c[k]?.length ?? 0) > 0);
      if (kind === 'CONTROL_SEQUENCE_CORRID' && values.length > 0) {
        throw Errors.invalidArg(`sequence batching must not specify either 'int32_false_true' nor 'fp32_false_true' for ${kind} for ${model}`);
      }
      if (values.length > 1) throw Errors.invalidArg(`sequence batching specifies both '${values[0]!}' and '${values[1]!}' for ${kind} for ${model}`);
    }
  }
  controlTensors(config, batching, { key: '', correlationId: 1n, start: true, end: false }, model);
}

/** The most bytes an initial state file may hold (as all the states of a sequence). */
const MAX_INITIAL_STATE_FILE_BYTES = MAX_STATE_BYTES;

type StateConfig = NonNullable<ModelSequenceBatching['state']>[number];

/**
 * The tensor each new sequence starts with for `s`, made once at load as Triton's
 * GenerateInitialStateData makes it: `initial_state` zero data or `<model>/initial_state/<data_file>`
 * (checked against the state), else zeros with each variable dim of the state as 1.
 * @throws TriodeError INVALID_ARG, Triton's text, for an initial state that does not fit its state
 */
function initialState(s: StateConfig, batching: boolean, modelPath: string): Tensor {
  const name = s.input_name ?? '';
  const init = s.initial_state?.[0];
  const stateDims = s.dims ?? [];
  let dims: number[];
  let dt: DataType;
  let file: Uint8Array | undefined;
  if (init) {
    if ((init.data_type ?? '') !== (s.data_type ?? '')) throw Errors.invalidArg(`The data type used for 'initial_state' field of state '${name}' does not match the state data type.`);
    if (!init.name) throw Errors.invalidArg(`Field 'name' must be set when using initial_state for state input '${name}'.`);
    const initDims = init.dims ?? [];
    if (initDims.length !== stateDims.length) {
      throw Errors.invalidArg(`Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input '${name}'. ${initDims.length} != ${stateDims.length}`);
    }
    initDims.forEach((d, i) => {
      if (d === -1) throw Errors.invalidArg(`'initial_state' field for state input name '${name}' contains variable dimensions.`);
      if (stateDims[i] !== -1 && d !== stateDims[i]) throw Errors.invalidArg(`'initial_state' dim for input name '${name}' doesn't match 'state' dim description. ${d} != ${stateDims[i]}`);
    });
    dims = initDims;
    dt = configTypeToDataType(init.data_type ?? '') ?? 'FP32';
    if (init.data_file) {
      file = readRepositoryFile(resolveInside(join(modelPath, 'initial_state'), init.data_file), `initial_state file '${init.data_file}'`, MAX_INITIAL_STATE_FILE_BYTES);
    } else if (!init.zero_data) {
      throw Errors.invalidArg(`initial_state setting expects state '${name}' to have state_data set`);
    }
  } else {
    // Triton's SequenceStates: a variable dim of a state without an initial state starts as 1.
    dims = stateDims.map((d) => (d < 0 ? 1 : d));
    dt = configTypeToDataType(s.data_type ?? '') ?? 'FP32';
  }
  const shape = batching ? [1, ...dims] : [...dims];
  const n = elementCount(shape);
  if (dt === 'BYTES') {
    if (file) {
      const found = deserializeBytesTensor(file, undefined, `initial_state file '${init?.data_file ?? ''}'`).length;
      if (found !== n) throw Errors.invalidArg(`initial_state file '${init?.data_file ?? ''}' holds ${found} BYTES elements, state '${name}' needs ${n}`);
      // The file's own memory when it has it alone (a small Buffer shares a pool: copied).
      const own = file.byteOffset === 0 && file.byteLength === file.buffer.byteLength;
      return { name, datatype: dt, shape, data: own ? new Uint8Array(file.buffer, 0, file.byteLength) : new Uint8Array(file) };
    }
    // n empty strings: a zero length prefix each.
    return { name, datatype: dt, shape, data: new Uint8Array(4 * n) };
  }
  const bytes = n * dataTypeByteSize(dt);
  const buf = new ArrayBuffer(bytes);
  if (file) {
    if (file.byteLength < bytes) throw Errors.invalidArg(`initial_state setting expects ${bytes} bytes, but the data provided from ${init?.data_file ?? ''} only has ${file.byteLength} bytes.`);
    new Uint8Array(buf).set(file.subarray(0, bytes));
  }
  return { name, datatype: dt, shape, data: typedArrayView(dt, buf, 0, n) };
}

/** Implicit state of every live sequence of a model version. */
export class SequenceStates {
  readonly #config: ModelSequenceBatching;
  readonly #states = new Map<string, Map<string, Tensor>>();
  /** What each state starts with, by input name (each sequence gets a copy). */
  readonly #initial = new Map<string, Tensor>();

  /**
   * @throws TriodeError INVALID_ARG for an initial state that does not fit its state (see
   *   initialState), or initial states over {@link MAX_STATE_BYTES} together
   */
  constructor(config: ModelSequenceBatching, batching: boolean, modelPath: string) {
    this.#config = config;
    let bytes = 0;
    for (const s of config.state ?? []) {
      const t = initialState(s, batching, modelPath);
      // review: the config check counts 4 bytes per BYTES element; a data_file makes each element
      // as long as it likes (20 states of one 40 MiB element held 1.1 GB at load, a copy a sequence).
      bytes += t.data.byteLength;
      if (bytes > MAX_STATE_BYTES) {
        const file = s.initial_state?.[0]?.data_file;
        throw Errors.invalidArg(`implicit state '${s.input_name ?? ''}' starts with ${t.data.byteLength} bytes${file ? ` (initial_state file '${file}')` : ''}: its states would start with over the limit of ${MAX_STATE_BYTES} bytes a sequence`);
      }
      this.#initial.set(s.input_name ?? '', t);
    }
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
      const init = this.#initial.get(name)!;
      return { ...init, shape: [...init.shape], data: init.data.slice() };
    });
  }

  /**
   * The shapes of the states a sequence's next request gets (`start`: the initial ones, which a
   * START gets), as a batch key: a state with variable dims has whatever shape its sequence's
   * requests made it, and requests whose states differ in shape cannot be joined into one batch.
   */
  shapeKey(key: string, start: boolean): string {
    const saved = start ? undefined : this.#states.get(key);
    let out = '';
    for (const s of this.#config.state ?? []) {
      const name = s.input_name ?? '';
      out += `${(saved?.get(name) ?? this.#initial.get(name)!).shape.join(',')};`;
    }
    return out;
  }

  /**
   * Keeps a request's state outputs (copied: they may be views of a batch's shared buffer).
   * @throws TriodeError INVALID_ARG, keeping nothing, when the sequence's states would hold over
   *   {@link MAX_STATE_BYTES} together: a state with variable dims grows as its requests make it
   *   (an output that appends each request's input), and the server keeps it for the sequence
   */
  save(key: string, outputs: readonly Tensor[]): void {
    let saved = this.#states.get(key);
    const found: (Tensor | undefined)[] = [];
    let bytes = 0;
    for (const s of this.#config.state ?? []) {
      const o = outputs.find((t) => t.name === s.output_name);
      found.push(o);
      bytes += (o ?? saved?.get(s.input_name ?? '') ?? this.#initial.get(s.input_name ?? '')!).data.byteLength;
    }
    if (bytes > MAX_STATE_BYTES) {
      throw Errors.invalidArg(`the implicit state of the request's sequence would hold ${bytes} bytes after it, over the limit of ${MAX_STATE_BYTES} bytes a sequence: its state outputs were not kept`);
    }
    if (!saved) this.#states.set(key, (saved = new Map()));
    (this.#config.state ?? []).forEach((s, i) => {
      const o = found[i];
      if (o) saved.set(s.input_name ?? '', { name: s.input_name ?? '', datatype: o.datatype, shape: [...o.shape], data: o.data.slice() });
    });
  }

  /** Forgets a sequence (END, idle timeout, restart). */
  drop(key: string): void {
    this.#states.delete(key);
  }
}
