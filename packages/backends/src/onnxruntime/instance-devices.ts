/**
 * @module The device of each instance group of an onnxruntime model, chosen when its config is
 * completed (before the core normalizes KIND_AUTO): KIND_AUTO becomes KIND_GPU or KIND_CPU,
 * KIND_GPU with no GPU or no usable provider fails the load naming what is missing, and the
 * provider chosen for a model that names none is written into its config (so
 * `/v2/models/<m>/config` shows it). Triton: core/src/model_config_utils.cc (NormalizeInstanceGroup)
 */
import {
  Errors, chooseExecutionProvider, needsProviderProbe, requestedProviders,
  type GpuExecutionProvider, type GpuInventory, type Logger, type ModelConfig, type ModelInstanceGroup, type ProviderStatus,
} from '@triode/core';

/** What the choice needs: the GPUs, a provider probe, and where to say what was chosen. */
export interface DeviceChoiceContext {
  gpus: GpuInventory;
  probe(provider: GpuExecutionProvider, modelFile: string): Promise<ProviderStatus>;
  logger: Logger;
}

/** The statuses of the candidate providers, probed in order up to the first usable one. */
async function probeInOrder(providers: readonly GpuExecutionProvider[], file: string, ctx: DeviceChoiceContext): Promise<Map<GpuExecutionProvider, ProviderStatus>> {
  const status = new Map<GpuExecutionProvider, ProviderStatus>();
  for (const p of providers) {
    const s = await ctx.probe(p, file);
    status.set(p, s);
    if (s.usable) break;
  }
  return status;
}

/**
 * The provider of a KIND_GPU group, or the error that fails its load (in < 1 s without a GPU:
 * the probes fail fast).
 */
export async function gpuProviderFor(config: ModelConfig, group: ModelInstanceGroup, file: string, ctx: DeviceChoiceContext): Promise<GpuExecutionProvider> {
  const providers = requestedProviders(config, group);
  const status = needsProviderProbe(group, ctx.gpus.gpus) ? await probeInOrder(providers, file, ctx) : new Map<GpuExecutionProvider, ProviderStatus>();
  const choice = chooseExecutionProvider({ model: config.name ?? '', group, gpus: ctx.gpus.gpus, ...(ctx.gpus.reason ? { gpuReason: ctx.gpus.reason } : {}), providers, status });
  if (choice.device === 'error') throw choice.error;
  if (choice.device !== 'gpu') throw Errors.internal(`instance group "${group.name ?? ''}" is not a GPU group`);
  return choice.provider;
}

/** Resolves the kind of each instance group of an onnxruntime model in place (see the module comment). */
export async function chooseInstanceDevices(config: ModelConfig, file: string, ctx: DeviceChoiceContext): Promise<void> {
  const implicit = !config.instance_group?.length;
  const groups: ModelInstanceGroup[] = implicit ? [{}] : config.instance_group!;
  requestedProviders(config); // a name that is no provider fails the load whatever the groups
  let chosen: GpuExecutionProvider | undefined;
  for (const [i, g] of groups.entries()) {
    const group = { ...g, name: g.name || `${config.name ?? ''}_${i}` };
    const providers = requestedProviders(config, group);
    const status = needsProviderProbe(group, ctx.gpus.gpus) ? await probeInOrder(providers, file, ctx) : new Map<GpuExecutionProvider, ProviderStatus>();
    const choice = chooseExecutionProvider({ model: config.name ?? '', group, gpus: ctx.gpus.gpus, ...(ctx.gpus.reason ? { gpuReason: ctx.gpus.reason } : {}), providers, status });
    if (choice.device === 'error') throw choice.error;
    if (choice.device === 'cpu') {
      if (choice.warning) ctx.logger.warning(choice.warning, { model: config.name });
      if (g.kind === 'KIND_AUTO') g.kind = 'KIND_CPU';
      continue;
    }
    g.kind = 'KIND_GPU';
    chosen ??= choice.provider;
    const on = g.gpus?.length ? g.gpus.join(', ') : ctx.gpus.gpus.map((x) => x.cudaId).join(', ');
    ctx.logger.info(`model "${config.name ?? ''}": instance group "${group.name}" runs on GPU ${on} with execution provider ${choice.provider}`, { model: config.name });
  }
  if (implicit && groups[0]!.kind === 'KIND_GPU') config.instance_group = groups;
  const named = config.optimization?.execution_accelerators?.gpu_execution_accelerator ?? [];
  if (chosen && named.length === 0) {
    config.optimization ??= {};
    config.optimization.execution_accelerators = { ...config.optimization.execution_accelerators, gpu_execution_accelerator: [{ name: chosen }] };
  }
}
