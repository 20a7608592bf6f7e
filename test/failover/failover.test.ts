/**
 * Failover, on real parts: a Patroni cluster (etcd, two PostgreSQL 15 nodes, leader plus
 * synchronous replica, ttl 10) behind HAProxy, and plain PostgreSQL 15 clusters for the
 * asynchronous case. Ports 5440-5446 and 8440-8441, etcd 23790/23800; never 5432.
 *
 * (a) and (b) run the chaos harness (test/stress/chaos-run.ts) with a fixed failover plan: real
 * worker processes and a producer connect through HAProxy, one-off and recurring jobs flow, and
 * the nemesis does exactly one thing, a `kill -9` of the leader's postmaster and Patroni (a) or a
 * planned `patronictl switchover --force` (b). The chaos checker then holds the run to its
 * invariants: 0 acknowledged submits lost, 0 jobs finished twice, 0 stale results accepted, no
 * early claim, one run per recurring slot, 0 worker exits; and work must resume on the new
 * leader, the kill-to-first-claim time under 15 s (Patroni's ttl of 10 s bounds it).
 *
 * (c) is the case synchronous replication exists to prevent, run on purpose with asynchronous
 * replication: a standby stops streaming, a worker claims jobs on the primary, the primary dies
 * and the standby is promoted without those claims. The promoted standby hands the same jobs out
 * again with the very same token numbers, to another worker. The first worker's writes must all
 * be refused; they are, because every fenced write also names the claim's own random owner.
 *
 * Figures are printed; the whole file takes about three minutes.
 */
import { execFile } from 'node:child_process';
import { chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Docket } from '../../src/docket.js';
import type { ClaimedJob } from '../../src/job/job.js';
import type { JobContext } from '../../src/worker/job-handler.js';
import { formatFailovers, formatFigures } from '../stress/chaos-figures.js';
import { type ChaosResult, DEFAULT_CHAOS_OPTIONS, runChaos } from '../stress/chaos-run.js';
import { canQuery, PATRONI_TTL_S, PatroniCluster, waitFor } from './patroni-cluster.js';

const execFileAsync = promisify(execFile);
const SEED = Number(process.env.DOCKET_FAILOVER_SEED ?? 13);
const log = (line: string) => console.log(line);

/** The target: with ttl 10, work resumes within 15 s of the kill. */
const KILL_TO_CLAIM_TARGET_MS = 15_000;

function expectClean(result: ChaosResult): void {
  const f = result.figures;
  const context = `seed ${result.options.seed}: ${JSON.stringify({ ...f, recurring: undefined })}\n${result.violations.slice(0, 20).join('\n')}`;
  expect(result.violations, context).toEqual([]);
  expect(result.drained, context).toBe(true);
  expect(f.jobsLost, context).toBe(0);
  expect(f.jobsFinishedTwice, context).toBe(0);
  expect(f.staleResultsAccepted, context).toBe(0);
  expect(f.jobsStartedEarly, context).toBe(0);
  expect(f.recurring.duplicateSlots, context).toBe(0);
  expect(result.unexpectedWorkerExits, context).toBe(0);
  expect(f.jobsSubmitted, context).toBeGreaterThan(300);
  expect(result.failovers, context).toHaveLength(1);
}

/** A short chaos run whose only fault is one failover `atMs` into the fault phase. */
function runWithOneFailover(cluster: PatroniCluster, action: 'leaderKill' | 'switchover'): Promise<ChaosResult> {
  return runChaos({
    ...DEFAULT_CHAOS_OPTIONS,
    store: 'postgres',
    seed: SEED,
    // Long enough for the failover (about ttl) and a stretch of load on the new leader after it.
    faultMs: action === 'leaderKill' ? 32_000 : 20_000,
    drainTimeoutMs: 60_000,
    workers: 3,
    concurrency: 8,
    jobsPerSecond: 30,
    recoverySlackMs: 3000,
    failover: { cluster, plan: [{ action, atMs: 5000 }] },
    log,
  });
}

