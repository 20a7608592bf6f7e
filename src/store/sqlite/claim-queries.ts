/**
 * The SQLite claim: its SQL (each statement headed by purpose, parameters, result and how it
 * differs from the PostgreSQL claim in ../postgres/claim-queries.ts) and the claim planner that
 * runs it. SQLite has no SKIP LOCKED and no loose index scan, so the planner walks the pending
 * (queue, kind, priority) triples one index seek at a time and reads each due range itself;
 * the store runs it inside its BEGIN IMMEDIATE write transaction, which already excludes other
 * claimers. Planning the claimed recurring runs' schedules is pure policy (planClaimedRuns in
 * ../schedule-plan.ts).
 */
import type Database from 'better-sqlite3';
import { JOB_COLUMN_AT, JOB_COLUMNS } from '../job-columns.js';
import { type ChunkedSource, mergeChunked } from '../ordered-merge.js';
import type { KindFilter } from '../store.js';
import { KIND_ALLOWED, kindParams, NOT_PAUSED } from './job-queries.js';
import { QUEUE_PAUSED_NAMES } from './schedule-queries.js';

/**
 * The next queue holding a pending job after :after (a loose index scan over
 * jobs_pending_kind_claim: one seek per distinct queue, so a claim can walk queues without
 * reading their rows).
 * Parameters: :after ('' to start: queue names are never empty). Result: { queue } or nothing.
 * PostgreSQL: the same walk, written as a recursive CTE.
 */
export const JOB_PENDING_NEXT_QUEUE = `
  SELECT queue FROM jobs
  WHERE state = 'pending' AND queue > :after
  ORDER BY queue LIMIT 1`;

/**
 * The next kind holding a pending job in one queue after :after, with its lowest priority: one
 * seek that also yields the kind's first triple. (A row-value range `(kind, priority) > (?, ?)`
 * would walk the kind's whole priority, row by row: SQLite seeks on its first column only.)
 * Parameters: :queue, :after ('' to start: kinds are never empty). Result: { kind, priority } or nothing.
 * PostgreSQL: the same walk, as the middle column of its (queue, kind, priority) triples.
 */
export const JOB_PENDING_NEXT_KIND = `
  SELECT kind, priority FROM jobs
  WHERE state = 'pending' AND queue = :queue AND kind > :after
  ORDER BY kind, priority LIMIT 1`;

/**
 * The next priority holding a pending job in one (queue, kind) after :after (one seek).
 * Parameters: :queue, :kind, :after (below -32768 to start). Result: { priority } or nothing.
 * PostgreSQL: the same walk.
 */
export const JOB_PENDING_NEXT_PRIORITY = `
  SELECT priority FROM jobs
  WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority > :after
  ORDER BY priority LIMIT 1`;

/**
 * Due pending jobs in one (queue, kind, priority), in claim order: an index range scan on
 * jobs_pending_kind_claim (queue = ?, kind = ?, priority = ?, run_at <= now), already ordered by
 * run_at, id, so it stops after :limit rows and never reads future-dated, foreign-kind, running
 * or finished rows.
 * Parameters: :queue, :kind, :priority, :now, :limit. Result: { id, priority, run_at }.
 * PostgreSQL: the same range per triple, feeding `FOR UPDATE SKIP LOCKED`; here the write lock
 * already excludes other claimers.
 */
export const JOB_DUE_PENDING = `
  SELECT id, priority, run_at FROM jobs
  WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority = :priority AND run_at <= :now
  ORDER BY run_at, id LIMIT :limit`;

/**
 * JOB_DUE_PENDING from past a row already read: the next due pending jobs of one triple after
 * (:after_run_at, :after_id), as the claim's merge of one priority's triples reads on (decision
 * 0026). The same index range, entered at :after_run_at (SQLite seeks on run_at; the few rows
 * that share it are passed by id).
 * Parameters: as JOB_DUE_PENDING, and :after_run_at, :after_id. Result: { id, priority, run_at }.
 * PostgreSQL: a triple's cursor in the claim's merge function, fetched on.
 */
export const JOB_DUE_PENDING_AFTER = `
  SELECT id, priority, run_at FROM jobs
  WHERE state = 'pending' AND queue = :queue AND kind = :kind AND priority = :priority
    AND run_at >= :after_run_at AND (run_at > :after_run_at OR id > :after_id) AND run_at <= :now
  ORDER BY run_at, id LIMIT :limit`;

// The lapsed-lease reads name their index (INDEXED BY): without statistics SQLite could take
// another index for `state = 'running'` (the dashboard's (state, queue, id) index did, until
// migration 5 replaced it) and walk every running row on every claim, where jobs_running_lease
// reads only the lapsed ones.

