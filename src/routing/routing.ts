/**
 * Routing policy, in pure TypeScript: which kinds a worker claims, and which due jobs no live
 * worker serves. Kind-aware claims make routing a guarantee (a job is only ever claimed by a
 * worker with its handler); this module decides what a worker asks for and what the registry
 * says is left waiting. The store only applies the resulting filters.
 *
 * The types here are structural, so anything shaped like a registry record (the store's
 * `WorkerRecord`, a test fixture) fits without this module importing the store.
 */
import { ConfigurationError } from '../job/errors.js';

/** What routing needs to know about a live worker (a subset of the registry's WorkerRecord). */
export interface ServingWorker {
  /** Queues it claims from; null means every queue. */
  queues: readonly string[] | null;
  /** Kinds it claims; null means every kind (a catch-all worker). */
  kinds: readonly string[] | null;
  /** Kinds it never claims, whatever `kinds` says. */
  excludeKinds: readonly string[];
}

/** A count of due jobs of one queue and kind (the store's DueKindCount fits). */
export interface QueueKindCount {
  queue: string;
  kind: string;
  count: number;
}

/** True when `worker` would claim a job of `kind` on `queue`. */
export function servesJob(worker: ServingWorker, queue: string, kind: string): boolean {
  if (worker.queues !== null && !worker.queues.includes(queue)) return false;
  if (worker.kinds !== null && !worker.kinds.includes(kind)) return false;
  return !worker.excludeKinds.includes(kind);
}

/** True when at least one of `workers` would claim a job of `kind` on `queue`. */
export function isHandled(workers: readonly ServingWorker[], queue: string, kind: string): boolean {
  return workers.some((worker) => servesJob(worker, queue, kind));
}

/**
 * The due counts no live worker serves, in input order: a (queue, kind) is handled when some
 * worker's queues are null or include the queue, its kinds are null or include the kind, and the
 * kind is not among its excluded kinds. Zero counts are left out.
 */
export function unhandledCounts<C extends QueueKindCount>(due: readonly C[], workers: readonly ServingWorker[]): C[] {
  return due.filter((entry) => entry.count > 0 && !isHandled(workers, entry.queue, entry.kind));
}

/** Sums counts by queue. */
export function countsByQueue(counts: readonly QueueKindCount[]): Map<string, number> {
  const byQueue = new Map<string, number>();
  for (const entry of counts) byQueue.set(entry.queue, (byQueue.get(entry.queue) ?? 0) + entry.count);
  return byQueue;
}

/** How a worker chose the kinds it claims. */
export interface ClaimKindsInput {
  /** Kinds with a registered handler right now. */
  handlerKinds: Iterable<string>;
  /** The worker's `kinds` option: an explicit subset of the handlers; undefined when not given. */
  kinds: readonly string[] | undefined;
  /** The worker's `catchAll` option: claim every kind (a job without a handler then fails). */
  catchAll: boolean;
  /** Names the worker in errors. */
  workerId: string;
}

/**
 * The kinds a worker claims: null for a catch-all worker (no kind filter), else the explicit
 * `kinds` or every kind with a handler, sorted. Throws {@link ConfigurationError} for a worker
 * that could claim nothing useful: an explicit kind with no handler, or no handlers at all.
 */
export function resolveClaimKinds(input: ClaimKindsInput): readonly string[] | null {
  const handlers = new Set(input.handlerKinds);
  if (input.catchAll) return null;
  if (input.kinds !== undefined) {
    const missing = input.kinds.filter((kind) => !handlers.has(kind));
    if (missing.length > 0) {
      throw new ConfigurationError(
        `worker ${input.workerId}: option kinds names ${missing.map((k) => `"${k}"`).join(', ')} with no registered handler ` +
          `(registered: ${describeKinds(handlers)}); register it with docket.handle(kind, handler) before start()`,
      );
    }
    return Object.freeze([...input.kinds].sort());
  }
  if (handlers.size === 0) {
    throw new ConfigurationError(
      `worker ${input.workerId} has no handlers, so it could claim nothing: register handlers with ` +
        'docket.handle(kind, handler) before start(), or pass catchAll: true to claim every kind ' +
        '(jobs without a handler then fail and are parked after their attempts)',
    );
  }
  return Object.freeze([...handlers].sort());
}

function describeKinds(kinds: ReadonlySet<string>): string {
  return kinds.size > 0 ? [...kinds].map((k) => `"${k}"`).join(', ') : 'none';
}
