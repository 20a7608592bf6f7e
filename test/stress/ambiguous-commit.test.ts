/**
 * Fault class 5, the ambiguous commit, reproduced exactly: a proxy lets a statement commit and
 * then cuts the connection before its answer arrives, and the caller retries. These are the
 * regression tests for what the chaos run found (see docs/reliability.md). The proxy fronts the
 * shared test server; only this file's own connections are cut.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket, SubmitUnconfirmedError, seededRandom } from '../../src/index.js';
import { DEFAULT_RETRY_POLICY, normalizeSubmit } from '../../src/job/job-spec.js';
import { openStore } from '../../src/store/open-store.js';
import type { Store } from '../../src/store/store.js';
import { SubmitBatcher } from '../../src/submit/submit-batcher.js';
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

/** A proxy in front of the test PostgreSQL server that can cut a connection after COMMIT, and the URL through it. */
async function commitCuttingProxy(): Promise<{ proxy: CommitCuttingProxy; url: string }> {
  const target = new URL(POSTGRES_URL);
  const proxy = new CommitCuttingProxy(target.hostname, Number(target.port || 5432));
  target.host = `127.0.0.1:${await proxy.listen()}`;
  return { proxy, url: target.toString() };
}

// A completion: the stored function (src/store/postgres/stored-statements.ts), or the statement
// that marks rows done, as a completion inside the caller's transaction still sends it.
const isCompletion = (sql: string) =>
  sql.includes("SET state = 'done'") || /\."complete_jobs_[0-9a-f]{12}"\(/.test(sql);

describe('ambiguous commits on PostgreSQL', () => {
  let db: TestDatabase;
  let proxy: CommitCuttingProxy;
  let viaProxy: Store;
  let direct: Store;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    direct = await db.open();
    let url: string;
    ({ proxy, url } = await commitCuttingProxy());
    viaProxy = await openStore(url, { schema: db.schema, poolSize: 1 });
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
    const cut = proxy.arm(isCompletion);
    await expect(viaProxy.jobComplete(lease)).rejects.toThrow();
    expect((await cut).failed).toBe(false);
    await viaProxy.jobComplete(lease);
    const job = await direct.jobGet({ id: lease.id });
    expect(job).toMatchObject({ state: 'done', token: lease.token, attempts: 1 });
  });

  // Completion is idempotent for the claim that made it, so the worker hears 'done', not 'stale'.
  it('answers done, not stale, to the retry of a complete that committed', async () => {
    const lease = await claimOne();
    const cut = proxy.arm(isCompletion);
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

  // Both claims are stored functions (src/store/postgres/stored-statements.ts): the one that
  // searches lapsed leases, and the one of pending jobs only that a busy worker sends between.
  it.each([
    { claim: 'searching lapsed leases (stored)', includeLapsed: true, queue: 'hidden-claim' },
    { claim: 'of pending jobs only (stored)', includeLapsed: false, queue: 'hidden-claim-pending' },
  ])(
    'counts one attempt for a hidden claim $claim and hands the job out again once that lease lapses',
    async ({ includeLapsed, queue }) => {
      const queues = [queue];
      const [submitted] = await direct.jobSubmit({ jobs: [spec(null, queue)] });
      const now = await direct.now();
      const cut = proxy.arm((sql) => /\."claim_(pending|searching)_[0-9a-f]{12}"\(/.test(sql));
      await expect(
        viaProxy.jobClaim({ owner: 'lost', limit: 1, leaseMs: 1000, now, queues, includeLapsed }),
      ).rejects.toThrow();
      expect((await cut).failed).toBe(false);
      // Nobody heard of that claim, so nobody runs the job until its lease lapses.
      const at = (ms: number) => new Date(now.getTime() + ms);
      const during = await direct.jobClaim({ owner: 'other', limit: 10, leaseMs: 1000, now: at(500), queues });
      expect(during).toEqual([]);
      const after = await direct.jobClaim({ owner: 'other', limit: 10, leaseMs: 1000, now: at(1001), queues });
      expect(after).toHaveLength(1);
      expect(after[0]).toMatchObject({ id: submitted?.id, token: 2, attempts: 2 });
    },
  );
});

/**
 * The library's side of the same fault (issue 13): `docket.submit()` itself retries a submit whose
 * connection dropped, under the job ids it reserved for that call, so the caller gets one id and
 * the database holds one job, or, once the retry window closes, one SubmitUnconfirmedError that
 * states the outcome.
 */
describe('submits through a connection cut after COMMIT', () => {
  let db: TestDatabase;
  let proxy: CommitCuttingProxy;
  let proxiedUrl: string;
  let docket: Docket;
  let direct: Store;

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    direct = await db.open();
    ({ proxy, url: proxiedUrl } = await commitCuttingProxy());
    docket = await Docket.open({ url: proxiedUrl, schema: db.schema, poolSize: 2, random: seededRandom(13) });
  });

  afterAll(async () => {
    await docket?.close();
    await direct?.close();
    await proxy?.close();
    await db?.drop();
  });

  // The keyed submit statement starts its insert so; the lean insert of unkeyed jobs is the stored
  // function (src/store/postgres/stored-statements.ts).
  const isSubmitInsert = (sql: string) =>
    /INSERT INTO \S+\.jobs \(id, kind/.test(sql) || /\."insert_jobs_[0-9a-f]{12}"\(/.test(sql);

  async function jobsOfKind(kind: string) {
    return direct.jobList({ kind, limit: 1000 });
  }

  it('resolves a single submit whose commit was hidden with its one job', async () => {
    const cut = proxy.arm(isSubmitInsert);
    const result = await docket.submit({ kind: 'hidden.single', payload: { n: 1 } });
    expect((await cut).failed).toBe(false);
    const jobs = await jobsOfKind('hidden.single');
    expect(jobs.map((j) => j.id)).toEqual([result.id]);
    expect(result.created).toBe(true);
    expect(jobs[0]?.runAt.getTime()).toBe(result.runAt.getTime());
  });

  it('resolves 100 concurrent submits whose shared flush was hidden, one job each', async () => {
    const cut = proxy.arm(isSubmitInsert);
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, n) => docket.submit({ kind: 'hidden.flush', payload: { n } })),
    );
    const hidden = await cut;
    expect(hidden.failed).toBe(false);
    const jobs = await jobsOfKind('hidden.flush');
    expect(jobs).toHaveLength(100);
    expect(new Set(results.map((r) => r.id))).toEqual(new Set(jobs.map((j) => j.id)));
    expect(results.every((r) => r.created)).toBe(true);
    for (const [n, result] of results.entries()) {
      expect(jobs.find((j) => j.id === result.id)?.payload).toEqual({ n });
    }
  });

  it('answers created for a keyed submit whose commit was hidden: the retry found its own row', async () => {
    const cut = proxy.arm(isSubmitInsert);
    const result = await docket.submit({ kind: 'hidden.keyed', payload: 'x', idempotencyKey: 'hidden-1' });
    await cut;
    expect(result.created).toBe(true);
    expect((await jobsOfKind('hidden.keyed')).map((j) => j.id)).toEqual([result.id]);
  });

  it('resolves a submitMany whose commit was hidden with each job once', async () => {
    const cut = proxy.arm(isSubmitInsert);
    const results = await docket.submitMany(
      Array.from({ length: 30 }, (_, n) => ({ kind: 'hidden.many', payload: n })),
    );
    await cut;
    expect((await jobsOfKind('hidden.many')).map((j) => j.id).sort()).toEqual(results.map((r) => r.id).sort());
  });

  /** A batcher on a store behind its own proxy, with a short retry window, so the bound is quick to reach. */
  async function shortWindowSubmitter(windowMs: number) {
    const own = new CommitCuttingProxy(new URL(POSTGRES_URL).hostname, Number(new URL(POSTGRES_URL).port || 5432));
    const target = new URL(POSTGRES_URL);
    target.host = `127.0.0.1:${await own.listen()}`;
    const store = await openStore(target.toString(), { schema: db.schema, poolSize: 1 });
    const retries: number[] = [];
    const batcher = new SubmitBatcher({
      store,
      random: seededRandom(5),
      retryWindowMs: windowMs,
      onRetry: ({ attempt }) => retries.push(attempt),
    });
    const submit = (payload: unknown) =>
      batcher.submit(normalizeSubmit({ kind: 'unconfirmed', payload }, seededRandom(1)));
    return { proxy: own, store, batcher, submit, retries };
  }

  it('fails with SubmitUnconfirmedError naming its job id once the window closes on a lost database', async () => {
    const windowMs = 1500;
    const { proxy: own, store, submit, retries } = await shortWindowSubmitter(windowMs);
    try {
      await submit('reserves a block of ids');
      await own.close();
      const startedAt = performance.now();
      const error = await submit('never confirmed').catch((e: unknown) => e);
      const tookMs = performance.now() - startedAt;
      expect(error).toBeInstanceOf(SubmitUnconfirmedError);
      const unconfirmed = error as SubmitUnconfirmedError;
      // Ids came from the block reserved by the first submit, so the send may have gone out.
      expect(unconfirmed.outcome).toBe('unknown');
      expect(unconfirmed.jobIds).toHaveLength(1);
      expect(unconfirmed.message).toContain(`job ${unconfirmed.jobIds[0]} may or may not have been written`);
      expect(retries.length).toBeGreaterThan(2);
      expect(tookMs).toBeLessThan(windowMs + 1000);
      expect(await direct.jobGet({ id: unconfirmed.jobIds[0]! })).toBeNull();
    } finally {
      await store.close();
    }
  });

  it("says nothing was written when the window closed before the submit's ids could be reserved", async () => {
    const { proxy: own, store, submit } = await shortWindowSubmitter(800);
    try {
      await own.close();
      const error = await submit('no ids').catch((e: unknown) => e);
      expect(error).toBeInstanceOf(SubmitUnconfirmedError);
      expect((error as SubmitUnconfirmedError).outcome).toBe('not_written');
      expect((error as SubmitUnconfirmedError).jobIds).toEqual([]);
      expect((error as SubmitUnconfirmedError).message).toContain('nothing was written');
    } finally {
      await store.close();
    }
  });
});
