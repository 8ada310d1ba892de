/**
 * @module The instance thread of a JavaScript model: imports model.js / model.mjs, creates the
 * model object, and runs `initialize`, `execute` and `finalize` on it. Errors come back as data,
 * `{ code, message }`; outputs move to the main thread only when the model handed them over (`owned`).
 * Triton: python_backend/src/pb_stub.cc (the stub process that hosts a Python model)
 */
import { register } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Piscina } from 'piscina';
import { countBytesElements, elementCount, isDataType, isErrorCode, toWireError, type ModelConfig, type WireError } from '@triode/core';
import { collectBatchInputs } from '../common/backend-input-collector.js';
import { respondBatchOutputs } from '../common/backend-output-responder.js';
import * as api from './model-api.js';
import type { JsExecuteReply, JsExecuteTask, JsTask } from './messages.js';

// `import ... from 'triode'` in a model file resolves to the model API this thread uses.
register(new URL('./resolve-hooks.js', import.meta.url), { data: { apiUrl: new URL('./model-api.js', import.meta.url).href } });

type ModelClass = (new () => api.Model) & { autoCompleteConfig?: (config: ModelConfig) => ModelConfig | void | Promise<ModelConfig | void> };

/** A request's correlation id when it has none (Triton's Python backend: 0). */
const NO_CORRELATION_ID = 0n;

let model: api.Model | undefined;
/** The loaded model's config (executeBatch joins inputs and splits outputs by it). */
let modelConfig: ModelConfig = {};

async function importModel(file: string): Promise<ModelClass> {
  const mod = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const cls = mod['default'] ?? mod['Model'] ?? mod['TritonModel'] ?? mod['TritonPythonModel'];
  if (typeof cls !== 'function') {
    throw new Error(`${file} must export a model class (export default class, or export class Model)`);
  }
  return cls as ModelClass;
}

/**
 * Checks a response from user code and keeps only the outputs the request asked for. `where` names
 * it in messages: `for request <i>`, or `from executeBatch()`.
 */
function checkResponse(r: unknown, outputNames: string[], index: number, where = `execute() returned {} for request ${index}`): { outputs: api.Tensor[] } | { error: WireError } {
  const fail = (message: string) => ({ error: { code: 'INTERNAL' as const, message } });
  const say = (what: string) => where.replace('{}', what);
  if (r instanceof Error) return { error: toWireError(r) };
  if (!r || typeof r !== 'object') return fail(`${say(String(r))}; expected { outputs: [...] } or an Error`);
  if ('error' in r && typeof (r as { error: unknown }).error === 'string') {
    const { error, code } = r as { error: string; code?: unknown };
    return { error: { code: isErrorCode(code) ? code : 'INTERNAL', message: error } };
  }
  const outputs = (r as { outputs?: unknown }).outputs;
  if (!Array.isArray(outputs)) return fail(say("a response without 'outputs'"));
  const want = new Set(outputNames);
  const out: api.Tensor[] = [];
  const seen = new Set<string>();
  for (const o of outputs as api.Tensor[]) {
    if (!o || typeof o.name !== 'string' || !isDataType(o.datatype) || !Array.isArray(o.shape) || !ArrayBuffer.isView(o.data) || o.data instanceof DataView) {
      return fail(`${say('an output that is not a tensor')} (use tensor(name, datatype, shape, data))`);
    }
    const problem = outputProblem(o);
    if (problem !== undefined) return fail(`${say(`output '${o.name}'`)}: ${problem}`);
    if (seen.has(o.name)) return fail(`${say(`output '${o.name}' twice`)}`);
    seen.add(o.name);
    if (want.size === 0 || want.has(o.name)) out.push(api.__plainTensor(o));
  }
  return { outputs: out };
}

/**
 * Why an output tensor's shape and data do not agree (undefined when they do): its shape is
 * written into responses as is, and its data read as `datatype`, so a model that gets either
 * wrong must fail the request (INTERNAL), not send a broken or mislabeled answer.
 */
