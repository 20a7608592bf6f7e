/**
 * Real processes, real faults: a worker killed with SIGKILL mid-job, and one frozen with SIGSTOP
 * past its lease. Both stores: SQLite processes share one file, PostgreSQL ones one schema.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { storeKinds } from '../support/stores.js';
import { type ChildWorker, stopChildWorker } from './support/child-worker.js';
import { useChildWorkers } from './support/suite-fixtures.js';

const LEASE_MS = 1500;

describe.each(storeKinds())('worker processes on %s', (kind) => {
  const processes = useChildWorkers(kind, 'docket-ledger-');

  function spawnWorker(id: string, ledger: string): Promise<ChildWorker> {
    return processes.spawn({ id, ledger, leaseMs: LEASE_MS, heartbeatIntervalMs: 500 });
  }

  function ledgerLines(ledger: string): string[] {
    try {
      return readFileSync(ledger, 'utf8').trim().split('\n').filter(Boolean);
    } catch {
      return [];
    }
  }

  async function spawnPair(prefix: string, ledger: string): Promise<[ChildWorker, ChildWorker]> {
    return Promise.all([spawnWorker(`${prefix}-1`, ledger), spawnWorker(`${prefix}-2`, ledger)]);
  }

  /** Submits one job to two idle workers and tells which one started it (the victim) and which did not. */
  async function submitToPair(
    pair: [ChildWorker, ChildWorker],
    ms: number,
  ): Promise<{ id: string; victim: ChildWorker; survivor: ChildWorker }> {
    const { id } = await processes.docket.submit({ kind: 'ledger.sleep', payload: { ms } });
    const started = await Promise.race(pair.map((child) => child.waitFor((e) => e.event === 'started' && e.id === id)));
    const [victim, survivor] = started.worker === pair[0].events[0]?.worker ? pair : [pair[1], pair[0]];
    return { id, victim, survivor };
  }

  it('finishes a job on another worker after the first is killed with SIGKILL mid-job', async () => {
    const { docket, dir } = processes;
    const ledger = join(dir, 'kill.ledger');
    const pair = await spawnPair('kill', ledger);
    const { id, victim, survivor } = await submitToPair(pair, 800);
    victim.process.kill('SIGKILL');
    await victim.exited;

    const completed = await survivor.waitFor((e) => e.event === 'completed' && e.id === id, 15_000);
    expect(completed.token).toBe(2);
    const job = await docket.getJob(id);
    expect(job?.state).toBe('done');
    expect(job?.attempts).toBe(2);
    expect(job?.errors.map((error) => error.kind)).toEqual(['lease_expired']);
    const v = victim.events[0]?.worker;
    const s = survivor.events[0]?.worker;
    // The victim may die between its 'started' event and its first ledger write; it never ends.
    const lines = ledgerLines(ledger);
    expect(lines.filter((line) => !line.startsWith(`${v} `))).toEqual([`${s} ${id} 2 start`, `${s} ${id} 2 end`]);
    expect(lines.filter((line) => line.startsWith(`${v} `) && line.endsWith(' end'))).toEqual([]);
  });

  it('refuses the heartbeat and completion of a worker frozen past its lease; the job is done once', async () => {
    const { docket, dir } = processes;
    const ledger = join(dir, 'stop.ledger');
    const pair = await spawnPair('stop', ledger);
    const { id, victim, survivor } = await submitToPair(pair, 800);
    victim.process.kill('SIGSTOP');
    await survivor.waitFor((e) => e.event === 'completed' && e.id === id, 15_000);
    victim.process.kill('SIGCONT');

    // Woken up, the frozen worker learns from the database that its lease is gone.
    const stale = await victim.waitFor((e) => e.event === 'stale' && e.id === id && e.token === 1);
    expect(['heartbeat', 'complete']).toContain(stale.operation);
    await Promise.all(pair.map((child) => stopChildWorker(child)));

    const events = [...victim.events, ...survivor.events];
    const accepted = events.filter((e) => e.event === 'completed' && e.id === id);
    expect(accepted).toEqual([expect.objectContaining({ worker: survivor.events[0]?.worker, token: 2 })]);
    const job = await docket.getJob(id);
    expect(job?.state).toBe('done');
    expect(job?.token).toBe(2);
    // Both handlers ran (at-least-once): the fencing token, not luck, kept the stale result out.
    const v = victim.events[0]?.worker;
    const s = survivor.events[0]?.worker;
    // (The frozen one may have been stopped between its 'started' event and its first ledger write.)
    expect(
      ledgerLines(ledger)
        .filter((line) => line.endsWith('start'))
        .sort((x, y) => x.split(' ')[2]!.localeCompare(y.split(' ')[2]!)),
    ).toEqual([`${v} ${id} 1 start`, `${s} ${id} 2 start`]);
  });
});
