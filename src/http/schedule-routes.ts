/**
 * Recurring schedules and queue pause over HTTP: /v1/schedules and /v1/queues. Every route calls
 * Docket's admin operations; schedule bodies are validated by normalizeScheduleSpec (inside
 * `docket.schedule`), the same rules the library and the CLI apply, so a refused schedule names
 * the same field everywhere and nothing is stored. Scopes: `read` to list and get, `admin` to
 * change anything.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { Docket } from '../docket.js';
import { isPlainObject, QUEUE_NAME_PATTERN } from '../job/job-spec.js';
import { numberText, pageSize } from '../job/list-params.js';
import { JITTER_MODES } from '../schedule/jitter.js';
import { nextSlotAfter } from '../schedule/next-slot.js';
import {
  MAX_CATCH_UP_RUNS,
  MAX_CATCH_UP_WINDOW_MS,
  MAX_SCHEDULE_JITTER_MS,
  MISFIRE_POLICIES,
  normalizeScheduleSpec,
  SCHEDULE_ID_PATTERN,
  type Schedule,
  type ScheduleInput,
} from '../schedule/schedule.js';
import type { QueueState } from '../store/store.js';
import type { AppEnv } from './app-env.js';
import { requireScope } from './auth.js';
import { badRequest, HttpError, notFound } from './http-error.js';
import { checkWebhookJob } from './job-routes.js';
import { readJson, readQuery } from './request-input.js';
import type { DestinationGuard } from './ssrf-guard.js';
import { redactPayload } from './webhook-handler.js';

/**
 * A schedule as the API returns it: the library's {@link Schedule} record, field for field, with
 * instants as ISO-8601 strings (what `JSON.stringify` of the record gives, and the CLI's `--json`).
 */
export function scheduleJson(schedule: Schedule) {
  const { job } = schedule;
  return {
    id: schedule.id,
    cron: schedule.cron,
    timeZone: schedule.timeZone,
    paused: schedule.paused,
    job: {
      kind: job.kind,
      queue: job.queue,
      payload: redactPayload(job.kind, job.payload),
      priority: job.priority,
      maxAttempts: job.maxAttempts,
      retry: job.retry,
      timeoutMs: job.timeoutMs,
    },
    jitterMs: schedule.jitterMs,
    jitterMode: schedule.jitterMode,
    misfire: schedule.misfire,
    lastSlotAt: schedule.lastSlotAt?.toISOString() ?? null,
    nextSlotAt: schedule.nextSlotAt?.toISOString() ?? null,
    nextRunAt: schedule.nextRunAt?.toISOString() ?? null,
    upcoming: upcomingSlots(schedule).map((slot) => slot.toISOString()),
    createdAt: schedule.createdAt.toISOString(),
    updatedAt: schedule.updatedAt.toISOString(),
  };
}

/** How many upcoming slots a schedule's JSON lists. */
export const UPCOMING_SLOTS = 5;

/**
 * The next {@link UPCOMING_SLOTS} slots of an active schedule: its pending run's slot, then the
 * cron's following matches (before jitter). Read from the stored next slot, never a clock: empty
 * while paused or when the pattern has no later match.
 */
function upcomingSlots(schedule: Schedule): Date[] {
  if (schedule.paused || schedule.nextSlotAt === null) return [];
  const slots = [schedule.nextSlotAt];
  while (slots.length < UPCOMING_SLOTS) {
    const next = nextSlotAfter(schedule, slots.at(-1)!);
    if (next === null) break;
    slots.push(next);
  }
  return slots;
}

function queueJson(state: QueueState) {
  return { name: state.name, paused: state.paused, pausedAt: state.pausedAt?.toISOString() ?? null };
}

/** Query of GET /v1/schedules. */
export const listSchedulesQuerySchema = z.strictObject({
  paused: z
    .enum(['true', 'false'])
    .transform((value) => value === 'true')
    .optional(),
  // Checked by the one page-size rule every list shares (src/job/list-params.ts), in the route.
  limit: z.string().optional(),
  after: z.string().regex(SCHEDULE_ID_PATTERN, { error: 'must be a schedule id' }).optional(),
});

