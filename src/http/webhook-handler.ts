/**
 * The built-in webhook job kind: at run_at, POST the payload's `body` as JSON to its `url`.
 *
 * - 2xx completes the job. Any other status, a timeout or a network error fails the attempt, so
 *   the usual backoff applies and the job ends in the dead-letter table after its last attempt.
 * - 429 and 503 with Retry-After (seconds or an HTTP date): the retry waits at least that long,
 *   capped (default one hour) so a hostile or broken receiver cannot park a job for a year.
 * - Every request is signed (see webhook-signature.ts) with the server's secret over the delivery
 *   id (the job id), a timestamp taken per attempt, and the body.
 * - The destination must pass the {@link DestinationGuard}: host allowlist first, then every
 *   resolved address, checked inside the socket's own DNS lookup so the address connected to is
 *   the address checked (no DNS rebinding between check and connect). Redirects are not
 *   followed: a 3xx to an internal address would otherwise walk straight past the guard.
 * - Error messages and logs name the host, never the query string, headers or body: those often
 *   carry the receiver's credentials.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { z } from 'zod';
import type { Docket } from '../docket.js';
import { WEBHOOK_KIND } from '../job/builtin-kinds.js';
import { DocketError, ValidationError } from '../job/errors.js';
import type { Job, JsonValue } from '../job/job.js';
import { checkJsonValue } from '../job/json-value.js';
import type { JobContext } from '../worker/job-handler.js';
import { type DestinationGuard, DestinationRefusedError } from './ssrf-guard.js';
import { withSpan } from './tracing.js';
import { signWebhook } from './webhook-signature.js';

export { WEBHOOK_KIND };

/** What every read shows instead of a webhook header's value. */
export const REDACTED = '[redacted]';

/**
 * Header values Node's HTTP client can send (its `validateHeaderValue` rule): tab, visible ASCII,
 * space and Latin-1 above 0x7f; no NUL, no other control character, nothing past U+00FF. A
 * value outside it would fail every delivery until the job is parked.
 */
export const HEADER_VALUE_PATTERN = /^[\t\x20-\x7e\x80-\xff]*$/;
/** Header names are RFC 7230 tokens. */
export const HEADER_NAME_PATTERN = /^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$/;

/** Headers a payload may not set: the transport's own, and the signature's. */
const RESERVED_HEADERS = /^(host|content-length|content-type|transfer-encoding|connection|te|upgrade|docket-.*)$/i;

/** A webhook job's payload. */
export const webhookPayloadSchema = z.strictObject({
  url: z.string().min(1).max(2048),
  // Any JSON value: checkJsonValue (depth, size, storable strings) has already walked it, without
  // recursion, before this schema sees it.
  body: z.unknown().optional(),
  headers: z
    .record(
      z
        .string()
        .regex(HEADER_NAME_PATTERN, { error: 'is not a valid header name (an RFC 7230 token)' })
        .refine((name) => !RESERVED_HEADERS.test(name), { error: 'is set by Docket and cannot be overridden' }),
      z.string().max(8192).regex(HEADER_VALUE_PATTERN, {
        error: 'is not a valid header value (tab, printable ASCII and Latin-1 only; no control characters)',
      }),
    )
    .optional()
    .describe('Sent with every delivery. Write-only: every read shows the values as "[redacted]".'),
});

/** A validated webhook payload. */
export type WebhookPayload = z.output<typeof webhookPayloadSchema>;

/** Validates a webhook payload and its URL against the guard; throws ValidationError naming the field. */
export function validateWebhookPayload(payload: unknown, guard: DestinationGuard, field = 'payload'): WebhookPayload {
  checkJsonValue(field, payload);
  const parsed = webhookPayloadSchema.safeParse(payload);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const path = [field, ...(issue?.path.map(String) ?? [])];
    if (issue?.code === 'unrecognized_keys') path.push(issue.keys[0] ?? '');
    throw new ValidationError(
      path.join('.'),
      issue?.code === 'unrecognized_keys' ? 'unknown field' : (issue?.message ?? 'is invalid'),
    );
  }
  try {
    guard.checkUrl(parsed.data.url);
  } catch (error) {
    if (error instanceof DestinationRefusedError) throw new ValidationError(`${field}.url`, error.message);
    throw error;
  }
  return parsed.data;
}

/**
 * A webhook payload as reads show it: header values replaced by {@link REDACTED}, since they
 * often hold the receiver's credentials. Any other payload is returned as is.
 */
export function redactPayload(kind: string, payload: unknown): unknown {
  if (kind !== WEBHOOK_KIND || typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    return payload;
  }
  const headers = (payload as { headers?: unknown }).headers;
  if (typeof headers !== 'object' || headers === null) return payload;
  return {
    ...payload,
    headers: Object.fromEntries(Object.keys(headers).map((name) => [name, REDACTED])),
  };
}

/** A job with its webhook headers redacted (see {@link redactPayload}). */
export function redactJob<J extends Pick<Job, 'kind' | 'payload'>>(job: J): J {
  return { ...job, payload: redactPayload(job.kind, job.payload) as JsonValue };
}

/** Settings of {@link registerWebhookHandler}. */
export interface WebhookHandlerOptions {
  /** HMAC-SHA256 signing secret shared with receivers. */
  secret: string;
  guard: DestinationGuard;
  /** Per-request time limit, ms (default 10 000). */
  timeoutMs?: number | undefined;
  /** Longest Retry-After honoured, ms (default one hour). */
  retryAfterCapMs?: number | undefined;
  /** Wall clock for signature timestamps, epoch ms (tests pin it). */
  nowMs?: (() => number) | undefined;
}

