/**
 * The hostile-input suite: a table of requests a hostile or careless client sends, across auth,
 * bodies, fields, ids, query strings, idempotency, remote-worker calls and SSRF forms. On both
 * stores, each case asserts the status, the field its error names, and that nothing was
 * written (the store's fingerprint is unchanged).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { storeKinds } from '../support/stores.js';
import { nested, nestedJsonText, startHostileServer, storeFingerprint } from './hostile-support.js';
import type { TestServer } from './http-support.js';
import { TOKENS } from './http-support.js';

/** State the cases refer to, created once per store before the table runs. */
interface Fixtures {
  /** A job leased by worker "holder": id, token and receipt. */
  leased: { id: string; token: number; receipt: string };
  /** A second leased job, whose receipt is "another job's". */
  other: { id: string; token: number; receipt: string };
}

interface Case {
  name: string;
  method?: string;
  path?: string | ((fx: Fixtures) => string);
  /** A string is sent as is; anything else is JSON-encoded. */
  body?: unknown | ((fx: Fixtures) => unknown);
  headers?: Record<string, string>;
  /** Bearer secret; null sends none. Default: the all-scopes token. */
  token?: string | null;
  status: number;
  /** The field the error names; undefined when the error is about the request as a whole. */
  field?: string | undefined;
}

const NUL = '\u0000';
const job = (extra: Record<string, unknown>) => ({ kind: 'hostile.kind', ...extra });
const webhook = (url: string, extra: Record<string, unknown> = {}) => ({
  kind: 'docket.webhook',
  payload: { url, ...extra },
});

