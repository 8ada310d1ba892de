/**
 * @module The rate limiter (`--rate-limit=execution_count`): an instance executes only while it
 * holds the resources its instance group's `rate_limiter` lists, and among instances waiting for
 * resources the one with the least `executions x priority` goes next, across models.
 * Triton: core/src/rate_limiter.cc (ResourceManager, ModelInstanceContext, AttemptAllocation)
 */
import { Errors } from '../errors.js';
import type { ModelInstanceGroup } from '../model-config/model-config.js';
import type { InstanceGate } from './scheduler.js';

/** One `--rate-limit-resource=<name>:<count>[:<device>]`. */
export interface RateLimitResource {
  name: string;
  count: number;
  /** The device it is given for; absent: every device (and the global pool). */
  device?: number;
}

/** Options of a RateLimiter. */
export interface RateLimiterOptions {
  /**
   * Available counts (`--rate-limit-resource`). When any is given, a resource that no entry names
   * is unavailable (count 0), as in Triton. @default [] (each resource: the largest count any
   * loaded instance asks for)
   */
  resources?: RateLimitResource[];
}

/** What the limiter needs to know of one model instance. */
export interface RateLimitedInstanceSpec {
  /** The device it runs on (CPU instances: 0). */
  device: number;
  /** Its instance group's `rate_limiter`. */
  rateLimiter?: ModelInstanceGroup['rate_limiter'];
}

/** Device key of global resources (Triton: GLOBAL_RESOURCE_KEY). */
const GLOBAL = -2;
/** Device key of a `--rate-limit-resource` given for every device (Triton: PER_DEVICE_RESOURCE_KEY). */
const PER_DEVICE = -1;

/** device (or GLOBAL / PER_DEVICE) -> resource name -> count */
type ResourceMap = Map<number, Map<string, number>>;

function add(map: ResourceMap, device: number, name: string, count: number, combine: (a: number, b: number) => number): void {
  let m = map.get(device);
  if (!m) map.set(device, m = new Map());
  const had = m.get(name);
  m.set(name, had === undefined ? count : combine(had, count));
}

/** Devices in Triton's std::map order (global first), then names in order: the same error wins. */
function sorted(map: ResourceMap): [number, [string, number][]][] {
  return [...map.entries()].sort((a, b) => a[0] - b[0]).map(([d, m]) => [d, [...m.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))]);
}

type State = 'available' | 'staged' | 'allocated';

/** One instance's seat at the limiter (Triton: RateLimiter::ModelInstanceContext). */
export class RateLimitedInstance implements InstanceGate {
  /** `rate_limiter.priority`; 0 counts as 1. */
  readonly priority: number;
  /** What it needs while executing: device (GLOBAL for global resources) -> name -> count. */
  readonly resources: ResourceMap = new Map();
  /** Batches it has executed under the limiter (Triton: exec_count_). */
  executions = 0;
  #state: State = 'available';
  #onAllocate: (() => void) | undefined;
  /** Order of staging: equal scaled priorities go first come, first served. */
  stagedAt = 0;
  readonly #limiter: RateLimiter;

  /** @internal made by RateLimiter.register */
  constructor(limiter: RateLimiter, spec: RateLimitedInstanceSpec) {
    this.#limiter = limiter;
    this.priority = Math.max(1, spec.rateLimiter?.priority ?? 1);
    for (const r of spec.rateLimiter?.resources ?? []) {
      // A later entry of the same name replaces an earlier one, as Triton's map assignment does.
      add(this.resources, r.global ? GLOBAL : spec.device, r.name ?? '', r.count ?? 0, (_a, b) => b);
    }
  }

  /** Who goes next among staged instances: the least `executions x priority` (Triton: ScaledPriority). */
  get scaledPriority(): number {
    return this.executions * this.priority;
  }

  get state(): State {
    return this.#state;
  }

