/**
 * The chaos checker: reads what the harness did (submits, faults), what every worker wrote in its
 * ledger and what the database holds at the end, and checks the invariants of
 * /work/shared/docs/RELIABILITY.md that a black-box run can observe:
 *
 * - I1 no loss: every id a submit returned ends done, dead or cancelled; nothing live is left.
 * - I2 one accepted result: at most one completion heard as accepted per job, and it carries the
 *   job's final token; a done job has a recorded side effect under that token.
 * - I3 no overlapping leases (observable part): a claim whose holder wrote no outcome is not
 *   followed by another claim before its lease (claim instant + leaseMs, database clock) ended.
 * - I4 never early: every claim instant (database clock) is at or after the run_at it was handed
 *   with; every retry's run_at is at least its backoff band's lower bound after the failure.
 * - I5 attempts are claims: poison jobs, including ones that exit their process, are parked with
 *   attempts = maxAttempts and never started more than maxAttempts times.
 * - I8 bounded recovery: after a worker is killed, its in-flight jobs start elsewhere within
 *   leaseMs + pollIntervalMs + slack (measured; kills overlapping a database restart or a fleet
 *   freeze are reported apart, since nobody could claim).
 * - Fault class 5: statements the proxy let commit and then hid (ambiguous commits) end in the
 *   same state a clean call would have given: one job per idempotency key, no extra attempt.
 * - I7 one run per recurring slot, and I4 for recurring runs (never before slot + jitter offset):
 *   see schedule-slot-checker.ts for exactly what is checked; gaps are attributed to the fault
 *   that overlapped the late claim (a restart, a killed or frozen worker, a cut connection) or to
 *   none (a claim late under load).
 */
import type { Job, RetryPolicy } from '../../src/job/job.js';
import { backoffBand } from '../../src/retry/backoff.js';
import type { LedgerEntry } from './chaos-worker.js';
import type { CommitCut } from './commit-cutting-proxy.js';
import { type CheckedSchedule, checkScheduleSlots, type ScheduleSlotVerdict } from './schedule-slot-checker.js';

/** A job the producer was told about. */
export interface SubmittedJob {
  id: string;
  key: string;
  kind: string;
  maxAttempts: number;
}

/** One fault the nemesis injected (or a process that died by itself). */
export interface FaultEvent {
  type: 'kill' | 'pause' | 'freezeAll' | 'restart' | 'terminate' | 'cut' | 'poisonExit';
  /** Host epoch ms the fault began. */
  at: number;
  /** Host epoch ms it ended (pauses, restarts). */
  until?: number;
  pid?: number;
  detail?: string;
}

/** A submit batch whose commit the proxy hid, and what the retry returned. */
export interface AmbiguousSubmit {
  keys: string[];
  /** Ids the first (lost) answer would have carried are unknown; these came from the retry. */
  ids: string[];
  created: boolean[];
}

/** Everything the checker reads. */
export interface ChaosHistory {
  leaseMs: number;
  pollIntervalMs: number;
  recoverySlackMs: number;
  /**
   * True on SQLite, where one file has one write lock: a process paused inside a write
   * transaction stops every other process's claims until it runs again (docs/operations.md,
   * "SQLite settings"), so a pause there counts like a fleet freeze for I8.
   */
  pauseHoldsEveryWriter?: boolean;
  submitted: SubmittedJob[];
  faults: FaultEvent[];
  workerCuts: CommitCut[];
  ambiguousSubmits: AmbiguousSubmit[];
  ledger: LedgerEntry[];
  /** Every job row at the end (jobs table and dead-letter table). */
  jobs: Job[];
  /** The schedules the producer created (none in older histories). */
  schedules?: CheckedSchedule[];
  /** Their pending runs, recorded just before the final pause deleted them. */
  removedByPause?: Job[];
}

