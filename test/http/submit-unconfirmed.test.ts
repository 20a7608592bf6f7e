/**
 * The HTTP face of SubmitUnconfirmedError: a submit whose database stayed unreachable for the
 * retry window answers 503 `submit_unconfirmed`, saying what is known (nothing written, or which
 * job ids to look up), and never the connection error's internals. A real Hono app renders a
 * real error through the server's one error renderer.
 */
import { Hono } from 'hono';
import { describe, expect, it } from 'vitest';
import { errorResponse } from '../../src/http/http-error.js';
import { SubmitUnconfirmedError } from '../../src/index.js';

function appThrowing(error: unknown): Hono {
  const app = new Hono();
  app.post('/v1/jobs', () => {
    throw error;
  });
  app.onError((thrown, c) => errorResponse(c, thrown));
  return app;
}

const lost = new Error('connect ECONNREFUSED 10.1.2.3:5432');

describe('a submit the database never confirmed, over HTTP', () => {
  it('answers 503 naming the job id that may exist, without the connection details', async () => {
    const error = new SubmitUnconfirmedError({
      outcome: 'unknown',
      jobIds: ['4711'],
      attempts: 9,
      elapsedMs: 29_800,
      cause: lost,
    });
    const response = await appThrowing(error).request('/v1/jobs', { method: 'POST' });
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe('submit_unconfirmed');
    expect(body.error.message).toContain('job 4711 may or may not have been written');
    expect(body.error.message).not.toContain('10.1.2.3');
    // The library's own message keeps the cause for the operator's log.
    expect(error.message).toContain('ECONNREFUSED');
  });

  it('says submitting again is safe when nothing was written', async () => {
    const error = new SubmitUnconfirmedError({
      outcome: 'not_written',
      jobIds: [],
      attempts: 3,
      elapsedMs: 30_000,
      cause: lost,
    });
    const response = await appThrowing(error).request('/v1/jobs', { method: 'POST' });
    expect(response.status).toBe(503);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.message).toContain('nothing was written');
  });
});
