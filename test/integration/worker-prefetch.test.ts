/**
 * Prefetch: a worker claims up to concurrency + prefetch jobs and holds the extra ones leased in a
 * local buffer. Buffered jobs are heartbeated like running ones, start as slots free, and go back
 * to the queue at once when the worker stops.
 */
import { describe, expect, it } from 'vitest';
import { ConfigurationError, type Docket, type WorkerOptions } from '../../src/index.js';
import { storeKinds } from '../support/stores.js';
import { deferred, within } from './support/deferred.js';
import { withStallProofLease } from './support/stall-proof-lease.js';
import { useInProcessDockets } from './support/suite-fixtures.js';

const QUICK: WorkerOptions = { leaseMs: 600, heartbeatIntervalMs: 200, pollIntervalMs: 100, shutdownGraceMs: 500 };
/** QUICK for the tests that count runs but are not about leases. */
const LONG_LEASE = withStallProofLease(QUICK);

/**
 * Queues `total` jobs of `kind` on `docket` with a handler that counts each job's runs; answers
 * the counts and the check that every job ran exactly once.
 */
async function queueCountedJobs(
  docket: Docket,
  kind: string,
  total: number,
): Promise<{ runs: Map<number, number>; expectEachRanOnce: () => void }> {
  const runs = new Map<number, number>();
  docket.handle<{ i: number }>(kind, async (payload) => {
    runs.set(payload.i, (runs.get(payload.i) ?? 0) + 1);
  });
  await docket.submitMany(Array.from({ length: total }, (_, i) => ({ kind, payload: { i } })));
  const expectEachRanOnce = () => {
    expect(runs.size).toBe(total);
    expect([...runs.values()].every((count) => count === 1)).toBe(true);
  };
  return { runs, expectEachRanOnce };
}

