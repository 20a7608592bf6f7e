/**
 * Fault class 5, the ambiguous commit, reproduced exactly: a proxy lets a statement commit and
 * then cuts the connection before its answer arrives, and the caller retries. These are the
 * regression tests for what the chaos run found (see docs/reliability.md). The proxy fronts the
 * shared test server; only this file's own connections are cut.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { createTestDatabase, POSTGRES_URL, type TestDatabase } from '../support/stores.js';
import { CommitCuttingProxy } from './commit-cutting-proxy.js';

const spec = (idempotencyKey: string | null = null, queue = 'default') => ({
  kind: 'ambiguous',
  queue,
  payloadJson: 'null',
  priority: 0,
  runAt: null,
  delayMs: 0,
  maxAttempts: 5,
  retryPolicy: DEFAULT_RETRY_POLICY,
  timeoutMs: null,
  idempotencyKey,
  scheduleId: null,
  scheduleSlot: null,
});

describe('ambiguous commits on PostgreSQL', () => {
  let db: TestDatabase;
  let proxy: CommitCuttingProxy;
  let viaProxy: Store;
  let direct: Store;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    direct = await db.open();
    const target = new URL(POSTGRES_URL);
    proxy = new CommitCuttingProxy(target.hostname, Number(target.port || 5432));
    const port = await proxy.listen();
    target.host = `127.0.0.1:${port}`;
    viaProxy = await openStore(target.toString(), { schema: db.schema, poolSize: 1 });
  });

  afterAll(async () => {
    await viaProxy?.close();
    await direct?.close();
    await proxy?.close();
    await db?.drop();
  });

  async function claimOne(): Promise<{ id: string; token: number }> {
    const [job] = await direct.jobSubmit({ jobs: [spec()] });
    const claimed = await direct.jobClaim({ owner: 'ambiguous', limit: 1, leaseMs: 30_000 });
    const mine = claimed.find((c) => c.id === job?.id);
    if (!mine) throw new Error('claim returned nothing');
    return { id: mine.id, token: mine.token };
  }

  it('leaves a job done once, with no extra attempt, when a hidden complete is retried', async () => {
    const lease = await claimOne();
    const cut = proxy.arm((sql) => sql.includes("SET state = 'done'"));
    await expect(viaProxy.jobComplete(lease)).rejects.toThrow();
    expect((await cut).failed).toBe(false);
    await viaProxy.jobComplete(lease);
    const job = await direct.jobGet({ id: lease.id });
    expect(job).toMatchObject({ state: 'done', token: lease.token, attempts: 1 });
  });

  // Completion is idempotent for the claim that made it, so the worker hears 'done', not 'stale'.
  it('answers done, not stale, to the retry of a complete that committed', async () => {
    const lease = await claimOne();
    const cut = proxy.arm((sql) => sql.includes("SET state = 'done'"));
    await expect(viaProxy.jobComplete(lease)).rejects.toThrow();
    await cut;
    expect(await viaProxy.jobComplete(lease)).toBe('done');
  });

  it('returns the same job, writing nothing, when a hidden submit with an idempotency key is retried', async () => {
    const cut = proxy.arm((sql) => sql.includes('INSERT INTO'));
    await expect(viaProxy.jobSubmit({ jobs: [spec('ambiguous-submit-1')] })).rejects.toThrow();
    expect((await cut).failed).toBe(false);
    const [retried] = await viaProxy.jobSubmit({ jobs: [spec('ambiguous-submit-1')] });
    expect(retried?.created).toBe(false);
    const jobs = await direct.jobList({ kind: 'ambiguous' });
    expect(jobs.filter((j) => j.idempotencyKey === 'ambiguous-submit-1')).toHaveLength(1);
    expect(jobs.find((j) => j.idempotencyKey === 'ambiguous-submit-1')?.id).toBe(retried?.id);
  });

  it('counts one attempt for a hidden claim and hands the job out again once that lease lapses', async () => {
    const queues = ['hidden-claim'];
    const [submitted] = await direct.jobSubmit({ jobs: [spec(null, 'hidden-claim')] });
    const now = await direct.now();
    const cut = proxy.arm((sql) => sql.includes('token = j.token + 1'));
    await expect(viaProxy.jobClaim({ owner: 'lost', limit: 1, leaseMs: 1000, now, queues })).rejects.toThrow();
    expect((await cut).failed).toBe(false);
    // Nobody heard of that claim, so nobody runs the job until its lease lapses.
    const at = (ms: number) => new Date(now.getTime() + ms);
    const during = await direct.jobClaim({ owner: 'other', limit: 10, leaseMs: 1000, now: at(500), queues });
    expect(during).toEqual([]);
    const after = await direct.jobClaim({ owner: 'other', limit: 10, leaseMs: 1000, now: at(1001), queues });
    expect(after).toHaveLength(1);
    expect(after[0]).toMatchObject({ id: submitted?.id, token: 2, attempts: 2 });
  });
});