describe('failover on a Patroni cluster behind HAProxy (synchronous replication)', () => {
  let cluster: PatroniCluster | undefined;

  beforeAll(async () => {
    cluster = await PatroniCluster.start(log);
  }, 420_000);

  afterAll(async () => {
    await cluster?.stop();
  }, 60_000);

  it('loses nothing acknowledged and resumes on the new leader within 15 s when the leader is killed -9', async () => {
    const result = await runWithOneFailover(cluster as PatroniCluster, 'leaderKill');
    log(`failover (a) leader kill, seed ${SEED}, ttl ${PATRONI_TTL_S} s:\n${formatFigures(result)}`);
    expectClean(result);
    const [kill] = result.failovers;
    expect(kill?.action).toBe('leaderKill');
    expect(kill?.to).not.toBe(kill?.from);
    // Work resumed on the new leader, and soon enough.
    expect(kill?.firstClaimAfterMs, formatFailovers(result).join('\n')).not.toBeNull();
    expect(kill?.firstClaimAfterMs as number, formatFailovers(result).join('\n')).toBeLessThan(KILL_TO_CLAIM_TARGET_MS);
  }, 240_000);

  it('loses nothing acknowledged through a planned patronictl switchover under load', async () => {
    const result = await runWithOneFailover(cluster as PatroniCluster, 'switchover');
    log(`failover (b) switchover, seed ${SEED}:\n${formatFigures(result)}`);
    expectClean(result);
    const [switchover] = result.failovers;
    expect(switchover?.action).toBe('switchover');
    expect(switchover?.firstClaimAfterMs, formatFailovers(result).join('\n')).not.toBeNull();
  }, 240_000);
});

// ---- (c): asynchronous replication and a lost WAL tail ----

const PRIMARY_PORT = 5445;
const STANDBY_PORT = 5446;
const PG_BIN = '/usr/lib/postgresql/15/bin';

interface PlainCluster {
  dataDir: string;
  logFile: string;
  /** Its own socket directory, outside the data directory (pg_basebackup would copy a lock file there). */
  socketDir: string;
}

