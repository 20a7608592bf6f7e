/**
 * The one error shape every HTTP response uses: `{ error: { code, field?, message } }`. Handlers
 * throw {@link HttpError}; validation errors from the job layer keep their field name, so a client
 * learns exactly which input to fix.
 */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import type { z } from 'zod';
import { DocketError, IdempotencyConflictError, SubmitUnconfirmedError, ValidationError } from '../job/errors.js';

/** The JSON body of every error response. */
export interface ErrorBody {
  error: { code: string; message: string; field?: string };
}

/** An error with an HTTP status, a stable code and (for bad input) the offending field. */
export class HttpError extends DocketError {
  readonly status: ContentfulStatusCode;
  readonly field: string | undefined;

  constructor(status: ContentfulStatusCode, code: string, message: string, field?: string) {
    super(code, message);
    this.status = status;
    this.field = field;
  }
}

/** A 400 naming the field at fault. */
export function badRequest(field: string, message: string): HttpError {
  return new HttpError(400, 'invalid_input', `${field}: ${message}`, field);
}

/** A 404 for an unknown resource. */
export function notFound(what: string): HttpError {
  return new HttpError(404, 'not_found', `${what} not found`);
}

/** Turns the first zod issue into a 400 that names its path, the way ValidationError does. */
export function fromZodError(error: z.ZodError, prefix = ''): HttpError {
  const issue = error.issues[0];
  if (!issue) return badRequest(prefix || 'body', 'is invalid');
  let path = [prefix, ...issue.path.map(String)].filter((part) => part !== '').join('.');
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    path = [path, key].filter((part) => part !== '').join('.');
    return badRequest(path || 'body', 'unknown field');
  }
  return badRequest(path || 'body', issue.message);
}

/** What an HTTP client is told of a {@link SubmitUnconfirmedError}: the outcome and the ids, no internals. */
function unconfirmedMessage(error: SubmitUnconfirmedError): string {
  if (error.outcome === 'not_written' || error.jobIds.length === 0) {
    return 'submit not confirmed: the database could not be reached; nothing was written, submitting again is safe';
  }
  const ids = error.jobIds.join(', ');
  return (
    `submit not confirmed: the database stopped answering; job${error.jobIds.length === 1 ? '' : 's'} ${ids} may or ` +
    'may not have been written: look up GET /v1/jobs/{id} before submitting again (or resubmit with an Idempotency-Key)'
  );
}

/** Renders any thrown value as the standard error body; unknown errors become an opaque 500. */
export function errorResponse(c: Context, error: unknown): Response {
  if (error instanceof HttpError) {
    const body: ErrorBody = { error: { code: error.code, message: error.message } };
    if (error.field !== undefined) body.error.field = error.field;
    return c.json(body, error.status);
  }
  if (error instanceof IdempotencyConflictError) {
    // 409, not 400: the input is valid, it conflicts with a live job (as an equal repeat would
    // have answered that job). Header keys are scoped per token, so only the caller's own jobs meet.
    return c.json({ error: { code: error.code, field: error.field, message: error.message } } satisfies ErrorBody, 409);
  }
  if (error instanceof ValidationError) {
    return c.json({ error: { code: error.code, field: error.field, message: error.message } } satisfies ErrorBody, 400);
  }
  if (error instanceof SubmitUnconfirmedError) {
    // 503: the database was unreachable for the whole retry window. The outcome and the job ids
    // are the client's to know (to look the jobs up before resubmitting); the connection error
    // itself (hosts, ports) is not.
    return c.json({ error: { code: error.code, message: unconfirmedMessage(error) } } satisfies ErrorBody, 503);
  }
  // Internal details (SQL text, stack traces, payload fragments) never reach the client.
  return c.json({ error: { code: 'internal', message: 'internal server error' } } satisfies ErrorBody, 500);
}
