/**
 * The raw-SQL reference: what a worker written directly against Docket's own tables with `pg` can
 * drain, with none of Docket's machinery (no worker registry, no wake-up listener, no lease
 * renewal, no retry policy, no lapsed-lease sweep, no recurring runs). Docket tuned ÷ this is the
 * share of the database's reachable speed that Docket's features cost.
 *
 * The store side is Docket's (same schema, migrated by Docket, rows inserted by `submitMany`), so
 * the table, its indexes and its rows are exactly the ones Docket drains. The worker:
 * - claims up to {@link CLAIM_LIMIT} due pending rows in one statement (`FOR UPDATE SKIP LOCKED`,
 *   in the pending index's order), setting state, lease, owner, token and attempts as Docket's
 *   claim does;
 * - runs them {@link SystemConfig.concurrency} at a time (the tuned systems' concurrency), claiming
 *   again once its buffer falls below half a claim, one claim in flight;
 * - finishes them in batches with a fenced update (id AND token AND owner AND state = 'running'),
 *   one batch in flight, and fails the run if any finish is refused;
 * - on stop, hands rows it claimed but never started back to pending.
 *
 * Its single submit is a submit path without group commit, beside Docket's in the single-submit
 * workload: one autocommitted `INSERT` of the row with a `pg_notify` in the same statement, from a
 * pool of {@link SUBMIT_POOL_SIZE} connections (a web app's pool), no batching, validation or
 * idempotency. The worker `LISTEN`s on that channel and claims at once on each notification instead
 * of waiting out its idle poll, so a job passes two commits (the insert's and the claim's) and a
 * notification between them; PostgreSQL serialises the commits of notifying transactions, which
 * is what this measures. Drains and spikes insert through Docket, which notifies on its own
 * channel, so they are measured as before.
 */
import pg from 'pg';
import { docketSystem } from './docket.js';
import { benchIndexOf, refuseKinds, type SystemModule } from './system.js';

/** Rows per claim: the tuned systems' local queue size. */
export const CLAIM_LIMIT = 500;
const SCHEMA = 'docket';
const QUEUE = 'default';
const KIND = 'bench.noop';
/** Wait before claiming again when a claim found nothing due. */
const IDLE_POLL_MS = 10;
const LEASE_SECONDS = 30;
/** The wake-up channel of the reference's own submits (Docket's submits notify Docket's channel). */
export const RAW_WAKE_CHANNEL = 'raw_sql_wake';
/** Connections the reference's single submits share: node-postgres's default pool size. */
export const SUBMIT_POOL_SIZE = 10;

/**
 * A single submit: one pending row due now, with the columns Docket's claim and listings need,
 * and the wake-up in the same statement so it is delivered only if the row commits.
 */
export const RAW_SUBMIT_SQL = `
  WITH inserted AS (
    INSERT INTO ${SCHEMA}.jobs (kind, queue, payload, state, run_at, max_attempts, retry_policy, created_at)
    VALUES ($1, $2, $3, 'pending', now(), 1, '{}'::jsonb, now())
    RETURNING id
  )
  SELECT pg_notify('${RAW_WAKE_CHANNEL}', '') FROM inserted`;

/** The claim: due pending rows of one queue and kind in index order, skipping rows another claimer holds. */
export const RAW_CLAIM_SQL = `
  WITH c AS (
    SELECT id FROM ${SCHEMA}.jobs
    WHERE state = 'pending' AND queue = $2 AND kind = $3 AND run_at <= now()
    ORDER BY priority, run_at, id
    LIMIT $4
    FOR UPDATE SKIP LOCKED
  )
  UPDATE ${SCHEMA}.jobs j
  SET state = 'running', lease_until = now() + interval '${LEASE_SECONDS} seconds', lease_owner = $1,
      token = j.token + 1, attempts = j.attempts + 1
  FROM c WHERE j.id = c.id
  RETURNING j.id, j.token, j.payload`;

/** The finish: done, fenced by each row's token and this worker as owner. */
export const RAW_FINISH_SQL = `
  UPDATE ${SCHEMA}.jobs j SET state = 'done', finished_at = now(), lease_until = NULL
  FROM unnest($1::bigint[], $2::int[]) AS f(id, token)
  WHERE j.id = f.id AND j.token = f.token AND j.lease_owner = $3 AND j.state = 'running'`;

/** The hand-back of claimed, never-started rows on stop (fenced the same way). */
const RAW_RELEASE_SQL = `
  UPDATE ${SCHEMA}.jobs j SET state = 'pending', lease_until = NULL, lease_owner = NULL
  FROM unnest($1::bigint[], $2::int[]) AS f(id, token)
  WHERE j.id = f.id AND j.token = f.token AND j.lease_owner = $3 AND j.state = 'running'`;

interface ClaimedRow {
  id: string;
  token: number;
  payload: unknown;
}

