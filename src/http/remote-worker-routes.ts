/**
 * The remote-worker protocol: claim (with long polling), heartbeat, complete and fail over HTTP,
 * so a worker in any language follows the same rules as the Node worker.
 *
 * Fencing: every claimed job carries its token. Heartbeat, complete and fail must send it back;
 * when the lease has passed to another claim (or the job was cancelled) the answer is
 * 409 `stale` and nothing changed: the worker must stop working on that job and must not retry
 * the call. The database clock decides every lease; the server's clock only paces long polls.
 * Failure policy (retry delay or park) is decided here with retry/backoff.ts from the job's
 * stored policy, exactly as the Node worker decides it.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { Docket } from '../docket.js';
import type { ClaimedJob } from '../job/job.js';
import { QUEUE_NAME_PATTERN } from '../job/job-spec.js';
import { decideAfterFailure } from '../retry/backoff.js';
import type { AppEnv } from './app-env.js';
import { requireScope } from './auth.js';
import { ClaimWaiter } from './claim-waiter.js';
import { HttpError } from './http-error.js';
import type { DocketMetrics } from './metrics.js';
import { jobIdParam, readBody } from './request-input.js';

/** Shortest and longest lease a remote worker may ask for, ms. */
export const REMOTE_LEASE_RANGE = { min: 100, max: 3_600_000 } as const;
/** Most jobs one claim may return. */
export const MAX_REMOTE_CLAIM = 100;

const token = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);
const leaseMs = z.number().int().min(REMOTE_LEASE_RANGE.min).max(REMOTE_LEASE_RANGE.max);

/** Body of POST /v1/worker/claim. */
export const claimRequestSchema = z.strictObject({
  workerId: z.string().min(1).max(200).describe('Stored as the lease owner; use something that names the process.'),
  queues: z.array(z.string().regex(QUEUE_NAME_PATTERN)).min(1).max(100).optional(),
  limit: z.number().int().min(1).max(MAX_REMOTE_CLAIM).default(1),
  leaseMs: leaseMs.default(30_000),
  waitMs: z.number().int().min(0).max(600_000).default(0).describe('Long-poll: wait up to this long for a job.'),
});

/** Body of POST /v1/worker/jobs/{id}/heartbeat. */
export const heartbeatRequestSchema = z.strictObject({ token, leaseMs: leaseMs.default(30_000) });

/** Body of POST /v1/worker/jobs/{id}/complete. */
export const completeRequestSchema = z.strictObject({ token });

/** Body of POST /v1/worker/jobs/{id}/fail. */
export const failRequestSchema = z.strictObject({
  token,
  error: z.strictObject({
    message: z.string().min(1).max(2000),
    detail: z.string().max(20_000).optional(),
  }),
  retryAfterMs: z
    .number()
    .int()
    .min(0)
    .max(7 * 24 * 3_600_000)
    .optional()
    .describe('Retry no earlier than this (e.g. a Retry-After the worker was given); never shortens the backoff.'),
});

/** What a remote worker receives for each claimed job. */
export function remoteJob(job: ClaimedJob) {
  return {
    id: job.id,
    token: job.token,
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
    `${operation} refused: the lease is no longer yours (it lapsed, another worker holds it, or the job was cancelled); stop working on this job`,
  );
}

/** Settings of {@link remoteWorkerRoutes}. */
export interface RemoteWorkerRouteOptions {
  metrics: DocketMetrics;
  maxLongPollMs: number;
  /** Uniform [0, 1) source for backoff jitter. */
  random: () => number;
  /** Re-check interval while long polling, in case a wake-up hint was lost. */
  pollIntervalMs?: number;
}

