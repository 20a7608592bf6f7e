/**
 * The dashboard's routes (docs/dashboard-api.md): the overview counts, the activity series, a
 * job's detail, bulk actions on a filter with their progress, a schedule's run-now, and the live
 * event stream. Each calls Docket's operations; the filter is read by the one filter parser
 * (src/job/job-filter.ts). Scopes: `read` for every GET and for the bulk preview (it changes
 * nothing); `admin` for every action.
 *
 * The event stream (`GET /v1/events`, text/event-stream) authenticates like any route: the page
 * sends its bearer token in the Authorization header (reading the body with fetch), never in the
 * URL. Streams end cleanly when the server stops ({@link DashboardRoutes.close}).
 */
import { Hono } from 'hono';
import { streamSSE } from 'hono/streaming';
import { z } from 'zod';
import type { Docket } from '../docket.js';
import { latenessPercentiles } from '../job/activity.js';
import type { Job } from '../job/job.js';
import { bulkAction, bulkActionStates, JOB_FILTER_TEXT_FIELDS, parseJobFilterText } from '../job/job-filter.js';
import { parseInstant } from '../job/job-spec.js';
import { jobAttempts, jobTimeline } from '../job/job-timeline.js';
import { numberText } from '../job/list-params.js';
import { SCHEDULE_ID_PATTERN } from '../schedule/schedule.js';
import type { QueueCounts } from '../store/store.js';
import type { AppEnv } from './app-env.js';
import { requireScope } from './auth.js';
import { type BulkOperation, BulkOperations } from './bulk-operations.js';
import { badRequest, notFound } from './http-error.js';
import { jobFilterFields, jobJson } from './job-routes.js';
import { jobIdParam, readBody, readQuery } from './request-input.js';
import { scheduleJson } from './schedule-routes.js';

/** How often a stream sends a heartbeat comment, so proxies keep an idle stream open. */
export const HEARTBEAT_MS = 15_000;
/** The overview interval of a stream, by default and at the bounds. */
const DEFAULT_STREAM_INTERVAL_MS = 2000;
const MIN_STREAM_INTERVAL_MS = 1000;
const MAX_STREAM_INTERVAL_MS = 60_000;

const COUNT_FIELDS = ['scheduled', 'available', 'running', 'unhandled', 'done', 'cancelled', 'dead'] as const;

/** The overview body: per-queue counts and their totals, at the database's now. */
export async function overviewJson(docket: Docket) {
  const [at, queues] = await Promise.all([docket.store.now(), docket.queueCounts()]);
  const totals: Record<string, number> = Object.fromEntries(COUNT_FIELDS.map((field) => [field, 0]));
  const estimated = new Set<string>();
  for (const queue of queues) {
    for (const field of COUNT_FIELDS) totals[field] = (totals[field] ?? 0) + queue[field];
    for (const field of queue.estimated) estimated.add(field);
  }
  return {
    at: at.toISOString(),
    queues: queues.map(queueCountsJson),
    totals: { ...totals, estimated: [...estimated].sort() },
    // 0: done jobs are deleted as they complete (decision 0022), so the page says why none show.
    retentionMs: docket.retentionMs,
  };
}

function queueCountsJson(counts: QueueCounts) {
  return {
    queue: counts.queue,
    paused: counts.paused === true,
    scheduled: counts.scheduled,
    available: counts.available,
    running: counts.running,
    unhandled: counts.unhandled,
    done: counts.done,
    cancelled: counts.cancelled,
    dead: counts.dead,
    estimated: counts.estimated,
  };
}

/** A bulk operation as the API returns it. */
export function operationJson(operation: BulkOperation) {
  return {
    id: operation.id,
    action: operation.action,
    filter: operation.filter,
    runAt: operation.runAt?.toISOString() ?? null,
    state: operation.state,
    total: operation.total,
    totalEstimated: operation.totalEstimated,
    done: operation.done,
    affected: operation.affected,
    startedAt: operation.startedAt.toISOString(),
    finishedAt: operation.finishedAt?.toISOString() ?? null,
    error: operation.error,
  };
}

