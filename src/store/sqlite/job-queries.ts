/**
 * Every SQL statement SqliteStore runs, one place per entity, each headed by its purpose,
 * parameters and result, and by how it differs from its PostgreSQL twin.
 *
 * Conventions: instants are INTEGER epoch milliseconds; `:now` is the transaction's instant,
 * read once per transaction by {@link DATABASE_NOW} after the write lock is held (or pinned by the
 * caller), so every comparison in one transaction sees the same time. PostgreSQL's twin writes
 * `coalesce($now, now())` inline instead; `now()` there is also fixed for the transaction.
 * Writes run inside `BEGIN IMMEDIATE` (SqliteStore does that), which makes each transaction
 * serial: SQLite has one writer per file, so there is no SKIP LOCKED and none is needed.
 */

/** Live states: the jobs a claim may hand out once due. Spelt out in SQL so partial indexes match. */
const LIVE = `state IN ('pending', 'running')`;

/** True unless the row's queue is paused (a probe of the tiny queues table). */
const NOT_PAUSED = `queue NOT IN (SELECT name FROM queues WHERE paused = 1)`;

/** Columns both tables share, in one order, for moving rows between them. */
const COMMON_COLUMNS = `id, kind, queue, payload, priority, run_at, lease_owner, token, attempts, max_attempts,
  retry_policy, idempotency_key, timeout_ms, schedule_id, schedule_slot, created_at`;

/**
 * The database clock.
 * Parameters: none. Result: one INTEGER, epoch milliseconds.
 * PostgreSQL: `now()`; here the host clock that every process on the file shares.
 */
export const DATABASE_NOW = `SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)`;

/**
 * Finds a live job holding an idempotency key (submit answers it instead of inserting).
 * Parameters: :key. Result: { id, run_at } of the oldest live holder, or nothing.
 * PostgreSQL: a unique partial index plus ON CONFLICT does this in the insert; here the IMMEDIATE
 * transaction already serialises submits, so a lookup before the insert is race-free.
 */
export const JOB_FIND_LIVE_BY_KEY = `
  SELECT id, run_at FROM jobs
  WHERE idempotency_key = :key AND ${LIVE}
  ORDER BY id LIMIT 1`;

/**
 * Inserts one submitted job as pending.
 * Parameters: the spec's columns, :run_at (absolute, already resolved), :now (created_at).
 * Result: { id, run_at }.
 * PostgreSQL: one multi-row INSERT … SELECT FROM unnest(...) for the batch; here one prepared
 * statement per job inside one transaction, which costs microseconds in-process.
 */
export const JOB_INSERT = `
  INSERT INTO jobs (kind, queue, payload, priority, state, run_at, max_attempts, retry_policy,
    idempotency_key, timeout_ms, schedule_id, schedule_slot, created_at)
  VALUES (:kind, :queue, :payload, :priority, 'pending', :run_at, :max_attempts, :retry_policy,
    :idempotency_key, :timeout_ms, :schedule_id, :schedule_slot, :now)
  RETURNING id, run_at`;

/**
 * The next queue holding a pending job after :after (a loose index scan over jobs_pending_claim:
 * one seek per distinct queue, so a claim can walk queues without reading their rows).
 * Parameters: :after ('' to start: queue names are never empty). Result: { queue } or nothing.
 * PostgreSQL: the same walk, written as a recursive CTE.
 */
export const JOB_PENDING_NEXT_QUEUE = `
  SELECT queue FROM jobs
  WHERE state = 'pending' AND queue > :after
  ORDER BY queue LIMIT 1`;

/**
 * The next priority holding a pending job in one queue after :after (one seek).
 * Parameters: :queue, :after (below -32768 to start). Result: { priority } or nothing.
 * PostgreSQL: the same walk.
 */
export const JOB_PENDING_NEXT_PRIORITY = `
  SELECT priority FROM jobs
  WHERE state = 'pending' AND queue = :queue AND priority > :after
  ORDER BY priority LIMIT 1`;

/**
 * Due pending jobs in one (queue, priority), in claim order: an index range scan on
 * jobs_pending_claim (queue = ?, priority = ?, run_at <= now), already ordered by run_at, id, so
 * it stops after :limit rows and never reads future-dated, running or finished rows.
 * Parameters: :queue, :priority, :now, :limit. Result: { id, priority, run_at }.
 * PostgreSQL: the same range per pair, feeding `FOR UPDATE SKIP LOCKED`; here the write lock
 * already excludes other claimers.
 */
