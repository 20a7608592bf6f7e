/**
 * The handlers module both `docket work` processes of the partition test load (`--handlers`).
 * The process's role comes from DOCKET_PARTITION_ROLE:
 *
 * - `partitioned` (the worker inside the network namespace): `partition.long` behaves like a real
 *   handler doing its work inside its own transaction: it writes its effect row (uncommitted, so
 *   it holds that row's lock) and keeps working in that transaction (a statement every 250 ms)
 *   for as long as the job takes, until its signal aborts.
 *   Then, like a careless handler that does not give up, it waits until the database answers again
 *   and tries to deliver its result anyway: the same effect row and `ctx.completeInTransaction`,
 *   which must be refused (StaleLeaseError), so the transaction rolls back.
 * - `peer` (the worker in the root namespace): `partition.long` writes the effect row and
 *   completes the job in the same transaction at once. The insert waits on the partitioned
 *   handler's row lock until PostgreSQL ends that session, so a completed takeover proves it did.
 *
 * `partition.after` (either role) records which worker ran it: after the partition heals, the
 * partitioned worker must run it, proving it recovered without a restart.
 *
 * Every step is appended as one JSON line to DOCKET_PARTITION_MARKS (host epoch ms in `at`; both
 * processes share this machine's clock), which is how the test measures the time to abort.
 */
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { JobContext } from '../../src/index.js';

/** One line of the marks file. */
export interface PartitionMark {
  /** What happened: start, in_transaction, aborted, reconnected, stale_refused, stale_accepted, completed, after. */
  e: string;
  role: string;
  jobId: string;
  token: number;
  /** Host epoch ms. */
  at: number;
  reason?: string;
  code?: string;
  message?: string;
}

function setting(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`partition handlers: ${name} is not set`);
  return value;
}

const role = setting('DOCKET_PARTITION_ROLE');
const marksFile = setting('DOCKET_PARTITION_MARKS');
/** The handler's own connection (not Docket's pool): a user's transaction, as PostgreSQL sees it. */
const appUrl = setting('DOCKET_PARTITION_APP_URL');
/** Schema-qualified table of effect rows, one per job (primary key job_id). */
const effectsTable = setting('DOCKET_PARTITION_EFFECTS_TABLE');

// The test holds this process's stdin open; when the test process dies without its cleanup (a
// kill -9, a crashed vitest) the pipe closes, and this worker goes too instead of living on to
// claim jobs from the next run's cluster. unref: the pipe must not keep a stopped worker alive.
process.stdin.once('close', () => process.exit(70));
process.stdin.resume();
(process.stdin as { unref?: () => void }).unref?.();

function mark(e: string, ctx: JobContext, extra: Partial<PartitionMark> = {}): void {
  const line: PartitionMark = { e, role, jobId: ctx.jobId, token: ctx.token, at: Date.now(), ...extra };
  appendFileSync(marksFile, `${JSON.stringify(line)}\n`);
}

/** A connected client of the handler's own; its 'error' is handled so a dropped session cannot crash the process. */
async function connect(connectTimeoutMs: number): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: appUrl,
    application_name: `partition-handler-${role}`,
    connectionTimeoutMillis: connectTimeoutMs,
    keepAlive: true,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return client;
  } catch (error) {
    await client.end().catch(() => {});
    throw error;
  }
}

function aborted(signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

/** Drops a client whose server may be unreachable: `end()` would wait for an answer that never comes. */
function abandon(client: pg.Client): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

async function insertEffect(client: pg.Client, ctx: JobContext): Promise<void> {
  await client.query(`INSERT INTO ${effectsTable} (job_id, role, token) VALUES ($1, $2, $3)`, [
    ctx.jobId,
    role,
    ctx.token,
  ]);
}

async function partitionedLong(ctx: JobContext): Promise<void> {
  const first = await connect(5000);
  await first.query('BEGIN');
  await insertEffect(first, ctx);
  mark('in_transaction', ctx);
  // The job's work: a statement in the transaction every 250 ms, so the transaction is never idle
  // for long (idle_in_transaction_session_timeout) until the partition stops its statements.
  while (!ctx.signal.aborted) {
    try {
      await Promise.race([first.query('SELECT pg_sleep(0)'), aborted(ctx.signal)]);
    } catch {
      break; // the session was ended; nothing more to do in it
    }
    await Promise.race([sleep(250), aborted(ctx.signal)]);
  }
  await aborted(ctx.signal);
  const reason = (ctx.signal.reason as { reason?: string } | undefined)?.reason;
  mark('aborted', ctx, { reason });
  abandon(first);
  // The careless part: keep trying to deliver the result until the database answers again.
  let client: pg.Client | undefined;
  while (!client) {
    try {
      client = await connect(1000);
    } catch {
      await sleep(200);
    }
  }
  mark('reconnected', ctx);
  try {
    await client.query('BEGIN');
    await client.query(
      `INSERT INTO ${effectsTable} (job_id, role, token) VALUES ($1, $2, $3) ON CONFLICT (job_id) DO NOTHING`,
      [ctx.jobId, role, ctx.token],
    );
    try {
      await ctx.completeInTransaction(client);
      await client.query('COMMIT');
      mark('stale_accepted', ctx);
    } catch (error) {
      await client.query('ROLLBACK');
      const { code, message } = error as { code?: string; message?: string };
      mark('stale_refused', ctx, { code, message });
    }
  } finally {
    await client.end().catch(() => {});
  }
}

async function peerLong(ctx: JobContext): Promise<void> {
  const client = await connect(5000);
  try {
    await client.query('BEGIN');
    // Waits here while the partitioned handler's uncommitted row still holds the key.
    await insertEffect(client, ctx);
    await ctx.completeInTransaction(client);
    await client.query('COMMIT');
    mark('completed', ctx);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    await client.end().catch(() => {});
  }
}

export default {
  'partition.long': async (_payload: unknown, ctx: JobContext) => {
    mark('start', ctx);
    if (role === 'partitioned') await partitionedLong(ctx);
    else await peerLong(ctx);
  },
  'partition.after': (_payload: unknown, ctx: JobContext) => {
    mark('after', ctx);
  },
};
