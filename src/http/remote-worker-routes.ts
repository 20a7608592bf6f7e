/**
 * The remote-worker protocol: claim (with long polling), heartbeat, complete and fail over HTTP,
 * so a worker in any language follows the same rules as the Node worker.
 *
 * Fencing and receipts: every claimed job carries its token and a receipt, an HMAC-SHA256 of
 * `<id>.<token>.<lease owner>` under a server secret (256 bits, unguessable: tokens are small
 * counters anyone could guess). Heartbeat, complete and fail must send both back. When either
 * does not match the current lease (it lapsed, another claim holds it, the job was cancelled,
 * the job never existed) the answer is the same 409 `stale`, so a foreign worker learns nothing,
 * and nothing changed: the worker must stop working on that job and must not retry the call.
 * Servers that share a database verify each other's receipts only with a shared secret
 * (`receiptSecret`); without one each process draws its own at start.
 *
 * Routing: remote workers never get built-in kinds (the claim excludes them, and a claim naming
 * the reserved queue is refused); a claim may name `kinds` to take only those. Each claim
 * registers (refreshes) its `workerId` in the live worker registry. The database clock decides every lease; the server's clock only paces long polls.
 * Failure policy (retry delay or park) is decided here with retry/backoff.ts from the job's
 * stored policy, exactly as the Node worker decides it.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { Hono } from 'hono';
import { z } from 'zod';
import type { Docket } from '../docket.js';
import { BUILTIN_KINDS, BUILTIN_QUEUE, isBuiltinKind } from '../job/builtin-kinds.js';
import type { ClaimedJob, Job } from '../job/job.js';
import { MAX_KIND_LENGTH, QUEUE_NAME_PATTERN, unstorableReason } from '../job/job-spec.js';
import { decideAfterFailure } from '../retry/backoff.js';
import { DEFAULT_REGISTRY_TTL_MS } from '../routing/worker-registration.js';
import { LapsedSearchPacer } from '../worker/lapsed-search-pacer.js';
import type { AppEnv } from './app-env.js';
import { requireScope } from './auth.js';
import { ClaimWaiter, type WaitEnd } from './claim-waiter.js';
import { CompletionGroup } from './completion-group.js';
import { HttpError } from './http-error.js';
import type { DocketMetrics } from './metrics.js';
import { jobIdParam, readBody } from './request-input.js';
import type { ServerLogger } from './server-logger.js';

/** Shortest and longest lease a remote worker may ask for, ms. */
export const REMOTE_LEASE_RANGE = { min: 100, max: 3_600_000 } as const;
/** Most jobs one claim may return. */
export const MAX_REMOTE_CLAIM = 100;
/** A remote worker's registry record is refreshed at most this often (its claims may be many). */
export const REMOTE_REGISTRY_REFRESH_MS = 5_000;

/** A zod check that a string is text every store can keep (no NUL, no lone surrogate). */
export const storableText = (value: string, ctx: z.core.$RefinementCtx<string>) => {
  const reason = unstorableReason(value);
  if (reason !== null) ctx.addIssue({ code: 'custom', message: reason });
};

const token = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const receipt = z
  .string()
  .min(1)
  .max(200)
  .describe('The `receipt` the claim returned with this job; proves the caller holds the lease.');
const leaseMs = z.number().int().min(REMOTE_LEASE_RANGE.min).max(REMOTE_LEASE_RANGE.max);

/** Body of POST /v1/worker/claim. */
export const claimRequestSchema = z.strictObject({
  workerId: z
    .string()
    .min(1)
    .max(200)
    .superRefine(storableText)
    .describe(
      "Listed in the worker registry and stored in each claimed job's lease owner, `<workerId>/<random>` (drawn per claim); use something that names the process.",
    ),
  queues: z
    .array(
      z
        .string()
        .regex(QUEUE_NAME_PATTERN, { error: 'must be a queue name (letters, digits, _ . : -)' })
        .refine((queue) => queue !== BUILTIN_QUEUE, {
          error: `${BUILTIN_QUEUE} is reserved for built-in kinds, which remote workers never get`,
        }),
    )
    .min(1)
    .max(100)
    .optional(),
  kinds: z
    .array(
      z
        .string()
        .min(1)
        .max(MAX_KIND_LENGTH)
        .superRefine(storableText)
        .refine((kind) => !isBuiltinKind(kind), { error: 'is a built-in kind, which remote workers never get' }),
    )
    .min(1)
    .max(1000)
    .optional()
    .describe('Only jobs of these kinds (the ones this worker has handlers for); every user kind when omitted.'),
  version: z.string().max(200).superRefine(storableText).optional().describe("The client's version, for the registry."),
  limit: z.number().int().min(1).max(MAX_REMOTE_CLAIM).default(1),
  leaseMs: leaseMs.default(30_000),
  waitMs: z.number().int().min(0).max(600_000).default(0).describe('Long-poll: wait up to this long for a job.'),
});

