/**
 * RELIABILITY.md fault class 3: a handler that blocks the event loop for longer than the heartbeat
 * interval. With heartbeats at a third of the lease, one missed beat still leaves a margin: the job
 * keeps its lease, completes once, and no other worker is handed it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/index.js';
import { createTestDatabase, storeKinds, type TestDatabase } from '../support/stores.js';

/** Blocks the event loop: no timer, heartbeat or I/O callback runs until it returns. */
function blockEventLoop(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Busy-wait on purpose: this is the handler misbehaving.
  }
}

describe.each(storeKinds())('a handler blocking the event loop on %s', (kind) => {
  let db: TestDatabase;

  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('keeps its lease through a block longer than the heartbeat interval, and completes once', async () => {
    const docket = await Docket.open({ url: db.url });
    const rival = await Docket.open({ url: db.url });
    try {
      // Scaled so the lease outlasts the block by more than a loaded CI machine's stall (1-2 s):
      // with a 3 s lease and a 1.6 s block, a stall of 1.4 s lapsed the lease and the rival ran it.
      const leaseMs = 6000;
      const heartbeatIntervalMs = 2000;
      const runs: number[] = [];
      const handler = (_payload: unknown, ctx: { token: number }) => {
        runs.push(ctx.token);
        // 1.6 heartbeat intervals without a single beat, but well inside the lease.
        blockEventLoop(3200);
      };
      docket.handle('blocking', handler);
      rival.handle('blocking', handler);
      const leaseLost: string[] = [];
      docket.events.on('leaseLost', (event) => leaseLost.push(event.job.id));
      const { id } = await docket.submit({ kind: 'blocking' });
      const worker = docket.worker({ leaseMs, heartbeatIntervalMs, pollIntervalMs: 100 });
      await worker.start();
      await expect.poll(() => runs.length, { timeout: 10_000 }).toBe(1);
      // A rival polls throughout; it must never be handed the job while the lease holds.
      const rivalWorker = rival.worker({ leaseMs, heartbeatIntervalMs, pollIntervalMs: 50 });
      await rivalWorker.start();
      await expect.poll(async () => (await docket.getJob(id))?.state, { timeout: 10_000 }).toBe('done');
      await rivalWorker.stop();
      await worker.stop();
      expect(runs).toEqual([1]);
      expect(leaseLost).toEqual([]);
      expect(await docket.getJob(id)).toMatchObject({ state: 'done', token: 1, attempts: 1 });
    } finally {
      await rival.close();
      await docket.close();
    }
  });
});
