/**
 * @module The sequence batcher: every request of a sequence (correlation id) runs on the same
 * instance, in order, one at a time; batches mix requests of different sequences. Direct and
 * Oldest strategies, a backlog for sequences that find no free slot, and the idle timeout.
 * Triton: core/src/sequence_batch_scheduler/sequence_batch_scheduler.cc
 */
import { systemClock, type Clock } from '../clock.js';
import { Errors, TriodeError, echo } from '../errors.js';
import type { ModelSequenceBatching } from '../model-config/model-config.js';
import type { BatchRunner, InstanceGate, RejectHandler, Schedulable, Scheduler } from './scheduler.js';
import { DeadlineHeap, type Deadline } from './deadline-heap.js';
import { IdleWaiters, WakeTimer } from './wake-timer.js';

/** The sequence parameters of a request. */
export interface SequenceInfo {
  /** The correlation id as a map key (`"n:1000"` or `"s:abc"`). */
  key: string;
  /** The id as given: uint64 (bigint) or string. */
  correlationId: bigint | string;
  start: boolean;
  end: boolean;
}

/** A request of a sequence. */
export interface SequenceSchedulable extends Schedulable {
  sequence: SequenceInfo;
}

/** Options of a SequenceBatchScheduler. */
export interface SequenceBatchSchedulerOptions<T> {
  /** The model's `sequence_batching { }`. */
  config: ModelSequenceBatching;
  modelName: string;
  /** The model's max_batch_size (0: one request per execution). */
  maxBatchSize: number;
  /** Called when a sequence ends, times out or is restarted, to drop its state. */
  onSequenceEnd?: (key: string) => void;
  /** Answers requests of a sequence dropped for idleness. */
  onReject?: RejectHandler<T>;
  /** @default systemClock */
  clock?: Clock;
  /**
   * Rate limiter seats, one per instance (`--rate-limit=execution_count`): an instance takes its
   * next batch only once its seat is allocated. @default none
   */
  gates?: readonly InstanceGate[];
  /**
   * What else must be equal for requests to share a batch, besides their `shapeKey`: the shapes of
   * the implicit state each request will get (a state with variable dims takes whatever shape its
   * sequence's requests made it). Asked when a batch is formed, when nothing of the sequence runs.
   * @default none
   */
  batchKey?: (request: T) => string;
}

interface Sequence<T> {
  key: string;
  /** The instance it is pinned to, or -1 while in the backlog. */
  instance: number;
  queue: T[];
  running: boolean;
  /**
   * Arrival of its last request (ns), for the idle timeout: Triton's correlation_id_timestamps_,
   * set in Enqueue only (an execution's end does not count).
   */
  lastArrivalNs: number;
  /** Set once its END request was queued: no more requests are accepted for it. */
  ending: boolean;
  /**
   * In the backlog: when it expires (ns; 0: never), the earliest `timeout` of its requests from
   * their arrival. A sequence that gets a slot no longer expires. Triton: the reaper's backlog
   * expiration.
   */
  expiresNs: number;
}

