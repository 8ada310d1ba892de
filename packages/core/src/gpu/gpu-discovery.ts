/**
 * @module GPU discovery through `nvidia-smi`'s CSV query interface: the GPUs this process may use
 * (after `CUDA_VISIBLE_DEVICES`), with the readings the `nv_gpu_*` metrics report.
 * Triton: core/src/cuda_utils.cc (GetSupportedGPUs), core/src/metrics.cc (DCGM metrics)
 */
import { execFile } from 'node:child_process';

/** One GPU as `nvidia-smi` reports it. */
export interface GpuDevice {
  /** `nvidia-smi`'s index (PCI bus order), which ignores `CUDA_VISIBLE_DEVICES`. */
  index: number;
  /** The CUDA device id this process sees it as: its position among the visible GPUs. */
  cudaId: number;
  /** `GPU-xxxxxxxx-...`: the `gpu_uuid` label of the `nv_gpu_*` metrics. */
  uuid: string;
  name: string;
  memoryTotalBytes: number;
  memoryUsedBytes: number;
  /** 0..1 (`utilization.gpu` / 100); undefined when `nvidia-smi` says `[N/A]`. */
  utilization?: number;
  /** Watts; undefined when not reported. */
  powerDrawW?: number;
  /** Watts; undefined when not reported. */
  powerLimitW?: number;
}

/** The fields asked of `nvidia-smi --query-gpu`, in the order `parseNvidiaSmiCsv` reads them. */
export const NVIDIA_SMI_QUERY = 'index,uuid,name,memory.total,memory.used,utilization.gpu,power.draw,power.limit';

/** The arguments `queryGpus` runs `nvidia-smi` with. */
export const NVIDIA_SMI_ARGS: readonly string[] = [`--query-gpu=${NVIDIA_SMI_QUERY}`, '--format=csv,noheader,nounits'];

const MIB = 1024 * 1024;

/** A number, or undefined for `[N/A]`, `[Not Supported]` and the like. */
function reading(v: string | undefined): number | undefined {
  if (v === undefined) return undefined;
  const n = Number(v.trim());
  return v.trim() !== '' && Number.isFinite(n) ? n : undefined;
}

/**
 * Parses `nvidia-smi --query-gpu=<NVIDIA_SMI_QUERY> --format=csv,noheader,nounits` output
 * (memory in MiB, utilization in %, power in W). Lines that do not parse are skipped; `cudaId`
 * is the row's position (before `CUDA_VISIBLE_DEVICES` is applied).
 */
export function parseNvidiaSmiCsv(text: string): GpuDevice[] {
  const out: GpuDevice[] = [];
  for (const line of text.split('\n')) {
    const f = line.split(',').map((s) => s.trim());
    if (f.length < 5) continue;
    const index = reading(f[0]);
    const total = reading(f[3]);
    if (index === undefined || !Number.isInteger(index) || !f[1] || total === undefined) continue;
    const util = reading(f[5]);
    const draw = reading(f[6]);
    const limit = reading(f[7]);
    out.push({
      index, cudaId: out.length, uuid: f[1], name: f[2] ?? '',
      memoryTotalBytes: total * MIB, memoryUsedBytes: (reading(f[4]) ?? 0) * MIB,
      ...(util !== undefined ? { utilization: util / 100 } : {}),
      ...(draw !== undefined ? { powerDrawW: draw } : {}),
      ...(limit !== undefined ? { powerLimitW: limit } : {}),
    });
  }
  return out;
}

/**
 * The GPUs `CUDA_VISIBLE_DEVICES` leaves visible, in its order, numbered as CUDA numbers them
 * (`cudaId` 0, 1, ...). Unset: all. Entries are `nvidia-smi` indices or UUIDs (`GPU-...`, a
 * unique prefix is enough); as in CUDA, the list ends at the first entry that names no GPU
 * (so `""` and `-1` hide every GPU).
 */
export function applyCudaVisibleDevices(gpus: readonly GpuDevice[], cudaVisibleDevices: string | undefined): GpuDevice[] {
  if (cudaVisibleDevices === undefined) return gpus.map((g, i) => ({ ...g, cudaId: i }));
  const out: GpuDevice[] = [];
  for (const raw of cudaVisibleDevices.split(',')) {
    const token = raw.trim();
    const matches = /^\d+$/.test(token)
      ? gpus.filter((g) => g.index === Number(token))
      : token.length > 0 ? gpus.filter((g) => g.uuid.startsWith(token)) : [];
    const gpu = matches.length === 1 ? matches[0]! : undefined;
    if (!gpu || out.some((g) => g.uuid === gpu.uuid)) break;
    out.push({ ...gpu, cudaId: out.length });
  }
  return out;
}

/** Options of `queryGpus`. */
export interface GpuQueryOptions {
  /** The `nvidia-smi` to run (the CLI takes it from env `TRIODE_NVIDIA_SMI`). @default 'nvidia-smi' */
  nvidiaSmi?: string;
  /** The `CUDA_VISIBLE_DEVICES` to honour (undefined: every GPU). @default undefined */
  cudaVisibleDevices?: string | undefined;
  /** `nvidia-smi` still running after this is killed and counts as no GPU. @default 10000 */
  timeoutMs?: number;
}

/** What `queryGpus` found: the visible GPUs, or none and why. */
export interface GpuInventory {
  gpus: GpuDevice[];
  /** Why there are none (no `nvidia-smi`, it failed, CUDA_VISIBLE_DEVICES hides them); absent when some were found. */
  reason?: string;
}

/**
 * Runs `nvidia-smi` and returns the visible GPUs. Never throws: a missing or failing
 * `nvidia-smi` is "no GPU" with the reason.
 * @example const { gpus, reason } = await queryGpus({ nvidiaSmi: process.env.TRIODE_NVIDIA_SMI });
 */
export function queryGpus(options: GpuQueryOptions = {}): Promise<GpuInventory> {
  const smi = options.nvidiaSmi || 'nvidia-smi';
  return new Promise((resolve) => {
    const child = execFile(smi, NVIDIA_SMI_ARGS, { timeout: options.timeoutMs ?? 10_000, maxBuffer: 1024 * 1024 }, (err, stdout, stderr) => {
      if (err) {
        const code = (err as NodeJS.ErrnoException).code;
        const why = code === 'ENOENT'
          ? `'${smi}' was not found (is the NVIDIA driver installed?)`
          : err.killed ? `'${smi}' did not answer in ${options.timeoutMs ?? 10_000} ms`
          : `'${smi}' failed: ${(String(stderr).trim() || String(stdout).trim() || err.message).split('\n')[0]!}`;
        resolve({ gpus: [], reason: `no GPU found by nvidia-smi: ${why}` });
        return;
      }
      const all = parseNvidiaSmiCsv(String(stdout));
      const gpus = applyCudaVisibleDevices(all, options.cudaVisibleDevices);
      if (gpus.length > 0) resolve({ gpus });
      else if (all.length === 0) resolve({ gpus, reason: 'no GPU found by nvidia-smi: it listed none' });
      else resolve({ gpus, reason: `no GPU found by nvidia-smi: CUDA_VISIBLE_DEVICES='${options.cudaVisibleDevices ?? ''}' hides all ${all.length}` });
    });
    // An 'error' (spawn failure) also reaches the callback above; this keeps it from being thrown.
    child.on('error', () => undefined);
  });
}