/**
 * A failed delivery. `retryAfterMs` asks the worker to wait at least that long before the next
 * attempt; `retryable: false` asks it to park at once (a refused destination never gets better).
 */
export class WebhookDeliveryError extends DocketError {
  readonly status: number | null;
  readonly retryAfterMs: number | undefined;
  readonly retryable: boolean;

  constructor(message: string, options: { status?: number | null; retryAfterMs?: number; retryable?: boolean } = {}) {
    super('webhook_delivery_failed', message);
    this.status = options.status ?? null;
    this.retryAfterMs = options.retryAfterMs;
    this.retryable = options.retryable ?? true;
  }
}

/** Parses Retry-After (delta seconds or an HTTP date) into ms from `nowMs`, capped; undefined if absent or bad. */
export function parseRetryAfterMs(value: string | undefined, nowMs: number, capMs: number): number | undefined {
  if (value === undefined) return undefined;
  const trimmed = value.trim();
  let ms: number;
  if (/^\d+$/.test(trimmed)) ms = Number(trimmed) * 1000;
  else {
    const at = Date.parse(trimmed);
    if (!Number.isFinite(at)) return undefined;
    ms = at - nowMs;
  }
  return Math.min(capMs, Math.max(0, ms));
}

const MAX_RESPONSE_BYTES = 64 * 1024;

/** Sends one signed POST; resolves with the status and Retry-After, rejects on network errors and timeouts. */
function post(
  url: URL,
  headers: Record<string, string>,
  body: string,
  guard: DestinationGuard,
  timeoutMs: number,
  signal: AbortSignal,
): Promise<{ status: number; retryAfter: string | undefined }> {
  return new Promise((resolve, reject) => {
    const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
    let settled = false;
    const finish = (error: Error | null, value?: { status: number; retryAfter: string | undefined }) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve(value as { status: number; retryAfter: string | undefined });
    };
    const req = send(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        // The guard resolves, checks every address, and hands the socket only checked ones.
        lookup: guard.lookup as never,
        // No pooled sockets: a kept-alive connection would skip the lookup and so the check.
        agent: false,
      },
      (res: IncomingMessage) => {
        let received = 0;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          // The body is not needed; stop reading a huge one rather than buffering it.
          if (received > MAX_RESPONSE_BYTES) res.destroy();
        });
        const done = () =>
          finish(null, {
            status: res.statusCode ?? 0,
            retryAfter: typeof res.headers['retry-after'] === 'string' ? res.headers['retry-after'] : undefined,
          });
        res.on('end', done);
        res.on('close', done);
        res.on('error', done);
      },
    );
    const timer = setTimeout(() => {
      req.destroy(new WebhookDeliveryError(`no response within ${timeoutMs} ms`));
    }, timeoutMs);
    const onAbort = () => req.destroy(new WebhookDeliveryError('aborted: the job lost its lease or timed out'));
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('error', (error) => finish(error));
    req.end(body);
  });
}

/** Registers the {@link WEBHOOK_KIND} handler on `docket`. */
export function registerWebhookHandler(docket: Docket, options: WebhookHandlerOptions): void {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const capMs = options.retryAfterCapMs ?? 3_600_000;
  const nowMs = options.nowMs ?? Date.now;
  docket.handle<JsonValue>(WEBHOOK_KIND, async (raw, ctx: JobContext) => {
    let payload: WebhookPayload;
    try {
      payload = validateWebhookPayload(raw, options.guard);
    } catch (error) {
      throw new WebhookDeliveryError(`refused: ${(error as Error).message}`, { retryable: false });
    }
    const url = new URL(payload.url);
    const body = JSON.stringify(payload.body ?? null);
    const signature = signWebhook({
      secret: options.secret,
      deliveryId: ctx.jobId,
      body,
      timestampS: Math.floor(nowMs() / 1000),
    });
    const headers: Record<string, string> = {
      ...payload.headers,
      'content-type': 'application/json',
      'user-agent': 'docket-webhook/0.1',
      'docket-attempt': String(ctx.attempt),
      ...signature,
    };
    await withSpan(
      'docket.webhook POST',
      'client',
      { 'server.address': url.hostname, 'docket.job.id': ctx.jobId, 'docket.job.attempt': ctx.attempt },
      async (span) => {
        let response: { status: number; retryAfter: string | undefined };
        try {
          response = await post(url, headers, body, options.guard, timeoutMs, ctx.signal);
        } catch (error) {
          if (error instanceof DestinationRefusedError) {
            throw new WebhookDeliveryError(`refused destination ${url.hostname}: ${error.message}`, {
              retryable: false,
            });
          }
          // A socket error's errno code (ECONNREFUSED) says most; our own timeout error is a
          // DocketError whose code is generic, so its message is the reason instead.
          const code = error instanceof DocketError ? undefined : (error as NodeJS.ErrnoException).code;
          throw new WebhookDeliveryError(`POST to ${url.hostname} failed: ${code ?? (error as Error).message}`, {});
        }
        span.setAttribute('http.response.status_code', response.status);
        if (response.status >= 200 && response.status < 300) return;
        const retryAfterMs =
          response.status === 429 || response.status === 503
            ? parseRetryAfterMs(response.retryAfter, nowMs(), capMs)
            : undefined;
        throw new WebhookDeliveryError(`POST to ${url.hostname} answered ${response.status}`, {
          status: response.status,
          ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
        });
      },
    );
  });
}