export const JOB_DUE_PENDING = `
  SELECT id, priority, run_at FROM jobs
  WHERE state = 'pending' AND queue = :queue AND priority = :priority AND run_at <= :now
  ORDER BY run_at, id LIMIT :limit`;

/**
 * Running jobs whose lease lapsed and whose attempts are used up: the claim parks them all
 * before choosing candidates. A range scan on jobs_running_lease (lease_until <= now).
 * Parameters: :now, :queues (JSON array, or NULL for every queue). Result: { id, attempts }.
 * PostgreSQL: the same condition, moved to dead_jobs in one CTE of the claim statement.
 */
export const JOB_LAPSED_EXHAUSTED = `
  SELECT id, attempts FROM jobs
  WHERE state = 'running' AND lease_until <= :now AND attempts >= max_attempts
    AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues))) AND ${NOT_PAUSED}`;

/**
 * Running jobs whose lease lapsed (their worker crashed or stalled), in claim order: a range
 * scan on jobs_running_lease (lease_until <= now), which holds only in-flight rows, then a sort
 * of the lapsed ones alone. Runs after JOB_LAPSED_EXHAUSTED parked the used-up ones.
 * Parameters: :now, :limit, :queues (JSON array, or NULL for every queue).
 * Result: { id, priority, run_at }.
 * PostgreSQL: identical, with `queue = ANY($queues)`.
 */
export const JOB_LAPSED = `
  SELECT id, priority, run_at FROM jobs
  WHERE state = 'running' AND lease_until <= :now
    AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues))) AND ${NOT_PAUSED}
  ORDER BY priority, run_at, id LIMIT :limit`;

/**
 * Leases the candidates: running, new lease and owner, token + 1, attempts + 1. A candidate that
 * was already running lost its lease (its worker crashed or stalled), so that attempt's
 * lease_expired error is recorded first, numbered by the attempts before this claim.
 * Parameters: :ids (JSON array of candidate ids), :now, :lease_until, :owner, :message.
 * Result: the updated rows, in no particular order (the caller sorts them into claim order).
 * PostgreSQL: the same SET list in one UPDATE … FROM the locked candidates.
 */
export const JOB_CLAIM_MANY = `
  UPDATE jobs SET
    state = 'running',
    lease_until = :lease_until,
    lease_owner = :owner,
    token = token + 1,
    attempts = attempts + 1,
    errors = CASE WHEN state = 'running'
      THEN json_insert(errors, '$[#]', json_object(
        'attempt', attempts, 'at', :now, 'kind', 'lease_expired', 'message', :message))
      ELSE errors END
  WHERE id IN (SELECT value FROM json_each(:ids))
  RETURNING *`;

/**
 * Copies a job into the dead-letter table with one more error entry (moving it: JOB_DELETE
 * follows in the same transaction).
 * Parameters: :id, :now (finished_at and parked_at), :entry (one JSON error object).
 * Result: changes = 1 when the job existed.
 * PostgreSQL: one statement, `WITH moved AS (DELETE … RETURNING *) INSERT INTO dead_jobs …`.
 */
export const JOB_PARK = `
  INSERT INTO dead_jobs (${COMMON_COLUMNS}, state, lease_until, errors, finished_at, parked_at)
  SELECT ${COMMON_COLUMNS}, 'dead', NULL, json_insert(errors, '$[#]', json(:entry)), :now, :now
  FROM jobs WHERE id = :id`;

/**
 * Deletes one job by id (the second half of a move between tables).
 * Parameters: :id. Result: changes.
 */
export const JOB_DELETE = `DELETE FROM jobs WHERE id = :id`;

/**
 * Extends a live lease. Fenced: the token must be current, the job running and its lease not yet
 * lapsed (a lapsed lease may already be promised to the next claimer).
 * Parameters: :id, :token, :now, :lease_until. Result: { lease_until } or nothing when stale.
 * PostgreSQL: identical, with timestamptz arithmetic.
 */
export const JOB_HEARTBEAT = `
  UPDATE jobs SET lease_until = :lease_until
  WHERE id = :id AND token = :token AND state = 'running' AND lease_until > :now
  RETURNING lease_until`;

/**
 * Accepts a completion. Fenced by token and state only: a lapsed lease that nobody re-claimed
 * still completes, exactly as in the design's reference model.
 * Parameters: :id, :token, :now. Result: changes = 1 when done, 0 when stale.
 * PostgreSQL: identical.
 */
export const JOB_COMPLETE = `
  UPDATE jobs SET state = 'done', finished_at = :now, lease_until = NULL
  WHERE id = :id AND token = :token AND state = 'running'`;