/**
 * Running jobs whose lease lapsed and whose attempts are used up: the claim parks them all
 * before choosing candidates, whatever their kind (parking hands nothing out, and the workers of
 * the job's own kind may all be gone). A range scan on jobs_running_lease (lease_until <= now).
 * Parameters: :now, :queues (JSON array, or NULL for every queue). Result: { id, attempts }.
 * PostgreSQL: the same condition, moved to dead_jobs in one CTE of the claim statement.
 */
export const JOB_LAPSED_EXHAUSTED = `
  SELECT id, attempts FROM jobs INDEXED BY jobs_running_lease
  WHERE state = 'running' AND lease_until <= :now AND attempts >= max_attempts
    AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues))) AND ${NOT_PAUSED}`;

/**
 * Running jobs whose lease lapsed (their worker crashed or stalled) and whose kind the claimer
 * handles, in claim order: a range scan on jobs_running_lease (lease_until <= now), which holds
 * only in-flight rows, then a sort of the lapsed ones alone. Runs after JOB_LAPSED_EXHAUSTED
 * parked the used-up ones.
 * Parameters: :now, :limit, :queues (JSON array, or NULL for every queue), :kinds (JSON array or
 * NULL), :exclude_kinds (JSON array). Result: { id, priority, run_at }.
 * PostgreSQL: the `lapsed` CTE of its claim statement: the same conditions on text[] parameters
 * (`queue = ANY($5)`, the kind filter), plus FOR UPDATE SKIP LOCKED.
 */
export const JOB_LAPSED_OF_KINDS = `
  SELECT id, priority, run_at FROM jobs INDEXED BY jobs_running_lease
  WHERE state = 'running' AND lease_until <= :now
    AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues))) AND ${NOT_PAUSED}
    AND ${KIND_ALLOWED}
  ORDER BY priority, run_at, id LIMIT :limit`;

/**
 * JOB_LAPSED_OF_KINDS for a claim without a kind filter (a catch-all): the same rows, without
 * evaluating the kind lists, so the default claim costs what it did before kind filters.
 * Parameters: :now, :limit, :queues. Result: { id, priority, run_at }.
 */
export const JOB_LAPSED = `
  SELECT id, priority, run_at FROM jobs INDEXED BY jobs_running_lease
  WHERE state = 'running' AND lease_until <= :now
    AND (:queues IS NULL OR queue IN (SELECT value FROM json_each(:queues))) AND ${NOT_PAUSED}
  ORDER BY priority, run_at, id LIMIT :limit`;

/**
 * What the claim answers for each column, in JOB_COLUMNS order: NULL for the five the claim itself
 * set to the same value in every row (state 'running', lease_until, lease_owner, started_at) or
 * that a running row never has (finished_at), and NULL for an empty errors list (nearly every
 * claim), which claimedValuesToJob (job-row.ts) puts back. Each is a string or a number fewer to
 * build per row (PostgreSQL's claim answers state and owner the same way: CLAIMED_COLUMN_FORMS).
 */
const CLAIMED_COLUMNS: readonly string[] = JOB_COLUMNS.map((column) => {
  if (column === 'errors') return "nullif(errors, '[]')";
  const setByClaim = ['state', 'lease_until', 'lease_owner', 'started_at', 'finished_at'] as const;
  return (setByClaim as readonly string[]).includes(column) ? 'NULL' : column;
});

/**
 * Leases the candidates: running, new lease and owner, token + 1, attempts + 1. A candidate that
 * was already running lost its lease (its worker crashed or stalled), so that attempt's
 * lease_expired error is recorded first, numbered by the attempts before this claim.
 * Parameters: :ids (JSON array of candidate ids), :now, :lease_until, :owner, :message.
 * Result: the updated rows in CLAIMED_COLUMNS form, read as arrays, in no particular order (the
 * caller puts them in claim order).
 * PostgreSQL: the same SET list in one UPDATE … FROM the locked candidates.
 */
export const JOB_CLAIM_MANY = `
  UPDATE jobs SET
    state = 'running',
    lease_until = :lease_until,
    lease_owner = :owner,
    started_at = :now,
    token = token + 1,
    attempts = attempts + 1,
    errors = CASE WHEN state = 'running'
      THEN json_insert(errors, '$[#]', json_object(
        'attempt', attempts, 'at', :now, 'kind', 'lease_expired', 'message', :message,
        'startedAt', started_at, 'owner', lease_owner))
      ELSE errors END
  WHERE id IN (SELECT value FROM json_each(:ids))
  RETURNING ${CLAIMED_COLUMNS.join(', ')}`;