  stage(onAllocate: () => void): void {
    if (this.#state !== 'available') throw new Error(`cannot stage a rate-limited instance that is ${this.#state}`);
    this.#state = 'staged';
    this.#onAllocate = onAllocate;
    this.#limiter.onStage(this);
  }

  release(executed: boolean, next?: () => void): void {
    if (this.#state !== 'allocated') throw new Error(`cannot release a rate-limited instance that is ${this.#state}`);
    if (executed) this.executions++;
    this.#state = 'available';
    this.#limiter.onRelease(this, next);
  }

  /** @internal staged -> allocated; returns the callback to run. */
  allocate(): () => void {
    this.#state = 'allocated';
    const f = this.#onAllocate!;
    this.#onAllocate = undefined;
    return f;
  }

  /** @internal staged -> available (its model is unloading). */
  unstage(): void {
    if (this.#state === 'staged') {
      this.#state = 'available';
      this.#onAllocate = undefined;
    }
  }
}

/**
 * Grants model instances the resources they need to execute, one server-wide pool. An instance
 * with work stages itself; the staged instance with the least scaled priority is allocated as
 * soon as its resources are free (only that one: a lower-priority instance does not jump ahead);
 * it releases them when its execution ends.
 * @example
 * const limiter = new RateLimiter({ resources: [{ name: 'R1', count: 1 }] });
 * const [gate] = limiter.register([{ device: 0, rateLimiter: { resources: [{ name: 'R1', count: 1 }] } }]);
 * gate.stage(() => run().finally(() => gate.release(true)));
 */
export class RateLimiter {
  readonly #explicit: ResourceMap = new Map();
  readonly #instances = new Set<RateLimitedInstance>();
  /** Available count of each resource. */
  #max: ResourceMap = new Map();
  readonly #allocated: ResourceMap = new Map();
  #staged: RateLimitedInstance[] = [];
  #stageSeq = 0;
  #allocating = false;

  constructor(options: RateLimiterOptions = {}) {
    for (const [i, r] of (options.resources ?? []).entries()) {
      if (!r.name) throw new TypeError(`options.resources[${i}].name must be a non-empty string`);
      if (!Number.isSafeInteger(r.count) || r.count < 0) throw new RangeError(`options.resources[${i}].count must be an integer >= 0, got ${String(r.count)}`);
      if (r.device !== undefined && (!Number.isSafeInteger(r.device) || r.device < 0)) throw new RangeError(`options.resources[${i}].device must be an integer >= 0, got ${String(r.device)}`);
      add(this.#explicit, r.device ?? PER_DEVICE, r.name, r.count, Math.max);
    }
  }

  /**
   * Registers a model version's instances (all or none) and recomputes the available counts.
   * @throws TriodeError INVALID_ARG with Triton's message when a resource count cannot be met or a
   *   resource is both global and per device; nothing is registered then.
   */
  register(specs: readonly RateLimitedInstanceSpec[]): RateLimitedInstance[] {
    const fresh = specs.map((s) => new RateLimitedInstance(this, s));
    for (const x of fresh) this.#instances.add(x);
    try {
      this.#max = this.#limits();
    } catch (err) {
      for (const x of fresh) this.#instances.delete(x);
      throw err;
    }
    return fresh;
  }

  /** Removes instances (an unloaded model version); one that still executes gives its resources back on release. */
  unregister(instances: readonly RateLimitedInstance[]): void {
    for (const x of instances) {
      this.#instances.delete(x);
      x.unstage();
    }
    this.#staged = this.#staged.filter((x) => this.#instances.has(x));
    // Fewer instances never raise a requirement: this cannot fail.
    this.#max = this.#limits();
    this.#attemptAllocation();
  }

  /** The available count of a resource on a device (`global`: the global pool). For tests and logs. */
  available(name: string, device: number | 'global'): number {
    return this.#max.get(device === 'global' ? GLOBAL : device)?.get(name) ?? 0;
  }

  /** How many of a resource are held now. */
  inUse(name: string, device: number | 'global'): number {
    return this.#allocated.get(device === 'global' ? GLOBAL : device)?.get(name) ?? 0;
  }

  /** @internal */
  onStage(x: RateLimitedInstance): void {
    x.stagedAt = this.#stageSeq++;
    this.#staged.push(x);
    this.#attemptAllocation();
  }

  /** @internal Frees `x`'s resources; `next`: stage it again first (Triton's OnRelease order). */
  onRelease(x: RateLimitedInstance, next: (() => void) | undefined): void {
    for (const [device, m] of x.resources) {
      for (const [name, count] of m) add(this.#allocated, device, name, -count, (a, b) => a + b);
    }
    if (next && this.#instances.has(x)) x.stage(next);
    else this.#attemptAllocation();
  }

  /**
   * Allocates staged instances in scaled-priority order while the first can have its resources.
   * Callbacks may stage or release re-entrantly: those calls only mark that another pass is due.
   */
  #attemptAllocation(): void {
    if (this.#allocating) return;
    this.#allocating = true;
    try {
      for (;;) {
        let best = -1;
        for (let i = 0; i < this.#staged.length; i++) {
          const x = this.#staged[i]!;
          const b = best < 0 ? undefined : this.#staged[best]!;
          if (!b || x.scaledPriority < b.scaledPriority || (x.scaledPriority === b.scaledPriority && x.stagedAt < b.stagedAt)) best = i;
        }
        if (best < 0) return;
        const x = this.#staged[best]!;
        if (!this.#fits(x)) return;
        this.#staged.splice(best, 1);
        for (const [device, m] of x.resources) {
          for (const [name, count] of m) add(this.#allocated, device, name, count, (a, b) => a + b);
        }
        x.allocate()();
      }
    } finally {
      this.#allocating = false;
    }
  }

  #fits(x: RateLimitedInstance): boolean {
    for (const [device, m] of x.resources) {
      for (const [name, count] of m) {
        const used = this.#allocated.get(device)?.get(name) ?? 0;
        if (used + count > (this.#max.get(device)?.get(name) ?? 0)) return false;
      }
    }
    return true;
  }

  /** The available counts for the registered instances. Triton: ResourceManager::UpdateResourceLimits */
  #limits(): ResourceMap {
    const max: ResourceMap = new Map();
    for (const x of this.#instances) {
      for (const [device, m] of x.resources) for (const [name, count] of m) add(max, device, name, count, Math.max);
    }
    if (this.#explicit.size > 0) {
      for (const [device, entries] of sorted(max)) {
        for (const [name, need] of entries) {
          // Not given explicitly: unavailable. A global resource takes the largest count given
          // for its name on any device; a device's, the largest given for it or for every device.
          let have = 0;
          for (const [d, m] of this.#explicit) {
            if (device === GLOBAL || d === device || d === PER_DEVICE) have = Math.max(have, m.get(name) ?? 0);
          }
          if (have < need) {
            throw Errors.invalidArg(`Resource count for "${name}" is limited to ${have} which will prevent scheduling of one or more model instances, the minimum required count is ${need}`);
          }
          max.get(device)!.set(name, have);
        }
      }
    }
    for (const [name] of max.get(GLOBAL) ?? []) {
      for (const [device, m] of max) {
        if (device !== GLOBAL && m.has(name)) {
          throw Errors.invalidArg(`Resource "${name}" is present as both global and device-specific resource in the model configuration.`);
        }
      }
    }
    return max;
  }
}