/**
 * Tells a repeated completion from a refused one: the job is already done under this very token,
 * so an earlier completion of the same claim committed (its reply was lost). Read only after
 * JOB_COMPLETE changed nothing, inside the same write transaction.
 * Parameters: :id, :token. Result: a row when the completion was already accepted, else nothing.
 * PostgreSQL: the same read, batched for a whole completion batch (transaction-queries.ts).
 */
export const JOB_DONE_WITH_TOKEN = `
  SELECT 1 FROM jobs WHERE id = :id AND token = :token AND state = 'done'`;

/**
 * Reads the fenced row a failure applies to.
 * Parameters: :id, :token. Result: { attempts } or nothing when stale.
 * PostgreSQL: the twin folds this into the UPDATE with a CTE.
 */
export const JOB_FIND_HELD = `
  SELECT attempts FROM jobs WHERE id = :id AND token = :token AND state = 'running'`;

/**
 * Applies a retry decision: pending again at :run_at, lease cleared, the attempt's error appended.
 * Parameters: :id, :run_at, :entry (one JSON error object). Result: changes.
 * PostgreSQL: identical, `errors || $entry::jsonb`.
 */
export const JOB_RETRY = `
  UPDATE jobs SET state = 'pending', run_at = :run_at, lease_until = NULL,
    errors = json_insert(errors, '$[#]', json(:entry))
  WHERE id = :id AND state = 'running'`;

/**
 * Gives a lease back: pending, due at once, lease cleared, the attempt not counted. Fenced.
 * run_at is kept (it was due to be claimed, so it is already at or before now): the job keeps
 * its place in claim order instead of queueing behind jobs that were due after it.
 * Parameters: :id, :token, :now. Result: changes = 1 when released, 0 when stale.
 * PostgreSQL: identical.
 */
export const JOB_RELEASE = `
  UPDATE jobs SET state = 'pending', run_at = MIN(run_at, :now), lease_until = NULL, attempts = attempts - 1
  WHERE id = :id AND token = :token AND state = 'running'`;

/**
 * Gives back every lease still held under one claim's owner, like JOB_RELEASE.
 * Parameters: :owner, :now. Result: changes = how many; RETURNING run_at for the wake-up.
 * PostgreSQL: identical, plus its NOTIFY.
 */
export const JOB_RELEASE_BY_OWNER = `
  UPDATE jobs SET state = 'pending', run_at = MIN(run_at, :now), lease_until = NULL, attempts = attempts - 1
  WHERE state = 'running' AND lease_owner = :owner
  RETURNING run_at`;

/**
 * Cancels a live job. The token is left alone, so a worker holding it is refused (stale) on its
 * next heartbeat or completion.
 * Parameters: :id, :now. Result: changes = 1 when cancelled.
 * PostgreSQL: identical.
 */
export const JOB_CANCEL = `
  UPDATE jobs SET state = 'cancelled', finished_at = :now, lease_until = NULL
  WHERE id = :id AND ${LIVE}`;

/**
 * One job by id from the jobs table. Parameters: :id. Result: the row or nothing.
 */
export const JOB_GET = `SELECT * FROM jobs WHERE id = :id`;

/**
 * One parked job by id. Parameters: :id. Result: the row or nothing.
 */
export const DEAD_GET = `SELECT * FROM dead_jobs WHERE id = :id`;

/**
 * A page of jobs by id (keyset paging), optionally by states, queue and kind.
 * Parameters: :states (JSON array or NULL for all), :queue, :kind (NULL for any), :after_id,
 * :limit. Result: rows ordered by id. A primary-key range scan.
 * PostgreSQL: `state = ANY($states)`; here json_each carries the list in one parameter.
 */
export const JOB_LIST = `
  SELECT * FROM jobs
  WHERE id > :after_id
    AND (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
    AND (:queue IS NULL OR queue = :queue)
    AND (:kind IS NULL OR kind = :kind)
  ORDER BY id LIMIT :limit`;

/**
 * A page of parked jobs by id, optionally by queue and kind.
 * Parameters: :queue, :kind, :after_id, :limit. Result: rows ordered by id.
 */
export const DEAD_LIST = `
  SELECT * FROM dead_jobs
  WHERE id > :after_id
    AND (:queue IS NULL OR queue = :queue)
    AND (:kind IS NULL OR kind = :kind)
  ORDER BY id LIMIT :limit`;

/**
 * Deletes up to :limit finished (done, cancelled) records that finished before :before; called
 * in batches so one prune never holds the file's write lock for long.
 * Parameters: :before, :limit. Result: changes.
 * PostgreSQL: the same batching with ctid.
 */