/** Where a claimed row (a JOB_COLUMNS array) holds its id. */
const ID = JOB_COLUMN_AT.id;

/** A claim candidate as JOB_DUE_PENDING and JOB_LAPSED return it. */
export interface Candidate {
  id: number;
  priority: number;
  run_at: number;
}

/** The contract's claim order: priority (lower first), then run_at, then id. */
export function claimOrder(
  a: Pick<Candidate, 'priority' | 'run_at' | 'id'>,
  b: Pick<Candidate, 'priority' | 'run_at' | 'id'>,
): number {
  return a.priority - b.priority || a.run_at - b.run_at || a.id - b.id;
}

/** Prepares the claim statements once per connection. */
function prepareClaimStatements(db: Database.Database) {
  return {
    pendingNextQueue: db.prepare(JOB_PENDING_NEXT_QUEUE).pluck(),
    pendingNextKind: db.prepare<Record<string, unknown>, { kind: string; priority: number }>(JOB_PENDING_NEXT_KIND),
    pendingNextPriority: db.prepare(JOB_PENDING_NEXT_PRIORITY).pluck(),
    duePending: db.prepare<Record<string, unknown>, Candidate>(JOB_DUE_PENDING),
    duePendingAfter: db.prepare<Record<string, unknown>, Candidate>(JOB_DUE_PENDING_AFTER),
    lapsed: db.prepare<Record<string, unknown>, Candidate>(JOB_LAPSED),
    lapsedOfKinds: db.prepare<Record<string, unknown>, Candidate>(JOB_LAPSED_OF_KINDS),
    lapsedExhausted: db.prepare<Record<string, unknown>, { id: number; attempts: number }>(JOB_LAPSED_EXHAUSTED),
    // Arrays, not keyed objects: an object per row was a quarter of the claim statement's cost.
    claimMany: db.prepare<Record<string, unknown>, unknown[]>(JOB_CLAIM_MANY).raw(),
    queuePausedNames: db.prepare(QUEUE_PAUSED_NAMES).pluck(),
  };
}

/** The claim planner and statements for one connection; every method runs inside the caller's transaction. */
export class SqliteClaimQueries {
  private readonly stmt: ReturnType<typeof prepareClaimStatements>;

  constructor(db: Database.Database) {
    this.stmt = prepareClaimStatements(db);
  }

  /** Lapsed jobs of these queues (undefined: all) whose attempts are used up: the claim parks them first. */
  lapsedExhausted(nowMs: number, queues: readonly string[] | undefined): { id: number; attempts: number }[] {
    return this.stmt.lapsedExhausted.all({ now: nowMs, queues: queues === undefined ? null : JSON.stringify(queues) });
  }

  /**
   * Leases the candidates (JOB_CLAIM_MANY) and returns their rows (CLAIMED_COLUMNS arrays, for
   * claimedValuesToJob) in the
   * candidates' order, which is claim order.
   */
  leaseMany(
    candidates: readonly Candidate[],
    lease: { nowMs: number; leaseUntilMs: number; owner: string; message: string },
  ): unknown[][] {
    const rows = this.stmt.claimMany.all({
      ids: JSON.stringify(candidates.map((candidate) => candidate.id)),
      now: lease.nowMs,
      lease_until: lease.leaseUntilMs,
      owner: lease.owner,
      message: lease.message,
    });
    if (rows.length !== candidates.length) throw new Error('claim candidates vanished inside their transaction');
    // SQLite answers in the order it visits the ids, ascending, which is claim order whenever
    // claim order is id order (a queue drained first in, first out): then the rows need no
    // reordering and no map from id to position (a third of a claim's allocations per row).
    let inOrder = true;
    for (let i = 0; i < rows.length && inOrder; i += 1) inOrder = rows[i]![ID] === candidates[i]!.id;
    if (inOrder) return rows;
    const positionOf = new Map<number, number>();
    for (let i = 0; i < candidates.length; i += 1) positionOf.set(candidates[i]!.id, i);
    const ordered = new Array<unknown[]>(rows.length);
    for (const row of rows) ordered[positionOf.get(row[ID] as number)!] = row;
    return ordered;
  }

