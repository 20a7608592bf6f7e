/**
 * Jobs, dead letters and queue statistics over HTTP. Every route calls Docket's admin operations;
 * submits are validated by normalizeSubmit (job/job-spec.ts), the same rules the library and the
 * CLI apply, so a job refused here would be refused everywhere, with the same field name.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { Docket } from '../docket.js';
import { ValidationError } from '../job/errors.js';
import type { Job } from '../job/job.js';
import { listOrder, parseJobFilterText } from '../job/job-filter.js';
import {
  MAX_KIND_LENGTH,
  normalizeSubmit,
  parseInstant,
  QUEUE_NAME_PATTERN,
  unstorableReason,
} from '../job/job-spec.js';
import { afterJobId, MAX_JOB_ID, MAX_PURGE_IDS, numberText, pageSize, purgeIds } from '../job/list-params.js';
import type { AppEnv } from './app-env.js';
import { requireScope } from './auth.js';
import { badRequest, HttpError, notFound } from './http-error.js';
import { jobIdParam, readBody, readJson, readQuery } from './request-input.js';
import type { DestinationGuard } from './ssrf-guard.js';
import { redactPayload, validateWebhookPayload, WEBHOOK_KIND } from './webhook-handler.js';

/** Most jobs one batch submit may carry. */
export const MAX_BATCH_SUBMIT = 1000;
/**
 * Longest `Idempotency-Key` header: the stored key is `<token name>:<key>` (token names are at
 * most 64 characters), and a batch adds `:<index>`, all within the 200-character key limit.
 */
export const MAX_IDEMPOTENCY_HEADER_LENGTH = 128;

/**
 * A job as the API returns it: the stored record with instants as RFC 3339 strings. Webhook
 * header values are redacted and the fencing token is left out: reads are for people and
 * dashboards, and a lease's secrets belong to the worker holding it.
 */
export function jobJson(job: Job) {
  return {
    id: job.id,
    kind: job.kind,
    queue: job.queue,
    state: job.state,
    payload: redactPayload(job.kind, job.payload),
    priority: job.priority,
    runAt: job.runAt.toISOString(),
    leaseUntil: job.leaseUntil?.toISOString() ?? null,
    leaseOwner: job.leaseOwner,
    attempts: job.attempts,
    maxAttempts: job.maxAttempts,
    retryPolicy: job.retryPolicy,
    errors: job.errors.map(({ startedAt, ...e }) => ({
      ...e,
      at: e.at.toISOString(),
      ...(startedAt === undefined ? {} : { startedAt: startedAt.toISOString() }),
    })),
    idempotencyKey: job.idempotencyKey,
    timeoutMs: job.timeoutMs,
    scheduleId: job.scheduleId,
    scheduleSlot: job.scheduleSlot?.toISOString() ?? null,
    createdAt: job.createdAt.toISOString(),
    finishedAt: job.finishedAt?.toISOString() ?? null,
    startedAt: job.startedAt?.toISOString() ?? null,
  };
}

// `state`, `limit` and `after` are read as text here and judged by the shared parsers in
// src/job/list-params.ts (see listQuery), so their refusals match the library's and the CLI's.
const queueParam = z.string().regex(QUEUE_NAME_PATTERN, { error: 'must be a queue name (letters, digits, _ . : -)' });
const kindParam = z
  .string()
  .min(1, { error: 'must be a non-empty job kind' })
  .max(MAX_KIND_LENGTH, { error: `must be at most ${MAX_KIND_LENGTH} characters` })
  .superRefine((value, ctx) => {
    const reason = unstorableReason(value);
    if (reason !== null) ctx.addIssue({ code: 'custom', message: reason });
  });

/**
 * The job filter's text fields (docs/dashboard-api.md, "The job filter"): queue and kind checked
 * here, the rest read by parseJobFilterText (src/job/job-filter.ts), the one filter parser.
 */
export const jobFilterFields = {
  state: z.string().optional(),
  queue: queueParam.optional(),
  kind: kindParam.optional(),
  idFrom: z.string().optional(),
  idTo: z.string().optional(),
  runAtFrom: z.string().optional(),
  runAtTo: z.string().optional(),
  payload: z.string().optional(),
};

const pageFields = {
  order: z.string().optional(),
  limit: z.string().optional(),
  after: z.string().optional(),
};

/** Query of GET /v1/jobs. */
export const listJobsQuerySchema = z.strictObject({ ...jobFilterFields, ...pageFields });

