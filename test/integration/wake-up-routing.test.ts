/**
 * Wake-ups name their jobs' queue and kind (decision 0025): a submit wakes the workers that claim
 * its queue and kind, and no other. Before, every NOTIFY woke every listening process, and each
 * sent a claim that could find nothing: the workers of other services sharing the database each
 * claimed once per submit. Real dockets on one database (PostgreSQL: their own pools and LISTEN
 * connections; SQLite: their own connections to one file, each store watching the others'
 * submits); the idle workers poll once a minute, so any claim past their first was a wake-up.
 */
import { describe, expect, it } from 'vitest';
import type { Docket } from '../../src/index.js';
import { countCalls } from '../support/store-calls.js';
import { storeKinds } from '../support/stores.js';
import { eventually, useInProcessDockets } from './support/suite-fixtures.js';

/**
 * Resolves once job `id` is done: within 15 s, room for a loaded machine's stalls and still far
 * under the minute-long poll that would start a job no wake-up reached.
 */
function done(docket: Docket, id: string, what: string) {
  return eventually(
    () => docket.getJob(id),
    (job) => job?.state === 'done',
    15_000,
    what,
  );
}

describe.each(storeKinds())('wake-ups on %s', (kind) => {
  const { open } = useInProcessDockets(kind, 'wake-up routing');

  it('wakes only the workers that claim the queue and kind a submit names', async () => {
    const SLOW_POLL = { pollIntervalMs: 60_000 };
    const sender = await open();
    const emails = await open();
    emails.handle('wr.send', async () => {});
    await emails.worker({ ...SLOW_POLL, queues: ['wr.emails'] }).start();
    // Another service's worker (another kind), and the same kind's worker of another queue.
    const reports = await open();
    reports.handle('wr.report', async () => {});
    const reportsClaims = countCalls(reports.store, 'jobClaim');
    await reports.worker({ ...SLOW_POLL, queues: ['wr.emails'] }).start();
    const otherQueue = await open();
    otherQueue.handle('wr.send', async () => {});
    const otherQueueClaims = countCalls(otherQueue.store, 'jobClaim');
    await otherQueue.worker({ ...SLOW_POLL, queues: ['wr.other'] }).start();
    // Each worker's first claim goes out just after start: count from after it.
    for (const counter of [reportsClaims, otherQueueClaims])
      await eventually(
        async () => counter.count,
        (claims) => claims >= 1,
        10_000,
        'first claim',
      );
    // Then until no claim has gone out for 300 ms (a start-up claim a stall delayed would otherwise
    // count against the wake-ups below); at most 10 s, after which the counts below judge.
    for (let quiet = 0, last = -1, round = 0; quiet < 3 && round < 100; round += 1) {
      const now = reportsClaims.count + otherQueueClaims.count;
      quiet = now === last ? quiet + 1 : 0;
      last = now;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const atStart = { reports: reportsClaims.count, otherQueue: otherQueueClaims.count };

    for (let i = 0; i < 20; i += 1) {
      const { id } = await sender.submit({ kind: 'wr.send', queue: 'wr.emails' });
      // Each job is started by its own wake-up: the emails worker polls once a minute.
      await done(sender, id, `send job ${i}`);
    }
    expect(reportsClaims.count - atStart.reports, "the reports worker's claims for 20 emails").toBe(0);
    expect(otherQueueClaims.count - atStart.otherQueue, "the other queue's worker's claims").toBe(0);

    // A job of its own kind still wakes the reports worker at once.
    const { id } = await sender.submit({ kind: 'wr.report', queue: 'wr.emails' });
    await done(sender, id, 'report job');
    expect(reportsClaims.count - atStart.reports).toBeGreaterThanOrEqual(1);
  });
});