  /**
   * The first `limit` claimable jobs in claim order (priority, run_at, id): lapsed leases of
   * allowed kinds from jobs_running_lease (unless `includeLapsed` is false), merged with the
   * allowed (queue, kind, priority) triples' due ranges from jobs_pending_kind_claim. Priorities
   * are read lowest first, and the walk stops once `limit` candidates rank before every priority
   * still unread; the triples of one priority are merged in chunks (mergeChunked, decision 0026),
   * so a claim reads about `limit` rows plus a chunk per triple, not `limit` rows of each, and
   * priority order holds across kinds.
   */
  candidates(
    nowMs: number,
    limit: number,
    queues: readonly string[] | undefined,
    filter: KindFilter,
    includeLapsed = true,
  ): Candidate[] {
    const queueList = queues === undefined ? null : JSON.stringify(queues);
    const candidates = !includeLapsed
      ? []
      : filter.kinds === undefined && (filter.excludeKinds ?? []).length === 0
        ? this.stmt.lapsed.all({ now: nowMs, limit, queues: queueList })
        : this.stmt.lapsedOfKinds.all({ now: nowMs, limit, queues: queueList, ...kindParams(filter) });
    const triples = this.pendingTriples(queues, filter).sort((a, b) => a.priority - b.priority);
    for (let first = 0; first < triples.length; ) {
      const priority = triples[first]!.priority;
      let end = first + 1;
      while (end < triples.length && triples[end]!.priority === priority) end += 1;
      const ahead = candidates.filter((candidate) => candidate.priority < priority).length;
      if (ahead >= limit) break;
      // Rows of this priority past limit - ahead cannot place: `ahead` candidates rank before them all.
      const sources = triples.slice(first, end).map((triple) => this.dueSource(triple, nowMs));
      candidates.push(...mergeChunked(sources, limit - ahead, claimOrder));
      first = end;
    }
    return candidates.sort(claimOrder).slice(0, limit);
  }

  /** One triple's due range as a source for mergeChunked: read from its start, or on from a row. */
  private dueSource(
    triple: { queue: string; kind: string; priority: number },
    nowMs: number,
  ): ChunkedSource<Candidate> {
    const { queue, kind, priority } = triple;
    return (after, count) =>
      after === undefined
        ? this.stmt.duePending.all({ queue, kind, priority, now: nowMs, limit: count })
        : this.stmt.duePendingAfter.all({
            queue,
            kind,
            priority,
            now: nowMs,
            limit: count,
            after_run_at: after.run_at,
            after_id: after.id,
          });
  }

  /**
   * The distinct (queue, kind, priority) triples holding pending jobs, in queues not paused and of
   * kinds the filter allows, one index seek each. With `kinds` listed, each listed kind's
   * priorities are walked directly, so a foreign kind is not even seeked; with none listed the
   * kinds are walked (each seek also yields the kind's lowest priority), and an excluded kind is
   * skipped before any of its priorities or rows is read. The PostgreSQL twin walks every triple
   * and filters them; the rows read are the same.
   */
  pendingTriples(
    queues: readonly string[] | undefined,
    filter: KindFilter = {},
  ): { queue: string; kind: string; priority: number }[] {
    const excluded = new Set(filter.excludeKinds ?? []);
    const listedKinds = filter.kinds === undefined ? null : [...new Set(filter.kinds)].filter((k) => !excluded.has(k));
    const triples: { queue: string; kind: string; priority: number }[] = [];
    /** Appends the priorities of (queue, kind) above `after`, one seek each. */
    const walkPriorities = (queue: string, kind: string, after: number) => {
      for (;;) {
        const priority = this.stmt.pendingNextPriority.get({ queue, kind, after }) as number | undefined;
        if (priority === undefined) return;
        triples.push({ queue, kind, priority });
        after = priority;
      }
    };
    for (const queue of this.pendingQueues(queues)) {
      if (listedKinds !== null) {
        for (const kind of listedKinds) walkPriorities(queue, kind, Number.MIN_SAFE_INTEGER);
        continue;
      }
      for (let after = ''; ; ) {
        const next = this.stmt.pendingNextKind.get({ queue, after });
        if (next === undefined) break;
        after = next.kind;
        if (excluded.has(next.kind)) continue;
        triples.push({ queue, kind: next.kind, priority: next.priority });
        walkPriorities(queue, next.kind, next.priority);
      }
    }
    return triples;
  }

  /** The queues to walk: those named (or every queue holding pending jobs), less the paused ones. */
  private pendingQueues(queues: readonly string[] | undefined): string[] {
    const paused = new Set(this.stmt.queuePausedNames.all() as string[]);
    const queueNames: string[] = [];
    if (queues === undefined) {
      for (let after = ''; ; ) {
        const queue = this.stmt.pendingNextQueue.get({ after }) as string | undefined;
        if (queue === undefined) break;
        queueNames.push(queue);
        after = queue;
      }
    } else {
      queueNames.push(...new Set(queues));
    }
    // A paused queue's backlog is never walked: claims and next-run-at skip it.
    return queueNames.filter((queue) => !paused.has(queue));
  }
}
