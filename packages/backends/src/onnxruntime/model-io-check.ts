/**
 * @module A config checked against the ONNX model it describes, when an instance's session is made,
 * as Triton's onnxruntime backend checks it: the sequence controls the config names must be model
 * inputs of shape [1] and their data type; the model's inputs must be as many as the config's
 * (optional ones aside) with its batch inputs, sequence controls and implicit states; every
 * configured input must be one of the model's (an overridable initializer counts: onnxruntime-node
 * does not list those, so they are read from the file when needed) and every configured output
 * too; and each must have the model's data type and a shape it accepts; and each implicit state's
 * input and output must be the model's, of the state's data type. Without it, a config that
 * contradicted the model loaded and answered with tensors labelled by the config (an INT32 output
 * described as FP32 went out as INT32, shaped [1,16] for a config of [4,4]), or failed every
 * request ("input 'INPUT0' is missing in 'feeds'").
 * Triton: onnxruntime_backend/src/onnxruntime.cc (ModelInstanceState: ValidateInputs,
 * ValidateOutputs, ValidateBooleanSequenceControl, ValidateTypedSequenceControl);
 * backend/src/backend_common.cc (CompareDimsSupported, CheckAllowedModelInput)
 */
import { Errors, TriodeError, configTypeToDataType, dataTypeToConfigType, echo, type ModelConfig } from '@triode/core';
import { ortTypeToDataType } from './onnxruntime-utils.js';

/** A model input or output as the session describes it (dims: -1 where not fixed). */
export interface OnnxIo {
  name: string;
  /** onnxruntime's type name (`float32`, `string`, ...); '' for a value that is not a tensor. */
  type: string;
  /** Undefined when the model does not say (its rank is unknown): not checked then. */
  dims?: number[];
}

/** What of the config is checked (plain data: it crosses to the instance thread). */
export type IoCheckConfig = Pick<ModelConfig, 'name' | 'input' | 'output' | 'max_batch_size' | 'batch_output' | 'batch_input' | 'sequence_batching'>;

const shape = (dims: readonly number[]): string => `[${dims.join(',')}]`;

/**
 * Triton's CompareDimsSupported: a dim the model leaves open takes any configured one for an input;
 * for an output (`exact`) the config must leave it open too. A model scalar takes config dims that
 * are all 1 (a model that does not batch cannot reshape to []).
 */
function compareDims(model: string, tensor: string, modelDims: readonly number[], dims: readonly number[], batching: boolean, exact: boolean): void {
  if (modelDims.length === 0 && dims.every((d) => d === 1)) return;
  const differs = (d: number, c: number | undefined) => (exact ? d !== c : d !== -1 && d !== c);
  if (batching) {
    if (modelDims.length === 0 || modelDims[0] !== -1) {
      throw Errors.invalidArg(`model '${model}', tensor '${tensor}': for the model to support batching the shape should have at least 1 dimension and the first dimension must be -1; but shape expected by the model is ${shape(modelDims)}`);
    }
    const full = [-1, ...dims];
    if (modelDims.length !== full.length || modelDims.some((d, i) => differs(d, full[i]))) {
      throw Errors.invalidArg(`model '${model}', tensor '${tensor}': the model expects ${modelDims.length} dimensions (shape ${shape(modelDims)}) but the model configuration specifies ${full.length} dimensions (an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape ${shape(full)})`);
    }
    return;
  }
  if (modelDims.length !== dims.length || modelDims.some((d, i) => differs(d, dims[i]))) {
    throw Errors.invalidArg(`model '${model}', tensor '${tensor}': the model expects ${modelDims.length} dimensions (shape ${shape(modelDims)}) but the model configuration specifies ${dims.length} dimensions (shape ${shape(dims)})`);
  }
}

/** onnxruntime's name of a data type (OnnxDataTypeName): FLOAT for FP32, STRING for BYTES, ... */
function onnxTypeName(type: string): string {
  const dt = ortTypeToDataType(type);
  const names: Record<string, string> = { FP32: 'FLOAT', FP64: 'DOUBLE', FP16: 'FLOAT16', BF16: 'BFLOAT16', BYTES: 'STRING' };
  return dt ? names[dt] ?? dt : type || 'UNDEFINED';
}

