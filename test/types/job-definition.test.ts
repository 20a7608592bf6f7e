/**
 * Typed job definitions (issue 10, item 5), with no DocketJobs map declared (this program's
 * default; test/types/declared-jobs/ checks a declared map in a program of its own, because a
 * declaration merge applies to every file compiled with it).
 *
 * Type assertions are checked by `npm run typecheck` (tsconfig.json includes test/): every
 * `@ts-expect-error` line must fail to compile, or tsc reports the directive as unused. The
 * runtime assertions run under vitest against a real SQLite store.
 */
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import { ValidationError } from '../../src/job/errors.js';
import type { JsonValue } from '../../src/job/job.js';
import { defineJob, type JobDefinition, type JsonCompatible } from '../../src/job/job-definition.js';

interface Email {
  to: string;
  cc?: string[];
  attempt: number | null;
  meta: { tags: readonly string[]; nested: { ok: boolean }[] };
}

const sendEmail = defineJob<Email>('email.send', { queue: 'mail', maxAttempts: 3 });
const buildReport = defineJob<{ reportId: number }>('report.build');
const email: Email = { to: 'ada@example.com', attempt: null, meta: { tags: ['a'], nested: [{ ok: true }] } };

/** Compile-time cases: never called, only type-checked. */
function typeCases(docket: Docket): void {
  // --- defineJob accepts JSON payload types, including interfaces and optional fields ---
  expectTypeOf(sendEmail).toEqualTypeOf<JobDefinition<Email>>();
  defineJob<string>('plain.string');
  defineJob<null>('plain.null');
  defineJob<[number, string]>('plain.tuple');
  defineJob<JsonValue>('plain.json');
  defineJob('plain.default');
  expectTypeOf(defineJob('plain.default')).toEqualTypeOf<JobDefinition<JsonValue>>();

  // --- and refuses payload types JSON cannot carry ---
  // @ts-expect-error a Date arrives in the handler as a string
  defineJob<{ at: Date }>('bad.date');
  // @ts-expect-error a function does not survive JSON at all
  defineJob<{ callback: () => void }>('bad.function');
  // @ts-expect-error a function as the whole payload
  defineJob<() => void>('bad.function.top');
  // @ts-expect-error a Map becomes {}
  defineJob<{ m: Map<string, number> }>('bad.map');
  // @ts-expect-error JSON.stringify throws on a bigint
  defineJob<{ n: bigint }>('bad.bigint');
  // @ts-expect-error unknown may hold anything
  defineJob<{ u: unknown }>('bad.unknown');
  // @ts-expect-error a class instance with methods loses them
  defineJob<{ when: URL }>('bad.class');

  // --- jobs of a definition: the payload must have the definition's type ---
  expectTypeOf(sendEmail.job(email).payload).toEqualTypeOf<Email>();
  expectTypeOf(sendEmail.job(email).kind).toEqualTypeOf<string>();
  // @ts-expect-error wrong type for a field
  sendEmail.job({ ...email, to: 42 });
  // @ts-expect-error a required field is missing
  sendEmail.job({ to: 'x', attempt: 1 });
  // @ts-expect-error an unknown field
  sendEmail.job({ ...email, bcc: 'y' });
  // @ts-expect-error a misspelt definition does not exist, so its kind cannot be mistyped
  void sendEmial.job(email);

  // --- submit, submitMany, schedule and handle take definitions ---
  void docket.submit(sendEmail.job(email));
  void docket.submit(sendEmail.job(email, { runAt: '2030-06-01T09:00:00Z', priority: 1 }));
  void docket.submit(sendEmail.job(email, { runAt: new Date() }), { transaction: undefined });
  void docket.submit(sendEmail.job(email, { runAt: Date.now() + 1000 }));
  // @ts-expect-error runAt is an instant: a Date, epoch ms or an RFC 3339 string
  void docket.submit(sendEmail.job(email, { runAt: true }));
  // @ts-expect-error not a submit option
  void docket.submit(sendEmail.job(email, { prio: 1 }));
  void docket.submitMany([sendEmail.job(email), buildReport.job({ reportId: 7 }), { kind: 'plain', payload: [1] }]);
  void docket.schedule({ id: 'nightly-report', cron: '0 2 * * *', job: buildReport.job({ reportId: 7 }) });
  // @ts-expect-error a schedule decides run times itself: no runAt on its job
  void docket.schedule({ id: 'n', cron: '0 2 * * *', job: buildReport.job({ reportId: 7 }, { runAt: new Date() }) });
  docket.handle(sendEmail, async (payload, ctx) => {
    expectTypeOf(payload).toEqualTypeOf<Email>();
    expectTypeOf(ctx.signal).toEqualTypeOf<AbortSignal>();
  });
  // @ts-expect-error the handler must take the definition's payload type
  docket.handle(sendEmail, async (payload: { reportId: number }) => payload.reportId);

  // --- untyped use keeps working while no DocketJobs map is declared ---
  void docket.submit({ kind: 'anything', payload: { a: 1, b: ['x', null] } });
  void docket.submit({ kind: 'anything' });
  void docket.submit({ kind: 'anything', payload: email, runAt: '2030-06-01T09:00:00+02:00' });
  void docket.submitMany([
    { kind: 'a', payload: 1 },
    { kind: 'b', payload: { x: 'y' } },
  ]);
  void docket.schedule({ id: 's', cron: '* * * * *', job: { kind: 'tick', payload: { n: 1 } } });
  docket.handle('anything', async (payload) => expectTypeOf(payload).toEqualTypeOf<JsonValue>());
  docket.handle<{ i: number }>('explicit', async (payload) => expectTypeOf(payload).toEqualTypeOf<{ i: number }>());
  docket.handle('annotated', async (payload: Email) => payload.to);
  // @ts-expect-error a Date in an untyped payload still fails: it is not JSON
  void docket.submit({ kind: 'anything', payload: { at: new Date() } });
  // @ts-expect-error a function in an untyped payload
  void docket.submit({ kind: 'anything', payload: { f: () => 1 } });
  // @ts-expect-error a Date as a schedule's payload
  void docket.schedule({ id: 's', cron: '* * * * *', job: { kind: 'tick', payload: new Date() } });
  // @ts-expect-error runAt must be an instant
  void docket.submit({ kind: 'anything', runAt: { at: 1 } });
  // @ts-expect-error an explicit payload type must be JSON too
  docket.handle<{ at: Date }>('explicit.date', async () => {});
  // @ts-expect-error a misspelt option
  void docket.submit({ kind: 'anything', priorty: 1 });
}