/** Query of GET /v1/dead-letters: the filter without `state` (every dead letter is dead). */
const { state: _state, ...deadLetterFilterFields } = jobFilterFields;
export const listDeadLettersQuerySchema = z.strictObject({ ...deadLetterFilterFields, ...pageFields });

/**
 * The paging parameters of a list query, by the shared parsers: `limit` text read as a number
 * the way the CLI reads `--limit`, `after` named as this API spells it.
 */
function listPage(query: { limit?: string | undefined; after?: string | undefined; order?: string | undefined }) {
  const limit = pageSize(query.limit === undefined ? undefined : numberText(query.limit));
  if (query.after !== undefined) afterJobId(query.after, 'after');
  return { limit, afterId: query.after, order: listOrder(query.order) };
}

/** Body of POST /v1/dead-letters/purge. */
export const purgeRequestSchema = z.strictObject({
  // Judged by purgeIds (the library's rule and message); the schema only documents the shape.
  ids: z
    .array(z.unknown())
    .optional()
    .meta({
      items: {
        type: 'string',
        pattern: '^[0-9]{1,16}$',
        description: `A job id: decimal digits, at most ${MAX_JOB_ID}.`,
      },
      minItems: 1,
      maxItems: MAX_PURGE_IDS,
    }),
  parkedBefore: z.string().min(1).optional().describe('ISO-8601 instant: purge jobs parked before it.'),
});

/** Body of POST /v1/jobs/batch. */
export const batchSubmitRequestSchema = z.strictObject({
  jobs: z.array(z.unknown()).min(1).max(MAX_BATCH_SUBMIT),
});

/**
 * The `Idempotency-Key` header, scoped to the calling token's name: two clients choosing the
 * same key ("order-42") never see each other's jobs.
 */
function idempotencyHeader(value: string | undefined, tokenName: string): string | undefined {
  if (value === undefined) return undefined;
  if (value.length === 0 || value.length > MAX_IDEMPOTENCY_HEADER_LENGTH) {
    throw badRequest(
      'Idempotency-Key',
      `must be 1 to ${MAX_IDEMPOTENCY_HEADER_LENGTH} characters, got ${value.length}`,
    );
  }
  return `${tokenName}:${value}`;
}

/**
 * Checks a webhook job's payload and destination, as at submit, for any face that enqueues one
 * (submits and schedules): without a guard (no signing secret) webhook jobs are refused.
 */
export function checkWebhookJob(
  job: { kind?: unknown; payload?: unknown },
  guard: DestinationGuard | undefined,
  prefix: string,
): void {
  if (job.kind !== WEBHOOK_KIND) return;
  if (!guard) {
    throw new ValidationError(`${prefix}kind`, 'webhook jobs are disabled: the server has no webhook signing secret');
  }
  validateWebhookPayload(job.payload, guard, `${prefix}payload`);
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
    checkWebhookJob(input as { kind: string; payload?: unknown }, options.webhookGuard, prefix);
  };

  const withKey = (input: unknown, key: string | undefined, field: string): unknown => {
    if (key === undefined || typeof input !== 'object' || input === null || Array.isArray(input)) return input;
    if ((input as { idempotencyKey?: unknown }).idempotencyKey !== undefined) {
      throw badRequest(`${field}idempotencyKey`, 'give the Idempotency-Key header or the field, not both');
    }
    return { ...input, idempotencyKey: key };
  };

  routes.post('/jobs', requireScope('submit'), async (c) => {
    const key = idempotencyHeader(c.req.header('idempotency-key'), c.get('principal').name);
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
    const key = idempotencyHeader(c.req.header('idempotency-key'), c.get('principal').name);
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
    // One `state` parameter, so a wrong item is named `state` rather than `states[i]`.
    const filter = parseJobFilterText(query);
    const { limit, afterId, order } = listPage(query);
    const jobs = await docket.listJobs({ ...filter, limit, afterId, order });
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
    const filter = parseJobFilterText(query);
    const { limit, afterId, order } = listPage(query);
    const jobs = await docket.listDeadLetters({ ...filter, limit, afterId, order });
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
    const ids = purgeIds(body.ids);
    const parkedBefore = body.parkedBefore === undefined ? undefined : parseInstant('parkedBefore', body.parkedBefore);
    const purged = await docket.purgeDeadLetters({ ids, parkedBefore });
    return c.json({ purged });
  });

  routes.get('/stats', requireScope('read'), async (c) => {
    const queues = await docket.queueStats();
    return c.json({ queues, unhandled: queues.reduce((sum, row) => sum + (row.unhandled ?? 0), 0) });
  });

  return routes;
}