/** The data type a control's tensor has: its true/false values' for START, END and READY, its data_type for CORRID. */
function controlDataType(c: NonNullable<NonNullable<NonNullable<ModelConfig['sequence_batching']>['control_input']>[number]['control']>[number]): string {
  if (c.kind === 'CONTROL_SEQUENCE_CORRID') return c.data_type ?? 'TYPE_UINT64';
  if (c.int32_false_true?.length) return 'TYPE_INT32';
  if (c.fp32_false_true?.length) return 'TYPE_FP32';
  return 'TYPE_BOOL';
}

/**
 * Triton's ValidateBooleanSequenceControl / ValidateTypedSequenceControl: each control the config
 * names is a model input, of shape [1] past its batch dim and of the control's data type.
 * @returns how many controls there are (one of each kind at most: the core checked that)
 */
function checkControls(config: IoCheckConfig, found: readonly OnnxIo[]): number {
  const model = config.name ?? '';
  const batching = (config.max_batch_size ?? 0) > 0;
  let n = 0;
  for (const ci of config.sequence_batching?.control_input ?? []) {
    const name = ci.name ?? '';
    for (const c of ci.control ?? []) {
      n++;
      const m = found.find((f) => f.name === name);
      if (!m) throw new TriodeError('INTERNAL', `configuration specified sequence control '${name}', but model does not provide that input`);
      if (m.dims) {
        const dims = m.dims.slice(batching ? 1 : 0);
        if (dims.length !== 1 || dims[0] !== 1) throw Errors.invalidArg(`unable to load model '${model}', sequence control '${name}' in model has dims ${shape(dims)} but dims [1] is expected`);
      }
      const want = controlDataType(c);
      if (configTypeToDataType(want) !== ortTypeToDataType(m.type)) {
        throw Errors.invalidArg(`unable to load model '${model}', sequence control '${name}', the model expects data-type ${onnxTypeName(m.type)} but the model configuration specifies data-type ${want}`);
      }
    }
  }
  return n;
}

/**
 * @param allowed the names an input may have when the model's inputs do not list it (its
 *   overridable initializers too), read only then; undefined: such an input is not checked
 */
function check(kind: 'input' | 'output', config: IoCheckConfig, found: readonly OnnxIo[], skipShape: ReadonlySet<string>, allowed?: () => readonly string[] | undefined): void {
  const model = config.name ?? '';
  const batching = (config.max_batch_size ?? 0) > 0;
  for (const io of (kind === 'input' ? config.input : config.output) ?? []) {
    const m = found.find((f) => f.name === io.name);
    if (!m) {
      const names = kind === 'input' ? allowed?.() : found.map((f) => f.name);
      // An input that is an overridable initializer (a graph input with a default): onnxruntime-node
      // does not describe it, and the session takes it (Triton checks its type and shape too).
      if (!names || (kind === 'input' && names.includes(io.name))) continue;
      // Triton's CheckAllowedModelInput / CheckAllowedModelOutput list the names in byte order (a std::set).
      const list = [...new Set(names)].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
      throw Errors.invalidArg(`unexpected inference ${kind} '${echo(io.name)}', allowed ${kind}s are: ${list.map((n) => echo(n)).join(', ')}`);
    }
    const want = configTypeToDataType(io.data_type ?? '');
    const have = ortTypeToDataType(m.type);
    if (want !== have) {
      const modelType = have ? dataTypeToConfigType(have) : m.type || 'a value that is not a tensor';
      throw Errors.invalidArg(`unable to load model '${model}', configuration expects datatype ${io.data_type ?? ''} for ${kind} '${io.name}', model provides ${modelType}`);
    }
    if (skipShape.has(io.name) || !m.dims) continue;
    compareDims(model, io.name, m.dims, io.reshape ? io.reshape.shape ?? [] : io.dims ?? [], batching, kind === 'output');
  }
}

/**
 * Each implicit state's input_name a model input and its output_name a model output, of the state's
 * data type: a state the model does not have loaded, and every request of the model failed with
 * onnxruntime's error ("input 'S' is missing in 'feeds'", "'fetches' contains invalid output name").
 * The output's words are those of Triton's ValidateOutputs for states; that check of Triton's never
 * runs (it reads the states only when `MemberAsArray("state")` fails, and a field `name` a state
 * does not have), so Triton loads such a model and fails its requests.
 */
