/**
 * The OpenAPI 3.1 document the server serves at /openapi.json. Request schemas come from the same
 * zod schemas the routes validate with (via `z.toJSONSchema`), so the document cannot drift from
 * the checks; the submit body, which normalizeSubmit validates imperatively, is described by a
 * schema built from job-spec's own limits.
 */
import { z } from 'zod';
import { JOB_STATES } from '../job/job.js';
import {
  LATEST_RUN_AT_MS,
  MAX_ATTEMPTS_RANGE,
  MAX_IDEMPOTENCY_KEY_LENGTH,
  MAX_KIND_LENGTH,
  PRIORITY_RANGE,
  QUEUE_NAME_PATTERN,
} from '../job/job-spec.js';
import { SCOPES } from './auth.js';
import { batchSubmitRequestSchema, MAX_BATCH_SUBMIT, purgeRequestSchema } from './job-routes.js';
import {
  claimRequestSchema,
  completeRequestSchema,
  failRequestSchema,
  heartbeatRequestSchema,
} from './remote-worker-routes.js';
import { scheduleOpenApi } from './schedule-routes.js';
import { webhookPayloadSchema } from './webhook-handler.js';

const submitSchema = z
  .strictObject({
    kind: z.string().min(1).max(MAX_KIND_LENGTH).describe('Which handler runs it; `docket.webhook` for webhooks.'),
    payload: z.json().optional().describe('Any JSON value, at most 256 KiB.'),
    runAt: z
      .union([z.iso.datetime({ offset: true }), z.number().int().min(0).max(LATEST_RUN_AT_MS)])
      .optional()
      .describe('Earliest start: ISO-8601 or epoch ms. Exclusive with delayMs.'),
    delayMs: z.number().int().min(0).optional().describe("Start this long after the database's now."),
    priority: z.number().int().min(PRIORITY_RANGE.min).max(PRIORITY_RANGE.max).optional(),
    queue: z.string().regex(QUEUE_NAME_PATTERN).optional(),
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

function schema(s: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(s, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  return rest;
}

const errorSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', examples: ['invalid_input', 'not_found', 'stale'] },
        field: { type: 'string', description: 'The offending field, as a dotted path.' },
        message: { type: 'string' },
      },
    },
  },
};

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
const json = (s: unknown) => ({ content: { 'application/json': { schema: s } } });
const errors = (...codes: number[]) =>
  Object.fromEntries(codes.map((code) => [String(code), { description: `Error ${code}`, ...json(ref('Error')) }]));
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', pattern: '^[0-9]{1,20}$' } };
const body = (name: string) => ({ required: true, ...json(ref(name)) });

function op(
  scope: string | null,
  summary: string,
  responses: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  const authErrors = scope ? errors(401, 403) : {};
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
  { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
  {
    name: 'after',
    in: 'query',
    schema: { type: 'string' },
    description: 'Keyset paging: the `next` of the previous page.',
  },
];

/** Builds the OpenAPI document. */
export function openApiDocument(): Record<string, unknown> {
  const schedules = scheduleOpenApi();
  const ok = (description: string, s: unknown = { type: 'object' }) => ({ description, ...json(s) });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Docket',
      version: '0.1.0',
      description:
        'Durable job scheduler API. Errors are `{error: {code, field?, message}}`. Bearer tokens carry scopes: ' +
        `${SCOPES.join(', ')}.`,
    },
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
      schemas: {
        Error: errorSchema,
        SubmitJob: schema(submitSchema),
        SubmitBatch: {
          ...schema(batchSubmitRequestSchema),
          properties: { jobs: { type: 'array', items: ref('SubmitJob'), minItems: 1, maxItems: MAX_BATCH_SUBMIT } },
        },
        WebhookPayload: schema(webhookPayloadSchema),
        Purge: schema(purgeRequestSchema),
        Claim: schema(claimRequestSchema),
        Heartbeat: schema(heartbeatRequestSchema),
        Complete: schema(completeRequestSchema),
        Fail: schema(failRequestSchema),
        ...schedules.schemas,
      },
    },
    paths: {
      '/v1/jobs': {
        post: op(
          'submit',
          'Submit one job. With an Idempotency-Key header, a repeat returns the first job (200) instead of a second (201).',
          { '201': ok('Created'), '200': ok('An idempotent repeat: the existing job'), ...errors(400, 413, 415) },
          {
            parameters: [{ name: 'Idempotency-Key', in: 'header', schema: { type: 'string' } }],
            requestBody: body('SubmitJob'),
          },
        ),
        get: op(
          'read',
          'List jobs, ordered by id.',
          { '200': ok('A page of jobs'), ...errors(400) },
          {
            parameters: listParams(true),
          },
        ),
      },
      '/v1/jobs/batch': {
        post: op(
          'submit',
          'Submit many jobs in one transaction; all are validated first. Idempotency-Key gives job i the key "<key>:<i>".',
          { '201': ok('Created'), '200': ok('All were idempotent repeats'), ...errors(400, 413, 415) },
          { requestBody: body('SubmitBatch') },
        ),
      },
      '/v1/jobs/{id}': {
        get: op(
          'read',
          'Get a job in any state.',
          { '200': ok('The job'), ...errors(400, 404) },
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
          { '200': ok('A page of parked jobs'), ...errors(400) },
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
            '200': ok('The job'),
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
      '/v1/stats': { get: op('read', 'Job counts by queue and state.', { '200': ok('Statistics') }) },
      ...schedules.paths,
      '/v1/worker/claim': {
        post: op(
          'worker',
          'Lease up to `limit` due jobs; with waitMs, wait (long poll) until one is due.',
          { '200': ok('Claimed jobs (possibly none)'), ...errors(400, 413, 415) },
          { requestBody: body('Claim') },
        ),
      },
      '/v1/worker/jobs/{id}/heartbeat': {
        post: op(
          'worker',
          'Extend the lease.',
          { '200': ok('New leaseUntil'), ...errors(400, 409) },
          {
            parameters: [idParam],
            requestBody: body('Heartbeat'),
          },
        ),
      },
      '/v1/worker/jobs/{id}/complete': {
        post: op(
          'worker',
          'Complete the job (fenced by token).',
          { '200': ok('Done'), ...errors(400, 409) },
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
          { '200': ok('retry or parked'), ...errors(400, 409) },
          { parameters: [idParam], requestBody: body('Fail') },
        ),
      },
      '/metrics': { get: op('read', 'Prometheus metrics.', { '200': { description: 'text/plain exposition' } }) },
      '/health': { get: op(null, 'Liveness: the process answers.', { '200': ok('ok') }) },
      '/ready': { get: op(null, 'Readiness: the store answers.', { '200': ok('ready'), '503': ok('not ready') }) },
      '/openapi.json': { get: op(null, 'This document.', { '200': ok('OpenAPI 3.1') }) },
    },
  };
}
