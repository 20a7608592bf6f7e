/**
 * The schedule and queue-pause conformance suite: one behavioural suite, run unchanged against
 * every store kind, for the recurring-schedule and paused-queue methods of the Store contract.
 *
 * Isolation: each kind gets one database and every test its own queue and schedule ids; the
 * operations that act on every schedule (list, repair) get a fresh database. Time is pinned, so
 * every slot and run time is exact: `at(h, m, s)` is an instant on 1 May 2026 (UTC).
 */
import { describe, expect, it } from 'vitest';
import { ValidationError } from '../../src/job/errors.js';
import type { Job } from '../../src/job/job.js';
import { jitterOffsetMs } from '../../src/schedule/jitter.js';
import { normalizeScheduleSpec, type ScheduleInput, type ScheduleSpec } from '../../src/schedule/schedule.js';
import type { Store } from '../../src/store/store.js';
import { conformanceStoreKinds } from '../support/stores.js';
import { PARK, spec, thrown, useConformanceDatabase } from './conformance-helpers.js';

const LEASE_MS = 30_000;
const MINUTE_MS = 60_000;

/** An instant on 1 May 2026, UTC. */
function at(hours: number, minutes: number, seconds = 0): Date {
  return new Date(Date.UTC(2026, 4, 1, hours, minutes, seconds));
}

function plusMs(date: Date, ms: number): Date {
  return new Date(date.getTime() + ms);
}