/** The schedule body, for the OpenAPI document (the route validates with normalizeScheduleSpec). */
export const scheduleBodySchema = z
  .strictObject({
    id: z.string().regex(SCHEDULE_ID_PATTERN).describe('The schedule key; on PUT, optional and equal to the path id.'),
    cron: z.string().min(1).describe('5 fields, or 6 with seconds first.'),
    timeZone: z.string().optional().describe('IANA zone the cron is read in; default UTC.'),
    job: z
      .strictObject({
        kind: z.string().min(1),
        payload: z.json().optional(),
        queue: z.string().regex(QUEUE_NAME_PATTERN).optional(),
        priority: z.number().int().optional(),
        maxAttempts: z.number().int().optional(),
        retry: z.record(z.string(), z.number()).optional(),
        timeoutMs: z.number().int().min(1).optional(),
      })
      .describe('The job enqueued for each slot.'),
    jitterMs: z.number().int().min(0).max(MAX_SCHEDULE_JITTER_MS).optional(),
    jitterMode: z.enum(JITTER_MODES).optional(),
    misfire: z
      .strictObject({
        policy: z.enum(MISFIRE_POLICIES).optional(),
        catchUpWindowMs: z.number().int().min(1).max(MAX_CATCH_UP_WINDOW_MS).optional(),
        maxCatchUpRuns: z.number().int().min(1).max(MAX_CATCH_UP_RUNS).optional(),
      })
      .optional(),
    paused: z.boolean().optional(),
  })
  .describe('A recurring schedule. Unknown fields are refused.');

function scheduleIdParam(id: string | undefined): string {
  const value = id ?? '';
  if (!SCHEDULE_ID_PATTERN.test(value)) {
    throw badRequest(
      'id',
      `must be a schedule id (1 to 200 of letters, digits, _ . : -), got ${JSON.stringify(value.slice(0, 40))}`,
    );
  }
  return value;
}

function queueNameParam(name: string | undefined): string {
  const value = name ?? '';
  if (!QUEUE_NAME_PATTERN.test(value)) {
    throw badRequest(
      'name',
      `must be a queue name (letters, digits, _ . : -), got ${JSON.stringify(value.slice(0, 40))}`,
    );
  }
  return value;
}

/** Settings of {@link scheduleRoutes}. */
export interface ScheduleRouteOptions {
  /** Checks a webhook job's destination when a schedule is stored, as submits do; none refuses them. */
  webhookGuard: DestinationGuard | undefined;
}

/** The schedule's job template, checked as a webhook submit would be (after the library's own checks). */
function checkScheduleJob(input: unknown, guard: DestinationGuard | undefined): void {
  if (!isPlainObject(input) || !isPlainObject(input.job)) return;
  checkWebhookJob(input.job, guard, 'job.');
}

/** Routes for /v1/schedules and /v1/queues. */
export function scheduleRoutes(
  docket: Docket,
  options: ScheduleRouteOptions = { webhookGuard: undefined },
): Hono<AppEnv> {
  const routes = new Hono<AppEnv>();

  routes.post('/schedules', requireScope('admin'), async (c) => {
    const input = await readJson(c);
    const id = isPlainObject(input) ? input.id : undefined;
    // A create must not silently replace: PUT /v1/schedules/{id} is the explicit replace.
    if (typeof id === 'string' && SCHEDULE_ID_PATTERN.test(id) && (await docket.getSchedule(id)) !== null) {
      throw new HttpError(409, 'conflict', `schedule ${id} exists; replace it with PUT /v1/schedules/${id}`, 'id');
    }
    normalizeScheduleSpec(input);
    checkScheduleJob(input, options.webhookGuard);
    const { schedule } = await docket.schedule(input as ScheduleInput);
    c.header('Location', `/v1/schedules/${schedule.id}`);
    return c.json(scheduleJson(schedule), 201);
  });

  routes.put('/schedules/:id', requireScope('admin'), async (c) => {
    const id = scheduleIdParam(c.req.param('id'));
    const input = await readJson(c);
    if (!isPlainObject(input)) throw badRequest('body', 'must be a JSON object');
    if (input.id !== undefined && input.id !== id) throw badRequest('id', 'differs from the id in the path');
    normalizeScheduleSpec({ ...input, id });
    checkScheduleJob(input, options.webhookGuard);
    const { schedule, created } = await docket.schedule({ ...input, id } as ScheduleInput);
    return c.json(scheduleJson(schedule), created ? 201 : 200);
  });

  routes.get('/schedules', requireScope('read'), async (c) => {
    const query = readQuery(c, listSchedulesQuerySchema);
    const limit = pageSize(query.limit === undefined ? undefined : numberText(query.limit));
    const schedules = await docket.listSchedules({ paused: query.paused, limit, afterId: query.after });
    return c.json({
      schedules: schedules.map(scheduleJson),
      next: schedules.length === limit ? (schedules.at(-1)?.id ?? null) : null,
    });
  });

  routes.get('/schedules/:id', requireScope('read'), async (c) => {
    const id = scheduleIdParam(c.req.param('id'));
    const schedule = await docket.getSchedule(id);
    if (!schedule) throw notFound(`schedule ${id}`);
    return c.json(scheduleJson(schedule));
  });

  routes.post('/schedules/:id/pause', requireScope('admin'), async (c) => {
    const id = scheduleIdParam(c.req.param('id'));
    const schedule = await docket.pauseSchedule(id);
    if (!schedule) throw notFound(`schedule ${id}`);
    return c.json(scheduleJson(schedule));
  });

  routes.post('/schedules/:id/resume', requireScope('admin'), async (c) => {
    const id = scheduleIdParam(c.req.param('id'));
    const schedule = await docket.resumeSchedule(id);
    if (!schedule) throw notFound(`schedule ${id}`);
    return c.json(scheduleJson(schedule));
  });

  routes.delete('/schedules/:id', requireScope('admin'), async (c) => {
    const id = scheduleIdParam(c.req.param('id'));
    if (!(await docket.deleteSchedule(id))) throw notFound(`schedule ${id}`);
    return c.json({ id, deleted: true });
  });

  routes.get('/queues', requireScope('read'), async (c) => {
    return c.json({ queues: (await docket.listQueues()).map(queueJson) });
  });

  routes.post('/queues/:name/pause', requireScope('admin'), async (c) => {
    return c.json(queueJson(await docket.pauseQueue(queueNameParam(c.req.param('name')))));
  });

  routes.post('/queues/:name/resume', requireScope('admin'), async (c) => {
    return c.json(queueJson(await docket.resumeQueue(queueNameParam(c.req.param('name')))));
  });

  return routes;
}

