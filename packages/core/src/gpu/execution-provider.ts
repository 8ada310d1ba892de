/**
 * @module The choice of device and execution provider for an instance group: a pure function of
 * the group's kind, the visible GPUs and which providers work here, so every outcome is tested
 * without a GPU. Triton: onnxruntime_backend/src/onnxruntime.cc (execution accelerators),
 * core/src/model_config_utils.cc (NormalizeInstanceGroup: KIND_AUTO)
 */
import { Errors, type TriodeError } from '../errors.js';
import type { ModelConfig, ModelInstanceGroup } from '../model-config/model-config.js';
import type { GpuDevice } from './gpu-discovery.js';
import { missingGpus } from './gpu-placement.js';

/** GPU execution providers, by their `gpu_execution_accelerator` names (Triton's where it has them). */
export const GPU_EXECUTION_PROVIDERS = ['tensorrt', 'cuda', 'webgpu'] as const;
export type GpuExecutionProvider = (typeof GPU_EXECUTION_PROVIDERS)[number];

/**
 * Tried in this order for a KIND_GPU group of a model that names none: CUDA (where an operator
 * installed a GPU build of onnxruntime-node), then WebGPU (bundled). TensorRT only when named: its
 * engine builds take minutes.
 */
export const DEFAULT_PROVIDER_ORDER: readonly GpuExecutionProvider[] = ['cuda', 'webgpu'];

/**
 * Tried for a KIND_AUTO group (or one with no kind) of a model that names none: CUDA only, as
 * Triton's KIND_AUTO takes a GPU through CUDA. WebGPU is not a default there: it runs big models
 * faster than the CPU but small ones far slower (on an H200, `simple` served from WebGPU answered
 * 269 requests/s at one in flight against the CPU's thousands, and ppocr_cls ran slower than on
 * 8 CPU threads; bench/RESULTS.md), so a model gets WebGPU by naming it
 * (`gpu_execution_accelerator [ { name: "webgpu" } ]`) or by asking for KIND_GPU.
 */
export const AUTO_PROVIDER_ORDER: readonly GpuExecutionProvider[] = ['cuda'];

/** Whether a provider works on this machine, and why not. */
export type ProviderStatus = { usable: true } | { usable: false; reason: string };

/**
 * The providers a model asks for, in its order: `optimization { execution_accelerators {
 * gpu_execution_accelerator [ { name: "webgpu" } ] } }`; when it names none, DEFAULT_PROVIDER_ORDER
 * for a KIND_GPU group and AUTO_PROVIDER_ORDER for a KIND_AUTO one (or one with no kind).
 * @throws TriodeError INVALID_ARG for a name that is not a GPU execution provider.
 */
export function requestedProviders(config: ModelConfig, group: ModelInstanceGroup = { kind: 'KIND_GPU' }): GpuExecutionProvider[] {
  const named = (config.optimization?.execution_accelerators?.gpu_execution_accelerator ?? []).map((a) => a.name ?? '');
  if (named.length === 0) return [...((group.kind ?? 'KIND_AUTO') === 'KIND_GPU' ? DEFAULT_PROVIDER_ORDER : AUTO_PROVIDER_ORDER)];
  const out: GpuExecutionProvider[] = [];
  for (const n of named) {
    const p = GPU_EXECUTION_PROVIDERS.find((x) => x === n.toLowerCase());
    if (!p) throw Errors.invalidArg(`unknown gpu_execution_accelerator "${n}" for model "${config.name ?? ''}" (${GPU_EXECUTION_PROVIDERS.join(', ')})`);
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

/** What `chooseExecutionProvider` is given. */
export interface ProviderChoiceInput {
  model: string;
  group: ModelInstanceGroup;
  /** The visible GPUs (`queryGpus`). */
  gpus: readonly GpuDevice[];
  /** Why there are no GPUs, when there are none. */
  gpuReason?: string;
  /** Candidate providers in order of preference (`requestedProviders`). */
  providers: readonly GpuExecutionProvider[];
  /** The status of each candidate probed; one not probed counts as unusable. */
  status: ReadonlyMap<GpuExecutionProvider, ProviderStatus>;
}

/** Where a group's instances run: CPU (with a warning for a KIND_AUTO fallback), GPU with a provider, or an error. */
export type ProviderChoice =
  | { device: 'cpu'; warning?: string }
  | { device: 'gpu'; provider: GpuExecutionProvider }
  | { device: 'error'; error: TriodeError };

/** Whether the choice for this group needs GPU providers probed at all (GPUs visible, kind GPU or AUTO). */
export function needsProviderProbe(group: ModelInstanceGroup, gpus: readonly GpuDevice[]): boolean {
  const kind = group.kind ?? 'KIND_AUTO';
  if (kind === 'KIND_GPU') return gpus.length > 0 && missingGpus(group, gpus).length === 0;
  return kind === 'KIND_AUTO' && gpus.length > 0 && group.gpus?.length !== 0 && missingGpus(group, gpus).length === 0;
}

/**
 * KIND_CPU/KIND_MODEL: CPU. KIND_GPU: the first usable provider, else an error naming what is
 * missing (no GPU, a GPU it lists not visible, each provider's reason). KIND_AUTO (or no kind):
 * the same on a GPU, else CPU; the fallback carries a warning when the group asked for KIND_AUTO
 * explicitly or GPUs exist (a load never fails because of AUTO).
 */
export function chooseExecutionProvider(input: ProviderChoiceInput): ProviderChoice {
  const { group, gpus } = input;
  const kind = group.kind ?? 'KIND_AUTO';
  if (kind === 'KIND_CPU' || kind === 'KIND_MODEL') return { device: 'cpu' };
  const where = `instance group "${group.name ?? ''}" of model "${input.model}"`;
  let why: string | undefined;
  const missing = missingGpus(group, gpus);
  if (gpus.length === 0) why = input.gpuReason ?? 'no GPU found by nvidia-smi';
  else if (missing.length > 0) why = `it lists GPU ${missing.join(', ')}, but the visible GPUs are ${gpus.map((g) => g.cudaId).join(', ')}`;
  else if (kind === 'KIND_AUTO' && group.gpus?.length === 0) return { device: 'cpu' };
  else {
    const provider = input.providers.find((p) => input.status.get(p)?.usable === true);
    if (provider) return { device: 'gpu', provider };
    const reasons = input.providers.map((p) => {
      const s = input.status.get(p);
      return `${p}: ${s && !s.usable ? s.reason : 'not tried'}`;
    });
    why = `no usable GPU execution provider (${reasons.join('; ')})`;
    if (kind === 'KIND_AUTO' && !input.providers.includes('webgpu')) {
      why += '; WebGPU is used only by models that name it (gpu_execution_accelerator [ { name: "webgpu" } ]) or ask for KIND_GPU';
    }
  }
  if (kind === 'KIND_GPU') return { device: 'error', error: Errors.unavailable(`Cannot place ${where} on a GPU: ${why}`) };
  const explicit = group.kind === 'KIND_AUTO' || gpus.length > 0;
  return explicit ? { device: 'cpu', warning: `${where} is KIND_AUTO and runs on CPU: ${why}` } : { device: 'cpu' };
}