/** The figures a run prints. */
export interface ChaosFigures {
  jobsSubmitted: number;
  jobsDone: number;
  jobsParked: number;
  healthyJobsParked: number;
  poisonJobsParked: number;
  handlerStarts: number;
  kills: number;
  poisonExits: number;
  pauses: number;
  /** Fleet freezes: every worker SIGSTOPped at once. */
  freezes: number;
  restarts: number;
  connectionsTerminated: number;
  ambiguousCommits: number;
  staleResultsRefused: number;
  staleByOperation: Record<string, number>;
  effectsRanTwice: number;
  jobsLost: number;
  jobsStartedEarly: number;
  worstStartBeforeRunAtMs: number;
  retriesBeforeBackoff: number;
  overlappingLeases: number;
  duplicateKeys: number;
  completionsReportedStaleButAccepted: number;
  /** Jobs with more than one completion heard as accepted (I2): must be 0. */
  jobsFinishedTwice: number;
  /** Completions heard as accepted whose token is not the one the row ended with (I2): must be 0. */
  staleResultsAccepted: number;
  worstRecoveryAfterKillMs: number | null;
  worstRecoveryDuringRestartMs: number | null;
  recoveryBoundMs: number;
  recoveriesMeasured: number;
  /** Recoveries where a later claim was lost too (a second fault), not held to the bound. */
  recoveriesAfterLostClaim: number;
  worstRecoveryAfterLostClaimMs: number | null;
  /** Healthy jobs parked, by the kind of their last error. */
  healthyParkedBy: Record<string, number>;
  /** I7 and recurring I4 figures (gapList cut to its first 50). */
  recurring: Omit<ScheduleSlotVerdict, 'violations'>;
}

/** The checker's verdict. */
export interface ChaosVerdict {
  figures: ChaosFigures;
  /** Invariant violations, each one line naming the job and what was seen. */
  violations: string[];
}

const LIVE = new Set(['pending', 'running']);
const POISON = new Set(['chaos.poison.throw', 'chaos.poison.exit']);
const MAX_LISTED = 20;