/** Routes under /v1/worker; returns the sub-app and a close function for pending long polls. */
export function remoteWorkerRoutes(
  docket: Docket,
  options: RemoteWorkerRouteOptions,
): { routes: Hono<AppEnv>; close: () => Promise<void> } {
  const store = docket.store;
  const waiter = new ClaimWaiter(store, options.pollIntervalMs ?? 1000);
  const { metrics } = options;
  metrics.longPollsWaiting = () => waiter.waiting;
  // Queue and claim instant per live lease, so complete can label its metrics and time the
  // handler without another read. Bounded: a worker that vanishes must not grow it for ever.
  const leases = new Map<string, { queue: string; claimedAtMs: number }>();
  const remember = (job: ClaimedJob) => {
    if (leases.size >= 10_000) {
      const oldest = leases.keys().next().value;
      if (oldest !== undefined) leases.delete(oldest);
    }
    leases.set(`${job.id}:${job.token}`, { queue: job.queue, claimedAtMs: Date.now() });
  };
  const routes = new Hono<AppEnv>();
  routes.use('*', requireScope('worker'));

  routes.post('/claim', async (c) => {
    const body = await readBody(c, claimRequestSchema);
    const untilMs = Date.now() + Math.min(body.waitMs, options.maxLongPollMs);
    const signal = c.req.raw.signal;
    for (;;) {
      // The client has gone: a claim now would lease jobs nobody will run until their lease lapses.
      if (signal.aborted) return c.json({ jobs: [] });
      const jobs = await store.jobClaim({
        owner: body.workerId,
        limit: body.limit,
        leaseMs: body.leaseMs,
        queues: body.queues,
      });
      if (jobs.length > 0 || Date.now() >= untilMs || waiter.closed) {
        for (const job of jobs) {
          remember(job);
          metrics.observeClaim(job);
          // The claim instant by the database clock is leaseUntil - leaseMs.
          const startedAtMs = job.leaseUntil.getTime() - body.leaseMs;
          metrics.lateness.observe({ queue: job.queue }, Math.max(0, startedAtMs - job.runAt.getTime()) / 1000);
        }
        return c.json({ jobs: jobs.map(remoteJob) });
      }
      const [next, now] = await Promise.all([store.jobNextRunAt({ queues: body.queues }), store.now()]);
      await waiter.wait(untilMs, signal, next ? next.getTime() - now.getTime() : null);
    }
  });

  routes.post('/jobs/:id/heartbeat', async (c) => {
    const id = jobIdParam(c);
    const body = await readBody(c, heartbeatRequestSchema);
    const leaseUntil = await store.jobHeartbeat({ id, token: body.token, leaseMs: body.leaseMs });
    if (!leaseUntil) {
      leases.delete(`${id}:${body.token}`);
      metrics.stale.inc({ operation: 'heartbeat' });
      throw stale('heartbeat');
    }
    return c.json({ leaseUntil: leaseUntil.toISOString() });
  });

  routes.post('/jobs/:id/complete', async (c) => {
    const id = jobIdParam(c);
    const body = await readBody(c, completeRequestSchema);
    const outcome = await store.jobComplete({ id, token: body.token });
    const key = `${id}:${body.token}`;
    const known = leases.get(key);
    leases.delete(key);
    if (outcome === 'stale') {
      metrics.stale.inc({ operation: 'complete' });
      throw stale('complete');
    }
    const queue = known?.queue ?? 'unknown';
    metrics.completed.inc({ queue });
    if (known) metrics.duration.observe({ queue }, (Date.now() - known.claimedAtMs) / 1000);
    return c.json({ outcome });
  });

  routes.post('/jobs/:id/fail', async (c) => {
    const id = jobIdParam(c);
    const body = await readBody(c, failRequestSchema);
    const job = await store.jobGet({ id });
    if (job?.state !== 'running' || job.token !== body.token) {
      metrics.stale.inc({ operation: 'fail' });
      throw stale('fail');
    }
    let decision = decideAfterFailure({
      attempts: job.attempts,
      maxAttempts: job.maxAttempts,
      policy: job.retryPolicy,
      random: options.random,
    });
    if (decision.kind === 'retry' && body.retryAfterMs !== undefined && body.retryAfterMs > decision.delayMs) {
      decision = { kind: 'retry', delayMs: body.retryAfterMs };
    }
    // jobFail is fenced by the token: if another claim took the job since the read above, it
    // answers stale and the decision computed from the old attempt count is never applied.
    const result = await store.jobFail({
      id,
      token: body.token,
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