describe('JsonCompatible', () => {
  it('maps JSON types to themselves and the rest to never', () => {
    expectTypeOf<JsonCompatible<Email>>().toEqualTypeOf<Email>();
    expectTypeOf<JsonCompatible<{ at: Date }>>().toEqualTypeOf<{ at: never }>();
    expect(typeof typeCases).toBe('function');
  });
});

describe('defineJob at runtime', () => {
  let docket: Docket;

  beforeAll(async () => {
    docket = await Docket.open({ url: 'sqlite::memory:' });
  });

  afterAll(async () => {
    await docket?.close();
  });

  it('builds jobs with the definition kind and defaults, overridden per submit', () => {
    expect(sendEmail.job(email)).toEqual({ kind: 'email.send', queue: 'mail', maxAttempts: 3, payload: email });
    expect(sendEmail.job(email, { maxAttempts: 1, delayMs: 5 })).toEqual({
      kind: 'email.send',
      queue: 'mail',
      maxAttempts: 1,
      delayMs: 5,
      payload: email,
    });
  });

  it('refuses a bad kind or default where the job is defined, naming the field', () => {
    expect(() => defineJob('')).toThrow(ValidationError);
    expect(() => defineJob('')).toThrow(/kind/);
    expect(() => defineJob('k', { queue: 'has space' })).toThrow(/queue/);
    expect(() => defineJob('k', { maxAttempts: 0 })).toThrow(/maxAttempts/);
    // @ts-expect-error runAt is per submit, not a default
    expect(() => defineJob('k', { runAt: 1 })).toThrow(/defaults\.runAt/);
  });

  it('submits, schedules and handles through definitions on a real store', async () => {
    const { id } = await docket.submit(sendEmail.job(email, { priority: 2 }));
    expect(await docket.getJob(id)).toMatchObject({
      kind: 'email.send',
      queue: 'mail',
      maxAttempts: 3,
      priority: 2,
      payload: email,
    });
    const [report] = await docket.submitMany([buildReport.job({ reportId: 7 })]);
    expect(await docket.getJob(report!.id)).toMatchObject({ kind: 'report.build', payload: { reportId: 7 } });
    const { schedule } = await docket.schedule({
      id: 'typed-report',
      cron: '0 2 * * *',
      job: buildReport.job({ reportId: 9 }),
    });
    expect(schedule.job).toMatchObject({ kind: 'report.build', payload: { reportId: 9 } });

    const seen: Email[] = [];
    docket.handle(sendEmail, async (payload) => {
      seen.push(payload);
    });
    expect(() => docket.handle(sendEmail, async () => {})).toThrow(/already registered/);
  });
});