/** A job's page: the record, its lease, its attempts, its timeline and its schedule. */
async function jobDetailJson(docket: Docket, job: Job) {
  const schedule = job.scheduleId === null ? null : await docket.getSchedule(job.scheduleId);
  const now = await docket.store.now();
  return {
    job: jobJson(job),
    lease:
      job.token === 0 || job.leaseOwner === null
        ? null
        : {
            owner: job.leaseOwner,
            until: job.leaseUntil?.toISOString() ?? null,
            token: job.token,
            live: job.state === 'running' && job.leaseUntil !== null && job.leaseUntil.getTime() > now.getTime(),
          },
    schedule: schedule === null ? null : scheduleJson(schedule),
    attempts: jobAttempts(job).map((attempt) => ({
      attempt: attempt.attempt,
      startedAt: attempt.startedAt?.toISOString() ?? null,
      endedAt: attempt.endedAt?.toISOString() ?? null,
      outcome: attempt.outcome,
      error: attempt.error,
      owner: attempt.owner,
    })),
    timeline: jobTimeline(job).map((event) => ({ ...event, at: event.at.toISOString() })),
  };
}

const filterSchema = z.strictObject(jobFilterFields);

/** Body of POST /v1/bulk/preview. */
export const bulkPreviewSchema = z.strictObject({ action: z.string(), filter: filterSchema.optional() });

/** Body of POST /v1/bulk. */
export const bulkStartSchema = z.strictObject({
  action: z.string(),
  filter: filterSchema.optional(),
  runAt: z.union([z.string(), z.number()]).optional(),
});

/** The action and filter of a bulk body, by the shared parsers (fields named as in the body). */
function bulkRequestOf(body: { action: string; filter?: Record<string, string | undefined> | undefined }) {
  const action = bulkAction(body.action, 'action');
  const filterText = Object.fromEntries(
    JOB_FILTER_TEXT_FIELDS.flatMap((field) =>
      body.filter?.[field] === undefined ? [] : [[field, body.filter[field]]],
    ),
  );
  const filter = parseJobFilterText(filterText, 'filter.');
  bulkActionStates(action, filter);
  return { action, filter, filterText };
}

const activityQuerySchema = z.strictObject({ minutes: z.string().optional() });
const eventsQuerySchema = z.strictObject({ intervalMs: z.string().optional() });

function integerParam(name: string, text: string | undefined, fallback: number, min: number, max: number): number {
  if (text === undefined) return fallback;
  const value = numberText(text);
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw badRequest(name, `must be an integer from ${min} to ${max}, got ${JSON.stringify(text.slice(0, 40))}`);
  }
  return value;
}

/** The dashboard routes and what they hold open: bulk operations and live streams. */
export interface DashboardRoutes {
  routes: Hono<AppEnv>;
  operations: BulkOperations;
  /** Ends every live stream and stops bulk walks after their current batch. */
  close(): Promise<void>;
}

/** How long close() waits for the live streams' loops to leave. */
const STREAM_STOP_WAIT_MS = 2_000;

