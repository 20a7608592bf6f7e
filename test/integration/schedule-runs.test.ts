/**
 * Recurring schedules end to end, in one process on real stores: a running worker executes a
 * schedule's runs one per slot (the claim inserts each next run), and the worker's repair sweep
 * re-links a chain whose pending run an operator cancelled.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Docket, type Store, type WorkerOptions } from '../../src/index.js';
import { createTestDatabase, storeKinds, type TestDatabase } from '../support/stores.js';

// A lease no stall of a loaded CI machine (1-2 s) outlasts: these tests check each slot ran once,
// and with 2 s a stall could lapse a lease and the run be taken back and run again (at-least-once).
const QUICK: WorkerOptions = { leaseMs: 10_000, heartbeatIntervalMs: 1000, pollIntervalMs: 100, shutdownGraceMs: 500 };

describe.each(storeKinds())('recurring schedules with a worker on %s', (kind) => {
  let db: TestDatabase;
  const dockets: Docket[] = [];
  const stores: Store[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });
  afterEach(async () => {
    await Promise.all(dockets.splice(0).map((docket) => docket.close()));
    // A Docket does not close a store it was given.
    await Promise.all(stores.splice(0).map((store) => store.close()));
  });
  afterAll(async () => {
    await db?.drop();
  });

  async function open(options: { retentionMs?: number } = {}): Promise<Docket> {
    const store = await db.open();
    stores.push(store);
    const docket = await Docket.open({ store, ...options });
    dockets.push(docket);
    return docket;
  }

  it('runs an every-second schedule once per slot, each run planned by the previous claim', async () => {
    const docket = await open();
    const slots: string[] = [];
    docket.handle('tick', async (_payload, ctx) => {
      const job = await docket.getJob(ctx.jobId);
      slots.push(job?.scheduleSlot?.toISOString() ?? 'none');
    });
    // catch_up, so a claim delayed past the next slot on a busy machine still runs every slot.
    await docket.schedule({
      id: `every-second-${kind}`,
      cron: '* * * * * *',
      job: { kind: 'tick', queue: `tick-${kind}` },
      misfire: { policy: 'catch_up' },
    });
    await docket.worker({ ...QUICK, queues: [`tick-${kind}`] }).start();
    await expect.poll(() => slots.length, { timeout: 8000, interval: 50 }).toBeGreaterThanOrEqual(3);
    await docket.pauseSchedule(`every-second-${kind}`);
    // Runs already started when the pause landed finish; wait for them before reading the slots.
    await expect
      .poll(async () => (await docket.listJobs({ queue: `tick-${kind}`, states: ['running'] })).length, {
        timeout: 10_000,
      })
      .toBe(0);
    expect(new Set(slots).size).toBe(slots.length);
    const ms = slots.map((slot) => Date.parse(slot)).sort((a, b) => a - b);
    for (let i = 1; i < ms.length; i++) expect((ms[i] as number) - (ms[i - 1] as number)).toBe(1000);
  });

  it('runs every slot once with retentionMs 0, though each run is deleted as it completes', async () => {
    // No done row is left to block a slot planned twice (the slot index's ON CONFLICT): the
    // schedule's own progress must, and the repair sweep must not take a deleted run for a lost one.
    const docket = await open({ retentionMs: 0 });
    const queue = `lean-tick-${kind}`;
    const slots: string[] = [];
    docket.handle('lean.tick', async (_payload, ctx) => {
      const job = await docket.getJob(ctx.jobId);
      slots.push(job?.scheduleSlot?.toISOString() ?? 'none');
    });
    await docket.schedule({
      id: `lean-every-second-${kind}`,
      cron: '* * * * * *',
      job: { kind: 'lean.tick', queue },
      misfire: { policy: 'catch_up' },
    });
    const worker = docket.worker({ ...QUICK, queues: [queue] });
    await worker.start();
    // Long enough for the worker's first repair sweeps (within two seconds of its start) to run.
    await expect.poll(() => slots.length, { timeout: 10_000, interval: 50 }).toBeGreaterThanOrEqual(4);
    await docket.pauseSchedule(`lean-every-second-${kind}`);
    await expect
      .poll(async () => (await docket.listJobs({ queue, states: ['running'] })).length, { timeout: 10_000 })
      .toBe(0);
    await worker.stop();
    expect(slots).not.toContain('none');
    expect(new Set(slots).size).toBe(slots.length);
    const ms = slots.map((slot) => Date.parse(slot)).sort((a, b) => a - b);
    for (let i = 1; i < ms.length; i++) expect((ms[i] as number) - (ms[i - 1] as number)).toBe(1000);
    expect(await docket.listJobs({ queue, states: ['done'] })).toEqual([]);
  });

  it("re-links a cancelled chain from the worker's repair sweep", async () => {
    const docket = await open();
    const id = `cancelled-${kind}`;
    const { schedule } = await docket.schedule({
      id,
      cron: '0 0 1 1 *',
      job: { kind: 'yearly', queue: `yearly-${kind}` },
    });
    const [pending] = await docket.listJobs({ queue: `yearly-${kind}` });
    expect(await docket.cancelJob(pending!.id)).toBe('cancelled');
    // The first sweep comes within two seconds of the worker starting.
    docket.handle('yearly', async () => {});
    await docket.worker({ ...QUICK, queues: [`yearly-${kind}`] }).start();
    await expect
      .poll(async () => (await docket.listJobs({ queue: `yearly-${kind}`, states: ['pending'] })).length, {
        timeout: 15_000,
        interval: 100,
      })
      .toBe(1);
    const relinked = await docket.getSchedule(id);
    // Cancelling a run skips exactly that run: the chain continues with the following year.
    expect(relinked!.nextSlotAt!.getUTCFullYear()).toBe(schedule.nextSlotAt!.getUTCFullYear() + 1);
  });
});