function outputProblem(o: api.Tensor): string | undefined {
  if (!o.shape.every((d) => Number.isSafeInteger(d) && d >= 0)) return `its shape [${o.shape.map((d) => typeof d === 'number' ? d : typeof d).join(',')}] is not a list of non-negative integers`;
  const n = elementCount(o.shape);
  if (o.datatype === 'BYTES') {
    if (!(o.data instanceof Uint8Array)) return 'BYTES data must be the length-prefixed bytes (a Uint8Array)';
    const got = countBytesElements(o.data);
    if (got !== n) return got < 0 ? 'its BYTES data is malformed' : `its shape [${o.shape.join(',')}] has ${n} elements, its data ${got}`;
    return undefined;
  }
  // The datatype's own array class: an Int32Array labelled FP32 went out as other numbers over
  // JSON than over binary, and a BigInt64Array as FP64 failed the frontend.
  const Ctor = api.__arrayClass(o.datatype);
  if (!Ctor || !(o.data instanceof Ctor)) return `${o.datatype} data must be a ${Ctor?.name ?? 'typed array'}, got ${o.data.constructor.name}`;
  if (o.data.length !== n) return `its shape [${o.shape.join(',')}] has ${n} elements, its data ${o.data.length}`;
  return undefined;
}

/** Refuses a model class that cannot serve its config: what it must define, and why. */
function checkModel(m: api.Model, file: string, config: ModelConfig): void {
  const batchIO = (config.batch_input?.length ?? 0) > 0 || (config.batch_output?.length ?? 0) > 0;
  if (batchIO && typeof m.executeBatch !== 'function') {
    throw new Error(`the model class of ${file} has no executeBatch(batch) method, which a config with batch_input or batch_output needs (execute(requests) gets each request alone)`);
  }
  if (config.model_transaction_policy?.decoupled === true && typeof m.execute !== 'function') {
    throw new Error(`the model class of ${file} has no execute(requests) method, which a decoupled model needs (its requests answer through their senders)`);
  }
  if (typeof m.execute !== 'function' && typeof m.executeBatch !== 'function') {
    throw new Error(`the model class of ${file} has no execute(requests) method`);
  }
}

/**
 * Runs `executeBatch` on the batch joined as a framework model takes it (ragged inputs flattened,
 * batch inputs made), then splits its outputs among the requests (batch outputs scattered).
 * Triton: what BackendInputCollector and BackendOutputResponder do around a framework model's run.
 */
async function executeBatch(m: api.Model, task: JsExecuteTask, requests: api.Request[], t0: number): Promise<JsExecuteReply> {
  try {
    const inputs = collectBatchInputs(requests, modelConfig).map(api.__received);
    const batch: api.Batch = { inputs, input: (name: string) => inputs.find((t) => t.name === name), requests };
    const checked = checkResponse(await m.executeBatch!(batch), [], 0, 'executeBatch() returned {}');
    if ('error' in checked) return checked;
    const parts = respondBatchOutputs(checked.outputs, task.requests, modelConfig);
    const responses = parts.map((outs, i) => checkResponse({ outputs: outs }, task.requests[i]!.outputNames, i));
    const reply: JsExecuteReply = { responses, computeInferNs: (performance.now() - t0) * 1e6 };
    const outputs = responses.flatMap((r) => ('outputs' in r ? r.outputs : []));
    // A part is a view of the batch output: what the model handed over moves once (the main
    // thread then lends each part, as several requests view that buffer); the rest is copied.
    const movable = { [Piscina.transferableSymbol]: api.__movable(outputs), [Piscina.valueSymbol]: reply };
    return Piscina.move(movable as unknown as Parameters<typeof Piscina.move>[0]) as unknown as JsExecuteReply;
  } catch (err) {
    // A throw fails every request of the batch with its error (the core answers them).
    return { error: toWireError(err) };
  }
}