/** Routes for /v1/overview, /v1/activity, /v1/jobs/{id}/detail, /v1/bulk*, /v1/events and run-now. */
export function dashboardRoutes(docket: Docket): DashboardRoutes {
  const routes = new Hono<AppEnv>();
  const operations = new BulkOperations(docket);
  const streams = new Set<() => void>();
  // Each stream's loop until it has left: close() waits for them, so no loop is still reading
  // the store (an overview in flight) when the server closes it under them.
  const loops = new Set<Promise<void>>();
  let closed = false;

  routes.get('/overview', requireScope('read'), async (c) => c.json(await overviewJson(docket)));

  routes.get('/activity', requireScope('read'), async (c) => {
    const query = readQuery(c, activityQuerySchema);
    const minutes = integerParam('minutes', query.minutes, 60, 1, 1440);
    const { from, to, buckets } = await docket.activity(minutes);
    return c.json({
      from: from.toISOString(),
      to: to.toISOString(),
      bucketMs: 60_000,
      buckets: buckets.map((bucket) => ({
        at: bucket.at.toISOString(),
        completed: bucket.completed,
        failed: bucket.failed,
        completedPerSecond: bucket.completed / 60,
        failedPerSecond: bucket.failed / 60,
        lateness: latenessPercentiles(bucket.latenessHistogram),
      })),
    });
  });

  routes.get('/jobs/:id/detail', requireScope('read'), async (c) => {
    const id = jobIdParam(c);
    const job = await docket.getJob(id);
    if (!job) throw notFound(`job ${id}`);
    return c.json(await jobDetailJson(docket, job));
  });

  routes.post('/schedules/:id/run-now', requireScope('admin'), async (c) => {
    const id = c.req.param('id');
    if (!SCHEDULE_ID_PATTERN.test(id)) {
      throw badRequest(
        'id',
        `must be a schedule id (1 to 200 of letters, digits, _ . : -), got ${JSON.stringify(id.slice(0, 40))}`,
      );
    }
    const result = await docket.runScheduleNow(id);
    if (!result) throw notFound(`schedule ${id}`);
    c.header('Location', `/v1/jobs/${result.id}`);
    return c.json({ id: result.id, created: result.created, runAt: result.runAt.toISOString() }, 201);
  });

  routes.post('/bulk/preview', requireScope('read'), async (c) => {
    const body = await readBody(c, bulkPreviewSchema);
    const { action, filter } = bulkRequestOf(body);
    const matched = await docket.countMatching({ action, filter });
    return c.json({ action, matched: matched.count, estimated: matched.estimated });
  });

  routes.post('/bulk', requireScope('admin'), async (c) => {
    const body = await readBody(c, bulkStartSchema);
    const { action, filter, filterText } = bulkRequestOf(body);
    if (action === 'reschedule' && body.runAt === undefined)
      throw badRequest('runAt', 'reschedule needs the new run time');
    if (action !== 'reschedule' && body.runAt !== undefined)
      throw badRequest('runAt', `is only for reschedule, not ${action}`);
    const runAt = body.runAt === undefined ? null : parseInstant('runAt', body.runAt);
    const { operation, joined } = await operations.start({ action, filter, filterText, runAt });
    c.header('Location', `/v1/bulk/${operation.id}`);
    return c.json({ ...operationJson(operation), joined }, joined ? 200 : 202);
  });

  routes.get('/bulk', requireScope('read'), async (c) => c.json({ operations: operations.list().map(operationJson) }));

  routes.get('/bulk/:id', requireScope('read'), async (c) => {
    const operation = operations.get(c.req.param('id'));
    if (!operation) throw notFound(`bulk operation ${c.req.param('id').slice(0, 60)}`);
    return c.json(operationJson(operation));
  });

  routes.get('/events', requireScope('read'), async (c) => {
    const query = readQuery(c, eventsQuerySchema);
    const intervalMs = integerParam(
      'intervalMs',
      query.intervalMs,
      DEFAULT_STREAM_INTERVAL_MS,
      MIN_STREAM_INTERVAL_MS,
      MAX_STREAM_INTERVAL_MS,
    );
    // Proxies must pass events through as they come, not buffer the response.
    c.header('Cache-Control', 'no-store');
    c.header('X-Accel-Buffering', 'no');
    return streamSSE(c, async (stream) => {
      let left: () => void = () => {};
      const loop = new Promise<void>((resolve) => {
        left = resolve;
      });
      loops.add(loop);
      let ended = false;
      let wake: (() => void) | undefined;
      const end = () => {
        ended = true;
        wake?.();
      };
      streams.add(end);
      stream.onAbort(end);
      const pending: BulkOperation[] = [];
      const unsubscribe = operations.subscribe((operation) => {
        pending.push(operation);
        wake?.();
      });
      try {
        let nextOverview = 0;
        let nextHeartbeat = Date.now() + HEARTBEAT_MS;
        while (!ended && !closed) {
          while (pending.length > 0) {
            const operation = pending.shift()!;
            await stream.writeSSE({ event: 'bulk', data: JSON.stringify(operationJson(operation)) });
          }
          const nowMs = Date.now();
          if (nowMs >= nextOverview) {
            await stream.writeSSE({ event: 'overview', data: JSON.stringify(await overviewJson(docket)) });
            nextOverview = Date.now() + intervalMs;
          }
          if (nowMs >= nextHeartbeat) {
            await stream.write(': heartbeat\n\n');
            nextHeartbeat = nowMs + HEARTBEAT_MS;
          }
          const waitMs = Math.max(0, Math.min(nextOverview, nextHeartbeat) - Date.now());
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, waitMs);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
        }
      } catch (error) {
        // A write to a stream the client or the server just ended is the end of it, not an error.
        if (!ended && !closed) throw error;
      } finally {
        unsubscribe();
        streams.delete(end);
        loops.delete(loop);
        left();
      }
    });
  });

  return {
    routes,
    operations,
    close: async () => {
      closed = true;
      for (const end of [...streams]) end();
      // Bounded: a loop blocked writing to a client that stopped reading must not hold the stop.
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.all([...loops]),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, STREAM_STOP_WAIT_MS);
        }),
      ]);
      clearTimeout(timer);
      await operations.close();
    },
  };
}