/** Schedules sequences onto instances (Triton's sequence batcher). */
export class SequenceBatchScheduler<T extends SequenceSchedulable> implements Scheduler<T> {
  readonly #runner: BatchRunner<T>;
  readonly #clock: Clock;
  readonly #modelName: string;
  readonly #onEnd: (key: string) => void;
  readonly #onReject: RejectHandler<T>;
  readonly #oldest: boolean;
  /** Sequences an instance may hold: its batch slots (Direct) or candidates (Oldest). */
  readonly #capacity: number;
  readonly #maxBatch: number;
  /**
   * The preferred sizes, each once, largest first. Read once: a config may list hundreds of
   * thousands (`Math.max(...)` over 130,000 threw on every request, which then stayed queued, review).
   */
  readonly #preferred: number[];
  readonly #delayNs: number;
  readonly #idleNs: number;
  readonly #minSlotUtilization: number;
  readonly #busy: boolean[];
  readonly #pinned: number[];
  readonly #sequences = new Map<string, Sequence<T>>();
  /**
   * The sequences holding a slot of each instance: what scheduling looks at. The backlog is never
   * scanned, so a client opening thousands of sequences does not make every request cost more.
   */
  readonly #held: Set<Sequence<T>>[];
  /**
   * Sequences waiting for a slot, oldest first (a Set keeps insertion order): one leaves from
   * anywhere in O(1), as a cancel takes it out (an array searched at each cancel made the
   * cancels of 100,000 backlogged sequences, a client going away, cost seconds of event loop).
   */
  readonly #backlog = new Set<Sequence<T>>();
  /** Backlog sequences that expire. */
  #timedBacklog = 0;
  /**
   * Their expiries, earliest first, and stale entries (a sequence that left the backlog, or
   * whose expiry moved earlier) skipped when met. An expiry pops what is due instead of walking
   * the backlog (sequences expiring one by one each walked all of it: 20,000 cost 25 s of CPU).
   */
  readonly #expiries = new DeadlineHeap<Sequence<T>>();
  #queued = 0;
  #inflight = 0;
  readonly #timer: WakeTimer;
  readonly #idle = new IdleWaiters();
  #stopped = false;
  /** stopAccepting was called: requests that start a sequence are refused. */
  #refusing = false;
  /** Waiters for no queued or running request and no live sequence. */
  readonly #quiet = new IdleWaiters();
  readonly #gates: readonly InstanceGate[] | undefined;
  /** Rate limited: instances waiting for their resources. */
  readonly #staged: boolean[];
  readonly #batchKey: ((request: T) => string) | undefined;

  constructor(instanceCount: number, runner: BatchRunner<T>, options: SequenceBatchSchedulerOptions<T>) {
    if (!Number.isInteger(instanceCount) || instanceCount < 1) throw new RangeError('instanceCount must be an integer >= 1');
    const c = options.config;
    this.#runner = runner;
    this.#clock = options.clock ?? systemClock;
    this.#modelName = options.modelName;
    this.#onEnd = options.onSequenceEnd ?? (() => undefined);
    this.#onReject = options.onReject ?? (() => undefined);
    this.#maxBatch = Math.max(1, options.maxBatchSize);
    this.#oldest = c.oldest !== undefined;
    if (c.oldest) {
      // 0 (unset, as a config JSON from Triton carries it) is max_batch_size, as in Triton's Create.
      const candidates = c.oldest.max_candidate_sequences ?? 0;
      this.#capacity = candidates > 0 ? candidates : this.#maxBatch;
      this.#preferred = [...new Set((c.oldest.preferred_batch_size ?? []).filter((p) => p > 0 && p <= this.#maxBatch))].sort((a, b) => b - a);
      this.#delayNs = (c.oldest.max_queue_delay_microseconds ?? 0) * 1000;
      this.#minSlotUtilization = 0;
    } else {
      this.#capacity = this.#maxBatch;
      this.#preferred = [];
      this.#delayNs = (c.direct?.max_queue_delay_microseconds ?? 0) * 1000;
      this.#minSlotUtilization = c.direct?.minimum_slot_utilization ?? 0;
    }
    this.#idleNs = (c.max_sequence_idle_microseconds || 1_000_000) * 1000;
    this.#busy = new Array<boolean>(instanceCount).fill(false);
    this.#pinned = new Array<number>(instanceCount).fill(0);
    this.#held = Array.from({ length: instanceCount }, () => new Set<Sequence<T>>());
    this.#timer = new WakeTimer(this.#clock, () => this.#schedule());
    this.#gates = options.gates;
    if (this.#gates && this.#gates.length !== instanceCount) throw new RangeError('options.gates must hold one gate per instance');
    this.#staged = new Array<boolean>(instanceCount).fill(false);
    this.#batchKey = options.batchKey;
  }

  /**
   * Triton's error for a request that continues no sequence. The id is the client's: echoed (a
   * string id with a newline cut the message there, as a client keeps its first line only).
   */
  #noStart(id: bigint | string): TriodeError {
    return Errors.invalidArg(`inference request for sequence ${echo(id)} to model '${this.#modelName}' must specify the START flag on the first request of the sequence`);
  }

