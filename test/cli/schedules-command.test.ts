/**
 * `docket schedules …` and `docket queues …` as scripts use them: real CLI processes against real
 * stores, checking stdout, stderr and the exit codes (0 ok, 1 failed or not found, 2 bad usage).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import type { Schedule } from '../../src/schedule/schedule.js';
import type { QueueState } from '../../src/store/store.js';
import { createTestDatabase, type TestDatabase } from '../support/stores.js';
import { describeRun, runDocket } from './run-docket.js';

describe.each(['sqlite', 'postgres'] as const)('docket schedules and queues on %s', (kind) => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('creates, shows, updates, pauses, resumes, lists and deletes a schedule', async () => {
    const created = await runDocket([
      'schedules',
      'create',
      'nightly',
      '--cron',
      '30 2 * * *',
      '--time-zone',
      'America/New_York',
      '--kind',
      'report.build',
      '--payload',
      '{"format":"pdf"}',
      '--queue',
      'reports',
      '--jitter-ms',
      '60000',
      '--db',
      db.url,
      '--json',
    ]);
    expect(created.code, describeRun(created)).toBe(0);
    const schedule = JSON.parse(created.stdout) as Schedule;
    expect(schedule).toMatchObject({
      id: 'nightly',
      cron: '30 2 * * *',
      timeZone: 'America/New_York',
      paused: false,
      jitterMs: 60000,
      job: { kind: 'report.build', queue: 'reports', payload: { format: 'pdf' } },
      // Nothing has run yet: the pending run's slot is the next slot, never the last one.
      lastSlotAt: null,
    });
    const nextRunAt = Date.parse(String(schedule.nextRunAt));
    expect(nextRunAt).toBeGreaterThan(Date.now());

    const again = await runDocket([
      'schedules',
      'create',
      'nightly',
      '--cron',
      '* * * * *',
      '--kind',
      'x',
      '--db',
      db.url,
    ]);
    expect(again.code, describeRun(again)).toBe(1);
    expect(again.stderr).toMatch(/exists/);

    const updated = await runDocket([
      'schedules',
      'update',
      'nightly',
      '--misfire',
      'catch_up',
      '--max-catch-up-runs',
      '3',
      '--db',
      db.url,
      '--json',
    ]);
    expect(updated.code, describeRun(updated)).toBe(0);
    // Only the flags given changed; the cron (and so the pending run) stayed.
    expect(JSON.parse(updated.stdout)).toMatchObject({
      cron: '30 2 * * *',
      misfire: { policy: 'catch_up', maxCatchUpRuns: 3 },
      job: { queue: 'reports' },
      nextRunAt: schedule.nextRunAt,
    });

    const paused = await runDocket(['schedules', 'pause', 'nightly', '--db', db.url]);
    expect(paused.code, describeRun(paused)).toBe(0);
    const listedPaused = await runDocket(['schedules', 'list', '--paused', '--db', db.url, '--json']);
    expect((JSON.parse(listedPaused.stdout) as Schedule[]).map((s) => [s.id, s.nextRunAt])).toEqual([
      ['nightly', null],
    ]);

    const resumed = await runDocket(['schedules', 'resume', 'nightly', '--db', db.url]);
    expect(resumed.code, describeRun(resumed)).toBe(0);
    const table = await runDocket(['schedules', 'list', '--db', db.url]);
    expect(table.stdout).toMatch(/^ID\s+STATE\s+CRON/);
    expect(table.stdout).toMatch(/nightly\s+active\s+30 2 \* \* \*\s+America\/New_York/);

    const shown = await runDocket(['schedules', 'show', 'nightly', '--db', db.url]);
    expect(shown.code, describeRun(shown)).toBe(0);
    expect(shown.stdout).toMatch(/next run at:\s+\d{4}-\d\d-\d\dT/);

    const deleted = await runDocket(['schedules', 'delete', 'nightly', '--db', db.url]);
    expect(deleted.code, describeRun(deleted)).toBe(0);
    const gone = await runDocket(['schedules', 'show', 'nightly', '--db', db.url]);
    expect(gone.code, describeRun(gone)).toBe(1);
    expect(gone.stderr).toMatch(/no schedule nightly/);
  }, 60_000);

  it('refuses bad input with exit 2, naming the flag, and stores nothing', async () => {
    for (const [flags, message] of [
      [['--cron', '61 * * * *', '--kind', 'k'], /--cron/],
      [['--cron', '* * * * *', '--time-zone', 'Mars/Olympus', '--kind', 'k'], /--time-zone/],
      [['--cron', '* * * * *', '--kind', 'k', '--jitter-ms', '-5'], /--jitter-ms/],
      [['--kind', 'k'], /--cron and --kind/],
    ] as const) {
      const result = await runDocket(['schedules', 'create', 'bad', ...flags, '--db', db.url]);
      expect(result.code, describeRun(result)).toBe(2);
      expect(result.stderr).toMatch(message);
    }
    const tooLong = await runDocket([
      'schedules',
      'create',
      'x'.repeat(201),
      '--cron',
      '* * * * *',
      '--kind',
      'k',
      '--db',
      db.url,
    ]);
    expect(tooLong.code, describeRun(tooLong)).toBe(2);
    expect(tooLong.stderr).toMatch(/id: is 201 characters/);
    const docket = await Docket.open({ url: db.url, schema: db.schema });
    try {
      expect(await docket.listSchedules()).toEqual([]);
    } finally {
      await docket.close();
    }
  }, 60_000);

  it('pauses and resumes a queue, and lists it with its state', async () => {
    const docket = await Docket.open({ url: db.url, schema: db.schema });
    try {
      await docket.submit({ kind: 'k', queue: 'mail' });
    } finally {
      await docket.close();
    }
    const paused = await runDocket(['queues', 'pause', 'mail', '--db', db.url, '--json']);
    expect(paused.code, describeRun(paused)).toBe(0);
    expect(JSON.parse(paused.stdout)).toMatchObject({ name: 'mail', paused: true });
    const listed = await runDocket(['queues', 'list', '--db', db.url]);
    expect(listed.stdout).toMatch(/mail\s+paused\s+\d{4}-.*\s+1\s+0\s+0/);
    const resumed = await runDocket(['queues', 'resume', 'mail', '--db', db.url, '--json']);
    expect((JSON.parse(resumed.stdout) as QueueState).paused).toBe(false);
    const bad = await runDocket(['queues', 'pause', 'has space', '--db', db.url]);
    expect(bad.code, describeRun(bad)).toBe(2);
  }, 60_000);
});
