/**
 * @module The only place Redis key names are built (gateways and workers share them).
 * Everything lives under one prefix, so several clusters can share a Redis.
 */

/**
 * A model name as a key component: ':' and '%' escaped (%3A, %25), so that no model name can build
 * another key ('a:w:w1' was the stream of model 'a' pinned to worker 'w1'; model 'm:x' with sequence
 * 'y' was model 'm' with sequence 'x:y'). Names without them, nearly all, are unchanged.
 */
function part(name: string): string {
  return /[:%]/.test(name) ? name.replace(/%/g, '%25').replace(/:/g, '%3A') : name;
}

/** Key names of one cluster. */
export class ClusterKeys {
  readonly prefix: string;

  constructor(prefix = 'triode') {
    this.prefix = prefix;
  }

  /** The request stream of a model (all versions; the request names the version). */
  requests(model: string): string {
    return `${this.prefix}:req:${part(model)}`;
  }

  /** A worker's own request stream for a model: the requests of sequences pinned to it. */
  workerRequests(model: string, workerId: string): string {
    return `${this.prefix}:req:${part(model)}:w:${workerId}`;
  }

  /** Which worker holds a sequence (its correlation id as a key, see SequenceInfo.key). */
  sequence(model: string, sequenceKey: string): string {
    return `${this.prefix}:seq:${part(model)}:${sequenceKey}`;
  }

  /** The consumer group all workers of the cluster read request streams with. */
  get group(): string {
    return 'workers';
  }

  /** A gateway's reply stream. */
  replies(gatewayId: string): string {
    return `${this.prefix}:reply:${gatewayId}`;
  }

  /** A worker's registry entry (what it has loaded), kept alive by its heartbeat. */
  worker(workerId: string): string {
    return `${this.prefix}:worker:${workerId}`;
  }

  /** Pub/sub channel of load/unload commands to every worker. */
  get control(): string {
    return `${this.prefix}:control`;
  }

  /** Pub/sub channel of cancellations: a gateway whose client went away tells the workers. */
  get cancel(): string {
    return `${this.prefix}:cancel`;
  }

  /** Where the workers answer control command `id`. */
  controlReplies(id: string): string {
    return `${this.prefix}:control:reply:${id}`;
  }

  /** The cluster's loaded set: model -> load parameters (a worker that joins later loads it). */
  get desired(): string {
    return `${this.prefix}:desired`;
  }

  /** Pattern matching every worker entry. */
  get workerPattern(): string {
    return `${this.prefix}:worker:*`;
  }
}