function postgresIds(): { uid: number; gid: number } {
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((row) => row.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  return { uid: Number(uid), gid: Number(gid) };
}

/** Runs a PostgreSQL binary as `postgres` (PostgreSQL refuses root). */
async function asPostgres(binary: string, args: string[]): Promise<string> {
  const { uid, gid } = postgresIds();
  const { stdout } = await execFileAsync(join(PG_BIN, binary), args, {
    uid,
    gid,
    // A folder the postgres user can enter: the checkout may not be one (see PatroniCluster).
    cwd: tmpdir(),
    encoding: 'utf8',
    timeout: 60_000,
    env: { PATH: `${PG_BIN}:/usr/bin:/bin`, LANG: 'C.UTF-8', LC_ALL: 'C.UTF-8', HOME: '/var/lib/postgresql' },
  });
  return stdout;
}

async function startPlain(cluster: PlainCluster, port: number): Promise<void> {
  // Asynchronous: no synchronous_standby_names, so a commit does not wait for the standby.
  // Each cluster has its own socket directory: the killed primary's socket lock file names a pid
  // that may linger as a zombie here (no init reaps it), which would refuse the promoted standby
  // the same socket path.
  const options = `-p ${port} -k ${cluster.socketDir} -c listen_addresses=127.0.0.1 -c wal_level=replica -c max_wal_senders=5`;
  await asPostgres('pg_ctl', ['-D', cluster.dataDir, '-l', cluster.logFile, '-o', options, '-w', 'start']);
}

function killPostmaster(cluster: PlainCluster): void {
  try {
    const pid = Number(readFileSync(join(cluster.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    if (pid > 0) process.kill(pid, 'SIGKILL');
  } catch {
    // Not running.
  }
}

async function portFree(port: number): Promise<boolean> {
  const { stdout } = await execFileAsync('ss', ['-Htln', `sport = :${port}`], { encoding: 'utf8' });
  return stdout.trim() === '';
}

async function scalar<T>(url: string, sql: string, params: unknown[] = []): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 2000 });
  client.on('error', () => {});
  await client.connect();
  try {
    const result = await client.query(sql, params);
    return Object.values(result.rows[0] ?? {})[0] as T;
  } finally {
    await client.end().catch(() => {});
  }
}

/** A promise with its resolve function, for handlers the test releases when it is ready. */
function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

describe('fencing after a promoted asynchronous standby lost the last claims (lost WAL tail)', () => {
  const JOBS = 4;
  let dir = '';
  const primary: PlainCluster = { dataDir: '', logFile: '', socketDir: '' };
  const standby: PlainCluster = { dataDir: '', logFile: '', socketDir: '' };
  const dockets: Docket[] = [];

  beforeAll(async () => {
    for (const port of [PRIMARY_PORT, STANDBY_PORT]) {
      if (!(await portFree(port))) throw new Error(`port ${port} is in use (a previous run left PostgreSQL behind?)`);
    }
    dir = mkdtempSync(join(tmpdir(), 'docket-lost-wal-'));
    const { uid, gid } = postgresIds();
    chownSync(dir, uid, gid);
    for (const [cluster, name] of [
      [primary, 'primary'],
      [standby, 'standby'],
    ] as const) {
      Object.assign(cluster, {
        dataDir: join(dir, name),
        logFile: join(dir, `${name}.log`),
        socketDir: join(dir, `${name}-socket`),
      });
      mkdirSync(cluster.socketDir);
      chownSync(cluster.socketDir, uid, gid);
    }
    await asPostgres('initdb', ['-D', primary.dataDir, '-U', 'postgres', '--auth=trust']);
    await startPlain(primary, PRIMARY_PORT);
    await asPostgres('pg_basebackup', [
      '-h',
      '127.0.0.1',
      '-p',
      String(PRIMARY_PORT),
      '-U',
      'postgres',
      '-D',
      standby.dataDir,
      '-R',
      '-X',
      'stream',
    ]);
    await startPlain(standby, STANDBY_PORT);
  }, 120_000);

  afterAll(async () => {
    for (const docket of dockets) await docket.close().catch(() => {});
    killPostmaster(primary);
    killPostmaster(standby);
    if (dir && process.env.DOCKET_FAILOVER_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it('refuses every write of the first claim once the promoted standby re-issued its token to another owner', async () => {
    const url = `postgres://postgres@127.0.0.1:${PRIMARY_PORT}/postgres?schema=lost_wal`;
    const first = await Docket.open({ url, poolSize: 4 });
    dockets.push(first);
    const submitted = await first.submitMany(
      Array.from({ length: JOBS }, (_, i) => ({ kind: 'fence.lostwal', payload: { i } })),
    );
    const ids = submitted.map((s) => s.id);

    // The standby has the jobs (pending, token 0), then stops streaming: it will lag from here on.
    const lsn = await scalar<string>(url, 'SELECT pg_current_wal_lsn()::text');
    const standbyUrl = `postgres://postgres@127.0.0.1:${STANDBY_PORT}/postgres`;
    await waitFor('the standby to replay the submits', 30_000, async () =>
      scalar<boolean>(standbyUrl, 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn', [lsn]),
    );
    await asPostgres('pg_ctl', ['-D', standby.dataDir, '-m', 'fast', '-w', 'stop']);

    // Worker A claims every job on the primary; the standby never sees these claims.
    const claimedByA = new Map<string, ClaimedJob>();
    const lostByA: string[] = [];
    const completedByA: string[] = [];
    const aHandlersRelease = gate();
    const aAllStarted = gate();
    first.events.on('claimed', ({ job }) => {
      claimedByA.set(job.id, job);
      if (claimedByA.size === JOBS) aAllStarted.open();
    });
    first.events.on('leaseLost', ({ job }) => lostByA.push(job.id));
    first.events.on('completed', ({ job }) => completedByA.push(job.id));
    first.handle('fence.lostwal', async () => {
      // A slow handler: still running when the database fails over under it.
      await aHandlersRelease.promise;
    });
    // A long lease, so worker A still holds its leases, and keeps heartbeating, after the failover.
    const workerA = first.worker({ id: 'worker-a', concurrency: JOBS, leaseMs: 30_000, heartbeatIntervalMs: 1000 });
    await workerA.start();
    await aAllStarted.promise;
    const tokensOnOldPrimary = [...claimedByA.values()].map((job) => job.token);
    expect(tokensOnOldPrimary).toEqual(ids.map(() => 1));

    // The primary dies; the lagging standby is promoted on the primary's address. Worker A's pool
    // reconnects to it, where its claims never happened.
    const failedAt = Date.now();
    killPostmaster(primary);
    await waitFor('the primary port to close', 20_000, () => portFree(PRIMARY_PORT));
    await startPlain(standby, PRIMARY_PORT);
    await asPostgres('pg_ctl', ['-D', standby.dataDir, '-w', 'promote']);
    await waitFor('the promoted standby to accept writes', 30_000, async () => {
      if (!(await canQuery(`postgres://postgres@127.0.0.1:${PRIMARY_PORT}/postgres`))) return false;
      return !(await scalar<boolean>(url, 'SELECT pg_is_in_recovery()'));
    });
    const promotedAfterMs = Date.now() - failedAt;
    for (const id of ids) expect(await first.getJob(id)).toMatchObject({ state: 'pending', token: 0 });

    // Worker B claims the same jobs on the promoted standby: the same token numbers again.
    const second = await Docket.open({ url, poolSize: 4 });
    dockets.push(second);
    const claimedByB = new Map<string, ClaimedJob>();
    const bAllStarted = gate();
    const bHandlersRelease = gate();
    const contexts: JobContext[] = [];
    second.events.on('claimed', ({ job }) => {
      claimedByB.set(job.id, job);
      if (claimedByB.size === JOBS) bAllStarted.open();
    });
    second.handle('fence.lostwal', async (_payload, ctx) => {
      contexts.push(ctx);
      await bHandlersRelease.promise;
    });
    const workerB = second.worker({ id: 'worker-b', concurrency: JOBS, leaseMs: 30_000, heartbeatIntervalMs: 1000 });
    await workerB.start();
    await bAllStarted.promise;
    let reissued = 0;
    for (const [id, job] of claimedByB) {
      const old = claimedByA.get(id) as ClaimedJob;
      if (job.token === old.token) reissued += 1;
      expect(job.leaseOwner).not.toBe(old.leaseOwner);
    }
    // The scenario really happened: every token number was handed out a second time.
    expect(reissued).toBe(JOBS);

    // Worker A's own heartbeats reach the new primary and are refused: its handlers are aborted.
    await waitFor('worker A to lose every lease', 20_000, async () => lostByA.length === JOBS);

    // Each of A's writes, with its exact lease (id, token, owner), changes nothing.
    let refused = 0;
    for (const old of claimedByA.values()) {
      const lease = { id: old.id, token: old.token, leaseOwner: old.leaseOwner };
      const answers = [
        (await first.store.jobHeartbeat({ ...lease, leaseMs: 30_000 })) === null,
        (await first.store.jobComplete(lease)) === 'stale',
        (
          await first.store.jobFail({
            ...lease,
            error: { message: 'late', kind: 'thrown' },
            decision: { kind: 'park' },
          })
        ).outcome === 'stale',
        (await first.store.jobRelease(lease)) === 'stale',
      ];
      refused += answers.filter(Boolean).length;
      expect(answers).toEqual([true, true, true, true]);
      const row = await first.getJob(old.id);
      expect(row).toMatchObject({ state: 'running', token: old.token, leaseOwner: claimedByB.get(old.id)?.leaseOwner });
    }
    // Why the owner is needed: the same write fenced by the token alone finds a match.
    const any = claimedByA.values().next().value as ClaimedJob;
    const tokenOnly = await first.store.jobHeartbeat({ id: any.id, token: any.token, leaseMs: 30_000 });
    expect(tokenOnly).not.toBeNull();

    // A's handlers finish late: their completions were withdrawn with the leases, none accepted.
    aHandlersRelease.open();
    bHandlersRelease.open();
    await waitFor('worker B to complete every job', 20_000, async () => {
      const rows = await Promise.all(ids.map((id) => second.getJob(id)));
      return rows.every((row) => row?.state === 'done');
    });
    await workerA.stop();
    await workerB.stop();
    expect(completedByA).toEqual([]);
    for (const id of ids) {
      expect(await second.getJob(id)).toMatchObject({ state: 'done', leaseOwner: claimedByB.get(id)?.leaseOwner });
    }
    expect(contexts).toHaveLength(JOBS);
    log(
      [
        'failover (c) asynchronous standby promoted without the last claims:',
        `  claims the promoted standby never saw   ${JOBS}`,
        `  promoted after the primary's kill       ${promotedAfterMs} ms`,
        `  token numbers re-issued to another owner ${reissued} of ${JOBS}`,
        `  old owner's writes refused              ${refused} of ${JOBS * 4} (heartbeat, complete, fail, release) + ${lostByA.length} worker heartbeats`,
        `  a token-only write would be accepted    ${tokenOnly !== null}`,
        `  old owner's completions accepted        ${completedByA.length} (must be 0)`,
      ].join('\n'),
    );
  }, 120_000);
});