/** Body of POST /v1/worker/jobs/{id}/heartbeat. */
export const heartbeatRequestSchema = z.strictObject({ token, receipt, leaseMs: leaseMs.default(30_000) });

/** Body of POST /v1/worker/jobs/{id}/complete. */
export const completeRequestSchema = z.strictObject({ token, receipt });

/** Body of POST /v1/worker/jobs/{id}/fail. */
export const failRequestSchema = z.strictObject({
  token,
  receipt,
  error: z.strictObject({
    message: z.string().min(1).max(2000).superRefine(storableText),
    detail: z.string().max(20_000).superRefine(storableText).optional(),
  }),
  retryAfterMs: z
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3_600_000)
    .optional()
    .describe('Retry no earlier than this (e.g. a Retry-After the worker was given); never shortens the backoff.'),
});

/** Signs and checks lease receipts: HMAC-SHA256 of `<id>.<token>.<lease owner>`. */
export class ReceiptSigner {
  private readonly secret: Buffer;

  /** @param secret shared by every server of one deployment; random (per process) when omitted. */
  constructor(secret?: string) {
    this.secret = secret === undefined ? randomBytes(32) : Buffer.from(secret, 'utf8');
  }

  /** The receipt of one lease, base64url (43 characters, 256 bits). */
  sign(id: string, fencingToken: number, owner: string): string {
    return createHmac('sha256', this.secret).update(`${id}.${fencingToken}.${owner}`).digest('base64url');
  }