describe.each(conformanceStoreKinds())('%s store: schedules and paused queues', (kind) => {
  const { store, nextQueue, withFreshStore } = useConformanceDatabase(kind, 'sched');

  /** A validated schedule in its own queue, every minute in UTC unless overridden. */
  function scheduleSpec(queue: string, overrides: Partial<ScheduleInput> = {}): ScheduleSpec {
    return normalizeScheduleSpec({
      id: `${queue}.s`,
      cron: '* * * * *',
      job: { kind: 'sched.tick', queue, payload: { from: queue } },
      ...overrides,
    });
  }

  /** Every job in `queue` ordered by id, in any live or finished state. */
  async function jobsIn(queue: string, on: Store = store): Promise<Job[]> {
    return on.jobList({ queue, limit: 1000 });
  }

  async function pendingSlots(queue: string, on: Store = store): Promise<Date[]> {
    return (await jobsIn(queue, on)).filter((job) => job.state === 'pending').map((job) => job.scheduleSlot as Date);
  }

  describe('scheduleUpsert (create)', () => {
    it('stores the schedule and enqueues its next slot in its zone, offset by its stable jitter', async () => {
      const q = nextQueue();
      const input = scheduleSpec(q, { cron: '0 9 * * *', timeZone: 'America/New_York', jitterMs: 60_000 });
      const { schedule, created } = await store.scheduleUpsert({ spec: input, now: at(12, 0) });
      // 12:00Z is 08:00 in New York (EDT, UTC-4); its next 09:00 is 13:00Z the same day.
      const slot = at(13, 0);
      const runAt = plusMs(slot, jitterOffsetMs(input.id, slot, 60_000, 'stable'));
      expect(created).toBe(true);
      // The record names the job's fields as the input does (payload as JSON, retry), and its last
      // slot stays null until a run starts: the pending run's slot is the next slot, not the last.
      const { payloadJson: _payloadJson, retryPolicy, ...template } = input.job;
      expect(schedule).toMatchObject({
        ...input,
        job: { ...template, payload: { from: q }, retry: retryPolicy },
        lastSlotAt: null,
        nextSlotAt: slot,
        nextRunAt: runAt,
      });
      expect(runAt.getTime()).toBeGreaterThanOrEqual(slot.getTime());
      expect(runAt.getTime()).toBeLessThan(slot.getTime() + 60_000);
      expect(await store.scheduleGet({ id: input.id })).toEqual(schedule);

      const jobs = await jobsIn(q);
      expect(jobs).toHaveLength(1);
      expect(jobs[0]).toMatchObject({
        kind: 'sched.tick',
        queue: q,
        payload: { from: q },
        state: 'pending',
        runAt,
        scheduleId: input.id,
        scheduleSlot: slot,
        attempts: 0,
      });
    });

    it('enqueues nothing for a schedule created paused', async () => {
      const q = nextQueue();
      const { schedule } = await store.scheduleUpsert({ spec: scheduleSpec(q, { paused: true }), now: at(12, 0) });
      expect(schedule).toMatchObject({ paused: true, lastSlotAt: null, nextSlotAt: null, nextRunAt: null });
      expect(await jobsIn(q)).toEqual([]);
    });
  });

  describe('claiming a recurring run', () => {
    it('inserts exactly one next run in the claim, and a re-claim after a lapsed lease inserts none', async () => {
      const q = nextQueue();
      const input = scheduleSpec(q);
      await store.scheduleUpsert({ spec: input, now: at(12, 0, 30) });
      expect(await pendingSlots(q)).toEqual([at(12, 1)]);

      const [first] = await store.jobClaim({ owner: 'w1', limit: 10, leaseMs: LEASE_MS, queues: [q], now: at(12, 1) });
      expect(first).toMatchObject({ scheduleId: input.id, scheduleSlot: at(12, 1), attempts: 1 });
      expect(await pendingSlots(q)).toEqual([at(12, 2)]);
      expect(await store.scheduleGet({ id: input.id })).toMatchObject({
        lastSlotAt: at(12, 1),
        nextSlotAt: at(12, 2),
        nextRunAt: at(12, 2),
      });
      // Nothing else is due yet, and a second claim at the same instant plans nothing more.
      expect(await store.jobClaim({ owner: 'w2', limit: 10, leaseMs: LEASE_MS, queues: [q], now: at(12, 1) })).toEqual(
        [],
      );

      // The lease lapses mid-minute; the re-claim hands the same run out again but plans nothing.
      const again = await store.jobClaim({ owner: 'w2', limit: 1, leaseMs: LEASE_MS, queues: [q], now: at(12, 1, 40) });
      expect(again.map((job) => [job.id, job.token])).toEqual([[first!.id, 2]]);
      expect(await pendingSlots(q)).toEqual([at(12, 2)]);
      expect(await store.jobComplete({ id: first!.id, token: 2, now: at(12, 1, 41) })).toBe('done');

      const [second] = await store.jobClaim({ owner: 'w1', limit: 10, leaseMs: LEASE_MS, queues: [q], now: at(12, 2) });
      expect(second).toMatchObject({ scheduleSlot: at(12, 2) });
      expect(await pendingSlots(q)).toEqual([at(12, 3)]);
      const slots = (await jobsIn(q)).map((job) => job.scheduleSlot?.toISOString());
      expect(new Set(slots).size).toBe(slots.length);
    });

    it('gives at most one job per slot when two store instances claim and repair at once', async () => {
      await withFreshStore(async (a, freshDb) => {
        const b = await freshDb.open();
        try {
          const queues = Array.from({ length: 6 }, () => nextQueue());
          for (const q of queues) await a.scheduleUpsert({ spec: scheduleSpec(q), now: at(12, 0, 30) });
          for (let minute = 1; minute <= 5; minute++) {
            const now = at(12, minute);
            const claimed: Job[] = [];
            // Concurrent claimers skip rows another one holds, so a round can come back short:
            // claim in rounds until this minute's six runs are out (bounded).
            for (let round = 0; round < 20 && claimed.length < queues.length; round++) {
              const claims = await Promise.all(
                [a, b, a, b].map((on, i) => on.jobClaim({ owner: `w${i}`, limit: 2, leaseMs: LEASE_MS, now })),
              );
              await Promise.all([a.scheduleRepair({ now }), b.scheduleRepair({ now })]);
              claimed.push(...claims.flat());
            }
            // Every schedule's run for this minute was claimed by exactly one claimer.
            expect(claimed.map((job) => job.scheduleSlot)).toEqual(queues.map(() => now));
            expect(new Set(claimed.map((job) => job.scheduleId)).size).toBe(queues.length);
            for (const job of claimed) {
              expect(await a.jobComplete({ id: job.id, token: job.token, now: plusMs(now, 1000) })).toBe('done');
            }
          }
          for (const q of queues) {
            const jobs = await jobsIn(q, a);
            expect(jobs.map((job) => job.scheduleSlot)).toEqual([1, 2, 3, 4, 5, 6].map((m) => at(12, m)));
            expect(jobs.map((job) => job.state)).toEqual(['done', 'done', 'done', 'done', 'done', 'pending']);
          }
        } finally {
          await b.close();
        }
      });
    });
  });

  describe('misfire policies after an outage', () => {
    // Created at 12:00:30, first slot 12:01; nothing runs until 12:06:10, when slots
    // 12:02 … 12:06 have passed without a job.
    const outageEnd = at(12, 6, 10);

    async function afterOutage(misfire: ScheduleInput['misfire']): Promise<{ q: string; claimed: Job[] }> {
      const q = nextQueue();
      await store.scheduleUpsert({ spec: scheduleSpec(q, { misfire }), now: at(12, 0, 30) });
      const claimed = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: outageEnd });
      expect(claimed.map((job) => job.scheduleSlot)).toEqual([at(12, 1)]);
      return { q, claimed };
    }

    it('skip: runs the late pending run once and enqueues only the next slot after now', async () => {
      const { q } = await afterOutage({ policy: 'skip' });
      expect(await pendingSlots(q)).toEqual([at(12, 7)]);
    });

    it('run_once: the late pending run is the one run for the missed slots; then the next slot', async () => {
      const { q } = await afterOutage({ policy: 'run_once' });
      expect(await pendingSlots(q)).toEqual([at(12, 7)]);
    });

    it('catch_up: runs the latest missed slots up to the cap, due at once, then the next slot', async () => {
      const { q } = await afterOutage({ policy: 'catch_up', maxCatchUpRuns: 3, catchUpWindowMs: 3_600_000 });
      const pending = (await jobsIn(q)).filter((job) => job.state === 'pending');
      expect(pending.map((job) => job.scheduleSlot)).toEqual([at(12, 4), at(12, 5), at(12, 6), at(12, 7)]);
      expect(pending.map((job) => job.runAt)).toEqual([at(12, 4), at(12, 5), at(12, 6), at(12, 7)]);
      // The catch-up runs are older than the schedule's latest slot, so claiming them plans nothing.
      const caughtUp = await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: outageEnd });
      expect(caughtUp.map((job) => job.scheduleSlot)).toEqual([at(12, 4), at(12, 5), at(12, 6)]);
      expect(await pendingSlots(q)).toEqual([at(12, 7)]);
    });

    it('catch_up: never more than the window allows, however long the outage', async () => {
      const q = nextQueue();
      const misfire = { policy: 'catch_up' as const, maxCatchUpRuns: 1000, catchUpWindowMs: 5 * MINUTE_MS };
      await store.scheduleUpsert({ spec: scheduleSpec(q, { misfire }), now: at(12, 0, 30) });
      // A nine-hour outage: only slots of the last five minutes (18:56 … 21:00) run.
      await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: at(21, 0, 30) });
      expect(await pendingSlots(q)).toEqual([at(20, 56), at(20, 57), at(20, 58), at(20, 59), at(21, 0), at(21, 1)]);
    });
  });

  describe('schedulePause and scheduleResume', () => {
    it('pause deletes the pending run, claims nothing; resume plans from now with no burst', async () => {
      const q = nextQueue();
      const input = scheduleSpec(q, { misfire: { policy: 'catch_up' } });
      await store.scheduleUpsert({ spec: input, now: at(12, 0, 30) });
      const paused = await store.schedulePause({ id: input.id, now: at(12, 0, 40) });
      expect(paused).toMatchObject({ paused: true, nextSlotAt: null, nextRunAt: null });
      expect(await jobsIn(q)).toEqual([]);
      expect(await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: at(12, 30) })).toEqual(
        [],
      );
      expect(await store.schedulePause({ id: input.id, now: at(12, 31) })).toEqual(paused);

      // Thirty slots passed while paused: even catch_up runs none of them.
      const resumed = await store.scheduleResume({ id: input.id, now: at(12, 30, 5) });
      expect(resumed).toMatchObject({ paused: false, nextSlotAt: at(12, 31), nextRunAt: at(12, 31) });
      expect(await pendingSlots(q)).toEqual([at(12, 31)]);
      expect(await store.scheduleResume({ id: input.id, now: at(12, 30, 6) })).toEqual(resumed);
      expect(await pendingSlots(q)).toEqual([at(12, 31)]);
    });

    it('lets a running run finish when its schedule is paused, and plans nothing after it', async () => {
      const q = nextQueue();
      const input = scheduleSpec(q);
      await store.scheduleUpsert({ spec: input, now: at(12, 0, 30) });
      const [running] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: at(12, 1) });
      await store.schedulePause({ id: input.id, now: at(12, 1, 5) });
      expect((await jobsIn(q)).map((job) => job.state)).toEqual(['running']);
      expect(await store.jobComplete({ id: running!.id, token: running!.token, now: at(12, 1, 10) })).toBe('done');
      expect(await store.scheduleRepair({ now: at(12, 5) })).toBe(0);
      expect(await pendingSlots(q)).toEqual([]);
    });

    it('answers null for an unknown schedule', async () => {
      expect(await store.schedulePause({ id: 'no.such.schedule' })).toBeNull();
      expect(await store.scheduleResume({ id: 'no.such.schedule' })).toBeNull();
      expect(await store.scheduleGet({ id: 'no.such.schedule' })).toBeNull();
    });
  });

  describe('scheduleUpsert (replace) and scheduleDelete', () => {
    it('re-plans from now when the cron changes, and keeps the pending run when only the job changes', async () => {
      const q = nextQueue();
      await store.scheduleUpsert({ spec: scheduleSpec(q, { cron: '0 * * * *' }), now: at(12, 10) });
      const [hourly] = await jobsIn(q);
      expect(hourly!.scheduleSlot).toEqual(at(13, 0));

      const { schedule, created } = await store.scheduleUpsert({
        spec: scheduleSpec(q, { cron: '30 * * * *' }),
        now: at(12, 11),
      });
      expect(created).toBe(false);
      expect(schedule).toMatchObject({ cron: '30 * * * *', nextSlotAt: at(12, 30), lastSlotAt: null });
      expect(await store.jobGet({ id: hourly!.id })).toBeNull();
      expect(await pendingSlots(q)).toEqual([at(12, 30)]);

      const [pending] = await jobsIn(q);
      const changed = await store.scheduleUpsert({
        spec: scheduleSpec(q, { cron: '30 * * * *', job: { kind: 'sched.tock', queue: q, payload: 2 } }),
        now: at(12, 12),
      });
      expect(changed.schedule.job).toMatchObject({ kind: 'sched.tock', payload: 2 });
      expect((await jobsIn(q)).map((job) => [job.id, job.kind])).toEqual([[pending!.id, 'sched.tick']]);
      await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: at(12, 30) });
      const next = (await jobsIn(q)).filter((job) => job.state === 'pending');
      expect(next.map((job) => [job.kind, job.payload, job.scheduleSlot])).toEqual([['sched.tock', 2, at(13, 30)]]);
    });

    it('deletes the schedule and its pending run; a running run finishes and plans nothing', async () => {
      const q = nextQueue();
      const input = scheduleSpec(q, { misfire: { policy: 'catch_up' } });
      await store.scheduleUpsert({ spec: input, now: at(12, 0, 30) });
      const [running] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: at(12, 1) });
      expect(await pendingSlots(q)).toEqual([at(12, 2)]);
      expect(await store.scheduleDelete({ id: input.id })).toBe(true);
      expect(await store.scheduleDelete({ id: input.id })).toBe(false);
      expect(await store.scheduleGet({ id: input.id })).toBeNull();
      expect((await jobsIn(q)).map((job) => job.state)).toEqual(['running']);
      // Its lease lapses; the re-claim hands the run out again and plans nothing.
      const again = await store.jobClaim({ owner: 'w2', limit: 5, leaseMs: LEASE_MS, queues: [q], now: at(12, 5) });
      expect(again.map((job) => job.id)).toEqual([running!.id]);
      expect(await pendingSlots(q)).toEqual([]);
    });
  });

  describe('scheduleList', () => {
    it('lists schedules by id with their next run times, filters by paused, and pages', async () => {
      await withFreshStore(async (fresh) => {
        const q = nextQueue();
        for (const id of ['b', 'a', 'c']) {
          await fresh.scheduleUpsert({
            spec: normalizeScheduleSpec({ id, cron: '*/5 * * * *', job: { kind: 'k', queue: q }, paused: id === 'c' }),
            now: at(12, 1),
          });
        }
        const all = await fresh.scheduleList({});
        expect(all.map((s) => [s.id, s.paused, s.nextRunAt])).toEqual([
          ['a', false, at(12, 5)],
          ['b', false, at(12, 5)],
          ['c', true, null],
        ]);
        expect((await fresh.scheduleList({ paused: true })).map((s) => s.id)).toEqual(['c']);
        expect((await fresh.scheduleList({ paused: false })).map((s) => s.id)).toEqual(['a', 'b']);
        expect((await fresh.scheduleList({ limit: 1 })).map((s) => s.id)).toEqual(['a']);
        expect((await fresh.scheduleList({ afterId: 'a', limit: 5 })).map((s) => s.id)).toEqual(['b', 'c']);
      });
    });
  });

  describe('scheduleRepair', () => {
    it('re-links a chain whose pending run was cancelled, applying the misfire policy to the gap', async () => {
      await withFreshStore(async (fresh) => {
        const skipQ = nextQueue();
        const onceQ = nextQueue();
        await fresh.scheduleUpsert({ spec: scheduleSpec(skipQ), now: at(12, 0, 30) });
        await fresh.scheduleUpsert({
          spec: scheduleSpec(onceQ, { misfire: { policy: 'run_once' } }),
          now: at(12, 0, 30),
        });
        expect(await fresh.scheduleRepair({ now: at(12, 0, 40) })).toBe(0);
        for (const q of [skipQ, onceQ]) {
          const [pending] = await jobsIn(q, fresh);
          expect(await fresh.jobCancel({ id: pending!.id, now: at(12, 0, 45) })).toBe('cancelled');
        }
        // Slots 12:02 … 12:05 pass with no job for either schedule.
        expect(await fresh.scheduleRepair({ now: at(12, 5, 30) })).toBe(2);
        expect(await pendingSlots(skipQ, fresh)).toEqual([at(12, 6)]);
        const once = (await jobsIn(onceQ, fresh)).filter((job) => job.state === 'pending');
        expect(once.map((job) => [job.scheduleSlot, job.runAt])).toEqual([
          [at(12, 5), at(12, 5)],
          [at(12, 6), at(12, 6)],
        ]);
        expect(await fresh.scheduleRepair({ now: at(12, 5, 31) })).toBe(0);
      });
    });
  });

  describe('bad input', () => {
    const cases: [string, Partial<ScheduleInput> | Record<string, unknown>][] = [
      ['cron', { cron: 'every day at nine' }],
      ['cron', { cron: '0 0 31 2 *' }],
      ['timeZone', { timeZone: 'Mars/Olympus_Mons' }],
      ['jitterMs', { jitterMs: -1 }],
      ['jitterMs', { jitterMs: Number.NaN }],
      ['id', { id: 'x'.repeat(201) }],
    ];

    it.each(cases)('refuses a bad %s with a ValidationError naming it, and stores nothing', async (field, bad) => {
      await withFreshStore(async (fresh) => {
        const q = nextQueue();
        const input = { id: `${q}.s`, cron: '* * * * *', job: { kind: 'k', queue: q }, ...bad };
        let refused: unknown;
        try {
          await fresh.scheduleUpsert({ spec: normalizeScheduleSpec(input) });
        } catch (error) {
          refused = error;
        }
        expect(refused).toBeInstanceOf(ValidationError);
        expect((refused as ValidationError).field).toBe(field);
        expect(await fresh.scheduleList({})).toEqual([]);
        expect(await jobsIn(q, fresh)).toEqual([]);
      });
    });

    it('re-checks a spec that skipped validation, naming the field and storing nothing', async () => {
      const q = nextQueue();
      const good = scheduleSpec(q);
      for (const [field, tampered] of [
        ['cron', { ...good, cron: 'nope' }],
        ['timeZone', { ...good, timeZone: 'Nowhere/Land' }],
        ['jitterMs', { ...good, jitterMs: -5 }],
        ['id', { ...good, id: 'y'.repeat(201) }],
      ] as const) {
        await expect(store.scheduleUpsert({ spec: tampered as ScheduleSpec })).rejects.toMatchObject({ field });
      }
      expect(await store.scheduleGet({ id: good.id })).toBeNull();
      expect(await jobsIn(q)).toEqual([]);
    });
  });

  describe('deadLetterRetry of a recurring run', () => {
    it('keeps its slot when free, and drops only the slot when another job holds it', async () => {
      const q = nextQueue();
      const input = scheduleSpec(q, { job: { kind: 'sched.tick', queue: q, maxAttempts: 1 } });
      await store.scheduleUpsert({ spec: input, now: at(12, 0, 30) });
      const park = async (now: Date): Promise<Job> => {
        const [run] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now });
        await store.jobFail({ id: run!.id, token: run!.token, error: thrown('broke'), decision: PARK, now });
        return run!;
      };
      const first = await park(at(12, 1));
      expect(await store.deadLetterRetry({ id: first.id, now: at(12, 1, 30) })).toMatchObject({
        scheduleId: input.id,
        scheduleSlot: at(12, 1),
      });
      const [revived] = await store.jobClaim({
        owner: 'w',
        limit: 1,
        leaseMs: LEASE_MS,
        queues: [q],
        now: at(12, 1, 30),
      });
      expect(revived!.id).toBe(first.id);
      expect(await store.jobComplete({ id: first.id, token: revived!.token, now: at(12, 1, 31) })).toBe('done');

      const second = await park(at(12, 2));
      // Another job takes the parked run's (schedule, slot) meanwhile.
      await store.jobSubmit({
        jobs: [
          {
            ...spec({ kind: 'sched.tick', queue: q, runAt: at(13, 0) }),
            scheduleId: input.id,
            scheduleSlot: at(12, 2),
          },
        ],
      });
      const retried = await store.deadLetterRetry({ id: second.id, now: at(12, 2, 30) });
      expect(retried).toMatchObject({ id: second.id, state: 'pending', scheduleId: input.id, scheduleSlot: null });
    });
  });

  describe('queuePause and queueResume', () => {
    it('skips a paused queue in claims and next-run-at, loses nothing, and claims it again after resume', async () => {
      const q = nextQueue();
      const other = nextQueue();
      const [a, b] = await store.jobSubmit({
        now: at(12, 0),
        jobs: [spec({ kind: 'k', queue: q, runAt: at(12, 0) }), spec({ kind: 'k', queue: q, runAt: at(12, 0) })],
      });
      const [running] = await store.jobClaim({ owner: 'w', limit: 1, leaseMs: LEASE_MS, queues: [q], now: at(12, 0) });
      expect(running!.id).toBe(a!.id);
      const paused = await store.queuePause({ name: q, now: at(12, 1) });
      expect(paused).toEqual({ name: q, paused: true, pausedAt: at(12, 1) });
      expect(await store.queuePause({ name: q, now: at(12, 2) })).toEqual(paused);
      await store.jobSubmit({ now: at(12, 1), jobs: [spec({ kind: 'k', queue: other, runAt: at(12, 0) })] });

      // The pending job and the lapsed lease both wait; another queue is unaffected.
      const later = at(12, 10);
      expect(await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q], now: later })).toEqual([]);
      expect(await store.jobNextRunAt({ queues: [q], now: later })).toBeNull();
      expect(
        (await store.jobClaim({ owner: 'w', limit: 10, leaseMs: LEASE_MS, queues: [q, other], now: later })).map(
          (j) => j.queue,
        ),
      ).toEqual([other]);
      const stats = await store.queueStats({ now: later });
      expect(stats.find((row) => row.queue === q)).toMatchObject({ paused: true, available: 2 });
      expect(stats.find((row) => row.queue === other)?.paused).toBeUndefined();
      expect(await store.queueList()).toContainEqual(paused);

      expect(await store.queueResume({ name: q, now: later })).toEqual({ name: q, paused: false, pausedAt: null });
      const claimed = await store.jobClaim({ owner: 'w2', limit: 10, leaseMs: LEASE_MS, queues: [q], now: later });
      expect(claimed.map((job) => job.id).sort()).toEqual([a!.id, b!.id].sort());
    });

    it('refuses a bad queue name with a ValidationError naming it', async () => {
      await expect(store.queuePause({ name: 'no spaces allowed' })).rejects.toBeInstanceOf(ValidationError);
      await expect(store.queuePause({ name: 'no spaces allowed' })).rejects.toMatchObject({ field: 'name' });
    });
  });
});