/** Checks a finished run; see the file header for what is checked. */
export function checkChaosRun(history: ChaosHistory): ChaosVerdict {
  const violations: string[] = [];
  const violate = (line: string) => {
    if (violations.length < 500) violations.push(line);
  };
  const rows = new Map(history.jobs.map((job) => [job.id, job]));
  const byJob = new Map<string, LedgerEntry[]>();
  for (const entry of history.ledger) {
    if (entry.j === undefined) continue;
    const list = byJob.get(entry.j) ?? [];
    if (list.length === 0) byJob.set(entry.j, list);
    list.push(entry);
  }

  // I1: every acknowledged id is terminal; nothing in the database is live.
  let jobsLost = 0;
  for (const job of history.submitted) {
    const row = rows.get(job.id);
    if (!row || LIVE.has(row.state)) {
      jobsLost += 1;
      if (jobsLost <= MAX_LISTED) violate(`I1 job ${job.id} (${job.kind}) ended ${row ? row.state : 'missing'}`);
    }
  }
  for (const row of history.jobs) {
    if (LIVE.has(row.state) && !history.submitted.some((job) => job.id === row.id)) {
      violate(`I1 job ${row.id} (not acknowledged to the producer) is still ${row.state}`);
    }
  }

  // Duplicate idempotency keys: a resubmit after an ambiguous commit wrote a second job.
  const keyCounts = new Map<string, number>();
  for (const row of history.jobs) {
    if (row.idempotencyKey) keyCounts.set(row.idempotencyKey, (keyCounts.get(row.idempotencyKey) ?? 0) + 1);
  }
  const duplicateKeys = [...keyCounts.values()].filter((n) => n > 1).length;
  for (const batch of history.ambiguousSubmits) {
    for (const key of batch.keys) {
      if ((keyCounts.get(key) ?? 0) !== 1) {
        violate(`5 ambiguous submit: key ${key} has ${keyCounts.get(key) ?? 0} jobs after the retry (want 1)`);
      }
    }
  }

  let staleResultsRefused = 0;
  const staleByOperation: Record<string, number> = {};
  let effectsRanTwice = 0;
  let handlerStarts = 0;
  let jobsStartedEarly = 0;
  let worstStartBeforeRunAtMs = 0;
  let retriesBeforeBackoff = 0;
  let overlappingLeases = 0;
  let completionsReportedStaleButAccepted = 0;
  let jobsFinishedTwice = 0;
  let staleResultsAccepted = 0;
  const submittedById = new Map(history.submitted.map((job) => [job.id, job]));

  for (const [id, entries] of byJob) {
    const row = rows.get(id);
    const starts = entries.filter((e) => e.e === 'start').sort((x, y) => (x.t ?? 0) - (y.t ?? 0));
    handlerStarts += starts.length;
    const effects = entries.filter((e) => e.e === 'effect');
    if (effects.length > 1) effectsRanTwice += 1;
    const completed = entries.filter((e) => e.e === 'completed');
    for (const stale of entries.filter((e) => e.e === 'stale')) {
      staleResultsRefused += 1;
      const op = stale.op ?? 'unknown';
      staleByOperation[op] = (staleByOperation[op] ?? 0) + 1;
      if (op === 'complete' && row?.state === 'done' && row.token === stale.t) completionsReportedStaleButAccepted += 1;
    }

    // I2: at most one accepted completion, carrying the final token, after a recorded effect.
    if (completed.length > 1) {
      jobsFinishedTwice += 1;
      violate(`I2 job ${id}: ${completed.length} completions accepted`);
    }
    for (const done of completed) {
      if (row && (row.state !== 'done' || row.token !== done.t)) {
        staleResultsAccepted += 1;
        violate(
          `I2 job ${id}: completion with token ${done.t} accepted but the row is ${row.state} token ${row.token}`,
        );
      }
    }
    if (row?.state === 'done' && !POISON.has(row.kind) && !effects.some((e) => e.t === row.token)) {
      violate(`I2 job ${id}: done with token ${row.token} but no side effect was recorded under that token`);
    }

    // I4: never claimed before run_at by the database clock; host start time for the record.
    for (const start of starts) {
      if (start.c !== undefined && start.r !== undefined && start.c < start.r) {
        jobsStartedEarly += 1;
        violate(`I4 job ${id} token ${start.t}: claimed at ${start.c} before run_at ${start.r} (database clock)`);
      }
      if (start.s !== undefined && start.r !== undefined) {
        worstStartBeforeRunAtMs = Math.max(worstStartBeforeRunAtMs, start.r - start.s);
      }
    }

    // I4 (retries): each thrown failure's retry is due no earlier than its band's lower bound.
    if (row) {
      const policy: RetryPolicy = row.retryPolicy;
      for (const error of row.errors) {
        if (error.kind !== 'thrown') continue;
        const failedAt = new Date(error.at).getTime();
        const next = starts.find((s) => s.a === error.attempt + 1 && s.c !== undefined && s.c >= failedAt);
        if (!next || next.r === undefined) continue;
        const minMs = backoffBand(policy, error.attempt).minMs;
        if (next.r - failedAt < minMs - 1) {
          retriesBeforeBackoff += 1;
          violate(
            `I4 job ${id}: retry of attempt ${error.attempt} due ${next.r - failedAt} ms after the failure, band starts at ${minMs} ms`,
          );
        }
      }
    }

    // I3 (observable): a claim whose holder wrote no outcome keeps its lease for at least leaseMs.
    for (let i = 0; i + 1 < starts.length; i += 1) {
      const first = starts[i];
      const second = starts[i + 1];
      if (!first || !second || first.c === undefined || second.c === undefined) continue;
      const endedByFailure = row?.errors.some(
        (error) =>
          error.attempt === first.a && error.kind !== 'lease_expired' && new Date(error.at).getTime() <= second.c!,
      );
      if (endedByFailure) continue;
      if (second.c < first.c + history.leaseMs) {
        overlappingLeases += 1;
        violate(
          `I3 job ${id}: token ${second.t} claimed ${second.c - first.c} ms after token ${first.t}, inside its ${history.leaseMs} ms lease`,
        );
      }
    }

    // I5: poison jobs are parked after exactly maxAttempts claims.
    const submitted = submittedById.get(id);
    if (submitted && POISON.has(submitted.kind)) {
      if (row?.state !== 'dead') violate(`I5 poison job ${id} (${submitted.kind}) ended ${row?.state ?? 'missing'}`);
      else if (row.attempts !== submitted.maxAttempts) {
        violate(`I5 poison job ${id}: parked with ${row.attempts} attempts, maxAttempts ${submitted.maxAttempts}`);
      }
      if (starts.length > submitted.maxAttempts) {
        violate(`I5 poison job ${id}: started ${starts.length} times, maxAttempts ${submitted.maxAttempts}`);
      }
    }
  }
  for (const job of history.submitted) {
    if (POISON.has(job.kind) && !byJob.has(job.id) && rows.get(job.id)?.state !== 'dead') {
      violate(`I5 poison job ${job.id} never started and is ${rows.get(job.id)?.state ?? 'missing'}`);
    }
  }

  // Fault class 5 on the worker side: a hidden complete leaves the job done under that token, or,
  // when that token was already stale as it committed (its lease lapsed, e.g. in a fleet freeze),
  // changes nothing: then a later claim carries a higher token. A done row is terminal and never
  // claimed again, so a higher final token proves the hidden complete was refused, as a clean
  // call would have been.
  for (const cut of history.workerCuts) {
    if (cut.failed || !cut.sql.includes("state = 'done'")) continue;
    const ids = parseArray(cut.params[1]);
    const tokens = parseArray(cut.params[2]);
    ids.forEach((id, i) => {
      const row = rows.get(id);
      const token = Number(tokens[i]);
      const tookEffect = row?.state === 'done' && row.token === token;
      const refusedAsStale = row !== undefined && row.token > token;
      if (!tookEffect && !refusedAsStale) {
        violate(
          `5 ambiguous complete: job ${id} token ${tokens[i]} committed but ended ${row?.state ?? 'missing'} token ${row?.token}`,
        );
      }
    });
  }

  // I8: recovery after a kill, measured from the kill to the next start of each in-flight job.
  const recoveryBoundMs = history.leaseMs + history.pollIntervalMs + history.recoverySlackMs;
  const restarts = history.faults.filter((f) => f.type === 'restart');
  const startsByPid = new Map<number, LedgerEntry[]>();
  const outcomes = new Set<string>();
  for (const entry of history.ledger) {
    if (entry.e === 'start') {
      const list = startsByPid.get(entry.pid) ?? [];
      if (list.length === 0) startsByPid.set(entry.pid, list);
      list.push(entry);
    } else if (['completed', 'failed', 'parked', 'stale', 'lost'].includes(entry.e)) {
      outcomes.add(`${entry.pid}:${entry.j}:${entry.t}`);
    }
  }
  let worstRecoveryAfterKillMs: number | null = null;
  let worstRecoveryDuringRestartMs: number | null = null;
  let recoveriesMeasured = 0;
  let recoveriesAfterLostClaim = 0;
  let worstRecoveryAfterLostClaimMs: number | null = null;
  for (const fault of history.faults) {
    if ((fault.type !== 'kill' && fault.type !== 'poisonExit') || fault.pid === undefined) continue;
    // A restart or a fleet freeze stops every claim: recoveries across one are reported apart. So
    // does a pause on SQLite, whose paused process may hold the file's one write lock.
    const stopsEveryClaim = (f: FaultEvent) =>
      f.type === 'freezeAll' || (history.pauseHoldsEveryWriter === true && f.type === 'pause');
    const duringRestart = [...restarts, ...history.faults.filter(stopsEveryClaim)].some(
      (r) => r.at <= fault.at + recoveryBoundMs && (r.until ?? r.at) + 2000 >= fault.at - history.leaseMs,
    );
    for (const start of startsByPid.get(fault.pid) ?? []) {
      if ((start.s ?? 0) > fault.at || outcomes.has(`${start.pid}:${start.j}:${start.t}`)) continue;
      // The next claim of this job, by token (ledger files are read in no particular order).
      let next: LedgerEntry | undefined;
      for (const e of byJob.get(start.j ?? '') ?? []) {
        if (e.e === 'start' && (e.t ?? 0) > (start.t ?? 0) && (next === undefined || (e.t ?? 0) < (next.t ?? 0)))
          next = e;
      }
      if (!next || next.s === undefined) continue;
      if ((next.t ?? 0) > (start.t ?? 0) + 1) {
        // A claim in between was lost too (its process died before starting the handler, or its
        // answer was hidden): that is a second fault, and it costs a second lease by design.
        recoveriesAfterLostClaim += 1;
        worstRecoveryAfterLostClaimMs = Math.max(worstRecoveryAfterLostClaimMs ?? 0, next.s - fault.at);
        continue;
      }
      // A fail that committed just before the death may have made the job due later than the death.
      const claimableFrom = Math.max(fault.at, next.r ?? fault.at);
      const recoveryMs = (next.c ?? next.s) - claimableFrom;
      recoveriesMeasured += 1;
      if (duringRestart) worstRecoveryDuringRestartMs = Math.max(worstRecoveryDuringRestartMs ?? 0, recoveryMs);
      else {
        worstRecoveryAfterKillMs = Math.max(worstRecoveryAfterKillMs ?? 0, recoveryMs);
        if (recoveryMs > recoveryBoundMs) {
          violate(
            `I8 job ${start.j} (${start.k}, token ${start.t}, pid ${start.pid}): claimed again ${recoveryMs} ms after its worker died ` +
              `(${fault.type} at ${fault.at}; next claim token ${next.t} pid ${next.pid} at ${next.c} run_at ${next.r}; bound ${recoveryBoundMs} ms)`,
          );
        }
      }
    }
  }

  // I7: one run per (schedule, slot), gaps only where the misfire policy allows.
  const causeOf = (fromMs: number, toMs: number): string => {
    const overlaps = (f: FaultEvent, before: number, after: number) =>
      f.at - before <= toMs && (f.until ?? f.at) + after >= fromMs;
    if (restarts.some((f) => overlaps(f, 500, 2000))) return 'database restart';
    if (history.faults.some((f) => f.type === 'freezeAll' && overlaps(f, 0, 1000))) return 'every worker frozen';
    if (history.faults.some((f) => ['kill', 'poisonExit', 'pause'].includes(f.type) && overlaps(f, 0, history.leaseMs)))
      return 'worker killed or frozen';
    if (history.faults.some((f) => ['terminate', 'cut'].includes(f.type) && overlaps(f, 0, 1000)))
      return 'connection cut';
    return 'no fault (late claim)';
  };
  const recurring = checkScheduleSlots({
    schedules: history.schedules ?? [],
    jobs: history.jobs,
    removedByPause: history.removedByPause ?? [],
    claims: history.ledger.flatMap((e) =>
      e.e === 'start' && e.j !== undefined && e.c !== undefined && e.t !== undefined
        ? [{ jobId: e.j, token: e.t, claimedAtMs: e.c }]
        : [],
    ),
    causeOf,
  });
  for (const line of recurring.violations) violate(line);

  // Recurring runs have their own figures: these count the producer's jobs only.
  const oneOff = history.jobs.filter((job) => job.scheduleId === null);
  const parked = oneOff.filter((job) => job.state === 'dead');
  const figures: ChaosFigures = {
    jobsSubmitted: history.submitted.length,
    jobsDone: oneOff.filter((job) => job.state === 'done').length,
    jobsParked: parked.length,
    healthyJobsParked: parked.filter((job) => !POISON.has(job.kind)).length,
    poisonJobsParked: parked.filter((job) => POISON.has(job.kind)).length,
    handlerStarts,
    kills: history.faults.filter((f) => f.type === 'kill').length,
    poisonExits: history.faults.filter((f) => f.type === 'poisonExit').length,
    pauses: history.faults.filter((f) => f.type === 'pause').length,
    freezes: history.faults.filter((f) => f.type === 'freezeAll').length,
    restarts: restarts.length,
    connectionsTerminated: history.faults.filter((f) => f.type === 'terminate').length,
    ambiguousCommits: history.workerCuts.filter((c) => !c.failed).length + history.ambiguousSubmits.length,
    staleResultsRefused,
    staleByOperation,
    effectsRanTwice,
    jobsLost,
    jobsStartedEarly,
    worstStartBeforeRunAtMs,
    retriesBeforeBackoff,
    overlappingLeases,
    duplicateKeys,
    completionsReportedStaleButAccepted,
    jobsFinishedTwice,
    staleResultsAccepted,
    worstRecoveryAfterKillMs,
    worstRecoveryDuringRestartMs,
    recoveryBoundMs,
    recoveriesMeasured,
    recoveriesAfterLostClaim,
    worstRecoveryAfterLostClaimMs,
    healthyParkedBy: countLastError(parked.filter((job) => !POISON.has(job.kind))),
    recurring: (({ violations: _v, ...rest }) => ({ ...rest, gapList: rest.gapList.slice(0, 50) }))(recurring),
  };
  return { figures, violations };
}

function countLastError(jobs: Job[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const job of jobs) {
    const kind = job.errors.at(-1)?.kind ?? 'none';
    counts[kind] = (counts[kind] ?? 0) + 1;
  }
  return counts;
}

function parseArray(text: string | null | undefined): string[] {
  if (!text) return [];
  return text
    .replace(/^\{|\}$/g, '')
    .split(',')
    .map((s) => s.replace(/^"|"$/g, ''))
    .filter((s) => s !== '');
}
