/**
 * The OpenAPI 3.1 document the server serves at /openapi.json. Request schemas come from the same
 * zod schemas the routes validate with (via `z.toJSONSchema`), so the document cannot drift from
 * the checks; the submit body, which normalizeSubmit validates imperatively, is described by a
 * schema built from job-spec's own limits. Definitions zod emits under `$defs` (recursive JSON
 * values) are hoisted into `components.schemas` with their refs rewritten, so every `$ref`
 * resolves from the document root; every operation has an `operationId`. Responses have real
 * schemas, and a test validates live responses of each route against them.
 */
import { z } from 'zod';
import { JOB_STATES } from '../job/job.js';
import {
  LATEST_RUN_AT_MS,
  MAX_ATTEMPTS_RANGE,
  MAX_DELAY_MS,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_KIND_LENGTH,
  MAX_PAYLOAD_BYTES,
  MAX_PAYLOAD_DEPTH,
  PRIORITY_RANGE,
  QUEUE_NAME_PATTERN,
  RFC3339_INSTANT_PATTERN,
} from '../job/job-spec.js';
import { SCOPES } from './auth.js';
import { dashboardOpenApi } from './dashboard-routes.js';
import {
  batchSubmitRequestSchema,
  MAX_BATCH_SUBMIT,
  MAX_IDEMPOTENCY_HEADER_LENGTH,
  purgeRequestSchema,
} from './job-routes.js';
import {
  claimRequestSchema,
  completeRequestSchema,
  failRequestSchema,
  heartbeatRequestSchema,
} from './remote-worker-routes.js';
import { scheduleOpenApi } from './schedule-routes.js';
import { WEBHOOK_KIND, webhookPayloadSchema } from './webhook-handler.js';

const submitSchema = z
  .strictObject({
    kind: z.string().min(1).max(MAX_KIND_LENGTH).describe('Which handler runs it; `docket.webhook` for webhooks.'),
    payload: z
      .unknown()
      .optional()
      .describe(
        `Any JSON value: at most ${MAX_PAYLOAD_BYTES} bytes, ${MAX_PAYLOAD_DEPTH} levels deep, no NUL or lone surrogate in any string or key.`,
      ),
    runAt: z
      .union([z.string().regex(RFC3339_INSTANT_PATTERN), z.number().int().min(0).max(LATEST_RUN_AT_MS)])
      .optional()
      .describe(
        'Earliest start: an RFC 3339 instant with an offset (Z or ±hh:mm), or integer epoch ms; at most 9999-12-31T23:59:59.999Z. Exclusive with delayMs.',
      ),
    delayMs: z
      .number()
      .int()
      .min(0)
      .max(MAX_DELAY_MS)
      .optional()
      .describe("Start this long after the database's now (at most 100 years)."),
    priority: z.number().int().min(PRIORITY_RANGE.min).max(PRIORITY_RANGE.max).optional(),
    queue: z
      .string()
      .regex(QUEUE_NAME_PATTERN)
      .optional()
      .describe(
        'Default `default`; `docket.webhook` jobs always run on `docket.builtin`, which no other kind may use.',
      ),
    maxAttempts: z.number().int().min(MAX_ATTEMPTS_RANGE.min).max(MAX_ATTEMPTS_RANGE.max).optional(),
    retry: z
      .strictObject({
        baseDelayMs: z.number().min(0).optional(),
        factor: z.number().min(1).optional(),
        maxDelayMs: z.number().min(0).optional(),
        jitterRatio: z.number().min(0).max(1).optional(),
      })
      .optional(),
    timeoutMs: z.number().int().min(1).optional(),
    idempotencyKey: z.string().min(1).max(MAX_IDEMPOTENCY_KEY_LENGTH).optional(),
    jitterMs: z.number().int().min(0).optional(),
  })
  .describe('A job to submit. Unknown fields are refused.');

const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', examples: ['invalid_input', 'not_found', 'stale', 'idempotency_conflict'] },
        field: { type: 'string', description: 'The offending field, as a dotted path.' },
        message: { type: 'string' },
      },
    },
  },
};

