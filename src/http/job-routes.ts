/**
 * Jobs, dead letters and queue statistics over HTTP. Every route calls Docket's admin operations;
 * submits are validated by normalizeSubmit (job/job-spec.ts), the same rules the library and the
 * CLI apply, so a job refused here would be refused everywhere, with the same field name.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { Docket } from '../docket.js';
import { ValidationError } from '../job/errors.js';
import { JOB_STATES, type Job, type JobState } from '../job/job.js';
import { MAX_IDEMPOTENCY_KEY_LENGTH, normalizeSubmit, parseInstant, QUEUE_NAME_PATTERN } from '../job/job-spec.js';
import type { AppEnv } from './app-env.js';
import { requireScope } from './auth.js';
import { badRequest, HttpError, notFound } from './http-error.js';
import { JOB_ID_PATTERN, jobIdParam, readBody, readJson, readQuery } from './request-input.js';
import type { DestinationGuard } from './ssrf-guard.js';
import { validateWebhookPayload, WEBHOOK_KIND } from './webhook-handler.js';

/** Most jobs one batch submit may carry. */
export const MAX_BATCH_SUBMIT = 1000;

/** A job as the API returns it: the stored record with instants as ISO-8601 strings. */
export function jobJson(job: Job) {
  return {
    id: job.id,
    kind: job.kind,
    queue: job.queue,
    state: job.state,
    payload: job.payload,
    priority: job.priority,
    runAt: job.runAt.toISOString(),
    leaseUntil: job.leaseUntil?.toISOString() ?? null,
    leaseOwner: job.leaseOwner,
    token: job.token,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    retryPolicy: job.retryPolicy,
    errors: job.errors.map((e) => ({ ...e, at: e.at.toISOString() })),
    idempotencyKey: job.idempotencyKey,
    timeoutMs: job.timeoutMs,
    scheduleId: job.scheduleId,
    scheduleSlot: job.scheduleSlot?.toISOString() ?? null,
    createdAt: job.createdAt.toISOString(),
    finishedAt: job.finishedAt?.toISOString() ?? null,
  };
}

const limitParam = z
  .string()
  .regex(/^\d{1,4}$/, { error: 'must be an integer from 1 to 1000' })
  .transform(Number)
  .refine((n) => n >= 1 && n <= 1000, { error: 'must be an integer from 1 to 1000' });
const afterParam = z.string().regex(JOB_ID_PATTERN, { error: 'must be a job id (decimal digits)' });
const queueParam = z.string().regex(QUEUE_NAME_PATTERN, { error: 'must be a queue name (letters, digits, _ . : -)' });
const kindParam = z.string().min(1).max(200);

/** Query of GET /v1/jobs. */
export const listJobsQuerySchema = z.strictObject({
  state: z
    .string()
    .transform((value, ctx) => {
      const states = value.split(',');
      const wrong = states.find((state) => !(JOB_STATES as readonly string[]).includes(state));
      if (wrong !== undefined) {
        ctx.addIssue({
          code: 'custom',
          message: `must be a comma-separated list of ${JOB_STATES.join(', ')}; got ${JSON.stringify(wrong.slice(0, 40))}`,
        });
        return z.NEVER;
      }
      return states as JobState[];
    })
    .optional(),
  queue: queueParam.optional(),
  kind: kindParam.optional(),
  limit: limitParam.optional(),
  after: afterParam.optional(),
});

/** Query of GET /v1/dead-letters. */
export const listDeadLettersQuerySchema = z.strictObject({
  queue: queueParam.optional(),
  kind: kindParam.optional(),
  limit: limitParam.optional(),
  after: afterParam.optional(),
});

/** Body of POST /v1/dead-letters/purge. */
export const purgeRequestSchema = z.strictObject({
  ids: z.array(afterParam).min(1).max(10_000).optional(),
  parkedBefore: z.string().min(1).optional().describe('ISO-8601 instant: purge jobs parked before it.'),
});

/** Body of POST /v1/jobs/batch. */
export const batchSubmitRequestSchema = z.strictObject({
  jobs: z.array(z.unknown()).min(1).max(MAX_BATCH_SUBMIT),
});

function idempotencyHeader(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  if (value.length === 0 || value.length > MAX_IDEMPOTENCY_KEY_LENGTH - 10) {
    throw badRequest(
      'Idempotency-Key',
      `must be 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH - 10} characters, got ${value.length}`,
    );
  }
  return value;
}

/** Settings of {@link jobRoutes}. */
export interface JobRouteOptions {
  /** Checks webhook destinations at submit time; without it webhook jobs are refused. */
  webhookGuard: DestinationGuard | undefined;
  random: () => number;
}

