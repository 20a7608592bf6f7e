/**
 * Worker settings and their validation. A configuration that cannot work safely is refused with a
 * {@link ConfigurationError} when the worker is created, before it claims anything: a heartbeat
 * interval too close to the lease, above all, lets a healthy job's lease lapse between two beats,
 * so another worker steals it and the job runs twice.
 */

import { hostname } from 'node:os';
import { ConfigurationError } from '../job/errors.js';
import { describe, validateKind, validateQueue } from '../job/job-spec.js';
import {
  DEFAULT_REGISTRY_TTL_MS,
  MAX_REGISTRY_TTL_MS,
  MIN_REGISTRY_TTL_MS,
  REGISTRY_REFRESHES_PER_TTL,
} from '../routing/worker-registration.js';
import { AUTO_CLAIM_PREFETCH, AUTO_PREFETCH_MAX } from './adaptive-prefetch.js';

/** What a caller may set on a worker; every field has a default. */
export interface WorkerOptions {
  /** Names the worker; each claim records `<id>/<instance>.<claim number>` as lease owner. Default `<host>-<pid>-<random>`. */
  id?: string | undefined;
  /** Handlers running at once; default 10. */
  concurrency?: number | undefined;
  /** Only claim from these queues; all queues when omitted. */
  queues?: readonly string[] | undefined;
  /**
   * Only claim these kinds: a subset of the kinds with a registered handler (checked at `start()`,
   * ConfigurationError naming the kind otherwise). Default: every kind with a handler, including
   * handlers registered while the worker runs. A job of any other kind is never claimed by this
   * worker; it waits, pending, for a worker that has its handler (see `docket.unhandledJobs()`).
   */
  kinds?: readonly string[] | undefined;
  /**
   * Claim every kind, with or without a handler (the behaviour before kind-aware claims): a job
   * whose kind has no handler here fails each attempt and is parked. Off by default; cannot be
   * combined with `kinds`.
   */
  catchAll?: boolean | undefined;
  /**
   * How long this worker's registry record lives without a refresh, ms; default 30 000. The worker
   * re-registers every ttl/6 (5 s by default), so five missed refreshes in a row still leave it
   * listed, and a worker killed without a graceful stop disappears from `listWorkers()` (and its
   * kinds count as unhandled) at most this long after its last refresh.
   */
  registryTtlMs?: number | undefined;
  /** Lease length per claim and per heartbeat, ms; default 30 000 (the 30 s of docs/design.md). */
  leaseMs?: number | undefined;
  /** Time between heartbeats, ms; at most leaseMs / 2; default leaseMs / 3 (10 s for the default lease). */
  heartbeatIntervalMs?: number | undefined;
  /**
   * Poll for due jobs this often even without a wake-up hint, ms. Default 1 000 where the store
   * wakes workers across processes (PostgreSQL LISTEN/NOTIFY), else 50 (SQLite: another
   * process's submits are found only by polling, and a poll is one local indexed query).
   */
  pollIntervalMs?: number | undefined;
  /** On stop, how long running handlers may finish before they are aborted and released, ms; default 10 000. */
  shutdownGraceMs?: number | undefined;
  /**
   * Jobs claimed ahead of free slots and held leased (and heartbeated) in a local buffer, so a freed
   * slot starts its next job without a database round trip; released at once on stop. Buffered
   * jobs are started in priority order, but a job of higher priority submitted later waits behind
   * the buffer, and another worker cannot take what this one holds.
   *
   * Default `'auto'`: only while claims come back full (a backlog deeper than one claim), the
   * buffer holds what this worker finishes in about 250 ms at its observed rate, at most 1,000
   * (claimed 500 beyond the free slots at a time, so two claims can be in flight; on SQLite, whose
   * claims run one after another on this thread, 1,000 at once); with
   * no backlog, or slow handlers, it is empty (see adaptive-prefetch.ts). A number fixes the
   * buffer; `0` claims only for free slots, so across workers jobs start in strict priority order.
   */
  prefetch?: number | 'auto' | undefined;
  /**
   * Most jobs leased by one claim; default min(concurrency + prefetch, 1000), prefetch counting as
   * 500 when `'auto'` (as 1,000 on SQLite, whose claims run one after another on this thread).
   */
  claimBatchSize?: number | undefined;
  /** Claims in flight at once, so the next batch is on its way while one is being leased; default 2. */
  maxConcurrentClaims?: number | undefined;
  /**
   * Most completions written in one round trip; default 500 (1,000 on SQLite). Failed attempts
   * are batched by the same rule, in batches of their own.
   */
  completionBatchSize?: number | undefined;
  /** How long a completion (or a failed attempt) waits for others to share its round trip, ms; default 1. */
  completionFlushMs?: number | undefined;
}