/** Definitions hoisted out of zod's `$defs`, by component name; filled while the document is built. */
type Components = Record<string, unknown>;

/** Rewrites `#/$defs/<name>` refs to components named `<owner><Name>`, recursively. */
function rewriteRefs(value: unknown, owner: string): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteRefs(item, owner));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    if (key === '$ref' && typeof inner === 'string' && inner.startsWith('#/$defs/')) {
      out[key] = `#/components/schemas/${defName(owner, inner.slice('#/$defs/'.length))}`;
    } else out[key] = rewriteRefs(inner, owner);
  }
  return out;
}

function defName(owner: string, name: string): string {
  return `${owner}_${name.replace(/[^A-Za-z0-9_.-]/g, '_')}`;
}

/**
 * The JSON Schema of a zod schema as a component: zod's `$schema` dropped, its `$defs` moved to
 * `components` (so `$ref`s resolve from the document root, which OpenAPI requires).
 */
function component(components: Components, name: string, s: z.ZodType | Record<string, unknown>): unknown {
  const raw =
    s instanceof z.ZodType
      ? (z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>)
      : { ...s };
  const { $schema: _schema, $defs, ...rest } = raw as Record<string, unknown> & { $defs?: Record<string, unknown> };
  for (const [defKey, def] of Object.entries($defs ?? {})) {
    components[defName(name, defKey)] = rewriteRefs(def, name);
  }
  components[name] = rewriteRefs(rest, name);
  return ref(name);
}

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (s: unknown) => ({ content: { 'application/json': { schema: s } } });
const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((code) => [String(code), { description: `Error ${code}`, ...json(ref('Error')) }]));
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9]{1,16}$' } };
const idempotencyKeyParam = {
  name: 'Idempotency-Key',
  in: 'header',
  schema: { type: 'string', minLength: 1, maxLength: MAX_IDEMPOTENCY_HEADER_LENGTH },
  description:
    "Scoped to the calling token's name. A repeat with an equal job returns the first (200); with a different payload, 409 idempotency_conflict.",
};
const body = (name: string) => ({ required: true, ...json(ref(name)) });

function op(
  scope: string | null,
  summary: string,
  responses: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  // Without tokens, a Host that is not the listen address gets 421 on every route.
  const authErrors = scope ? errors(401, 403, 421) : errors(421);
  return {
    summary,
    ...(scope ? { security: [{ bearer: [scope] }], description: `Scope: \`${scope}\`.` } : { security: [] }),
    ...extra,
    responses: { ...responses, ...authErrors, '500': { description: 'Internal error', ...json(ref('Error')) } },
  };
}