/** Piscina entry. */
export default async function handle(task: JsTask): Promise<unknown> {
  switch (task.op) {
    case 'autocomplete': {
      const cls = await importModel(task.file);
      if (typeof cls.autoCompleteConfig !== 'function') return task.config;
      return (await cls.autoCompleteConfig(task.config)) ?? task.config;
    }
    case 'load': {
      api.__connect(task.port, task.name, task.flow, task.clientStallMs);
      // Loaded again in a thread that has it (the main thread took a failed task for a dead thread).
      await model?.finalize?.();
      model = undefined;
      const cls = await importModel(task.file);
      model = new cls();
      modelConfig = task.config;
      checkModel(model, task.file, task.config);
      await model.initialize?.({
        model_config: JSON.stringify(task.config),
        config: task.config,
        model_instance_kind: task.instanceKind,
        model_instance_device_id: '0',
        model_instance_name: task.instanceName,
        model_repository: task.repository,
        model_version: String(task.version),
        model_name: task.name,
      });
      return { ok: true };
    }
    case 'execute': {
      if (!model) throw new Error('the model is not loaded');
      api.__beginExecute();
      const t0 = performance.now();
      const token = task.token;
      if (token !== undefined) api.__begin(token);
      const requests: api.Request[] = task.requests.map((r, i) => {
        const inputs = r.inputs.map(api.__received);
        return {
          ...(r.id !== undefined ? { id: r.id } : {}),
          inputs,
          input: (name: string) => inputs.find((t) => t.name === name),
          requestedOutputs: r.outputNames,
          parameters: r.parameters,
          correlationId: r.correlationId ?? NO_CORRELATION_ID,
          flags: r.flags ?? 0,
          timeout: r.timeoutUs ?? 0,
          ...(token !== undefined ? { sender: api.__sender(token, i, (x) => checkResponse(x, r.outputNames, i)) } : {}),
          isCancelled: () => api.__isCancelled(token, i),
        };
      });
      // Every model above any request of the batch: a BLS call from this execute (or from what it
      // leaves running) to one of them is refused. One request's chain alone let a batch mixing a
      // client's request with one that came through A call A, and both waited for good.
      const chain = [...new Set(task.requests.flatMap((r) => r.chain))];
      if (token === undefined && typeof model.executeBatch === 'function') return api.__withChain(chain, () => executeBatch(model!, task, requests, t0));
      let raw: unknown;
      try {
        raw = await api.__withChain(chain, () => model!.execute!(requests));
      } catch (err) {
        // A throw fails every request of the batch with its error (the core answers them).
        if (token !== undefined) api.__abandon(token, requests.length);
        return { error: toWireError(err) } satisfies JsExecuteReply;
      }
      if (token !== undefined) {
        // Decoupled: the responses go through the senders; what execute returns is not one (as
        // Triton's Python backend: it must return None). Ignored, its clients waited for good.
        if (raw !== undefined && raw !== null && !(Array.isArray(raw) && raw.length === 0)) {
          api.__abandon(token, requests.length);
          return { error: { code: 'INTERNAL', message: 'a decoupled model answers through each request\'s sender: its execute() must return nothing' } } satisfies JsExecuteReply;
        }
        return { responses: [], computeInferNs: (performance.now() - t0) * 1e6 } satisfies JsExecuteReply;
      }
      if (!Array.isArray(raw) || raw.length !== requests.length) {
        const message = `execute() must return one response per request (${requests.length}), got ${Array.isArray(raw) ? raw.length : typeof raw}`;
        return { error: { code: 'INTERNAL', message } } satisfies JsExecuteReply;
      }
      const responses = raw.map((r, i) => checkResponse(r, task.requests[i]!.outputNames, i));
      const reply: JsExecuteReply = { responses, computeInferNs: (performance.now() - t0) * 1e6 };
      // Only the buffers the model handed over move; the rest is copied (the model may keep them).
      const transfer = api.__movable(responses.flatMap((r) => ('outputs' in r ? r.outputs : [])));
      const movable = { [Piscina.transferableSymbol]: transfer, [Piscina.valueSymbol]: reply };
      return Piscina.move(movable as unknown as Parameters<typeof Piscina.move>[0]);
    }
    case 'unload':
      await model?.finalize?.();
      model = undefined;
      return { ok: true };
  }
}
