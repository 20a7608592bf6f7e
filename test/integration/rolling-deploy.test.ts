/**
 * A rolling deploy with real processes on both stores (issue 10): "old" worker processes that have
 * no handler for kind B and "new" ones that do share one database while B jobs are submitted.
 * Every B job completes, none is parked, none runs on an old worker. The live worker registry
 * lists each process and forgets one killed with SIGKILL once its ttl passes.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { WorkerRecord } from '../../src/index.js';
import { storeKinds } from '../support/stores.js';
import { type ChildWorker, stopChildWorker } from './support/child-worker.js';
import { eventually, useChildWorkers } from './support/suite-fixtures.js';

const KIND_A = 'deploy.a';
const KIND_B = 'deploy.b';
// Long enough that a killed worker's record is still listed when read just after the kill, on a
// loaded machine where a read can stall 1-2 s (with 1.5 s it could already have expired).
const REGISTRY_TTL_MS = 5000;

describe.each(storeKinds())('rolling deploy across processes on %s', (kind) => {
  const processes = useChildWorkers(kind, 'docket-deploy-');

  function spawn(id: string, kinds: string[], ledger: string): Promise<ChildWorker> {
    return processes.spawn({
      id,
      ledger,
      kinds,
      // A lease no stall of a loaded CI machine (1-2 s) outlasts: the first test counts attempts,
      // and with 3 s a stall could lapse a lease and another worker run the job again (attempt 2).
      leaseMs: 10_000,
      heartbeatIntervalMs: 1000,
      pollIntervalMs: 100,
      concurrency: 4,
      registryTtlMs: REGISTRY_TTL_MS,
    });
  }

  /** Worker id of every `start` line in the ledger, by job id. */
  function startsByJob(ledger: string): Map<string, string[]> {
    const starts = new Map<string, string[]>();
    let text = '';
    try {
      text = readFileSync(ledger, 'utf8');
    } catch {
      return starts;
    }
    for (const line of text.trim().split('\n')) {
      const [worker, jobId, , what] = line.split(' ');
      if (what !== 'start' || !worker || !jobId) continue;
      starts.set(jobId, [...(starts.get(jobId) ?? []), worker]);
    }
    return starts;
  }

  it('every kind-B job completes on a new-version worker while old ones run; none parked', async () => {
    const { docket, dir } = processes;
    const ledger = join(dir, 'deploy.ledger');
    const old = await Promise.all([spawn('old-1', [KIND_A], ledger), spawn('old-2', [KIND_A], ledger)]);

    // Phase 1: only old workers are up. A jobs run; B jobs wait, visibly unhandled.
    const firstB = await docket.submitMany(
      Array.from({ length: 10 }, (_, i) => ({ kind: KIND_B, payload: { ms: 5, i }, maxAttempts: 2 })),
    );
    const firstA = await docket.submitMany(Array.from({ length: 10 }, () => ({ kind: KIND_A, payload: { ms: 5 } })));
    await eventually(
      () => Promise.all(firstA.map((r) => docket.getJob(r.id))),
      (jobs) => jobs.every((job) => job?.state === 'done'),
      20_000,
      'the A jobs on old workers',
    );
    expect(await docket.unhandledJobs()).toContainEqual({ queue: 'default', kind: KIND_B, count: firstB.length });
    expect((await docket.queueStats()).find((s) => s.queue === 'default')?.unhandled).toBe(firstB.length);

    // Phase 2: the deploy. New workers come up while B (and A) jobs keep arriving; then old ones go.
    const fresh = [await spawn('new-1', [KIND_A, KIND_B], ledger)];
    const moreB = await docket.submitMany(
      Array.from({ length: 10 }, (_, i) => ({ kind: KIND_B, payload: { ms: 5, i }, maxAttempts: 2 })),
    );
    fresh.push(await spawn('new-2', [KIND_A, KIND_B], ledger));
    await stopChildWorker(old[0]!);
    const lastB = await docket.submitMany(
      Array.from({ length: 10 }, (_, i) => ({ kind: KIND_B, payload: { ms: 5, i }, maxAttempts: 2 })),
    );
    await docket.submitMany(Array.from({ length: 5 }, () => ({ kind: KIND_A, payload: { ms: 5 } })));
    await stopChildWorker(old[1]!);

    const allB = [...firstB, ...moreB, ...lastB].map((r) => r.id);
    const jobs = await eventually(
      () => Promise.all(allB.map((id) => docket.getJob(id))),
      (list) => list.every((job) => job?.state === 'done'),
      30_000,
      'every B job done',
    );
    expect(jobs.every((job) => job?.attempts === 1 && job.errors.length === 0)).toBe(true);
    expect(await docket.listDeadLetters({ kind: KIND_B })).toEqual([]);

    const starts = startsByJob(ledger);
    for (const id of allB) {
      const ranOn = starts.get(id) ?? [];
      expect(ranOn.length, `job ${id} ran on ${ranOn.join(', ')}`).toBeGreaterThan(0);
      expect(ranOn.every((worker) => worker.startsWith('new-'))).toBe(true);
    }
    // Old workers were never told about a B job either (no failed or parked event for any job).
    for (const child of [...old, ...fresh]) {
      expect(child.events.filter((e) => e.event === 'failed' || e.event === 'parked')).toEqual([]);
    }
    expect((await docket.unhandledJobs()).filter((entry) => entry.kind === KIND_B)).toEqual([]);
  });

  it('the registry lists live worker processes and expires one killed with SIGKILL', async () => {
    const { docket, dir } = processes;
    const ledger = join(dir, 'registry.ledger');
    const victim = await spawn('reg-victim', [KIND_A], ledger);
    const survivor = await spawn('reg-survivor', [KIND_A, KIND_B], ledger);
    const byId = (workers: WorkerRecord[], id: string) => workers.find((w) => w.id === id);

    const listed = await docket.listWorkers();
    expect(byId(listed, 'reg-victim')).toMatchObject({
      pid: victim.process.pid,
      kinds: [KIND_A],
      queues: null,
      concurrency: 4,
      origin: 'local',
    });
    expect(byId(listed, 'reg-survivor')?.kinds).toEqual([KIND_A, KIND_B]);
    const firstExpiry = byId(listed, 'reg-victim')!.expiresAt.getTime();

    // Alive and refreshing: still listed past its first record's expiry.
    await eventually(
      () => docket.listWorkers(),
      (workers) => (byId(workers, 'reg-victim')?.lastSeenAt.getTime() ?? 0) > firstExpiry,
      REGISTRY_TTL_MS + 10_000,
      'a refresh past the first expiry',
    );

    victim.process.kill('SIGKILL');
    await victim.exited;
    // A killed process deregisters nothing: its record outlives it until the ttl runs out.
    const justAfter = byId(await docket.listWorkers(), 'reg-victim');
    expect(justAfter).toBeDefined();
    const after = await eventually(
      () => docket.listWorkers(),
      (workers) => byId(workers, 'reg-victim') === undefined,
      REGISTRY_TTL_MS + 5_000,
      'the killed worker expiring',
    );
    expect(byId(after, 'reg-survivor')).toBeDefined();
    expect(byId(after, 'reg-survivor')!.expiresAt.getTime()).toBeGreaterThan(justAfter!.expiresAt.getTime());

    // A graceful stop deregisters at once.
    await stopChildWorker(survivor);
    expect(byId(await docket.listWorkers(), 'reg-survivor')).toBeUndefined();
  });
});