function checkStates(config: IoCheckConfig, inputs: readonly OnnxIo[], outputs: readonly OnnxIo[]): void {
  const model = config.name ?? '';
  const sorted = (list: readonly OnnxIo[]) => [...new Set(list.map((f) => f.name))].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))).map((n) => echo(n)).join(', ');
  for (const st of config.sequence_batching?.state ?? []) {
    for (const kind of ['input', 'output'] as const) {
      const name = (kind === 'input' ? st.input_name : st.output_name) ?? '';
      const found = kind === 'input' ? inputs : outputs;
      const m = found.find((f) => f.name === name);
      if (!m) throw Errors.invalidArg(`unexpected inference ${kind} '${echo(name)}', allowed ${kind}s are: ${sorted(found)}`);
      const have = ortTypeToDataType(m.type);
      if (configTypeToDataType(st.data_type ?? '') !== have) {
        const modelType = have ? dataTypeToConfigType(have) : m.type || 'a value that is not a tensor';
        throw Errors.invalidArg(`unable to load model '${model}', configuration expects datatype ${st.data_type ?? ''} for ${kind} state '${echo(name)}', model provides ${modelType}`);
      }
    }
  }
}

/**
 * @param graphInputs the names of the model's graph inputs, overridable initializers included (read
 *   from the file only for a config input the session does not list); undefined, or throwing:
 *   such an input is taken for an overridable initializer
 * @throws TriodeError INVALID_ARG, with Triton's text, for a configured input or output the model
 * does not have, of another data type, or of a shape it cannot take; for a model whose inputs are
 * not as many as the config gives it; for a sequence control of another shape or data type
 * (INTERNAL for one the model does not have); for an implicit state whose input or output the model
 * does not have, or has of another data type. A ragged input and a batch output (their tensors are
 * joined or scattered, not batched) have their shapes left unchecked.
 */
export function checkModelIo(config: IoCheckConfig, inputs: readonly OnnxIo[], outputs: readonly OnnxIo[], graphInputs?: () => readonly string[]): void {
  const model = config.name ?? '';
  const ragged = new Set((config.input ?? []).filter((i) => i.allow_ragged_batch).map((i) => i.name));
  const scattered = new Set((config.batch_output ?? []).flatMap((b) => b.target_name ?? []));
  const controls = checkControls(config, inputs);
  // Triton's count: the config's inputs (an optional one is an overridable initializer, not
  // counted), one a batch input, one a sequence control, one an implicit state.
  const expected = (config.input ?? []).filter((i) => !i.optional).length + (config.batch_input ?? []).length + controls + (config.sequence_batching?.state ?? []).length;
  if (inputs.length !== expected) throw Errors.invalidArg(`unable to load model '${model}', configuration expects ${expected} inputs, model provides ${inputs.length}`);
  if ((config.max_batch_size ?? 0) !== 0) {
    const optional = (config.input ?? []).find((i) => i.optional);
    if (optional) throw Errors.invalidArg(`unable to load model '${model}', optional input '${optional.name}' is not supported for models that support batching`);
  }
  let allowed: readonly string[] | undefined | null = null;
  const allowedNames = (): readonly string[] | undefined => {
    if (allowed === null) {
      try {
        allowed = graphInputs ? [...inputs.map((i) => i.name), ...graphInputs()] : undefined;
      } catch {
        allowed = undefined;
      }
    }
    return allowed;
  };
  check('input', config, inputs, ragged, allowedNames);
  check('output', config, outputs, scattered);
  checkStates(config, inputs, outputs);
}

/** A session's inputs or outputs as OnnxIo (symbolic and unknown dims become -1). */
export function onnxIo(list: readonly unknown[]): OnnxIo[] {
  return list.map((v) => {
    const m = v as { name: string; isTensor?: boolean; type?: string; shape?: ReadonlyArray<number | string> };
    return { name: m.name, type: m.isTensor === false ? '' : m.type ?? '', ...(m.shape ? { dims: m.shape.map((d) => (typeof d === 'number' && d >= 0 ? d : -1)) } : {}) };
  });
}