/** {@link WorkerOptions} with every default applied. */
export interface ResolvedWorkerOptions {
  id: string;
  concurrency: number;
  queues: readonly string[] | undefined;
  /** The explicit `kinds` option (validated names, frozen); undefined when not given. */
  kinds: readonly string[] | undefined;
  catchAll: boolean;
  registryTtlMs: number;
  /** Time between registry refreshes: registryTtlMs / 6. */
  registryRefreshMs: number;
  leaseMs: number;
  heartbeatIntervalMs: number;
  pollIntervalMs: number;
  shutdownGraceMs: number;
  /** The fixed buffer, or with {@link prefetchAuto} its ceiling. */
  prefetch: number;
  /** Whether the buffer follows the observed backlog and rate (`prefetch: 'auto'`, the default). */
  prefetchAuto: boolean;
  claimBatchSize: number;
  maxConcurrentClaims: number;
  completionBatchSize: number;
  completionFlushMs: number;
}

/** The default lease length (docs/design.md). */
export const DEFAULT_LEASE_MS = 30_000;
/** Poll interval where other processes' submits arrive as wake-ups; polling only backs them up. */
export const DEFAULT_POLL_INTERVAL_MS = 1000;
/** Poll interval where nothing wakes this process for another's submits: it bounds their start latency. */
export const DEFAULT_LOCAL_POLL_INTERVAL_MS = 50;

/** What the store offers that changes a default. */
export interface WorkerOptionContext {
  /** Other processes' submits wake this worker (the store's `listenNotify` capability). */
  crossProcessWakeUps: boolean;
  /**
   * The store's statements run on this process's thread (its `inProcess` capability, SQLite):
   * under `prefetch: 'auto'` one claim leases the whole room, and completions go 1,000 at a time.
   */
  inProcessStore?: boolean;
}

/** Completions written in one round trip (`completionBatchSize`) by default. */
export const DEFAULT_COMPLETION_BATCH_SIZE = 500;
/**
 * The same where the store runs in the process (SQLite): a batch costs its thread a transaction's
 * fixed cost whatever its size, and no round trip is saved by writing sooner (decision 0016).
 */
export const IN_PROCESS_COMPLETION_BATCH_SIZE = 1000;

/** Shortest lease accepted: below this a single slow round trip outlives the lease. */
export const MIN_LEASE_MS = 100;

const KNOWN = new Set<string>([
  'id',
  'concurrency',
  'queues',
  'kinds',
  'catchAll',
  'registryTtlMs',
  'leaseMs',
  'heartbeatIntervalMs',
  'pollIntervalMs',
  'shutdownGraceMs',
  'prefetch',
  'claimBatchSize',
  'maxConcurrentClaims',
  'completionBatchSize',
  'completionFlushMs',
]);

function integer(name: string, value: unknown, fallback: number, min: number, max: number, orElse = ''): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value)) {
    throw new ConfigurationError(
      `worker option ${name} must be an integer${orElse ? ` ${orElse}` : ''}, got ${describe(value)}`,
    );
  }
  if (value < min || value > max) {
    throw new ConfigurationError(`worker option ${name} must be between ${min} and ${max}, got ${value}`);
  }
  return value;
}

