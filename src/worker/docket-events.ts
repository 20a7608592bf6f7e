/**
 * Lifecycle events for metrics, tracing and logs. A small typed emitter rather than Node's
 * EventEmitter: Node's throws when an `'error'` event has no listener, which would turn a
 * transient database error into a crashed process, and a listener that throws must never break
 * the worker loop that emitted the event.
 */
import type { AttemptError, ClaimedJob } from '../job/job.js';
import type { Logger } from './logger.js';
import { errorFields } from './logger.js';

/** A job was accepted by submit or submitMany (`created` is false for an idempotent repeat). */
export interface SubmittedEvent {
  id: string;
  kind: string;
  queue: string;
  runAt: Date;
  created: boolean;
}

/** A worker leased a job. */
export interface ClaimedEvent {
  job: ClaimedJob;
  workerId: string;
}

/** A handler was invoked; `latenessMs` is its start minus the job's runAt, by the worker clock. */
export interface StartedEvent {
  job: ClaimedJob;
  workerId: string;
  latenessMs: number;
}

/** A completion was accepted: the job is done and can never run again. */
export interface CompletedEvent {
  job: ClaimedJob;
  workerId: string;
  durationMs: number;
}

/** An attempt failed and was recorded; `retryAt` is null when the job was parked. */
export interface FailedEvent {
  job: ClaimedJob;
  workerId: string;
  error: Pick<AttemptError, 'message' | 'kind' | 'detail'>;
  durationMs: number;
  retryAt: Date | null;
}

/** A job as it is once parked: state `dead`, no lease (the rest as it was claimed). */
export interface ParkedJob extends Omit<ClaimedJob, 'state' | 'leaseUntil'> {
  state: 'dead';
  leaseUntil: null;
}

/** A job reached the dead-letter table after its last attempt failed; `job.state` is `dead`. */
export interface ParkedEvent {
  job: ParkedJob;
  workerId: string;
  error: Pick<AttemptError, 'message' | 'kind' | 'detail'>;
}

/** A fenced write was refused: the lease had passed to another claim or the job was cancelled. */
export interface StaleEvent {
  job: ClaimedJob;
  workerId: string;
  operation: 'heartbeat' | 'complete' | 'fail' | 'release';
}

/**
 * A running job's lease is gone and its handler's signal was aborted: `heartbeat_refused` when the
 * database said so (lapsed, taken over or cancelled), `lease_unconfirmed` when no heartbeat could
 * reach the database before the lease would have lapsed. Also for a job whose handler has settled
 * while its completion or failure still waits in a batch (the write is then withdrawn); not once
 * that write has been sent, since its own answer decides (a `stale` event if the lease had passed on).
 */
export interface LeaseLostEvent {
  job: ClaimedJob;
  workerId: string;
  reason: 'heartbeat_refused' | 'lease_unconfirmed';
}

/** A database or internal error that Docket handled (retried, backed off); never fatal. */
export interface ErrorEvent {
  error: unknown;
  /** What was being done: `claim`, `heartbeat`, `complete`, `fail`, `release`, `subscribe`, `prune`, … */
  operation: string;
  workerId?: string | undefined;
}

/** Every event name and the value its listeners receive. */
export interface DocketEventMap {
  submitted: SubmittedEvent;
  claimed: ClaimedEvent;
  started: StartedEvent;
  completed: CompletedEvent;
  failed: FailedEvent;
  parked: ParkedEvent;
  stale: StaleEvent;
  leaseLost: LeaseLostEvent;
  error: ErrorEvent;
}

/** The name of a Docket event. */
export type DocketEventName = keyof DocketEventMap;

/** A listener for event `E`. */
export type DocketEventListener<E extends DocketEventName> = (event: DocketEventMap[E]) => void;

/** A typed, EventEmitter-like hub whose listeners can never break the code that emits. */
export class DocketEvents {
  private readonly listeners = new Map<DocketEventName, Set<(event: never) => void>>();

  constructor(private readonly logger: Logger) {}

  /** Adds a listener; returns this for chaining, like EventEmitter. */
  on<E extends DocketEventName>(name: E, listener: DocketEventListener<E>): this {
    let set = this.listeners.get(name);
    if (!set) {
      set = new Set();
      this.listeners.set(name, set);
    }
    set.add(listener as (event: never) => void);
    return this;
  }

  /** Removes a listener added with {@link on}. */
  off<E extends DocketEventName>(name: E, listener: DocketEventListener<E>): this {
    this.listeners.get(name)?.delete(listener as (event: never) => void);
    return this;
  }

  /** Adds a listener that runs once. */
  once<E extends DocketEventName>(name: E, listener: DocketEventListener<E>): this {
    const wrapper: DocketEventListener<E> = (event) => {
      this.off(name, wrapper);
      listener(event);
    };
    return this.on(name, wrapper);
  }

  /** Whether anyone listens, so hot paths can skip building an event nobody reads. */
  has(name: DocketEventName): boolean {
    return (this.listeners.get(name)?.size ?? 0) > 0;
  }

  /** Calls every listener of `name`; a listener that throws is logged and the others still run. */
  emit<E extends DocketEventName>(name: E, event: DocketEventMap[E]): void {
    const set = this.listeners.get(name);
    if (!set || set.size === 0) return;
    for (const listener of [...set]) {
      try {
        (listener as DocketEventListener<E>)(event);
      } catch (error) {
        this.logger.error({ event: name, ...errorFields(error) }, `docket: a '${name}' event listener threw`);
      }
    }
  }

  /** Removes every listener (on close). */
  clear(): void {
    this.listeners.clear();
  }
}