describe.each(storeKinds())('worker prefetch on %s', (kind) => {
  const dockets = useInProcessDockets(kind, 'worker-prefetch');
  const { open } = dockets;

  it('refuses a negative or fractional prefetch, or a word other than auto', async () => {
    const docket = await open();
    expect(() => docket.worker({ prefetch: -1 })).toThrow(ConfigurationError);
    expect(() => docket.worker({ prefetch: 1.5 })).toThrow(/prefetch/);
    expect(() => docket.worker({ prefetch: 'max' as never })).toThrow(
      /prefetch must be an integer or 'auto', got "max"/,
    );
    expect(docket.worker({ concurrency: 4, prefetch: 6 }).options.claimBatchSize).toBe(10);
    // 'auto' may buffer up to two claims' worth (1,000) but claims the slots plus 500 at a time,
    // so on a deep backlog a second claim fits in flight beside the first; a store in this
    // process (SQLite) runs claims one after another on this thread, so one claim takes the whole
    // room, and completions go 1,000 at a time (decision 0016).
    const auto = docket.worker({ concurrency: 24 }).options;
    const inProcess = docket.store.capabilities.inProcess;
    expect(inProcess).toBe(kind === 'sqlite');
    expect([
      auto.prefetchAuto,
      auto.prefetch,
      auto.claimBatchSize,
      auto.maxConcurrentClaims,
      auto.completionBatchSize,
    ]).toEqual([true, 1000, inProcess ? 1000 : 524, 2, inProcess ? 1000 : 500]);
  });

  it('with room for two claims, keeps the next one in flight while the last one is leased, and runs each once', async () => {
    const docket = await open();
    const total = 4000;
    const { expectEachRanOnce } = await queueCountedJobs(docket, 'prefetch.pipelined', total);
    // What 'auto' is at its ceiling: room for the slots plus 1,000, claims of the slots plus 500.
    const store = docket.store;
    const claim = store.jobClaim.bind(store);
    let inFlight = 0;
    let mostInFlight = 0;
    let largestClaim = 0;
    store.jobClaim = async (params) => {
      inFlight += 1;
      mostInFlight = Math.max(mostInFlight, inFlight);
      largestClaim = Math.max(largestClaim, params.limit);
      try {
        return await claim(params);
      } finally {
        inFlight -= 1;
      }
    };
    const worker = docket.worker({ ...LONG_LEASE, concurrency: 4, prefetch: 1000, claimBatchSize: 504 });
    await worker.start();
    await expect.poll(() => worker.stats.completed, { timeout: 30_000, interval: 50 }).toBe(total);
    await worker.stop();
    expect(mostInFlight).toBe(2);
    expect(largestClaim).toBe(504);
    expectEachRanOnce();
  });

  it('by default, on a deep backlog, claims the slots plus 500 at a time (PostgreSQL) or the whole room at once (SQLite), and runs each once', async () => {
    const docket = await open();
    const total = 6000;
    const { expectEachRanOnce } = await queueCountedJobs(docket, 'prefetch.default-claims', total);
    const store = docket.store;
    const claim = store.jobClaim.bind(store);
    const completeMany = store.jobCompleteMany.bind(store);
    let largestClaim = 0;
    let largestCompletion = 0;
    store.jobClaim = async (params) => {
      const claimed = await claim(params);
      largestClaim = Math.max(largestClaim, claimed.length);
      return claimed;
    };
    store.jobCompleteMany = async (params) => {
      largestCompletion = Math.max(largestCompletion, params.leases.length);
      return completeMany(params);
    };
    const worker = docket.worker({ ...LONG_LEASE, concurrency: 24 });
    await worker.start();
    await expect.poll(() => worker.stats.completed, { timeout: 30_000, interval: 50 }).toBe(total);
    await worker.stop();
    const inProcess = store.capabilities.inProcess;
    // The buffer grows with the observed rate, so a claim reaches its bound once the rate is known.
    expect(largestClaim).toBe(inProcess ? 1000 : 524);
    expect(largestCompletion).toBeLessThanOrEqual(inProcess ? 1000 : 500);
    expectEachRanOnce();
  });

  it('claims nothing more while its completions wait unwritten, then finishes every job once', async () => {
    // A slot is freed when its handler settles, before its completion is written: without a bound
    // the worker ran every queued job while the completions piled up behind (182,000 at once on a
    // million-job drain, each leased and heartbeated until written).
    const docket = await open();
    const total = 4000;
    const { runs, expectEachRanOnce } = await queueCountedJobs(docket, 'prefetch.unwritten', total);
    const store = docket.store;
    const completeMany = store.jobCompleteMany.bind(store);
    const gate = deferred<void>();
    store.jobCompleteMany = async (params) => {
      await gate.promise;
      return completeMany(params);
    };
    // Bound at these options: max(4 batches of 10, 4 x concurrency + 1,000) = 1,016 unwritten.
    const worker = docket.worker({ ...QUICK, leaseMs: 10_000, concurrency: 4, prefetch: 100, completionBatchSize: 10 });
    await worker.start();
    await expect.poll(() => runs.size, { timeout: 10_000, interval: 20 }).toBeGreaterThan(1016);
    // Past the bound, at most the claim that was in flight still runs; give the loops time to go on.
    await new Promise((resolve) => setTimeout(resolve, 4 * QUICK.pollIntervalMs!));
    expect(runs.size).toBeLessThanOrEqual(1016 + 104);
    gate.resolve();
    await expect.poll(() => worker.stats.completed, { timeout: 30_000, interval: 50 }).toBe(total);
    await worker.stop();
    expectEachRanOnce();
  });

  it('leases prefetched jobs ahead of free slots, keeps their leases alive and runs each once', async () => {
    const docket = await open();
    const gate = deferred<void>();
    const starts = new Map<number, number>();
    docket.handle<{ i: number }>('prefetch.block', async (payload) => {
      starts.set(payload.i, (starts.get(payload.i) ?? 0) + 1);
      if (payload.i === 0) await gate.promise;
    });
    const lost: unknown[] = [];
    docket.events.on('leaseLost', (event) => lost.push(event));
    const first = await docket.submit({ kind: 'prefetch.block', payload: { i: 0 }, priority: -1 });
    const rest = await docket.submitMany(
      Array.from({ length: 4 }, (_, k) => ({ kind: 'prefetch.block', payload: { i: k + 1 } })),
    );
    // The lease is the subject here (only heartbeats keep buffered jobs), so it stays short, but
    // with room for a loaded machine's stall (1-2 s) between heartbeats: 600 ms left none.
    const leaseMs = 3000;
    const worker = docket.worker({ ...QUICK, leaseMs, heartbeatIntervalMs: 500, concurrency: 1, prefetch: 4 });
    await worker.start();
    await expect.poll(() => worker.bufferedCount, { timeout: 10_000 }).toBe(4);
    const leased = await Promise.all(rest.map((job) => docket.getJob(job.id)));
    for (const job of leased) expect(job?.state).toBe('running');
    const firstLeaseUntil = Math.max(...leased.map((job) => job!.leaseUntil!.getTime()));
    // Held past the lease it was claimed with: only heartbeats keep the buffered jobs ours.
    await expect
      .poll(
        async () => {
          const jobs = await Promise.all(rest.map((job) => docket.getJob(job.id)));
          return Math.min(...jobs.map((job) => job?.leaseUntil?.getTime() ?? 0));
        },
        { timeout: 15_000, interval: 50 },
      )
      .toBeGreaterThan(firstLeaseUntil + leaseMs);
    expect(starts.get(1)).toBeUndefined();
    gate.resolve();
    await expect.poll(() => worker.stats.completed, { timeout: 10_000 }).toBe(5);
    expect([...starts.entries()].sort((a, b) => a[0] - b[0])).toEqual([0, 1, 2, 3, 4].map((i) => [i, 1]));
    expect(lost).toEqual([]);
    expect((await docket.getJob(first.id))?.state).toBe('done');
    await worker.stop();
  });

  it('releases prefetched jobs at once on stop, attempts uncounted, for another worker to run', async () => {
    const docket = await open();
    const gate = deferred<void>();
    const blocking = deferred<void>();
    const ranBy = new Map<number, string[]>();
    docket.handle<{ i: number }>('prefetch.release', async (payload, ctx) => {
      ranBy.set(payload.i, [...(ranBy.get(payload.i) ?? []), ctx.jobId]);
      if (payload.i === 0) {
        blocking.resolve();
        await gate.promise;
      }
    });
    await docket.submit({ kind: 'prefetch.release', payload: { i: 0 }, priority: -1 });
    const rest = await docket.submitMany(
      Array.from({ length: 3 }, (_, k) => ({ kind: 'prefetch.release', payload: { i: k + 1 } })),
    );
    // A grace period far past the poll below, so "released before it ends" holds with room for a
    // loaded machine's stalls; the stop still ends as soon as the gate opens.
    const first = docket.worker({ ...LONG_LEASE, concurrency: 1, prefetch: 3, shutdownGraceMs: 30_000 });
    await first.start();
    await within(blocking.promise, 10_000, 'the blocking job');
    await expect.poll(() => first.bufferedCount, { timeout: 10_000 }).toBe(3);
    const stopping = first.stop();
    // Released before the grace period ends: the running handler still blocks the stop.
    await expect
      .poll(async () => (await Promise.all(rest.map((job) => docket.getJob(job.id)))).map((job) => job?.state), {
        timeout: 10_000,
        interval: 20,
      })
      .toEqual(['pending', 'pending', 'pending']);
    for (const job of await Promise.all(rest.map((j) => docket.getJob(j.id)))) expect(job?.attempts).toBe(0);
    gate.resolve();
    await stopping;
    expect(first.stats.released).toBe(3);
    expect(first.bufferedCount).toBe(0);
    const second = docket.worker({ ...LONG_LEASE, concurrency: 2, prefetch: 2 });
    await second.start();
    await expect.poll(() => second.stats.completed, { timeout: 10_000 }).toBe(3);
    await second.stop();
    expect([...ranBy.keys()].sort()).toEqual([0, 1, 2, 3]);
    for (const ids of ranBy.values()) expect(ids).toHaveLength(1);
  });

  it('drops a prefetched job whose lease is lost and never starts it', async () => {
    const docket = await open();
    const gate = deferred<void>();
    const started: number[] = [];
    docket.handle<{ i: number }>('prefetch.cancel', async (payload) => {
      started.push(payload.i);
      if (payload.i === 0) await gate.promise;
    });
    await docket.submit({ kind: 'prefetch.cancel', payload: { i: 0 }, priority: -1 });
    const victim = await docket.submit({ kind: 'prefetch.cancel', payload: { i: 1 } });
    // The lease is lost by the cancel, not by lapsing: a lease no stall outlasts, so the blocking
    // job is not taken back and run again; heartbeats stay at 200 ms to hear the refusal soon.
    const worker = docket.worker({ ...QUICK, leaseMs: 10_000, concurrency: 1, prefetch: 1 });
    const lost = deferred<void>();
    docket.events.on('leaseLost', (event) => {
      if (event.job.id === victim.id) lost.resolve();
    });
    await worker.start();
    await expect.poll(() => worker.bufferedCount, { timeout: 10_000 }).toBe(1);
    expect(await docket.cancelJob(victim.id)).toBe('cancelled');
    await within(lost.promise, 10_000, 'the lease loss of the cancelled buffered job');
    expect(worker.bufferedCount).toBe(0);
    gate.resolve();
    await expect.poll(() => worker.stats.completed, { timeout: 10_000 }).toBe(1);
    await worker.stop();
    expect(started).toEqual([0]);
  });

  it('by default (auto) buffers ahead on a deep backlog of quick jobs, and runs each once', async () => {
    const docket = await open();
    const total = 3000;
    const { expectEachRanOnce } = await queueCountedJobs(docket, 'prefetch.auto', total);
    const worker = docket.worker({ ...LONG_LEASE, concurrency: 4 });
    expect(worker.options.prefetchAuto).toBe(true);
    let mostBuffered = 0;
    docket.events.on('started', () => {
      mostBuffered = Math.max(mostBuffered, worker.bufferedCount);
    });
    await worker.start();
    await expect.poll(() => worker.stats.completed, { timeout: 30_000, interval: 50 }).toBe(total);
    await worker.stop();
    // Claims of 4 (the free slots) would never buffer anything: the backlog made the buffer grow.
    expect(mostBuffered).toBeGreaterThan(4);
    expectEachRanOnce();
  });

  it('by default (auto) holds no buffer for slow handlers: other workers can take the rest', async () => {
    const docket = await open();
    docket.handle('prefetch.slow', async () => {
      await new Promise((resolve) => setTimeout(resolve, 700));
    });
    await docket.submitMany(Array.from({ length: 8 }, (_, i) => ({ kind: 'prefetch.slow', payload: { i } })));
    // Handlers of 700 ms outlast QUICK's 600 ms lease; a long one, so no stall has them run twice.
    const worker = docket.worker({ ...LONG_LEASE, concurrency: 2 });
    // What the worker holds beyond its slots, sampled between ticks (a claim's batch passes through
    // the buffer within one synchronous call, which a sampler never sees). The database's count of
    // running rows is no measure: a finished job stays running there until its batched completion
    // commits, while its slot already took the next job.
    let mostBuffered = 0;
    const sampler = setInterval(() => {
      mostBuffered = Math.max(mostBuffered, worker.bufferedCount);
    }, 5);
    try {
      await worker.start();
      await expect.poll(() => worker.stats.completed, { timeout: 20_000, interval: 50 }).toBe(8);
    } finally {
      clearInterval(sampler);
      await worker.stop();
    }
    // Under three jobs a second finish here: a buffered job would wait longer than the window.
    expect(mostBuffered).toBe(0);
  });
});