export const JOB_PRUNE_BATCH = `
  DELETE FROM jobs WHERE id IN (
    SELECT id FROM jobs
    WHERE state IN ('done', 'cancelled') AND finished_at < :before
    LIMIT :limit)`;

/**
 * The earliest pending run time in one (queue, priority): one seek to the head of its range.
 * Parameters: :queue, :priority. Result: { run_at } or nothing.
 */
export const JOB_FIRST_PENDING_RUN_AT = `
  SELECT run_at FROM jobs
  WHERE state = 'pending' AND queue = :queue AND priority = :priority
  ORDER BY run_at LIMIT 1`;

/**
 * The earliest lease end among running jobs (when a lapsed lease makes a job due again), paused
 * queues left out (their jobs must not wake a worker that cannot claim them).
 * Parameters: :queues (JSON array or NULL for all). Result: { lease_until } or nothing.
 */
export const JOB_NEXT_LEASE_END = `
  SELECT lease_until FROM jobs
  WHERE state = 'running' AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues)))
    AND ${NOT_PAUSED}
  ORDER BY lease_until LIMIT 1`;

/**
 * Moves a parked job back into jobs: pending, due now, attempts 0; id, token and errors kept.
 * Its idempotency key is dropped when a live job took the key meanwhile (the unique index would
 * refuse the move otherwise), and a recurring run drops its schedule_slot (keeping schedule_id)
 * when another job holds that (schedule, slot), exactly as in the PostgreSQL twin.
 * Parameters: :id, :now. Result: changes = 1 when the job was parked (DEAD_DELETE follows).
 * PostgreSQL: one statement with a DELETE … RETURNING CTE.
 */
export const DEAD_RETRY = `
  INSERT INTO jobs (${COMMON_COLUMNS}, state, lease_until, errors, finished_at)
  SELECT d.id, d.kind, d.queue, d.payload, d.priority, :now, d.lease_owner, d.token, 0, d.max_attempts,
    d.retry_policy,
    CASE WHEN EXISTS (SELECT 1 FROM jobs o WHERE o.idempotency_key = d.idempotency_key AND o.state IN ('pending', 'running'))
      THEN NULL ELSE d.idempotency_key END,
    d.timeout_ms, d.schedule_id,
    CASE WHEN EXISTS (SELECT 1 FROM jobs o WHERE o.schedule_id = d.schedule_id AND o.schedule_slot = d.schedule_slot)
      THEN NULL ELSE d.schedule_slot END,
    d.created_at,
    'pending', NULL, d.errors, NULL
  FROM dead_jobs d WHERE d.id = :id`;

/** Deletes one parked job by id. Parameters: :id. Result: changes. */
export const DEAD_DELETE = `DELETE FROM dead_jobs WHERE id = :id`;

/**
 * Deletes parked jobs named by id (a JSON array) or parked before an instant; either may be NULL.
 * Parameters: :ids, :before. Result: changes.
 * PostgreSQL: `id = ANY($ids) OR parked_at < $before`.
 */
export const DEAD_PURGE = `
  DELETE FROM dead_jobs
  WHERE (:ids IS NOT NULL AND id IN (SELECT value FROM json_each(:ids)))
     OR (:before IS NOT NULL AND parked_at < :before)`;

/**
 * Counts by queue and state. `running` is a live lease by :now; a lapsed one counts as available.
 * Paused queues appear even when empty, with paused = 1.
 * Parameters: :now. Result: one row per queue, by name. A full scan of both tables: a dashboard
 * query, never on the claim path.
 * PostgreSQL: identical with FILTER clauses.
 */
export const QUEUE_STATS = `
  SELECT queue, EXISTS (SELECT 1 FROM queues q WHERE q.name = queue AND q.paused = 1) AS paused,
    SUM(scheduled) AS scheduled, SUM(available) AS available, SUM(running) AS running,
    SUM(done) AS done, SUM(cancelled) AS cancelled, SUM(dead) AS dead
  FROM (
    SELECT queue,
      ${LIVE} AND NOT (state = 'running' AND lease_until > :now) AND run_at > :now AS scheduled,
      ${LIVE} AND NOT (state = 'running' AND lease_until > :now) AND run_at <= :now AS available,
      state = 'running' AND lease_until > :now AS running,
      state = 'done' AS done,
      state = 'cancelled' AS cancelled,
      0 AS dead
    FROM jobs
    UNION ALL
    SELECT queue, 0, 0, 0, 0, 0, 1 FROM dead_jobs
    UNION ALL
    SELECT name, 0, 0, 0, 0, 0, 0 FROM queues WHERE paused = 1
  )
  GROUP BY queue ORDER BY queue`;