  /** True when `presented` is the receipt of this lease; constant-time in the receipt's content. */
  verify(id: string, fencingToken: number, owner: string | null, presented: string): boolean {
    if (owner === null) return false;
    const expected = Buffer.from(this.sign(id, fencingToken, owner), 'utf8');
    const given = Buffer.from(presented, 'utf8');
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

/** A lease this process handed out to a remote worker (see `leases` in remoteWorkerRoutes). */
interface HeldLease {
  claimedAtMs: number;
  owner: string;
  queue: string;
}

/** What a remote worker receives for each claimed job. */
export function remoteJob(job: ClaimedJob, receiptOf: (job: ClaimedJob) => string) {
  return {
    id: job.id,
    token: job.token,
    receipt: receiptOf(job),
    kind: job.kind,
    queue: job.queue,
    payload: job.payload,
    attempt: job.attempts,
    maxAttempts: job.maxAttempts,
    runAt: job.runAt.toISOString(),
    leaseUntil: job.leaseUntil.toISOString(),
    timeoutMs: job.timeoutMs,
  };
}

function stale(operation: string): HttpError {
  return new HttpError(
    409,
    'stale',
    `${operation} refused: the lease is not yours (it lapsed, another worker holds it, the job was cancelled, or the token or receipt is wrong); stop working on this job`,
  );
}

/** Settings of {@link remoteWorkerRoutes}. */
export interface RemoteWorkerRouteOptions {
  metrics: DocketMetrics;
  maxLongPollMs: number;
  /** Uniform [0, 1) source for backoff jitter. */
  random: () => number;
  /** Re-check interval while long polling, in case a wake-up hint was lost. */
  pollIntervalMs?: number | undefined;
  /** Secret of the lease receipts; random per process when omitted. */
  receiptSecret?: string | undefined;
  logger?: ServerLogger | undefined;
}

/** Routes under /v1/worker; returns the sub-app and a close function for pending long polls. */
export function remoteWorkerRoutes(
  docket: Docket,
  options: RemoteWorkerRouteOptions,
): { routes: Hono<AppEnv>; close: () => Promise<void> } {
  const store = docket.store;
  const waiter = new ClaimWaiter(store, options.pollIntervalMs ?? 1000);
  const receipts = new ReceiptSigner(options.receiptSecret);
  const { metrics } = options;
  metrics.longPollsWaiting = () => waiter.waiting;
  // Each lease this process handed out (by `id:token`): its claim instant, to time the handler,
  // and its owner and queue, so a completion of it checks its receipt without reading the job
  // (that read was one round trip per request, most of a remote drain's cost). Bounded: a worker
  // that vanishes must not grow it for ever; a lease not found here (claimed through another
  // server, or forgotten) is checked by reading its job. Also the record of completions already
  // counted, so a repeated (idempotent) complete is never counted twice.
  const leases = new Map<string, HeldLease>();
  const bounded = (map: Map<string, unknown>) => {
    if (map.size < 10_000) return;
    const oldest = map.keys().next().value;
    if (oldest !== undefined) map.delete(oldest);
  };
  const completedRecently = new Map<string, true>();
  // Concurrent completions share round trips (one commit, not one each).
  const completions = new CompletionGroup(store, docket.deletesDoneRecords);
  const registeredAt = new Map<string, number>();
  const receiptOf = (job: ClaimedJob) => receipts.sign(job.id, job.token, job.leaseOwner);

  /** Registers the claiming worker, at most every REMOTE_REGISTRY_REFRESH_MS per id; never fails a claim. */
  const lastClaims = new Map<string, z.output<typeof claimRequestSchema>>();
  const register = async (body: z.output<typeof claimRequestSchema>) => {
    bounded(lastClaims);
    lastClaims.set(body.workerId, body);
    const now = Date.now();
    const last = registeredAt.get(body.workerId);
    if (last !== undefined && now - last < REMOTE_REGISTRY_REFRESH_MS) return;
    bounded(registeredAt);
    registeredAt.set(body.workerId, now);
    try {
      await docket.registerRemoteWorker(
        {
          id: body.workerId,
          version: body.version,
          queues: body.queues ?? null,
          kinds: body.kinds ?? null,
          concurrency: body.limit,
        },
        // A long poll re-registers while it waits; the ttl outlives the longest wait between claims.
        Math.max(DEFAULT_REGISTRY_TTL_MS, options.maxLongPollMs + 2 * REMOTE_REGISTRY_REFRESH_MS),
      );
    } catch (error) {
      registeredAt.delete(body.workerId);
      options.logger?.warn({ error: (error as Error).message }, 'remote worker registration failed');
    }
  };

  /**
   * The job if `token` and `receipt` prove the caller holds (or, for a finished job, last held)
   * its lease; null otherwise, whatever the reason, so the answer never tells whether it exists.
   */
  const leasedJob = async (id: string, fencingToken: number, presented: string): Promise<Job | null> => {
    const job = await store.jobGet({ id });
    if (!job || job.token !== fencingToken || isBuiltinKind(job.kind)) return null;
    return receipts.verify(id, fencingToken, job.leaseOwner, presented) ? job : null;
  };

  /**
   * What proves a completion request holds (or, for a finished job, last held) its lease: the
   * owner to fence the write by, and the queue when the lease was still running (to count it).
   * A lease this process handed out is checked against the owner it recorded at the claim, with
   * no read (the write's fence answers stale if it lapsed and was retaken, or was cancelled);
   * anything else (another server's claim, a forgotten lease, a wrong receipt, a repeat after the
   * first complete) by reading the job. Null when nothing proves it.
   */
  const completionProof = async (
    id: string,
    fencingToken: number,
    presented: string,
    held: HeldLease | undefined,
  ): Promise<{ leaseOwner: string | undefined; runningQueue: string | undefined } | null> => {
    if (held !== undefined && receipts.verify(id, fencingToken, held.owner, presented)) {
      return { leaseOwner: held.owner, runningQueue: held.queue };
    }
    const job = await leasedJob(id, fencingToken, presented);
    if (!job) return null;
    return { leaseOwner: job.leaseOwner ?? undefined, runningQueue: job.state === 'running' ? job.queue : undefined };
  };

  const routes = new Hono<AppEnv>();
  routes.use('*', requireScope('worker'));
  // The service's claims for all its remote workers search for lapsed leases at most every 250 ms.
  const lapsedSearch = new LapsedSearchPacer();

  type ClaimFilter = { queues?: string[] | undefined; kinds?: string[] | undefined; excludeKinds: readonly string[] };
  /**
   * The next run time of `filter`'s jobs and the database's now, read together, as epoch ms, with
   * when the answer arrived on this server's clock. The database's now held at or before then, so
   * the offset the waiter derives can only take the database clock to be a little behind (by at
   * most the round trip), never ahead: its timers may wake a claim a millisecond late, never before
   * the job is due by the database clock, which would cost a claim that finds nothing. (The middle
   * of the round trip, off either way by half of it, did cost one now and then.) Whatever happens
   * between this read and the wait no longer enters the offset.
   */
  const readNextRunAt = async (filter: ClaimFilter) => {
    const [next, now] = await Promise.all([store.jobNextRunAt(filter), store.now()]);
    return { nextRunAtMs: next ? next.getTime() : null, dbNowMs: now.getTime(), dbNowReadAtMs: Date.now() };
  };

  /**
   * After a claim woken by its group's timer came back short: reads when the next job falls due,
   * in the background (the claim's answer does not wait for it), and sets the group's timer by it.
   * Without it, the later jobs of a delayed stream waited for the poll.
   */
  const refreshNextDue = (groupKey: string, filter: ClaimFilter, claimSentAtMs: number) => {
    readNextRunAt(filter).then(
      ({ nextRunAtMs, ...dbNow }) => waiter.nextDue(groupKey, nextRunAtMs, dbNow, claimSentAtMs),
      // The group's poll intervals still find the job.
      (error: unknown) => options.logger?.warn({ error: (error as Error).message }, 'next run time read failed'),
    );
  };

  routes.post('/claim', async (c) => {
    const body = await readBody(c, claimRequestSchema);
    const untilMs = Date.now() + Math.min(body.waitMs, options.maxLongPollMs);
    const signal = c.req.raw.signal;
    const filter = { queues: body.queues, kinds: body.kinds, excludeKinds: BUILTIN_KINDS };
    const groupKey = ClaimWaiter.groupKey(body.queues, body.kinds);
    // Why this request's latest wait ended: woken as its group's claim for a due job, it owes the
    // group an answer (waiter.passOn or waiter.nextDue) once it has claimed, or if it never does.
    let woken: WaitEnd = 'timer';
    try {
      for (;;) {
        // The client has gone: a claim now would lease jobs nobody will run until their lease lapses.
        if (signal.aborted) return c.json({ jobs: [] });
        await register(body);
        // Each claim leases under its own owner, `<workerId>/<64 random bits>`, as a Node worker's
        // claims do: fenced writes match the owner as well as the token, and receipts bind it, so a
        // token number handed out again (a promoted standby that never saw this claim) cannot
        // validate this claim's late writes even when the same workerId claims it.
        const owner = `${body.workerId}/${randomBytes(8).toString('hex')}`;
        const sentAtMs = performance.now();
        const sentAtEpochMs = Date.now();
        const includeLapsed = lapsedSearch.next(sentAtMs);
        const jobs = await store
          .jobClaim({ owner, limit: body.limit, leaseMs: body.leaseMs, includeLapsed, ...filter })
          .catch((error: unknown) => {
            lapsedSearch.failed(sentAtMs);
            throw error;
          });
        const answered = woken;
        woken = 'timer';
        const answering = jobs.length > 0 || Date.now() >= untilMs || waiter.closed;
        if (answered !== 'timer' && jobs.length >= body.limit) waiter.passOn(groupKey, answered);
        // Short after the group's timer woke it: the later jobs' hints were dropped for that timer,
        // so the next run time must be read for the group, by this request's own wait if it waits
        // again, else in the background.
        else if (answered === 'due' && answering) refreshNextDue(groupKey, filter, sentAtEpochMs);
        if (answering) {
          for (const job of jobs) {
            bounded(leases);
            leases.set(`${job.id}:${job.token}`, { claimedAtMs: Date.now(), owner, queue: job.queue });
            metrics.observeClaim(job);
            // The claim instant by the database clock is leaseUntil - leaseMs.
            const startedAtMs = job.leaseUntil.getTime() - body.leaseMs;
            metrics.lateness.observe({ queue: job.queue }, Math.max(0, startedAtMs - job.runAt.getTime()) / 1000);
          }
          return c.json({ jobs: jobs.map((job) => remoteJob(job, receiptOf)) });
        }
        const next = await readNextRunAt(filter);
        woken = await waiter.wait(groupKey, { untilMs, ...next, claimSentAtMs: sentAtEpochMs }, signal);
      }
    } finally {
      // Woken for a due job but gone before claiming it (client left, store error): wake another.
      if (woken !== 'timer') waiter.passOn(groupKey, woken);
    }
  });

  routes.post('/jobs/:id/heartbeat', async (c) => {
    const id = jobIdParam(c);
    const body = await readBody(c, heartbeatRequestSchema);
    const job = await leasedJob(id, body.token, body.receipt);
    const leaseUntil =
      job?.state === 'running'
        ? await store.jobHeartbeat({
            id,
            token: body.token,
            leaseOwner: job.leaseOwner ?? undefined,
            leaseMs: body.leaseMs,
          })
        : null;
    if (!leaseUntil) {
      leases.delete(`${id}:${body.token}`);
      metrics.stale.inc({ operation: 'heartbeat' });
      throw stale('heartbeat');
    }
    // A worker busy with a long job claims nothing meanwhile; its heartbeats keep it listed.
    const lastClaim = job?.leaseOwner ? lastClaims.get(workerIdOfOwner(job.leaseOwner)) : undefined;
    if (lastClaim) await register(lastClaim);
    return c.json({ leaseUntil: leaseUntil.toISOString() });
  });

  routes.post('/jobs/:id/complete', async (c) => {
    const id = jobIdParam(c);
    const body = await readBody(c, completeRequestSchema);
    const key = `${id}:${body.token}`;
    const held = leases.get(key);
    const proof = await completionProof(id, body.token, body.receipt, held);
    // A finished job is passed on too: a repeated complete of a done job is idempotent ('done').
    // With retention 0 the completion deletes the row, so a repeat finds no job and is stale.
    const outcome = proof
      ? await completions.complete({ id, token: body.token, leaseOwner: proof.leaseOwner })
      : 'stale';
    // A request that proved nothing leaves the lease's entry alone (it may be someone else's).
    if (proof) leases.delete(key);
    if (outcome === 'stale') {
      metrics.stale.inc({ operation: 'complete' });
      throw stale('complete');
    }
    // Counted once: only a call that found the lease held (in this process, or the job running)
    // completed it. A repeat (the job was done before this call) answers 'done' again without a
    // second count, and so does a concurrent twin (completedRecently).
    const queue = proof?.runningQueue;
    if (queue !== undefined && !completedRecently.has(key)) {
      bounded(completedRecently);
      completedRecently.set(key, true);
      metrics.completed.inc({ queue });
      if (held !== undefined) metrics.duration.observe({ queue }, (Date.now() - held.claimedAtMs) / 1000);
    }
    return c.json({ outcome });
  });

  routes.post('/jobs/:id/fail', async (c) => {
    const id = jobIdParam(c);
    const body = await readBody(c, failRequestSchema);
    const job = await leasedJob(id, body.token, body.receipt);
    if (job?.state !== 'running') {
      metrics.stale.inc({ operation: 'fail' });
      throw stale('fail');
    }
    // The same retry rule as a Node worker's: a retryAfterMs hint only ever lengthens the backoff.
    const decision = decideAfterFailure({
      attempts: job.attempts,
      maxAttempts: job.maxAttempts,
      policy: job.retryPolicy,
      random: options.random,
      hints: { retryAfterMs: body.retryAfterMs },
    });
    // jobFail is fenced by the token and owner: if another claim took the job since the read above, it
    // answers stale and the decision computed from the old attempt count is never applied.
    const result = await store.jobFail({
      id,
      token: body.token,
      leaseOwner: job.leaseOwner ?? undefined,
      error: { message: body.error.message, detail: body.error.detail, kind: 'thrown' },
      decision,
    });
    leases.delete(`${id}:${body.token}`);
    if (result.outcome === 'stale') {
      metrics.stale.inc({ operation: 'fail' });
      throw stale('fail');
    }
    metrics.failed.inc({ queue: job.queue });
    if (result.outcome === 'parked') {
      metrics.parked.inc({ queue: job.queue });
      return c.json({ outcome: 'parked' as const });
    }
    return c.json({ outcome: 'retry' as const, runAt: result.runAt.toISOString() });
  });

  return { routes, close: () => waiter.close() };
}

/** The workerId part of a remote claim's lease owner (`<workerId>/<random>`). */
export function workerIdOfOwner(owner: string): string {
  const slash = owner.lastIndexOf('/');
  return slash > 0 ? owner.slice(0, slash) : owner;
}