/** Routes for /v1/jobs, /v1/dead-letters and /v1/stats. */
export function jobRoutes(docket: Docket, options: JobRouteOptions): Hono<AppEnv> {
  const routes = new Hono<AppEnv>();

  /** Validates one submit exactly as the library does, plus the webhook destination when the kind is ours. */
  const validate = (input: unknown, prefix: string): void => {
    normalizeSubmit(input, options.random, prefix);
    const job = input as { kind: string; payload?: unknown };
    if (job.kind === WEBHOOK_KIND) {
      if (!options.webhookGuard) {
        throw new ValidationError(
          `${prefix}kind`,
          'webhook jobs are disabled: the server has no webhook signing secret',
        );
      }
      validateWebhookPayload(job.payload, options.webhookGuard, `${prefix}payload`);
    }
  };

  const withKey = (input: unknown, key: string | undefined, field: string): unknown => {
    if (key === undefined || typeof input !== 'object' || input === null || Array.isArray(input)) return input;
    const own = (input as { idempotencyKey?: unknown }).idempotencyKey;
    if (own !== undefined && own !== key) {
      throw badRequest(`${field}idempotencyKey`, 'differs from the Idempotency-Key header; give one or the other');
    }
    return { ...input, idempotencyKey: key };
  };

  routes.post('/jobs', requireScope('submit'), async (c) => {
    const key = idempotencyHeader(c.req.header('idempotency-key'));
    const input = withKey(await readJson(c), key, '');
    validate(input, '');
    const result = await docket.submit(input as Parameters<Docket['submit']>[0]);
    c.header('Location', `/v1/jobs/${result.id}`);
    return c.json(
      { id: result.id, created: result.created, runAt: result.runAt.toISOString() },
      result.created ? 201 : 200,
    );
  });

  routes.post('/jobs/batch', requireScope('submit'), async (c) => {
    const key = idempotencyHeader(c.req.header('idempotency-key'));
    const body = await readBody(c, batchSubmitRequestSchema);
    // One header for the whole batch: job i gets "<key>:<i>", so a retried batch finds each
    // job it created the first time instead of creating a second set.
    const inputs = body.jobs.map((job, i) =>
      withKey(job, key === undefined ? undefined : `${key}:${i}`, `jobs[${i}].`),
    );
    inputs.forEach((input, i) => {
      validate(input, `jobs[${i}].`);
    });
    const results = await docket.submitMany(inputs as Parameters<Docket['submitMany']>[0]);
    return c.json(
      { jobs: results.map((r) => ({ id: r.id, created: r.created, runAt: r.runAt.toISOString() })) },
      results.some((r) => r.created) ? 201 : 200,
    );
  });

  routes.get('/jobs', requireScope('read'), async (c) => {
    const query = readQuery(c, listJobsQuerySchema);
    const limit = query.limit ?? 100;
    const jobs = await docket.listJobs({
      states: query.state,
      queue: query.queue,
      kind: query.kind,
      limit,
      afterId: query.after,
    });
    return c.json({ jobs: jobs.map(jobJson), next: jobs.length === limit ? (jobs.at(-1)?.id ?? null) : null });
  });

  routes.get('/jobs/:id', requireScope('read'), async (c) => {
    const id = jobIdParam(c);
    const job = await docket.getJob(id);
    if (!job) throw notFound(`job ${id}`);
    return c.json(jobJson(job));
  });

  routes.post('/jobs/:id/cancel', requireScope('admin'), async (c) => {
    const id = jobIdParam(c);
    const outcome = await docket.cancelJob(id);
    if (outcome === 'not_found') throw notFound(`job ${id}`);
    if (outcome === 'already_finished') {
      throw new HttpError(409, 'already_finished', `job ${id} has already finished and cannot be cancelled`);
    }
    return c.json({ id, state: 'cancelled' as const });
  });

  routes.get('/dead-letters', requireScope('read'), async (c) => {
    const query = readQuery(c, listDeadLettersQuerySchema);
    const limit = query.limit ?? 100;
    const jobs = await docket.listDeadLetters({ queue: query.queue, kind: query.kind, limit, afterId: query.after });
    return c.json({ jobs: jobs.map(jobJson), next: jobs.length === limit ? (jobs.at(-1)?.id ?? null) : null });
  });

  routes.post('/dead-letters/:id/retry', requireScope('admin'), async (c) => {
    const id = jobIdParam(c);
    const job = await docket.retryDeadLetter(id);
    if (!job) throw notFound(`dead letter ${id}`);
    return c.json(jobJson(job));
  });

  routes.post('/dead-letters/purge', requireScope('admin'), async (c) => {
    const body = await readBody(c, purgeRequestSchema);
    if (body.ids === undefined && body.parkedBefore === undefined) {
      throw badRequest('ids', 'give ids, parkedBefore or both; an empty purge would be ambiguous');
    }
    const parkedBefore = body.parkedBefore === undefined ? undefined : parseInstant('parkedBefore', body.parkedBefore);
    const purged = await docket.purgeDeadLetters({ ids: body.ids, parkedBefore });
    return c.json({ purged });
  });

  routes.get('/stats', requireScope('read'), async (c) => {
    return c.json({ queues: await docket.queueStats() });
  });

  return routes;
}