/** The raw-SQL reference behind the bench interface. */
export const rawSqlSystem: SystemModule = {
  name: 'raw-sql',
  variants: ['tuned'],

  describe(_variant, concurrency) {
    return `pg only, on Docket's schema: claim ${CLAIM_LIMIT} due rows per statement (FOR UPDATE SKIP LOCKED), run ${concurrency} at once, finish in batches with a fenced update (id, token, owner, state); no registry, renewal or retries; a single submit is one INSERT with its pg_notify (a pool of ${SUBMIT_POOL_SIZE}), and the worker claims on each notification`;
  },

  reset: async (config) => {
    refuseKinds(config, "its worker claims Docket's one bench kind");
    await docketSystem.reset(config);
  },
  async openStore(config) {
    const store = await docketSystem.openStore(config);
    const submitPool = new pg.Pool({ connectionString: config.databaseUrl, max: SUBMIT_POOL_SIZE });
    submitPool.on('error', () => {});
    return {
      ...store,
      async submitOne(i, key) {
        // No idempotency here (see the header): a key would be taken for a check never made.
        if (key !== undefined) throw new Error('the raw-SQL reference takes no caller keys');
        await submitPool.query(RAW_SUBMIT_SQL, [KIND, QUEUE, { i }]);
      },
      async submitOneAt() {
        // Its submit is one INSERT of a row due now (see the header); the store spread above is
        // Docket's, whose submitOneAt would measure Docket's submit instead of this reference's.
        throw new Error('the raw-SQL reference takes no run time on its single submit (DELAYED_SYSTEMS)');
      },
      async close() {
        await Promise.all([store.close(), submitPool.end()]);
      },
    };
  },
  destroy: (config) => docketSystem.destroy(config),

  async startWorker(config, onStart) {
    if (config.neighbour)
      throw new Error('the raw-SQL reference claims one queue and kind and cannot be a neighbour (NEIGHBOUR_SYSTEMS)');
    const pool = new pg.Pool({ connectionString: config.databaseUrl, max: 3 });
    pool.on('error', () => {});
    const owner = `raw-sql:${process.pid}`;
    const buffer: ClaimedRow[] = [];
    const finished: ClaimedRow[] = [];
    let running = 0;
    let stopping = false;
    let failure: Error | null = null;
    let claiming: Promise<void> | null = null;
    let finishing: Promise<void> | null = null;
    let wakeDispatch: (() => void) | null = null;
    // Wake-ups: a notification ends the idle wait at once, or (arriving while a claim is in
    // flight, which may have missed the new row) makes the loop claim again instead of waiting.
    let notified = false;
    let endIdleWait: (() => void) | null = null;
    const listener = new pg.Client({ connectionString: config.databaseUrl });
    listener.on('error', () => {});
    listener.on('notification', () => {
      notified = true;
      if (endIdleWait) endIdleWait();
      else dispatch();
    });
    await listener.connect();
    await listener.query(`LISTEN ${RAW_WAKE_CHANNEL}`);

    const fenced = async (sql: string, rows: ClaimedRow[], what: string) => {
      const result = await pool.query(sql, [rows.map((r) => r.id), rows.map((r) => r.token), owner]);
      if (result.rowCount !== rows.length) {
        throw new Error(`${what}: ${rows.length - (result.rowCount ?? 0)} of ${rows.length} fenced writes refused`);
      }
    };

    const flush = () => {
      if (finishing || finished.length === 0) return;
      const batch = finished.splice(0, finished.length);
      finishing = fenced(RAW_FINISH_SQL, batch, 'finish')
        .catch((error: Error) => {
          failure ??= error;
        })
        .finally(() => {
          finishing = null;
          flush();
          wakeDispatch?.();
        });
    };

    const dispatch = () => {
      while (!stopping && running < config.concurrency && buffer.length > 0) {
        const row = buffer.shift()!;
        running += 1;
        // A no-op handler, like every system's: report the start, then finish.
        Promise.resolve()
          .then(() => onStart(benchIndexOf(row.payload)))
          .then(
            () => finished.push(row),
            (error: Error) => {
              failure ??= error;
            },
          )
          .finally(() => {
            running -= 1;
            flush();
            dispatch();
          });
      }
      if (!stopping && !claiming && buffer.length < CLAIM_LIMIT / 2) claiming = claimLoop();
    };

    async function claimLoop(): Promise<void> {
      try {
        while (!stopping && buffer.length < CLAIM_LIMIT / 2) {
          notified = false;
          const { rows } = await pool.query<ClaimedRow>(RAW_CLAIM_SQL, [owner, QUEUE, KIND, CLAIM_LIMIT]);
          if (stopping) {
            if (rows.length > 0) await fenced(RAW_RELEASE_SQL, rows, 'release');
            break;
          }
          buffer.push(...rows);
          dispatch();
          if (rows.length === 0 && !notified) {
            await new Promise<void>((resolve) => {
              const timer = setTimeout(() => {
                endIdleWait = null;
                resolve();
              }, IDLE_POLL_MS);
              endIdleWait = () => {
                clearTimeout(timer);
                endIdleWait = null;
                resolve();
              };
            });
          }
        }
      } catch (error) {
        failure ??= error as Error;
      } finally {
        claiming = null;
      }
      if (!stopping) {
        // Errors end the loop; a later dispatch (or the idle restart below) starts it again.
        setTimeout(dispatch, failure ? 100 : 0);
      }
    }

    dispatch();
    return {
      async stop() {
        stopping = true;
        await claiming;
        while (running > 0 || finishing || finished.length > 0) {
          flush();
          await new Promise<void>((resolve) => {
            wakeDispatch = resolve;
            setTimeout(resolve, 5);
          });
        }
        const unstarted = buffer.splice(0, buffer.length);
        try {
          if (unstarted.length > 0) await fenced(RAW_RELEASE_SQL, unstarted, 'release');
        } finally {
          await Promise.all([pool.end(), listener.end().catch(() => {})]);
        }
        if (failure) throw failure;
      },
    };
  },
};
