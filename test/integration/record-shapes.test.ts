/**
 * One shape for each record (issue 11, item 7): a job, a schedule and a dead letter read through
 * the library, the HTTP API and the CLI's `--json` are the same record, field for field, on both
 * stores. The library's record is compared as JSON (`JSON.stringify` turns its Dates into the
 * ISO-8601 strings the other two faces print). The reproduction it guards: schedules came back as
 * `job.payloadJson` (a string) and `retryPolicy` from the library but `job.payload` and `retry`
 * over HTTP, and a new schedule's last slot showed its future slot.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { decideAfterFailure } from '../../src/retry/backoff.js';
import { describeRun, runDocket } from '../cli/run-docket.js';
import { startTestServer, type TestServer } from '../http/http-support.js';

/** The record as the library's callers would serialise it. */
const asJson = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

describe.each(['sqlite', 'postgres'] as const)('records on %s: library, HTTP and CLI --json agree', (kind) => {
  let api: TestServer;
  let docket: Docket;

  beforeAll(async () => {
    api = await startTestServer({ kind });
    docket = await Docket.open({ url: api.db.url, schema: api.db.schema });
  });

  afterAll(async () => {
    await docket?.close();
    await api?.stop();
  });

  async function cliJson(args: string[]): Promise<unknown> {
    const result = await runDocket([...args, '--db', api.db.url, '--json']);
    expect(result.code, describeRun(result)).toBe(0);
    return JSON.parse(result.stdout);
  }

  /**
   * Asserts the three faces give the same keys and the same value for each key. `httpOmits`: the
   * fields HTTP leaves out on purpose (a job's fencing token belongs to the worker holding its
   * lease; src/http/job-routes.ts jobJson).
   */
  /**
   * `httpAdds`: fields HTTP derives for the dashboard and no stored record has (a schedule's
   * `upcoming` slots, computed from its cron); checked by the test itself, not compared.
   */
  function expectSameRecord(
    library: unknown,
    http: unknown,
    cli: unknown,
    httpOmits: string[] = [],
    httpAdds: string[] = [],
  ): void {
    const keys = Object.keys(library as object).sort();
    const differences = (other: unknown, omitted: string[]) => {
      const otherKeys = Object.keys(other as object).filter((key) => other !== http || !httpAdds.includes(key));
      return {
        missing: keys.filter((key) => !otherKeys.includes(key) && !omitted.includes(key)),
        extra: otherKeys.filter((key) => !keys.includes(key) || omitted.includes(key)),
      };
    };
    expect(differences(http, httpOmits), 'HTTP fields').toEqual({ missing: [], extra: [] });
    expect(differences(cli, []), 'CLI fields').toEqual({ missing: [], extra: [] });
    for (const key of keys) {
      const expected = (library as Record<string, unknown>)[key];
      if (!httpOmits.includes(key)) expect((http as Record<string, unknown>)[key], `HTTP ${key}`).toEqual(expected);
      expect((cli as Record<string, unknown>)[key], `CLI ${key}`).toEqual(expected);
    }
  }

  it('a job', async () => {
    const { id } = await docket.submit({
      kind: 'shape.job',
      queue: 'shapes',
      payload: { order: 42, lines: ['a', 'b'] },
      idempotencyKey: `shape-${kind}`,
      timeoutMs: 5000,
      runAt: '2031-01-01T00:00:00Z',
    });
    const library = asJson(await docket.getJob(id));
    const http = await api.call('GET', `/v1/jobs/${id}`);
    expect(http.status).toBe(200);
    expectSameRecord(library, http.body, await cliJson(['jobs', 'show', id]), ['token']);
    expect(library).toMatchObject({ payload: { order: 42, lines: ['a', 'b'] }, runAt: '2031-01-01T00:00:00.000Z' });
  });

  it('a dead letter', async () => {
    const { id } = await docket.submit({ kind: 'shape.dead', queue: 'shapes-dead', maxAttempts: 1, payload: [1] });
    const [claimed] = await docket.store.jobClaim({
      owner: 'shape-test',
      limit: 1,
      leaseMs: 30_000,
      queues: ['shapes-dead'],
    });
    expect(claimed?.id).toBe(id);
    const decision = decideAfterFailure({
      attempts: claimed!.attempts,
      maxAttempts: claimed!.maxAttempts,
      policy: claimed!.retryPolicy,
      random: () => 0,
    });
    const outcome = await docket.store.jobFail({
      id,
      token: claimed!.token,
      error: { message: 'boom', kind: 'thrown' },
      decision,
    });
    expect(outcome).toEqual({ outcome: 'parked' });

    const [library] = (await docket.listDeadLetters()).map(asJson);
    const http = await api.call('GET', '/v1/dead-letters');
    expect(http.status).toBe(200);
    const [httpRecord] = (http.body as { jobs: unknown[] }).jobs;
    const [cliRecord] = (await cliJson(['dead', 'list'])) as unknown[];
    expectSameRecord(library, httpRecord, cliRecord, ['token']);
    expect(library).toMatchObject({ id, state: 'dead', errors: [{ attempt: 1, message: 'boom', kind: 'thrown' }] });
  });

  it('a schedule, whose job carries payload and retry and whose last slot stays null until a run starts', async () => {
    const { schedule } = await docket.schedule({
      id: `shape-${kind}`,
      cron: '0 3 * * *',
      timeZone: 'Europe/Paris',
      jitterMs: 1000,
      job: { kind: 'shape.report', queue: 'shapes', payload: { format: 'pdf' }, retry: { baseDelayMs: 500 } },
    });
    const library = asJson(await docket.getSchedule(schedule.id));
    const http = await api.call('GET', `/v1/schedules/${schedule.id}`);
    expect(http.status).toBe(200);
    expectSameRecord(library, http.body, await cliJson(['schedules', 'show', schedule.id]), [], ['upcoming']);
    // 03:00 in Paris is 02:00 UTC in winter and 01:00 in summer: five consecutive days at one of those.
    const upcoming = (http.body as { upcoming: string[] }).upcoming;
    expect(upcoming).toHaveLength(5);
    expect(upcoming[0]).toBe((library as { nextSlotAt: string }).nextSlotAt);
    for (const slot of upcoming) expect(['01:00:00.000Z', '02:00:00.000Z']).toContain(slot.slice(11));
    expectSameRecord(
      (library as { job: unknown }).job,
      (http.body as { job: unknown }).job,
      ((await cliJson(['schedules', 'show', schedule.id])) as { job: unknown }).job,
    );
    expect(library).toMatchObject({
      job: {
        kind: 'shape.report',
        queue: 'shapes',
        payload: { format: 'pdf' },
        retry: { baseDelayMs: 500, factor: 2 },
        timeoutMs: null,
      },
      lastSlotAt: null,
    });
    expect((library as { nextSlotAt: string | null }).nextSlotAt).not.toBeNull();
  });
});