/** The OpenAPI paths and schemas of these routes, merged into the document by openapi.ts. */
export function scheduleOpenApi(): { paths: Record<string, unknown>; schemas: Record<string, unknown> } {
  const error = { $ref: '#/components/schemas/Error' };
  const json = (schema: unknown) => ({ content: { 'application/json': { schema } } });
  const op = (scope: 'read' | 'admin', summary: string, codes: number[], extra: Record<string, unknown> = {}) => ({
    summary,
    security: [{ bearer: [scope] }],
    description: `Scope: \`${scope}\`.`,
    ...extra,
    responses: {
      '200': { description: 'OK', ...json({ type: 'object' }) },
      ...Object.fromEntries(
        [...codes, 401, 403, 421, 500].map((code) => [
          String(code),
          code < 300
            ? { description: 'Created', ...json({ type: 'object' }) }
            : { description: `Error ${code}`, ...json(error) },
        ]),
      ),
    },
  });
  const idParam = {
    name: 'id',
    in: 'path',
    required: true,
    schema: { type: 'string', pattern: SCHEDULE_ID_PATTERN.source },
  };
  const nameParam = {
    name: 'name',
    in: 'path',
    required: true,
    schema: { type: 'string', pattern: QUEUE_NAME_PATTERN.source },
  };
  const body = { required: true, ...json({ $ref: '#/components/schemas/Schedule' }) };
  const { $schema: _ignored, ...scheduleSchema } = z.toJSONSchema(scheduleBodySchema, {
    io: 'input',
    unrepresentable: 'any',
  }) as Record<string, unknown>;
  return {
    schemas: { Schedule: scheduleSchema },
    paths: {
      '/v1/schedules': {
        post: op(
          'admin',
          'Create a schedule and enqueue its next run (201); 409 if the id exists.',
          [201, 400, 409, 415],
          {
            requestBody: body,
          },
        ),
        get: op('read', 'List schedules by id, with their next run times.', [400], {
          parameters: [
            { name: 'paused', in: 'query', schema: { type: 'string', enum: ['true', 'false'] } },
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
            {
              name: 'after',
              in: 'query',
              schema: { type: 'string' },
              description: 'Keyset paging: the previous `next`.',
            },
          ],
        }),
      },
      '/v1/schedules/{id}': {
        get: op('read', 'Get a schedule with its next run time.', [400, 404], { parameters: [idParam] }),
        put: op(
          'admin',
          'Create (201) or replace (200) a schedule; a new cron, zone or jitter re-plans from now.',
          [201, 400, 415],
          {
            parameters: [idParam],
            requestBody: body,
          },
        ),
        delete: op('admin', 'Delete a schedule and its pending run; a running one finishes.', [400, 404], {
          parameters: [idParam],
        }),
      },
      '/v1/schedules/{id}/pause': {
        post: op('admin', 'Pause: the pending run is removed and nothing more is enqueued.', [400, 404], {
          parameters: [idParam],
        }),
      },
      '/v1/schedules/{id}/resume': {
        post: op('admin', 'Resume from now: slots passed while paused never run.', [400, 404], {
          parameters: [idParam],
        }),
      },
      '/v1/queues': { get: op('read', 'Queues that were ever paused or resumed, with their state.', []) },
      '/v1/queues/{name}/pause': {
        post: op('admin', 'Pause a queue: claims skip it, its jobs wait.', [400], { parameters: [nameParam] }),
      },
      '/v1/queues/{name}/resume': {
        post: op('admin', 'Resume a queue: its due jobs are claimable at once.', [400], { parameters: [nameParam] }),
      },
    },
  };
}