  enqueue(request: T): void {
    const info = request.sequence;
    // Stopping for a shutdown: only a request that starts a sequence is refused (Triton's
    // "stop_ && seq_start"), so live sequences can run to their END while the server waits.
    if (this.#stopped || (this.#refusing && info.start)) throw Errors.schedulerStopping();
    const now = this.#clock.nowNs();
    let seq = this.#sequences.get(info.key);
    if (seq && info.start) {
      // START on a live id (its END queued or not): as Triton, the old sequence's queued requests
      // run first, then the new one starts, in the same slot. Its state is dropped when the START
      // runs (not now: the old requests still queued need theirs).
      seq.ending = false;
    }
    if (!seq) {
      if (!info.start) throw this.#noStart(info.correlationId);
      seq = { key: info.key, instance: -1, queue: [], running: false, lastArrivalNs: now, ending: false, expiresNs: 0 };
      this.#sequences.set(info.key, seq);
      this.#place(seq);
    } else if (seq.ending && !info.start) {
      throw this.#noStart(info.correlationId);
    }
    if (info.end) seq.ending = true;
    if (seq.instance < 0 && (request.timeoutUs ?? 0) > 0) this.#expireAt(seq, now + request.timeoutUs! * 1000);
    seq.queue.push(request);
    seq.lastArrivalNs = now;
    this.#queued++;
    this.#schedule();
  }

  cancel(request: T): boolean {
    const seq = this.#sequences.get(request.sequence.key);
    const i = seq ? seq.queue.indexOf(request) : -1;
    if (!seq || i < 0) return false;
    // The requests of its sequence queued after it are cancelled too (Triton cancels a sequence's
    // pending requests): run without it, they would compute on a state that skipped a step. A
    // START after it begins another sequence, and stays.
    let j = i + 1;
    while (j < seq.queue.length && !seq.queue[j]!.sequence.start) j++;
    const dropped = seq.queue.splice(i, j - i);
    this.#queued -= dropped.length;
    for (const r of dropped.slice(1)) this.#onReject(r, Errors.cancelled());
    if (seq.queue.length === i) {
      // Nothing of it is left to come: the sequence is over (a request without START is refused),
      // and it gives its slot up once what runs has run.
      seq.ending = true;
      if (!seq.running && seq.queue.length === 0) this.#release(seq);
    }
    this.#notifyIdle();
    // A slot holder left with nothing queued now idles: the wake timer must count its idle time.
    this.#schedule();
    return true;
  }

  pendingCount(): number {
    return this.#queued;
  }

  inflightInferenceCount(): number {
    return this.#inflight;
  }

  /** Sequences holding a slot or waiting for one. */
  activeSequenceCount(): number {
    return this.#sequences.size;
  }

  idle(): Promise<void> {
    return this.#idle.wait(this.#queued === 0 && this.#inflight === 0);
  }

  stopAccepting(): void {
    this.#refusing = true;
  }

  quiesced(): Promise<void> {
    return this.#quiet.wait(this.#isQuiet());
  }

  #isQuiet(): boolean {
    return this.#queued === 0 && this.#inflight === 0 && this.#sequences.size === 0;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#timer.clear();
  }