const listParams = (withState: boolean) => [
  ...(withState
    ? [
        {
          name: 'state',
          in: 'query',
          schema: { type: 'string' },
          description: `Comma-separated: ${JOB_STATES.join(', ')}.`,
        },
      ]
    : []),
  { name: 'queue', in: 'query', schema: { type: 'string' } },
  { name: 'kind', in: 'query', schema: { type: 'string' } },
  { name: 'idFrom', in: 'query', schema: { type: 'string' }, description: 'Ids from this one (inclusive).' },
  { name: 'idTo', in: 'query', schema: { type: 'string' }, description: 'Ids up to this one (inclusive).' },
  {
    name: 'runAtFrom',
    in: 'query',
    schema: { type: 'string' },
    description: 'Run-at from (inclusive): RFC 3339 or epoch ms.',
  },
  {
    name: 'runAtTo',
    in: 'query',
    schema: { type: 'string' },
    description: 'Run-at before (exclusive): RFC 3339 or epoch ms.',
  },
  {
    name: 'payload',
    in: 'query',
    schema: { type: 'string', maxLength: 200 },
    description: 'One payload equality: `payload.key.key = <JSON scalar>` (docs/dashboard-api.md).',
  },
  { name: 'order', in: 'query', schema: { type: 'string', enum: ['asc', 'desc'], default: 'asc' } },
  { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
  {
    name: 'after',
    in: 'query',
    schema: { type: 'string' },
    description: 'Keyset paging: the `next` of the previous page.',
  },
];

/** Stable operation ids, by `METHOD path`; an operation missing here gets one made from both. */
const OPERATION_IDS: Record<string, string> = {
  'POST /v1/jobs': 'submitJob',
  'GET /v1/jobs': 'listJobs',
  'POST /v1/jobs/batch': 'submitJobs',
  'GET /v1/jobs/{id}': 'getJob',
  'POST /v1/jobs/{id}/cancel': 'cancelJob',
  'GET /v1/dead-letters': 'listDeadLetters',
  'POST /v1/dead-letters/{id}/retry': 'retryDeadLetter',
  'POST /v1/dead-letters/purge': 'purgeDeadLetters',
  'GET /v1/stats': 'getStats',
  'GET /v1/workers': 'listWorkers',
  'POST /v1/schedules': 'createSchedule',
  'GET /v1/schedules': 'listSchedules',
  'GET /v1/schedules/{id}': 'getSchedule',
  'PUT /v1/schedules/{id}': 'putSchedule',
  'DELETE /v1/schedules/{id}': 'deleteSchedule',
  'POST /v1/schedules/{id}/pause': 'pauseSchedule',
  'POST /v1/schedules/{id}/resume': 'resumeSchedule',
  'GET /v1/queues': 'listQueues',
  'POST /v1/queues/{name}/pause': 'pauseQueue',
  'POST /v1/queues/{name}/resume': 'resumeQueue',
  'POST /v1/worker/claim': 'claimJobs',
  'POST /v1/worker/jobs/{id}/heartbeat': 'heartbeatJob',
  'POST /v1/worker/jobs/{id}/complete': 'completeJob',
  'POST /v1/worker/jobs/{id}/fail': 'failJob',
  'GET /metrics': 'getMetrics',
  'GET /health': 'getHealth',
  'GET /ready': 'getReadiness',
  'GET /openapi.json': 'getOpenApiDocument',
};

function withOperationIds(paths: Record<string, Record<string, Record<string, unknown>>>) {
  for (const [path, operations] of Object.entries(paths)) {
    for (const [method, operation] of Object.entries(operations)) {
      const key = `${method.toUpperCase()} ${path}`;
      operation.operationId ??=
        OPERATION_IDS[key] ??
        method + path.replace(/[{}]/g, '').replace(/(^|[/._-])([a-z0-9])/gi, (_m, _sep, c: string) => c.toUpperCase());
    }
  }
  return paths;
}

const instant = { type: 'string', format: 'date-time' };
const nullable = (s: Record<string, unknown>) => ({ anyOf: [s, { type: 'null' }] });

/** The job record every read returns (src/http/job-routes.ts jobJson). */
const jobSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'id',
    'kind',
    'queue',
    'state',
    'payload',
    'priority',
    'runAt',
    'leaseUntil',
    'leaseOwner',
    'attempts',
    'maxAttempts',
    'retryPolicy',
    'errors',
    'idempotencyKey',
    'timeoutMs',
    'scheduleId',
    'scheduleSlot',
    'createdAt',
    'finishedAt',
  ],
  properties: {
    id: { type: 'string', pattern: '^[0-9]+$' },
    kind: { type: 'string' },
    queue: { type: 'string' },
    state: { type: 'string', enum: [...JOB_STATES] },
    payload: { description: 'The payload; webhook header values read as "[redacted]".' },
    priority: { type: 'integer' },
    runAt: instant,
    leaseUntil: nullable(instant),
    leaseOwner: nullable({ type: 'string' }),
    attempts: { type: 'integer', minimum: 0 },
    maxAttempts: { type: 'integer', minimum: 1 },
    retryPolicy: {
      type: 'object',
      required: ['baseDelayMs', 'factor', 'maxDelayMs', 'jitterRatio'],
      properties: {
        baseDelayMs: { type: 'number' },
        factor: { type: 'number' },
        maxDelayMs: { type: 'number' },
        jitterRatio: { type: 'number' },
      },
    },
    errors: {
      type: 'array',
      items: {
        type: 'object',
        required: ['attempt', 'at', 'message', 'kind'],
        properties: {
          attempt: { type: 'integer' },
          at: instant,
          message: { type: 'string' },
          kind: { type: 'string' },
          detail: { type: 'string' },
          startedAt: { ...instant, description: 'When this attempt’s claim started (recorded from this version on).' },
          owner: { type: 'string', description: 'The lease owner of this attempt’s claim.' },
        },
      },
    },
    idempotencyKey: nullable({ type: 'string' }),
    timeoutMs: nullable({ type: 'integer' }),
    scheduleId: nullable({ type: 'string' }),
    scheduleSlot: nullable(instant),
    createdAt: instant,
    finishedAt: nullable(instant),
    startedAt: { ...nullable(instant), description: 'When the latest claim started; null before the first.' },
  },
};

const submitResultSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'created', 'runAt'],
  properties: { id: { type: 'string' }, created: { type: 'boolean' }, runAt: instant },
};

const remoteJobSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'token', 'receipt', 'kind', 'queue', 'payload', 'attempt', 'maxAttempts', 'runAt', 'leaseUntil'],
  properties: {
    id: { type: 'string' },
    token: { type: 'integer', description: 'Fencing token of this claim.' },
    receipt: {
      type: 'string',
      description: 'Lease receipt (HMAC-SHA256, 256 bits); heartbeat, complete and fail must send it with the token.',
    },
    kind: { type: 'string' },
    queue: { type: 'string' },
    payload: {},
    attempt: { type: 'integer' },
    maxAttempts: { type: 'integer' },
    runAt: instant,
    leaseUntil: instant,
    timeoutMs: nullable({ type: 'integer' }),
  },
};

const queueStatsSchema = {
  type: 'object',
  required: ['queue', 'scheduled', 'available', 'running', 'done', 'cancelled', 'dead', 'unhandled'],
  properties: {
    queue: { type: 'string' },
    paused: { type: 'boolean' },
    scheduled: { type: 'integer' },
    available: { type: 'integer' },
    running: { type: 'integer' },
    done: { type: 'integer' },
    cancelled: { type: 'integer' },
    dead: { type: 'integer' },
    unhandled: { type: 'integer', description: 'Of `available`, how many no live worker handles.' },
  },
};

const workerSchema = {
  type: 'object',
  additionalProperties: false,
  required: [
    'id',
    'origin',
    'host',
    'pid',
    'version',
    'queues',
    'kinds',
    'excludeKinds',
    'concurrency',
    'startedAt',
    'lastSeenAt',
    'expiresAt',
  ],
  properties: {
    id: { type: 'string' },
    origin: { type: 'string', enum: ['local', 'remote'] },
    host: { type: 'string' },
    pid: nullable({ type: 'integer' }),
    version: { type: 'string' },
    queues: nullable({ type: 'array', items: { type: 'string' } }),
    kinds: nullable({ type: 'array', items: { type: 'string' } }),
    excludeKinds: { type: 'array', items: { type: 'string' } },
    concurrency: { type: 'integer' },
    startedAt: instant,
    lastSeenAt: instant,
    expiresAt: instant,
  },
};

const page = (items: string) => ({
  type: 'object',
  additionalProperties: false,
  required: ['jobs', 'next'],
  properties: {
    jobs: { type: 'array', items: ref(items) },
    next: { ...nullable({ type: 'string' }), description: 'Pass as `after` for the next page; null on the last.' },
  },
});