/** The OpenAPI paths and schemas of these routes, merged into the document by openapi.ts. */
export function dashboardOpenApi(): { paths: Record<string, unknown>; schemas: Record<string, unknown> } {
  const error = { $ref: '#/components/schemas/Error' };
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  const json = (schema: unknown) => ({ content: { 'application/json': { schema } } });
  const instant = { type: 'string', format: 'date-time' };
  const nullable = (s: Record<string, unknown>) => ({ anyOf: [s, { type: 'null' }] });
  const op = (
    scope: 'read' | 'admin',
    summary: string,
    ok: Record<string, unknown>,
    codes: number[],
    extra: Record<string, unknown> = {},
  ) => ({
    summary,
    security: [{ bearer: [scope] }],
    description: `Scope: \`${scope}\`.`,
    ...extra,
    responses: {
      ...ok,
      ...Object.fromEntries(
        [...codes, 401, 403, 421, 500].map((code) => [String(code), { description: `Error ${code}`, ...json(error) }]),
      ),
    },
  });
  const countFields = Object.fromEntries(COUNT_FIELDS.map((field) => [field, { type: 'integer', minimum: 0 }]));
  const estimated = {
    type: 'array',
    items: { type: 'string', enum: ['scheduled', 'available', 'running', 'unhandled', 'done', 'cancelled', 'dead'] },
    description: 'Fields whose value is an estimate (past 1,000 per queue and state).',
  };
  const filterSchemaJson = {
    type: 'object',
    additionalProperties: false,
    description: 'The job filter (docs/dashboard-api.md): every field a string, as in the list query.',
    properties: Object.fromEntries(JOB_FILTER_TEXT_FIELDS.map((field) => [field, { type: 'string' }])),
  };
  const operationSchema = {
    type: 'object',
    additionalProperties: false,
    required: [
      'id',
      'action',
      'filter',
      'runAt',
      'state',
      'total',
      'totalEstimated',
      'done',
      'affected',
      'startedAt',
      'finishedAt',
      'error',
    ],
    properties: {
      id: { type: 'string' },
      action: { type: 'string', enum: ['retry', 'purge', 'cancel', 'reschedule'] },
      filter: ref('JobFilter'),
      runAt: nullable(instant),
      state: { type: 'string', enum: ['running', 'done', 'failed'] },
      total: { type: 'integer', minimum: 0 },
      totalEstimated: { type: 'boolean' },
      done: { type: 'integer', minimum: 0 },
      affected: { type: 'integer', minimum: 0 },
      startedAt: instant,
      finishedAt: nullable(instant),
      error: nullable({ type: 'string' }),
      joined: { type: 'boolean', description: 'On POST /v1/bulk: true when a running identical operation was joined.' },
    },
  };
  const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9]{1,16}$' } };
  const bulkBody = (withRunAt: boolean) => ({
    required: true,
    ...json({
      type: 'object',
      additionalProperties: false,
      required: ['action'],
      properties: {
        action: { type: 'string', enum: ['retry', 'purge', 'cancel', 'reschedule'] },
        filter: ref('JobFilter'),
        ...(withRunAt
          ? { runAt: { type: ['string', 'integer'], description: 'reschedule only: RFC 3339 or epoch ms.' } }
          : {}),
      },
    }),
  });
  return {
    schemas: {
      JobFilter: filterSchemaJson,
      BulkOperation: operationSchema,
      QueueCounts: {
        type: 'object',
        additionalProperties: false,
        required: ['queue', 'paused', ...COUNT_FIELDS, 'estimated'],
        properties: { queue: { type: 'string' }, paused: { type: 'boolean' }, ...countFields, estimated },
      },
    },
    paths: {
      '/v1/overview': {
        get: op(
          'read',
          'Per-queue counts by state (bounded: estimates flagged), with totals.',
          {
            '200': {
              description: 'Counts',
              ...json({
                type: 'object',
                additionalProperties: false,
                required: ['at', 'queues', 'totals', 'retentionMs'],
                properties: {
                  at: instant,
                  queues: { type: 'array', items: ref('QueueCounts') },
                  retentionMs: {
                    type: 'integer',
                    minimum: 0,
                    description:
                      'How long done and cancelled records are kept, ms; 0: a job is deleted as it completes',
                  },
                  totals: {
                    type: 'object',
                    additionalProperties: false,
                    required: [...COUNT_FIELDS, 'estimated'],
                    properties: { ...countFields, estimated },
                  },
                },
              }),
            },
          },
          [],
        ),
      },
      '/v1/activity': {
        get: op(
          'read',
          'Completions, dead-letter parkings and start lateness per minute over the last `minutes`.',
          {
            '200': {
              description: 'Per-minute buckets',
              ...json({
                type: 'object',
                additionalProperties: false,
                required: ['from', 'to', 'bucketMs', 'buckets'],
                properties: {
                  from: instant,
                  to: instant,
                  bucketMs: { type: 'integer' },
                  buckets: {
                    type: 'array',
                    items: {
                      type: 'object',
                      additionalProperties: false,
                      required: ['at', 'completed', 'failed', 'completedPerSecond', 'failedPerSecond', 'lateness'],
                      properties: {
                        at: instant,
                        completed: { type: 'integer' },
                        failed: { type: 'integer' },
                        completedPerSecond: { type: 'number' },
                        failedPerSecond: { type: 'number' },
                        lateness: nullable({
                          type: 'object',
                          additionalProperties: false,
                          required: ['p50', 'p95', 'p99'],
                          properties: { p50: { type: 'number' }, p95: { type: 'number' }, p99: { type: 'number' } },
                        }),
                      },
                    },
                  },
                },
              }),
            },
          },
          [400],
          {
            parameters: [
              { name: 'minutes', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1440, default: 60 } },
            ],
          },
        ),
      },
      '/v1/jobs/{id}/detail': {
        get: op(
          'read',
          'A job with its lease, attempts, timeline and schedule.',
          {
            '200': {
              description: 'The job page',
              ...json({
                type: 'object',
                additionalProperties: false,
                required: ['job', 'lease', 'schedule', 'attempts', 'timeline'],
                properties: {
                  job: ref('Job'),
                  lease: nullable({
                    type: 'object',
                    additionalProperties: false,
                    required: ['owner', 'until', 'token', 'live'],
                    properties: {
                      owner: { type: 'string' },
                      until: nullable(instant),
                      token: { type: 'integer' },
                      live: { type: 'boolean' },
                    },
                  }),
                  schedule: nullable({ type: 'object' }),
                  attempts: {
                    type: 'array',
                    items: {
                      type: 'object',
                      required: ['attempt', 'startedAt', 'endedAt', 'outcome', 'error', 'owner'],
                    },
                  },
                  timeline: {
                    type: 'array',
                    items: { type: 'object', required: ['at', 'event', 'attempt', 'detail'] },
                  },
                },
              }),
            },
          },
          [400, 404],
          { parameters: [idParam] },
        ),
      },
      '/v1/schedules/{id}/run-now': {
        post: op(
          'admin',
          'Enqueue one run of the schedule’s job now, as a one-off job (no slot).',
          { '201': { description: 'Created', ...json(ref('SubmitResult')) } },
          [400, 404],
          {
            parameters: [
              {
                name: 'id',
                in: 'path',
                required: true,
                schema: { type: 'string', pattern: SCHEDULE_ID_PATTERN.source },
              },
            ],
          },
        ),
      },
      '/v1/bulk/preview': {
        post: op(
          'read',
          'How many jobs a bulk action would touch now (changes nothing).',
          {
            '200': {
              description: 'The matched count',
              ...json({
                type: 'object',
                additionalProperties: false,
                required: ['action', 'matched', 'estimated'],
                properties: {
                  action: { type: 'string' },
                  matched: { type: 'integer' },
                  estimated: { type: 'boolean' },
                },
              }),
            },
          },
          [400, 415],
          { requestBody: bulkBody(false) },
        ),
      },
      '/v1/bulk': {
        post: op(
          'admin',
          'Start a bulk action on every job the filter matches (202), or join the identical running one (200).',
          {
            '202': { description: 'Started', ...json(ref('BulkOperation')) },
            '200': { description: 'Joined', ...json(ref('BulkOperation')) },
          },
          [400, 415],
          { requestBody: bulkBody(true) },
        ),
        get: op(
          'read',
          'This server’s bulk operations, newest first.',
          {
            '200': {
              description: 'Operations',
              ...json({
                type: 'object',
                additionalProperties: false,
                required: ['operations'],
                properties: { operations: { type: 'array', items: ref('BulkOperation') } },
              }),
            },
          },
          [],
        ),
      },
      '/v1/bulk/{id}': {
        get: op(
          'read',
          'One bulk operation and its progress.',
          { '200': { description: 'The operation', ...json(ref('BulkOperation')) } },
          [404],
          { parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }] },
        ),
      },
      '/v1/events': {
        get: op(
          'read',
          'Live events (text/event-stream): `overview` every intervalMs, `bulk` on progress, `: heartbeat` every 15 s.',
          {
            '200': { description: 'An event stream', content: { 'text/event-stream': { schema: { type: 'string' } } } },
          },
          [400],
          {
            parameters: [
              {
                name: 'intervalMs',
                in: 'query',
                schema: { type: 'integer', minimum: 1000, maximum: 60000, default: 2000 },
              },
            ],
          },
        ),
      },
    },
  };
}