  /** A backlog sequence expires at `ns` at the latest. */
  #expireAt(seq: Sequence<T>, ns: number): void {
    if (seq.expiresNs !== 0 && seq.expiresNs <= ns) return;
    if (seq.expiresNs === 0) this.#timedBacklog++;
    seq.expiresNs = ns;
    this.#expiries.push(ns, seq);
  }

  /** A sequence leaves the backlog (for a slot, or for good): it no longer expires. */
  #untime(seq: Sequence<T>): void {
    if (seq.expiresNs === 0) return;
    seq.expiresNs = 0;
    this.#timedBacklog--;
    // Its entry stays in the heap, stale; rebuilt once stale entries outnumber the live ones.
    if (this.#expiries.size > 2 * this.#timedBacklog + 1024) {
      const live: Deadline<Sequence<T>>[] = [];
      for (const s of this.#backlog) if (s.expiresNs > 0) live.push({ at: s.expiresNs, value: s });
      this.#expiries.reset(live);
    }
  }

  /** The earliest expiry of a backlog sequence (ns), or 0: stale entries on top are dropped. */
  #nextExpiry(): number {
    for (let top = this.#expiries.peek(); top; top = this.#expiries.peek()) {
      if (top.value.expiresNs === top.at && this.#backlog.has(top.value)) return top.at;
      this.#expiries.pop();
    }
    return 0;
  }

  /**
   * Answers and drops the backlog sequences whose timeout passed (UNAVAILABLE, as Triton's
   * reaper), earliest expiry first; only those due are visited.
   */
  #expireBacklog(now: number, later: (t: number) => void): void {
    if (this.#timedBacklog === 0) {
      if (this.#expiries.size > 0) this.#expiries.reset([]);
      return;
    }
    let error: TriodeError | undefined;
    for (let at = this.#nextExpiry(); at > 0; at = this.#nextExpiry()) {
      if (at > now) {
        later(at);
        break;
      }
      const seq = this.#expiries.pop()!.value;
      this.#backlog.delete(seq);
      this.#untime(seq);
      const requests = seq.queue.splice(0);
      this.#queued -= requests.length;
      this.#sequences.delete(seq.key);
      this.#onEnd(seq.key);
      error ??= new TriodeError('UNAVAILABLE', 'timeout of the corresponding sequence has been expired', { rejected: true });
      for (const r of requests) this.#onReject(r, error);
    }
    if (error) this.#notifyIdle();
  }

  /** Pins a sequence to the instance with the most free capacity, or puts it in the backlog. */
  #place(seq: Sequence<T>): void {
    let best = -1;
    for (let i = 0; i < this.#pinned.length; i++) {
      if (this.#pinned[i]! < this.#capacity && (best < 0 || this.#pinned[i]! < this.#pinned[best]!)) best = i;
    }
    if (best < 0) {
      this.#backlog.add(seq);
      return;
    }
    seq.instance = best;
    this.#pinned[best]!++;
    this.#held[best]!.add(seq);
  }

  /** Frees a sequence's slot (END ran, or idle) and gives it to the oldest backlog sequence. */
  #release(seq: Sequence<T>): void {
    this.#sequences.delete(seq.key);
    this.#onEnd(seq.key);
    this.#quiet.notify(this.#isQuiet());
    if (seq.instance < 0) {
      this.#backlog.delete(seq);
      this.#untime(seq);
      return;
    }
    this.#pinned[seq.instance]!--;
    this.#held[seq.instance]!.delete(seq);
    const next = this.#backlog.values().next().value;
    if (next) {
      this.#backlog.delete(next);
      this.#untime(next);
      next.instance = seq.instance;
      this.#pinned[seq.instance]!++;
      this.#held[seq.instance]!.add(next);
    }
  }


  #schedule(): void {
    if (this.#stopped) return;
    const now = this.#clock.nowNs();
    let wake = 0;
    const later = (t: number) => { if (t > 0 && (wake === 0 || t < wake)) wake = t; };
    // Idle sequences lose their slot (and their state): idle counts from the last request's
    // arrival, as Triton's reaper counts it, even while a request of it runs or waits. One in the
    // backlog is never idle: it came with its START, and leaves the backlog only for a slot.
    for (const held of this.#held) for (const seq of [...held]) {
      // Ending already (END queued, or force-ended): its slot is freed after its last request.
      if (seq.ending && (seq.running || seq.queue.length > 0)) continue;
      const at = seq.lastArrivalNs + this.#idleNs;
      if (at > now) later(at);
      else if (!seq.running && seq.queue.length === 0) this.#release(seq);
      // Force-ended, as Triton's reaper queues a null request behind what the slot holds: what it
      // holds runs and is answered, then the slot is freed (dispatch's completion); a request that
      // arrives for it meanwhile without START is refused (#noStart).
      else seq.ending = true;
    }
    this.#expireBacklog(now, later);
    for (let inst = 0; inst < this.#busy.length; inst++) {
      if (this.#busy[inst] || this.#staged[inst]) continue;
      const chosen = this.#batchFor(inst, now, later);
      if (!chosen) continue;
      const gate = this.#gates?.[inst];
      if (gate) {
        this.#staged[inst] = true;
        gate.stage(() => this.#allocated(inst, gate));
      } else {
        this.#dispatch(inst, chosen);
      }
    }
    this.#timer.set(wake);
  }

  /** The sequences whose next requests form instance `inst`'s batch now, or undefined to wait. */
  #batchFor(inst: number, now: number, later: (t: number) => void): Sequence<T>[] | undefined {
    let ready: Sequence<T>[] = [];
    for (const seq of this.#held[inst]!) {
      if (!seq.running && seq.queue.length > 0) ready.push(seq);
    }
    if (ready.length === 0) return undefined;
    // Oldest first: by the arrival of each sequence's next request.
    ready.sort((a, b) => a.queue[0]!.enqueueNs - b.queue[0]!.enqueueNs);
    // Only requests of the same shapes (and inputs, and implicit state shapes) batch together, as
    // in the dynamic batcher: the oldest decides, the others wait for a later batch. Mixed, the
    // batch was joined wrongly and one client's shape failed every sequence in it.
    // The state shapes are asked for only of the requests whose own shapes match.
    const batchKey = this.#batchKey;
    const first = ready[0]!.queue[0]!;
    const key = first.shapeKey;
    const stateKey = batchKey?.(first);
    ready = ready.filter((s) => s.queue[0]!.shapeKey === key && (batchKey === undefined || batchKey(s.queue[0]!) === stateKey));
    let n = Math.min(ready.length, this.#maxBatch);
    // As Triton's dynamic batcher (Oldest runs one): a batch grows no larger than the largest
    // preferred size, with a queue delay or without one.
    if (this.#preferred.length > 0) n = Math.min(n, this.#preferred[0]!);
    const oldestNs = ready[0]!.queue[0]!.delayFromNs ?? ready[0]!.queue[0]!.enqueueNs;
    if (this.#delayNs > 0 && now < oldestNs + this.#delayNs) {
      const preferredAt = this.#preferred.find((p) => p <= n);
      const full = n >= this.#maxBatch;
      const utilized = this.#minSlotUtilization > 0 && n / this.#capacity >= this.#minSlotUtilization;
      if (preferredAt !== undefined) n = preferredAt;
      else if (!full && (this.#oldest || (this.#minSlotUtilization > 0 && !utilized))) {
        later(oldestNs + this.#delayNs);
        return undefined;
      }
    }
    // Never an empty batch: it would be dispatched, run nothing, and be dispatched again for ever.
    return n > 0 ? ready.slice(0, n) : undefined;
  }

  /** Rate limited: instance `inst` got its resources; it takes the batch its sequences form now. */
  #allocated(inst: number, gate: InstanceGate): void {
    this.#staged[inst] = false;
    const chosen = this.#stopped ? undefined : this.#batchFor(inst, this.#clock.nowNs(), () => undefined);
    if (chosen) {
      this.#dispatch(inst, chosen);
      return;
    }
    gate.release(false);
    this.#schedule();
  }

  #dispatch(inst: number, chosen: Sequence<T>[]): void {
    const batch = chosen.map((s) => {
      s.running = true;
      return s.queue.shift()!;
    });
    this.#queued -= batch.length;
    this.#inflight += batch.length;
    this.#busy[inst] = true;
    this.#runner(inst, batch)
      .catch(() => undefined)
      .finally(() => {
        const done = this.#clock.nowNs();
        this.#busy[inst] = false;
        this.#inflight -= batch.length;
        chosen.forEach((s) => {
          s.running = false;
          // Ended (its END ran, or the rest of it was cancelled) with nothing queued: the slot is free.
          if (s.ending && s.queue.length === 0 && this.#sequences.get(s.key) === s) this.#release(s);
        });
        const gate = this.#gates?.[inst];
        if (gate) {
          // Staged again (if it has more) before anyone else is allocated: Triton's OnRelease order.
          const more = !this.#stopped && this.#batchFor(inst, done, () => undefined) !== undefined;
          if (more) this.#staged[inst] = true;
          gate.release(true, more ? () => this.#allocated(inst, gate) : undefined);
        }
        this.#schedule();
        this.#notifyIdle();
      });
  }

  #notifyIdle(): void {
    this.#idle.notify(this.#queued === 0 && this.#inflight === 0);
    this.#quiet.notify(this.#isQuiet());
  }

  rejectAll(error: TriodeError): void {
    for (const seq of this.#sequences.values()) {
      for (const r of seq.queue.splice(0)) this.#onReject(r, error);
    }
    this.#queued = 0;
    this.#notifyIdle();
  }
}