/** Builds the OpenAPI document. */
export function openApiDocument(): Record<string, unknown> {
  const schedules = scheduleOpenApi();
  const dashboard = dashboardOpenApi();
  const components: Components = {};
  const ok = (description: string, s: unknown = { type: 'object' }) => ({ description, ...json(s) });
  const requests: [string, z.ZodType][] = [
    ['SubmitJob', submitSchema],
    ['WebhookPayload', webhookPayloadSchema],
    ['Purge', purgeRequestSchema],
    ['Claim', claimRequestSchema],
    ['Heartbeat', heartbeatRequestSchema],
    ['Complete', completeRequestSchema],
    ['Fail', failRequestSchema],
  ];
  for (const [name, s] of requests) component(components, name, s);
  // A webhook job's payload has its own shape; say so where a client generator can see it.
  components.SubmitJob = {
    ...(components.SubmitJob as Record<string, unknown>),
    if: { properties: { kind: { const: WEBHOOK_KIND } }, required: ['kind'] },
    // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then, never awaited.
    then: { properties: { payload: ref('WebhookPayload') }, required: ['payload'] },
  };
  // Described by hand: the route checks each job with normalizeSubmit, the schema only the array.
  void batchSubmitRequestSchema;
  components.SubmitBatch = {
    type: 'object',
    additionalProperties: false,
    required: ['jobs'],
    properties: { jobs: { type: 'array', items: ref('SubmitJob'), minItems: 1, maxItems: MAX_BATCH_SUBMIT } },
  };
  for (const [name, s] of Object.entries(schedules.schemas)) component(components, name, s as Record<string, unknown>);
  Object.assign(components, dashboard.schemas);
  Object.assign(components, {
    Error: errorSchema,
    Job: jobSchema,
    JobPage: page('Job'),
    SubmitResult: submitResultSchema,
    SubmitBatchResult: {
      type: 'object',
      additionalProperties: false,
      required: ['jobs'],
      properties: { jobs: { type: 'array', items: ref('SubmitResult') } },
    },
    RemoteJob: remoteJobSchema,
    ClaimResult: {
      type: 'object',
      additionalProperties: false,
      required: ['jobs'],
      properties: { jobs: { type: 'array', items: ref('RemoteJob') } },
    },
    QueueStats: queueStatsSchema,
    Stats: {
      type: 'object',
      additionalProperties: false,
      required: ['queues', 'unhandled'],
      properties: {
        queues: { type: 'array', items: ref('QueueStats') },
        unhandled: { type: 'integer', description: 'Due jobs no live worker handles, over every queue.' },
      },
    },
    Worker: workerSchema,
    WorkerList: {
      type: 'object',
      additionalProperties: false,
      required: ['workers'],
      properties: { workers: { type: 'array', items: ref('Worker') } },
    },
  });
  return {
    openapi: '3.1.0',
    servers: [{ url: '/', description: 'The server that serves this document.' }],
    info: {
      title: 'Docket',
      version: '0.1.0',
      description:
        'Durable job scheduler API. Errors are `{error: {code, field?, message}}`. Bearer tokens carry scopes: ' +
        `${SCOPES.join(', ')}. Without tokens (loopback only) every request must name the listen address in Host ` +
        '(else 421), a present Origin must be that same origin (else 403), and every write must be ' +
        'Content-Type: application/json (else 415).',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: components,
    },
    paths: withOperationIds({
      '/v1/jobs': {
        post: op(
          'submit',
          'Submit one job. With an Idempotency-Key header, a repeat returns the first job (200) instead of a second (201).',
          {
            '201': ok('Created', ref('SubmitResult')),
            '200': ok('An idempotent repeat: the existing job', ref('SubmitResult')),
            ...errors(400, 409, 413, 415, 503),
          },
          {
            parameters: [idempotencyKeyParam],
            requestBody: body('SubmitJob'),
          },
        ),
        get: op(
          'read',
          'List jobs, ordered by id.',
          { '200': ok('A page of jobs', ref('JobPage')), ...errors(400) },
          {
            parameters: listParams(true),
          },
        ),
      },
      '/v1/jobs/batch': {
        post: op(
          'submit',
          'Submit many jobs in one transaction; all are validated first. Idempotency-Key gives job i the key "<key>:<i>".',
          {
            '201': ok('Created', ref('SubmitBatchResult')),
            '200': ok('All were idempotent repeats', ref('SubmitBatchResult')),
            ...errors(400, 409, 413, 415, 503),
          },
          { parameters: [idempotencyKeyParam], requestBody: body('SubmitBatch') },
        ),
      },
      '/v1/jobs/{id}': {
        get: op(
          'read',
          'Get a job in any state.',
          { '200': ok('The job', ref('Job')), ...errors(400, 404) },
          {
            parameters: [idParam],
          },
        ),
      },
      '/v1/jobs/{id}/cancel': {
        post: op(
          'admin',
          'Cancel a live job.',
          { '200': ok('Cancelled'), ...errors(400, 404, 409) },
          {
            parameters: [idParam],
          },
        ),
      },
      '/v1/dead-letters': {
        get: op(
          'read',
          'List parked jobs.',
          { '200': ok('A page of parked jobs', ref('JobPage')), ...errors(400) },
          {
            parameters: listParams(false),
          },
        ),
      },
      '/v1/dead-letters/{id}/retry': {
        post: op(
          'admin',
          'Move a parked job back to pending with fresh attempts.',
          {
            '200': ok('The job', ref('Job')),
            ...errors(400, 404),
          },
          { parameters: [idParam] },
        ),
      },
      '/v1/dead-letters/purge': {
        post: op(
          'admin',
          'Delete parked jobs by id and/or parked before an instant.',
          {
            '200': ok('How many were purged'),
            ...errors(400, 413, 415),
          },
          { requestBody: body('Purge') },
        ),
      },
      '/v1/stats': {
        get: op('read', 'Job counts by queue and state, with the jobs no live worker handles.', {
          '200': ok('Statistics', ref('Stats')),
        }),
      },
      '/v1/workers': {
        get: op('read', 'The live worker registry: local and remote workers of every process sharing the store.', {
          '200': ok('Live workers', ref('WorkerList')),
        }),
      },
      ...schedules.paths,
      ...(dashboard.paths as Record<string, Record<string, Record<string, unknown>>>),
      '/v1/worker/claim': {
        post: op(
          'worker',
          'Lease up to `limit` due jobs; with waitMs, wait (long poll) until one is due.',
          {
            '200': ok('Claimed jobs (possibly none), each with its token and receipt', ref('ClaimResult')),
            ...errors(400, 413, 415),
          },
          { requestBody: body('Claim') },
        ),
      },
      '/v1/worker/jobs/{id}/heartbeat': {
        post: op(
          'worker',
          'Extend the lease (token and receipt of the claim).',
          {
            '200': ok('New leaseUntil', {
              type: 'object',
              additionalProperties: false,
              required: ['leaseUntil'],
              properties: { leaseUntil: instant },
            }),
            ...errors(400, 409),
          },
          {
            parameters: [idParam],
            requestBody: body('Heartbeat'),
          },
        ),
      },
      '/v1/worker/jobs/{id}/complete': {
        post: op(
          'worker',
          'Complete the job (token and receipt of the claim); a repeat answers done again.',
          {
            '200': ok('Done', {
              type: 'object',
              additionalProperties: false,
              required: ['outcome'],
              properties: { outcome: { const: 'done' } },
            }),
            ...errors(400, 409),
          },
          {
            parameters: [idParam],
            requestBody: body('Complete'),
          },
        ),
      },
      '/v1/worker/jobs/{id}/fail': {
        post: op(
          'worker',
          'Fail the attempt: retried after backoff, or parked after the last attempt.',
          {
            '200': ok('retry or parked', {
              type: 'object',
              additionalProperties: false,
              required: ['outcome'],
              properties: { outcome: { enum: ['retry', 'parked'] }, runAt: instant },
            }),
            ...errors(400, 409),
          },
          { parameters: [idParam], requestBody: body('Fail') },
        ),
      },
      '/metrics': { get: op('read', 'Prometheus metrics.', { '200': { description: 'text/plain exposition' } }) },
      '/health': { get: op(null, 'Liveness: the process answers.', { '200': ok('ok') }) },
      '/ready': { get: op(null, 'Readiness: the store answers.', { '200': ok('ready'), '503': ok('not ready') }) },
      '/openapi.json': { get: op(null, 'This document.', { '200': ok('OpenAPI 3.1') }) },
    } as Record<string, Record<string, Record<string, unknown>>>),
  };
}