const AUTH: Case[] = [
  ...['/v1/jobs', '/v1/stats', '/v1/workers', '/v1/dead-letters', '/v1/schedules', '/metrics'].map(
    (path): Case => ({ name: `no token on GET ${path}`, method: 'GET', path, token: null, status: 401 }),
  ),
  { name: 'no token on submit', body: job({}), token: null, status: 401 },
  { name: 'an unknown token', body: job({}), token: 'not-a-token-not-a-token', status: 401 },
  { name: 'a token with a trailing character', body: job({}), token: `${TOKENS.all.token}x`, status: 401 },
  {
    name: 'Basic instead of Bearer',
    body: job({}),
    token: null,
    headers: { authorization: `Basic ${Buffer.from(`u:${TOKENS.all.token}`).toString('base64')}` },
    status: 401,
  },
  { name: 'an empty bearer', body: job({}), token: null, headers: { authorization: 'Bearer ' }, status: 401 },
  { name: 'a read token submitting', body: job({}), token: TOKENS.read.token, status: 403 },
  { name: 'a worker token submitting', body: job({}), token: TOKENS.worker.token, status: 403 },
  { name: 'a submit token reading jobs', method: 'GET', path: '/v1/jobs', token: TOKENS.submit.token, status: 403 },
  {
    name: 'a submit token listing workers',
    method: 'GET',
    path: '/v1/workers',
    token: TOKENS.submit.token,
    status: 403,
  },
  { name: 'a submit token cancelling', path: '/v1/jobs/1/cancel', token: TOKENS.submit.token, status: 403 },
  {
    name: 'a read token purging',
    path: '/v1/dead-letters/purge',
    body: { ids: ['1'] },
    token: TOKENS.read.token,
    status: 403,
  },
  {
    name: 'a submit token claiming',
    path: '/v1/worker/claim',
    body: { workerId: 'w' },
    token: TOKENS.submit.token,
    status: 403,
  },
  {
    name: 'an admin token completing',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/complete`,
    body: (fx: Fixtures) => ({ token: fx.leased.token, receipt: fx.leased.receipt }),
    token: TOKENS.admin.token,
    status: 403,
  },
  {
    name: 'a worker token creating a schedule',
    path: '/v1/schedules',
    body: { id: 's', cron: '0 * * * *', job: job({}) },
    token: TOKENS.worker.token,
    status: 403,
  },
];

const BODIES: Case[] = [
  { name: 'malformed JSON', body: '{"kind": ', status: 400, field: 'body' },
  { name: 'trailing garbage', body: '{"kind":"a"} x', status: 400, field: 'body' },
  { name: 'an empty body', body: '', status: 400, field: 'body' },
  { name: 'whitespace only', body: '   ', status: 400, field: 'body' },
  { name: 'a JSON array', body: [], status: 400, field: 'job' },
  { name: 'JSON null', body: 'null', status: 400, field: 'job' },
  { name: 'a JSON number', body: '42', status: 400, field: 'job' },
  { name: 'a JSON string', body: '"job"', status: 400, field: 'job' },
  { name: 'text/plain', body: '{"kind":"a"}', headers: { 'content-type': 'text/plain' }, status: 415 },
  {
    name: 'form-urlencoded',
    body: 'kind=a',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    status: 415,
  },
  {
    name: 'a body over the size limit',
    body: JSON.stringify(job({ payload: 'x'.repeat(1_100_000) })),
    status: 413,
    field: 'body',
  },
  { name: 'a payload over 256 KiB', body: job({ payload: 'x'.repeat(300_000) }), status: 400, field: 'payload' },
  { name: 'a payload nested 65 deep', body: job({ payload: nested(65) }), status: 400, field: 'payload' },
  { name: 'a payload nested 2,000 deep', body: job({ payload: nested(2000) }), status: 400, field: 'payload' },
  {
    name: 'a payload nested 100,000 deep',
    body: `{"kind":"a","payload":${nestedJsonText(100_000)}}`,
    status: 400,
    field: 'payload',
  },
  { name: 'an unknown top-level field', body: job({ priorty: 1 }), status: 400, field: 'priorty' },
  { name: 'a prototype-polluting field', body: '{"kind":"a","__proto__":{"x":1}}', status: 400, field: '__proto__' },
  { name: 'a constructor field', body: job({ constructor: 'x' }), status: 400, field: 'constructor' },
  { name: 'a batch that is not a list', path: '/v1/jobs/batch', body: { jobs: 'x' }, status: 400, field: 'jobs' },
  { name: 'an empty batch', path: '/v1/jobs/batch', body: { jobs: [] }, status: 400, field: 'jobs' },
  {
    name: 'a batch of 1,001 jobs',
    path: '/v1/jobs/batch',
    body: { jobs: Array.from({ length: 1001 }, () => job({})) },
    status: 400,
    field: 'jobs',
  },
  {
    name: 'a batch with one bad job',
    path: '/v1/jobs/batch',
    body: { jobs: [job({}), job({ runAt: 'soon' })] },
    status: 400,
    field: 'jobs[1].runAt',
  },
  {
    name: 'a batch with an unknown field',
    path: '/v1/jobs/batch',
    body: { jobs: [job({})], all: true },
    status: 400,
    field: 'all',
  },
  { name: 'a schedule that is an array', path: '/v1/schedules', body: [], status: 400, field: 'schedule' },
];

const FIELDS: Case[] = [
  { name: 'a missing kind', body: { payload: 1 }, status: 400, field: 'kind' },
  { name: 'a numeric kind', body: { kind: 5 }, status: 400, field: 'kind' },
  { name: 'an empty kind', body: { kind: '' }, status: 400, field: 'kind' },
  { name: 'a blank kind', body: { kind: '   ' }, status: 400, field: 'kind' },
  { name: 'a kind of 201 characters', body: { kind: 'k'.repeat(201) }, status: 400, field: 'kind' },
  { name: 'a NUL in the kind', body: { kind: `a${NUL}b` }, status: 400, field: 'kind' },
  { name: 'a lone surrogate in the kind', body: '{"kind":"\\ud800"}', status: 400, field: 'kind' },
  { name: 'SQL in a queue', body: job({ queue: "q'; DROP TABLE jobs;--" }), status: 400, field: 'queue' },
  { name: 'a queue of 65 characters', body: job({ queue: 'q'.repeat(65) }), status: 400, field: 'queue' },
  { name: 'an object as queue', body: job({ queue: { $ne: 1 } }), status: 400, field: 'queue' },
  { name: 'a user kind on the reserved queue', body: job({ queue: 'docket.builtin' }), status: 400, field: 'queue' },
  {
    name: 'a webhook on another queue',
    body: { ...webhook('https://example.com/'), queue: 'default' },
    status: 400,
    field: 'queue',
  },
  { name: 'a string priority', body: job({ priority: 'high' }), status: 400, field: 'priority' },
  { name: 'a priority past smallint', body: job({ priority: 40_000 }), status: 400, field: 'priority' },
  { name: 'zero maxAttempts', body: job({ maxAttempts: 0 }), status: 400, field: 'maxAttempts' },
  { name: 'fractional maxAttempts', body: job({ maxAttempts: 1.5 }), status: 400, field: 'maxAttempts' },
  { name: 'maxAttempts of 1,001', body: job({ maxAttempts: 1001 }), status: 400, field: 'maxAttempts' },
  { name: 'a string retry policy', body: job({ retry: 'fast' }), status: 400, field: 'retry' },
  { name: 'a shrinking backoff', body: job({ retry: { factor: 0.5 } }), status: 400, field: 'retry.factor' },
  { name: 'a jitter ratio above 1', body: job({ retry: { jitterRatio: 2 } }), status: 400, field: 'retry.jitterRatio' },
  { name: 'an unknown retry field', body: job({ retry: { tries: 3 } }), status: 400, field: 'retry.tries' },
  { name: 'a zero timeout', body: job({ timeoutMs: 0 }), status: 400, field: 'timeoutMs' },
  { name: 'runAt "1"', body: job({ runAt: '1' }), status: 400, field: 'runAt' },
  { name: 'runAt "Dec 25"', body: job({ runAt: 'Dec 25' }), status: 400, field: 'runAt' },
  { name: 'runAt without an offset', body: job({ runAt: '2030-06-01T09:00:00' }), status: 400, field: 'runAt' },
  { name: 'runAt as a date only', body: job({ runAt: '2030-06-01' }), status: 400, field: 'runAt' },
  { name: 'runAt with a space', body: job({ runAt: '2030-06-01 09:00:00Z' }), status: 400, field: 'runAt' },
  { name: 'runAt on February 30th', body: job({ runAt: '2026-02-30T00:00:00Z' }), status: 400, field: 'runAt' },
  { name: 'runAt in month 13', body: job({ runAt: '2026-13-01T00:00:00Z' }), status: 400, field: 'runAt' },
  { name: 'runAt at hour 25', body: job({ runAt: '2026-01-01T25:00:00Z' }), status: 400, field: 'runAt' },
  { name: 'runAt at second 60', body: job({ runAt: '2026-01-01T00:00:60Z' }), status: 400, field: 'runAt' },
  { name: 'runAt with offset +25:00', body: job({ runAt: '2030-06-01T09:00:00+25:00' }), status: 400, field: 'runAt' },
  { name: 'runAt with a five-digit year', body: job({ runAt: '10000-01-01T00:00:00Z' }), status: 400, field: 'runAt' },
  {
    name: 'runAt past 9999 by its offset',
    body: job({ runAt: '9999-12-31T23:59:59.999-01:00' }),
    status: 400,
    field: 'runAt',
  },
  { name: 'runAt as fractional epoch ms', body: job({ runAt: 1.5 }), status: 400, field: 'runAt' },
  { name: 'runAt before 1970', body: job({ runAt: -1 }), status: 400, field: 'runAt' },
  { name: 'runAt past 9999 in epoch ms', body: job({ runAt: 253402300800000 }), status: 400, field: 'runAt' },
  { name: 'runAt as an object', body: job({ runAt: { $date: 1 } }), status: 400, field: 'runAt' },
  { name: 'runAt and delayMs together', body: job({ runAt: 0, delayMs: 5 }), status: 400, field: 'delayMs' },
  { name: 'a negative delay', body: job({ delayMs: -1 }), status: 400, field: 'delayMs' },
  { name: 'a delay into year 10056', body: job({ delayMs: 253402214400000 }), status: 400, field: 'delayMs' },
  { name: 'a fractional delay', body: job({ delayMs: 0.5 }), status: 400, field: 'delayMs' },
  {
    name: 'jitter spreading past 9999',
    body: job({ runAt: '9999-12-31T23:59:59Z', jitterMs: 5000 }),
    status: 400,
    field: 'jitterMs',
  },
  { name: 'an empty idempotency key', body: job({ idempotencyKey: '' }), status: 400, field: 'idempotencyKey' },
  { name: 'a numeric idempotency key', body: job({ idempotencyKey: 42 }), status: 400, field: 'idempotencyKey' },
  { name: 'a 201-character key', body: job({ idempotencyKey: 'k'.repeat(201) }), status: 400, field: 'idempotencyKey' },
  { name: 'a NUL in the key', body: job({ idempotencyKey: `k${NUL}` }), status: 400, field: 'idempotencyKey' },
  { name: 'a NUL in a payload string', body: job({ payload: { a: `x${NUL}` } }), status: 400, field: 'payload.a' },
  { name: 'a NUL in a payload key', body: job({ payload: { [`a${NUL}`]: 1 } }), status: 400, field: 'payload' },
  { name: 'a lone high surrogate', body: '{"kind":"a","payload":"\\ud800"}', status: 400, field: 'payload' },
  { name: 'a lone low surrogate', body: '{"kind":"a","payload":["ok","\\udfff"]}', status: 400, field: 'payload.1' },
  { name: 'a surrogate in a payload key', body: '{"kind":"a","payload":{"\\ud800":1}}', status: 400, field: 'payload' },
  {
    name: 'a NUL deep in a payload',
    body: job({ payload: { a: [{ b: [`c${NUL}`] }] } }),
    status: 400,
    field: 'payload.a.0.b.0',
  },
  {
    name: 'a schedule with a NUL kind',
    path: '/v1/schedules',
    body: { id: 's', cron: '0 * * * *', job: { kind: NUL } },
    status: 400,
    field: 'job.kind',
  },
  {
    name: 'a schedule with a NUL payload',
    path: '/v1/schedules',
    body: { id: 's', cron: '0 * * * *', job: job({ payload: NUL }) },
    status: 400,
    field: 'job.payload',
  },
  {
    name: 'a schedule id with a NUL',
    path: '/v1/schedules',
    body: { id: `s${NUL}`, cron: '0 * * * *', job: job({}) },
    status: 400,
    field: 'id',
  },
  {
    name: 'a schedule with a bad cron',
    path: '/v1/schedules',
    body: { id: 's', cron: '61 * * * *', job: job({}) },
    status: 400,
    field: 'cron',
  },
  {
    name: 'a schedule in an unknown zone',
    path: '/v1/schedules',
    body: { id: 's', cron: '0 * * * *', timeZone: 'Mars/Olympus', job: job({}) },
    status: 400,
    field: 'timeZone',
  },
  {
    name: 'a schedule job with runAt',
    path: '/v1/schedules',
    body: { id: 's', cron: '0 * * * *', job: job({ runAt: 0 }) },
    status: 400,
    field: 'job.runAt',
  },
  {
    name: 'a PUT whose id differs from the path',
    method: 'PUT',
    path: '/v1/schedules/a',
    body: { id: 'b', cron: '0 * * * *', job: job({}) },
    status: 400,
    field: 'id',
  },
  { name: 'a purge with nothing to purge', path: '/v1/dead-letters/purge', body: {}, status: 400, field: 'ids' },
  {
    name: 'a purge before an offset-less instant',
    path: '/v1/dead-letters/purge',
    body: { parkedBefore: '2030-01-01T00:00:00' },
    status: 400,
    field: 'parkedBefore',
  },
];

const IDS: Case[] = [
  ...[
    ['SQL', '1%20OR%201=1'],
    ['a negative id', '-1'],
    ['a hex id', '0x10'],
    ['an id past every store', '9007199254740992'],
    ['a 20-digit id', '99999999999999999999'],
    ['a fractional id', '1.5'],
    ['an exponent', '1e5'],
    ['Arabic-Indic digits', '%D9%A1'],
    ['a NUL', '1%00'],
  ].flatMap(([what, id]): Case[] => [
    { name: `${what} in GET /v1/jobs/{id}`, method: 'GET', path: `/v1/jobs/${id}`, status: 400, field: 'id' },
    { name: `${what} in cancel`, path: `/v1/jobs/${id}/cancel`, status: 400, field: 'id' },
  ]),
  { name: 'SQL in a dead-letter retry', path: "/v1/dead-letters/1';--/retry", status: 400, field: 'id' },
  {
    name: 'an overflowing dead-letter retry',
    path: '/v1/dead-letters/99999999999999999999/retry',
    status: 400,
    field: 'id',
  },
  {
    name: 'SQL in purge ids',
    path: '/v1/dead-letters/purge',
    body: { ids: ['1 OR 1=1'] },
    status: 400,
    field: 'ids[0]',
  },
  {
    name: 'an overflowing purge id',
    path: '/v1/dead-letters/purge',
    body: { ids: ['99999999999999999999'] },
    status: 400,
    field: 'ids[0]',
  },
  { name: 'a bad schedule id in the path', method: 'GET', path: '/v1/schedules/a%20b', status: 400, field: 'id' },
  { name: 'a bad queue name in the path', path: '/v1/queues/a%20b/pause', status: 400, field: 'name' },
  { name: 'an unknown job', method: 'GET', path: '/v1/jobs/8888888888', status: 404 },
  { name: 'cancelling an unknown job', path: '/v1/jobs/8888888888/cancel', status: 404 },
  { name: 'retrying an unknown dead letter', path: '/v1/dead-letters/8888888888/retry', status: 404 },
];

const QUERIES: Case[] = [
  ...[
    ['after past the largest id', 'after=99999999999999999999', 'after'],
    ['after past every store', 'after=9007199254740992', 'after'],
    ['after with letters', 'after=abc', 'after'],
    ['after with SQL', 'after=1;DROP%20TABLE%20jobs', 'after'],
    ['an empty after', 'after=', 'after'],
    ['limit 0', 'limit=0', 'limit'],
    ['limit 1001', 'limit=1001', 'limit'],
    ['limit in words', 'limit=ten', 'limit'],
    ['a NUL kind', 'kind=a%00', 'kind'],
    ['an empty kind', 'kind=', 'kind'],
    ['a bad queue', 'queue=a%20b', 'queue'],
    ['an unknown parameter', 'sort=id', 'sort'],
    ['a repeated parameter', 'limit=1&limit=2', 'limit'],
  ].flatMap(([what, query, field]): Case[] => [
    { name: `${what} on /v1/jobs`, method: 'GET', path: `/v1/jobs?${query}`, status: 400, field },
    { name: `${what} on /v1/dead-letters`, method: 'GET', path: `/v1/dead-letters?${query}`, status: 400, field },
  ]),
  { name: 'an unknown state', method: 'GET', path: '/v1/jobs?state=zombie', status: 400, field: 'state' },
  { name: 'SQL in a state', method: 'GET', path: "/v1/jobs?state=pending'%20OR%20'1'='1", status: 400, field: 'state' },
  {
    name: 'paused=maybe on schedules',
    method: 'GET',
    path: '/v1/schedules?paused=maybe',
    status: 400,
    field: 'paused',
  },
  { name: 'a bad after on schedules', method: 'GET', path: '/v1/schedules?after=a%20b', status: 400, field: 'after' },
];

const IDEMPOTENCY: Case[] = [
  {
    name: 'an Idempotency-Key of 129 characters',
    body: job({}),
    headers: { 'idempotency-key': 'k'.repeat(129) },
    status: 400,
    field: 'Idempotency-Key',
  },
  {
    name: 'the header and the field together',
    body: job({ idempotencyKey: 'one' }),
    headers: { 'idempotency-key': 'one' },
    status: 400,
    field: 'idempotencyKey',
  },
  {
    name: 'a repeat of a key with another payload',
    body: job({ idempotencyKey: 'fixture-key', payload: { v: 2 } }),
    status: 409,
    field: 'idempotencyKey',
  },
  {
    name: 'a batch repeating a key with another payload',
    path: '/v1/jobs/batch',
    body: { jobs: [job({ payload: 'new' }), job({ idempotencyKey: 'fixture-key', payload: { v: 3 } })] },
    status: 409,
    field: 'jobs[1].idempotencyKey',
  },
  {
    name: 'a header key in a batch with a bad job',
    path: '/v1/jobs/batch',
    body: { jobs: [job({}), job({ priority: 'x' })] },
    headers: { 'idempotency-key': 'batch-key' },
    status: 400,
    field: 'jobs[1].priority',
  },
];

const lease = (fx: Fixtures, extra: Record<string, unknown> = {}) => ({
  token: fx.leased.token,
  receipt: fx.leased.receipt,
  ...extra,
});
const REMOTE_WORKER: Case[] = [
  { name: 'a claim without a workerId', path: '/v1/worker/claim', body: {}, status: 400, field: 'workerId' },
  { name: 'an empty workerId', path: '/v1/worker/claim', body: { workerId: '' }, status: 400, field: 'workerId' },
  {
    name: 'a NUL in the workerId',
    path: '/v1/worker/claim',
    body: { workerId: `w${NUL}` },
    status: 400,
    field: 'workerId',
  },
  {
    name: 'a lone surrogate in the workerId',
    path: '/v1/worker/claim',
    body: '{"workerId":"\\udc00"}',
    status: 400,
    field: 'workerId',
  },
  {
    name: 'a workerId of 201 characters',
    path: '/v1/worker/claim',
    body: { workerId: 'w'.repeat(201) },
    status: 400,
    field: 'workerId',
  },
  {
    name: 'a claim of the reserved queue',
    path: '/v1/worker/claim',
    body: { workerId: 'w', queues: ['docket.builtin'] },
    status: 400,
    field: 'queues.0',
  },
  {
    name: 'a claim of the webhook kind',
    path: '/v1/worker/claim',
    body: { workerId: 'w', kinds: ['docket.webhook'] },
    status: 400,
    field: 'kinds.0',
  },
  {
    name: 'a claim of a NUL kind',
    path: '/v1/worker/claim',
    body: { workerId: 'w', kinds: [NUL] },
    status: 400,
    field: 'kinds.0',
  },
  {
    name: 'a claim with an empty kinds list',
    path: '/v1/worker/claim',
    body: { workerId: 'w', kinds: [] },
    status: 400,
    field: 'kinds',
  },
  {
    name: 'a claim limit of 0',
    path: '/v1/worker/claim',
    body: { workerId: 'w', limit: 0 },
    status: 400,
    field: 'limit',
  },
  {
    name: 'a claim limit of 101',
    path: '/v1/worker/claim',
    body: { workerId: 'w', limit: 101 },
    status: 400,
    field: 'limit',
  },
  {
    name: 'a 50 ms lease',
    path: '/v1/worker/claim',
    body: { workerId: 'w', leaseMs: 50 },
    status: 400,
    field: 'leaseMs',
  },
  {
    name: 'a negative wait',
    path: '/v1/worker/claim',
    body: { workerId: 'w', waitMs: -1 },
    status: 400,
    field: 'waitMs',
  },
  {
    name: 'an unknown claim field',
    path: '/v1/worker/claim',
    body: { workerId: 'w', greedy: true },
    status: 400,
    field: 'greedy',
  },
  {
    name: 'a complete without a receipt',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/complete`,
    body: (fx: Fixtures) => ({ token: fx.leased.token }),
    status: 400,
    field: 'receipt',
  },
  {
    name: 'a complete with a guessed receipt',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/complete`,
    body: (fx: Fixtures) => lease(fx, { receipt: 'A'.repeat(43) }),
    status: 409,
  },
  {
    name: "a complete with another job's receipt",
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/complete`,
    body: (fx: Fixtures) => lease(fx, { receipt: fx.other.receipt }),
    status: 409,
  },
  {
    name: 'a complete with the next token',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/complete`,
    body: (fx: Fixtures) => lease(fx, { token: fx.leased.token + 1 }),
    status: 409,
  },
  {
    name: 'a heartbeat with a guessed receipt',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/heartbeat`,
    body: (fx: Fixtures) => lease(fx, { receipt: 'B'.repeat(43) }),
    status: 409,
  },
  {
    name: 'a fail with a guessed receipt',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/fail`,
    body: (fx: Fixtures) => lease(fx, { receipt: 'C'.repeat(43), error: { message: 'x' } }),
    status: 409,
  },
  {
    name: 'a complete of a job that does not exist',
    path: '/v1/worker/jobs/7777777777/complete',
    body: { token: 1, receipt: 'A'.repeat(43) },
    status: 409,
  },
  {
    name: 'a fail whose message holds a NUL',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/fail`,
    body: (fx: Fixtures) => lease(fx, { error: { message: `boom${NUL}` } }),
    status: 400,
    field: 'error.message',
  },
  {
    name: 'a fail whose detail holds a lone surrogate',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/fail`,
    body: (fx: Fixtures) =>
      `{"token":${fx.leased.token},"receipt":"${fx.leased.receipt}","error":{"message":"m","detail":"\\ud800"}}`,
    status: 400,
    field: 'error.detail',
  },
  {
    name: 'a fail without an error',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/fail`,
    body: (fx: Fixtures) => lease(fx),
    status: 400,
    field: 'error',
  },
  {
    name: 'a string token',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/complete`,
    body: (fx: Fixtures) => lease(fx, { token: String(fx.leased.token) }),
    status: 400,
    field: 'token',
  },
  {
    name: 'a heartbeat lease of 50 ms',
    path: (fx) => `/v1/worker/jobs/${fx.leased.id}/heartbeat`,
    body: (fx: Fixtures) => lease(fx, { leaseMs: 50 }),
    status: 400,
    field: 'leaseMs',
  },
];

const SSRF_URLS: [string, string][] = [
  ['loopback', 'http://127.0.0.1/'],
  ['loopback with a port', 'http://127.0.0.1:9/'],
  ['another loopback', 'http://127.8.9.10/'],
  ['decimal loopback', 'http://2130706433/'],
  ['octal loopback', 'http://0177.0.0.1/'],
  ['hex loopback', 'http://0x7f.0.0.1/'],
  ['a single hex number', 'http://0x7f000001/'],
  ['short loopback', 'http://127.1/'],
  ['0.0.0.0', 'http://0.0.0.0/'],
  ['0', 'http://0/'],
  ['10/8', 'http://10.1.2.3/'],
  ['172.16/12', 'http://172.20.0.1/'],
  ['192.168/16', 'http://192.168.1.1/'],
  ['cloud metadata', 'http://169.254.169.254/latest/meta-data'],
  ['metadata with a trailing dot', 'http://169.254.169.254./'],
  ['CGNAT', 'http://100.64.0.1/'],
  ['multicast', 'http://224.0.0.1/'],
  ['broadcast', 'http://255.255.255.255/'],
  ['IPv6 loopback', 'http://[::1]/'],
  ['IPv6 unspecified', 'http://[::]/'],
  ['IPv4-compatible loopback', 'http://[::127.0.0.1]/'],
  ['IPv4-compatible private', 'http://[::10.0.0.1]/'],
  ['IPv4-mapped loopback', 'http://[::ffff:127.0.0.1]/'],
  ['IPv4-mapped in hex', 'http://[::ffff:7f00:1]/'],
  ['IPv4-mapped metadata', 'http://[0:0:0:0:0:ffff:169.254.169.254]/'],
  ['IPv4-translated loopback', 'http://[::ffff:0:7f00:1]/'],
  ['IPv4-translated private', 'http://[::ffff:0:10.0.0.1]/'],
  ['NAT64 loopback', 'http://[64:ff9b::127.0.0.1]/'],
  ['NAT64 private', 'http://[64:ff9b::a00:1]/'],
  ['local-use NAT64', 'http://[64:ff9b:1::1]/'],
  ['6to4 of loopback', 'http://[2002:7f00:1::1]/'],
  ['6to4 of a private address', 'http://[2002:c0a8:101::]/'],
  ['Teredo', 'http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/'],
  ['IPv6 link-local', 'http://[fe80::1]/'],
  ['IPv6 unique local', 'http://[fd00::1]/'],
  ['IPv6 multicast', 'http://[ff02::1]/'],
  ['IPv6 documentation', 'http://[2001:db8::1]/'],
  ['site-local', 'http://[fec0::1]/'],
  ['localhost', 'http://localhost/'],
  ['LOCALHOST', 'http://LOCALHOST:8080/'],
  ['a .localhost name', 'http://api.localhost/'],
  ['localhost with a trailing dot', 'http://localhost./'],
  ['userinfo', 'http://user:pass@example.com/'],
  ['a user only', 'http://user@example.com/'],
  ['userinfo hiding loopback', 'http://example.com@127.0.0.1/'],
  ['ftp', 'ftp://example.com/'],
  ['file', 'file:///etc/passwd'],
  ['gopher', 'gopher://example.com/'],
  ['javascript', 'javascript:alert(1)'],
  ['data', 'data:text/plain,hi'],
  ['a relative URL', '/hook'],
  ['no host', 'http://'],
  ['not a URL', 'not a url'],
];

const SSRF: Case[] = [
  ...SSRF_URLS.map(
    ([what, url]): Case => ({ name: `SSRF: ${what}`, body: webhook(url), status: 400, field: 'payload.url' }),
  ),
  { name: 'SSRF: an empty URL', body: webhook(''), status: 400, field: 'payload.url' },
  {
    name: 'SSRF: a URL that is not a string',
    body: { kind: 'docket.webhook', payload: { url: 7 } },
    status: 400,
    field: 'payload.url',
  },
  {
    name: 'SSRF: a batch hiding one loopback webhook',
    path: '/v1/jobs/batch',
    body: { jobs: [webhook('https://example.com/'), webhook('http://[::ffff:0:7f00:1]/')] },
    status: 400,
    field: 'jobs[1].payload.url',
  },
  {
    name: 'SSRF: a schedule posting to loopback',
    path: '/v1/schedules',
    body: { id: 'ssrf', cron: '0 * * * *', job: webhook('http://127.0.0.1:9/') },
    status: 400,
    field: 'job.payload.url',
  },
  {
    name: 'SSRF: a schedule PUT posting to metadata',
    method: 'PUT',
    path: '/v1/schedules/ssrf',
    body: { cron: '0 * * * *', job: webhook('http://[::ffff:169.254.169.254]/') },
    status: 400,
    field: 'job.payload.url',
  },
  {
    name: 'webhook header: a snowman',
    body: webhook('https://example.com/', { headers: { 'X-Snow': 'snow ☃' } }),
    status: 400,
    field: 'payload.headers.X-Snow',
  },
  {
    name: 'webhook header: a NUL',
    body: webhook('https://example.com/', { headers: { 'X-Nul': `a${NUL}` } }),
    status: 400,
    field: 'payload.headers.X-Nul',
  },
  {
    name: 'webhook header: a line break',
    body: webhook('https://example.com/', { headers: { 'X-Split': 'a\r\nHost: evil' } }),
    status: 400,
    field: 'payload.headers.X-Split',
  },
  {
    name: 'webhook header: a control character',
    body: webhook('https://example.com/', { headers: { 'X-Bell': 'a\u0007' } }),
    status: 400,
    field: 'payload.headers.X-Bell',
  },
  {
    name: 'webhook header: a name with a space',
    body: webhook('https://example.com/', { headers: { 'X Bad': 'v' } }),
    status: 400,
    field: 'payload.headers.X Bad',
  },
  {
    name: 'webhook header: Host',
    body: webhook('https://example.com/', { headers: { Host: 'internal' } }),
    status: 400,
    field: 'payload.headers.Host',
  },
  {
    name: 'webhook header: a signature header',
    body: webhook('https://example.com/', { headers: { 'Docket-Signature': 'forged' } }),
    status: 400,
    field: 'payload.headers.Docket-Signature',
  },
  {
    name: 'webhook: an unknown payload field',
    body: webhook('https://example.com/', { method: 'DELETE' }),
    status: 400,
    field: 'payload.method',
  },
];

const CASES: Case[] = [...AUTH, ...BODIES, ...FIELDS, ...IDS, ...QUERIES, ...IDEMPOTENCY, ...REMOTE_WORKER, ...SSRF];

describe('the hostile-input table', () => {
  it('holds at least 150 cases, each with a unique name', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(150);
    expect(new Set(CASES.map((c) => c.name)).size).toBe(CASES.length);
  });
});

for (const kind of storeKinds()) {
  describe(`hostile input (${kind}): status, field, nothing written`, () => {
    let t: TestServer;
    let fx: Fixtures;
    beforeAll(async () => {
      t = await startHostileServer(kind);
      const claimOne = async (queue: string) => {
        await t.call('POST', '/v1/jobs', { body: { kind: 'fixture', queue } });
        const claim = await t.call('POST', '/v1/worker/claim', {
          body: { workerId: 'holder', queues: [queue], leaseMs: 600_000 },
        });
        const [claimed] = (claim.body as { jobs: { id: string; token: number; receipt: string }[] }).jobs;
        if (!claimed) throw new Error('fixture claim found no job');
        return { id: claimed.id, token: claimed.token, receipt: claimed.receipt };
      };
      fx = { leased: await claimOne('fixture-a'), other: await claimOne('fixture-b') };
      await t.call('POST', '/v1/jobs', { body: job({ idempotencyKey: 'fixture-key', payload: { v: 1 } }) });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it.each(CASES.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
      const before = await storeFingerprint(t);
      const path = typeof c.path === 'function' ? c.path(fx) : (c.path ?? '/v1/jobs');
      const body = typeof c.body === 'function' ? (c.body as (f: Fixtures) => unknown)(fx) : c.body;
      const response = await t.call(c.method ?? 'POST', path, {
        token: c.token === undefined ? TOKENS.all.token : c.token,
        body,
        headers: c.headers,
      });
      expect(response.status, JSON.stringify(response.body).slice(0, 300)).toBe(c.status);
      const error = (response.body as { error?: { field?: string; code?: string } }).error;
      expect(error?.code).toEqual(expect.any(String));
      expect(error?.field).toBe(c.field);
      expect(await storeFingerprint(t)).toBe(before);
    });

    it('stays up and serves after every case', async () => {
      expect((await t.call('GET', '/health', { token: null })).status).toBe(200);
      expect((await t.call('POST', '/v1/jobs', { body: job({}) })).status).toBe(201);
    });
  });
}