function defaultWorkerId(): string {
  return `${hostname()}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}

/** Validates worker options and fills in defaults; throws {@link ConfigurationError} naming the option. */
export function resolveWorkerOptions(
  options: WorkerOptions = {},
  context: WorkerOptionContext = { crossProcessWakeUps: true },
): ResolvedWorkerOptions {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw new ConfigurationError(`worker options must be an object, got ${describe(options)}`);
  }
  for (const key of Object.keys(options)) {
    if (!KNOWN.has(key)) {
      throw new ConfigurationError(`unknown worker option ${key} (known: ${[...KNOWN].join(', ')})`);
    }
  }
  const day = 24 * 3600_000;
  const concurrency = integer('concurrency', options.concurrency, 10, 1, 100_000);
  const leaseMs = integer('leaseMs', options.leaseMs, DEFAULT_LEASE_MS, MIN_LEASE_MS, day);
  const heartbeatIntervalMs = integer(
    'heartbeatIntervalMs',
    options.heartbeatIntervalMs,
    Math.floor(leaseMs / 3),
    10,
    day,
  );
  // Two beats must fit in one lease: if a single beat is late (a GC pause, a slow round trip) the
  // next still lands before the lease lapses; otherwise healthy jobs are stolen and run twice.
  if (heartbeatIntervalMs * 2 > leaseMs) {
    throw new ConfigurationError(
      `worker option heartbeatIntervalMs (${heartbeatIntervalMs} ms) must be at most half of leaseMs ` +
        `(${leaseMs} ms, so at most ${Math.floor(leaseMs / 2)} ms): with fewer than two heartbeats per lease, ` +
        'one late heartbeat lets a healthy job’s lease lapse, another worker takes it and the job runs twice. ' +
        `A third of the lease (${Math.floor(leaseMs / 3)} ms) is the recommended interval.`,
    );
  }
  const prefetchAuto = options.prefetch === undefined || options.prefetch === 'auto';
  const prefetch = prefetchAuto ? AUTO_PREFETCH_MAX : integer('prefetch', options.prefetch, 0, 0, 100_000, "or 'auto'");
  let queues: readonly string[] | undefined;
  if (options.queues !== undefined) {
    if (!Array.isArray(options.queues) || options.queues.length === 0) {
      throw new ConfigurationError('worker option queues must be a non-empty array of queue names when given');
    }
    try {
      queues = Object.freeze(options.queues.map((queue, i) => validateQueue(queue, `queues[${i}]`)));
    } catch (error) {
      throw new ConfigurationError(`worker option ${(error as Error).message}`);
    }
  }
  let kinds: readonly string[] | undefined;
  if (options.kinds !== undefined) {
    if (!Array.isArray(options.kinds) || options.kinds.length === 0) {
      throw new ConfigurationError(
        'worker option kinds must be a non-empty array of kind names when given (leave it out to claim every kind with a handler)',
      );
    }
    try {
      kinds = Object.freeze(options.kinds.map((kind, i) => validateKind(kind, `kinds[${i}]`)));
    } catch (error) {
      throw new ConfigurationError(`worker option ${(error as Error).message}`);
    }
    const duplicate = kinds.find((kind, i) => kinds?.indexOf(kind) !== i);
    if (duplicate !== undefined) {
      throw new ConfigurationError(`worker option kinds names "${duplicate}" twice`);
    }
  }
  if (options.catchAll !== undefined && typeof options.catchAll !== 'boolean') {
    throw new ConfigurationError(`worker option catchAll must be a boolean, got ${describe(options.catchAll)}`);
  }
  const catchAll = options.catchAll === true;
  if (catchAll && kinds !== undefined) {
    throw new ConfigurationError(
      'worker options catchAll and kinds cannot be combined: catchAll claims every kind, kinds only the ones named',
    );
  }
  const registryTtlMs = integer(
    'registryTtlMs',
    options.registryTtlMs,
    DEFAULT_REGISTRY_TTL_MS,
    MIN_REGISTRY_TTL_MS,
    MAX_REGISTRY_TTL_MS,
  );
  let id = options.id;
  if (id === undefined) id = defaultWorkerId();
  else if (typeof id !== 'string' || id.trim() === '' || id.length > 200) {
    throw new ConfigurationError(`worker option id must be a non-empty string of at most 200 characters`);
  }
  return {
    id,
    concurrency,
    queues,
    kinds,
    catchAll,
    registryTtlMs,
    registryRefreshMs: Math.floor(registryTtlMs / REGISTRY_REFRESHES_PER_TTL),
    leaseMs,
    heartbeatIntervalMs,
    pollIntervalMs: integer(
      'pollIntervalMs',
      options.pollIntervalMs,
      context.crossProcessWakeUps ? DEFAULT_POLL_INTERVAL_MS : DEFAULT_LOCAL_POLL_INTERVAL_MS,
      10,
      day,
    ),
    shutdownGraceMs: integer('shutdownGraceMs', options.shutdownGraceMs, 10_000, 0, day),
    prefetch,
    prefetchAuto,
    // Under 'auto' a claim leases half the largest buffer beyond the slots, so on a deep backlog two
    // claims are in flight (maxConcurrentClaims): the next batch is leased while the last one runs,
    // instead of the worker waiting on each claim in turn (one claim of 1,000 was no faster than
    // one of 524: the claim loop, not the claim size, was the bottleneck; decision 0015). A store
    // in this process runs a claim on this thread, so two never overlap: one claim leases the
    // whole room, one transaction instead of two (decision 0016).
    claimBatchSize: integer(
      'claimBatchSize',
      options.claimBatchSize,
      Math.min(
        concurrency + (prefetchAuto ? (context.inProcessStore ? AUTO_PREFETCH_MAX : AUTO_CLAIM_PREFETCH) : prefetch),
        1000,
      ),
      1,
      10_000,
    ),
    maxConcurrentClaims: integer('maxConcurrentClaims', options.maxConcurrentClaims, 2, 1, 16),
    completionBatchSize: integer(
      'completionBatchSize',
      options.completionBatchSize,
      context.inProcessStore ? IN_PROCESS_COMPLETION_BATCH_SIZE : DEFAULT_COMPLETION_BATCH_SIZE,
      1,
      10_000,
    ),
    completionFlushMs: integer('completionFlushMs', options.completionFlushMs, 1, 0, 1000),
  };
}
