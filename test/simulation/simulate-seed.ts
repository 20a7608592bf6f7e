/**
 * One seeded simulation against a real store, in process, with pinned time: the design's
 * 200-seed simulation generalised with worker clock skew, database restarts and poison jobs.
 *
 * Time. The database clock is the simulation's time: every store call passes `now = base + t`.
 * Each worker also has its own clock, offset by up to ±5 minutes and running up to 10 % fast or
 * slow; workers use it only to pace themselves (when to poll, when to heartbeat, and when they
 * believe the next job is due, converting the store's answer to their own clock as a real worker
 * would). A worker whose clock runs ahead therefore asks early; the store must still hand out
 * nothing before its run_at. A slow clock stretches heartbeats; a lease lost that way is allowed
 * (the handler may run twice) but two live leases on one job are not.
 *
 * Faults per step, all drawn from `seededRandom(seed)`: handlers that crash (never answer),
 * fail (throw), stall past their lease and still finish, or succeed; poison jobs that crash or
 * throw on every attempt; whole workers that crash and come back under a new id; and database
 * restarts (the store is closed and reopened between two calls).
 *
 * Recurring schedules: half the seeds also create one to three schedules in their queue (crons
 * every 20, 30 or 60 s or at :00 and :45 of each minute, with or without jitter in either mode,
 * any misfire policy, from a separate seeded random so each seed stays replayable), whose runs
 * meet the same crashes, stalls and restarts, plus one fleet outage (every worker down at once
 * for 20 to 150 s) so slots are missed and the misfire policy decides; workers call the repair
 * sweep now and then, as real ones do. At 300 s the pending runs are recorded and the schedules paused, so the seed can end.
 *
 * Checked per seed: I1 every job ends done or dead and nothing is left live; I2 at most one
 * accepted completion per job, and a done job ran its effect; I3 no claim while another claim's
 * lease (as last extended) is live and unended; I4 no claim before run_at by the database clock;
 * I5 poison jobs parked with attempts = maxAttempts; I6 every retry's delay inside its band;
 * I7 one job per (schedule, slot), gaps only where the misfire policy allows, and no recurring
 * run claimed before slot + jitter offset (test/stress/schedule-slot-checker.ts).
 */
import type { ClaimedJob, Job } from '../../src/job/job.js';
import { DEFAULT_RETRY_POLICY } from '../../src/job/job-spec.js';
import { backoffBand, decideAfterFailure } from '../../src/retry/backoff.js';
import { type Random, seededRandom } from '../../src/retry/random.js';
import { normalizeScheduleSpec, type ScheduleSpec } from '../../src/schedule/schedule.js';
import type { Store } from '../../src/store/store.js';
import { checkScheduleSlots, type RunClaim } from '../stress/schedule-slot-checker.js';

/** Opens the store again after a simulated restart; the data must still be there. */
export interface SimulatedDatabase {
  open(): Promise<Store>;
}

/** Figures for one seed (summed over seeds by the runner). */
export interface SeedFigures {
  jobs: number;
  poisonJobs: number;
  claims: number;
  completions: number;
  staleRefused: number;
  effectsTwice: number;
  healthyParked: number;
  poisonParked: number;
  restarts: number;
  workerCrashes: number;
  earlyWakeUps: number;
  steps: number;
  schedules: number;
  fleetOutages: number;
  recurringRuns: number;
  gaps: number;
  missedSlots: number;
}

/** The outcome of one seed. */
export interface SeedResult {
  seed: number;
  figures: SeedFigures;
  violations: string[];
}

type Outcome = 'crash' | 'fail' | 'stall' | 'ok';

interface SimWorker {
  id: string;
  generation: number;
  offsetMs: number;
  rate: number;
  pollEveryMs: number;
  /** Own-clock instant of the next poll. */
  nextPollOwn: number;
  /** Database time until which a crashed worker stays down. */
  downUntil: number;
  /** Takes database instants for its own clock's readings (no offset correction). */
  naive: boolean;
}

interface Running {
  job: ClaimedJob;
  worker: SimWorker;
  generation: number;
  outcome: Outcome;
  finishAt: number;
  nextBeatOwn: number;
  lost: boolean;
}

interface LeaseModel {
  token: number;
  leaseUntil: number;
  ended: boolean;
}

const LEASE_MS = 30_000;
const HEARTBEAT_OWN_MS = 10_000;
const MAX_TIME_MS = 6000_000;
/** When the seed's schedules are paused, so the seed can drain and end. */
const SCHEDULES_STOP_MS = 300_000;
const SCHEDULE_CRONS = ['*/20 * * * * *', '*/30 * * * * *', '0 * * * * *', '0,45 * * * * *'] as const;
/** The simulation's epoch: a fixed instant, so every seed replays exactly. */
const BASE_MS = Date.UTC(2030, 0, 1);

function choice<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random() * items.length)] as T;
}

/** Every figure at zero: one seed's starting counts, and the identity for summing seeds. */
export function emptySeedFigures(): SeedFigures {
  return {
    jobs: 0,
    poisonJobs: 0,
    claims: 0,
    completions: 0,
    staleRefused: 0,
    effectsTwice: 0,
    healthyParked: 0,
    poisonParked: 0,
    restarts: 0,
    workerCrashes: 0,
    earlyWakeUps: 0,
    steps: 0,
    schedules: 0,
    fleetOutages: 0,
    recurringRuns: 0,
    gaps: 0,
    missedSlots: 0,
  };
}

/** Runs seed `seed` against `database`, in queue `queue` (so seeds can share one database). */
export async function simulateSeed(
  seed: number,
  database: SimulatedDatabase,
  queue = `sim-${seed}`,
): Promise<SeedResult> {
  const random = seededRandom(seed);
  const violations: string[] = [];
  const violate = (line: string) => violations.push(`seed ${seed}: ${line}`);
  const figures = emptySeedFigures();
  let store = await database.open();
  const at = (t: number) => new Date(BASE_MS + t);
  try {
    // Jobs: like the design's, plus poison ones.
    const kinds = new Map<string, 'normal' | 'poison.crash' | 'poison.throw'>();
    const count = 1 + Math.floor(random() * 25);
    const specs = Array.from({ length: count }, () => {
      const roll = random();
      const kind = roll < 0.08 ? 'poison.crash' : roll < 0.16 ? 'poison.throw' : 'normal';
      const t0 = Math.floor(random() * 120) * 1000;
      return { kind, t0 };
    });
    const results = await store.jobSubmit({
      now: at(0),
      jobs: specs.map((spec) => ({
        kind: spec.kind,
        queue,
        payloadJson: 'null',
        priority: 0,
        runAt: at(spec.t0),
        delayMs: 0,
        maxAttempts: 5,
        retryPolicy: DEFAULT_RETRY_POLICY,
        timeoutMs: null,
        idempotencyKey: null,
        scheduleId: null,
        scheduleSlot: null,
      })),
    });
    results.forEach((result, i) => {
      const spec = specs[i];
      if (!spec) return;
      kinds.set(result.id, spec.kind as 'normal');
      figures.jobs += 1;
      if (spec.kind !== 'normal') figures.poisonJobs += 1;
    });

    // Schedules come from their own random, so a seed's jobs and faults stay as they were drawn.
    const scheduleRandom = seededRandom(seed ^ 0x5c4ed);
    const schedules: ScheduleSpec[] = [];
    if (scheduleRandom() < 0.5) {
      const scheduleCount = 1 + Math.floor(scheduleRandom() * 3);
      for (let i = 0; i < scheduleCount; i += 1) {
        const policy = choice(scheduleRandom, ['skip', 'run_once', 'catch_up'] as const);
        const spec = normalizeScheduleSpec({
          id: `${queue}.s${i}`,
          cron: choice(scheduleRandom, SCHEDULE_CRONS),
          jitterMs: choice(scheduleRandom, [0, 0, 5000, 15_000]),
          jitterMode: choice(scheduleRandom, ['stable', 'per_occurrence'] as const),
          misfire:
            policy === 'catch_up'
              ? {
                  policy,
                  catchUpWindowMs: choice(scheduleRandom, [45_000, 600_000]),
                  maxCatchUpRuns: choice(scheduleRandom, [1, 2, 10]),
                }
              : { policy },
          job: { kind: 'sched', queue, maxAttempts: 5 },
        });
        await store.scheduleUpsert({ now: at(0), spec });
        schedules.push(spec);
      }
      figures.schedules += schedules.length;
    }
    let schedulesStopped = schedules.length === 0;
    // One fleet outage while the schedules run: no worker claims, so slots pass unplanned.
    let outageAt =
      schedules.length === 0 ? Number.POSITIVE_INFINITY : 20_000 + Math.floor(scheduleRandom() * 200) * 1000;
    const outageMs = 20_000 + Math.floor(scheduleRandom() * 130) * 1000;
    const removedByPause: Job[] = [];
    const recurringClaims: RunClaim[] = [];
    const crashes: { from: number; to: number }[] = [];

    const workerCount = 1 + Math.floor(random() * 4);
    const workers: SimWorker[] = Array.from({ length: workerCount }, (_, i) => ({
      id: `sim-${seed}-w${i}`,
      generation: 0,
      offsetMs: Math.round((random() - 0.5) * 2 * 5 * 60_000),
      rate: 0.9 + random() * 0.2,
      pollEveryMs: 1000 + Math.floor(random() * 4) * 1000,
      nextPollOwn: Number.NEGATIVE_INFINITY,
      downUntil: 0,
      naive: random() < 0.5,
    }));
    const own = (w: SimWorker, t: number) => w.offsetMs + t * w.rate;
    const fromOwn = (w: SimWorker, ownMs: number) => (ownMs - w.offsetMs) / w.rate;

    const leases = new Map<string, LeaseModel>();
    const effects = new Map<string, number>();
    const accepted = new Map<string, number>();
    let running: Running[] = [];
    let t = 0;

    while (t <= MAX_TIME_MS) {
      figures.steps += 1;
      const now = at(t);

      // A database restart between two calls: every later call goes to a freshly opened store.
      if (random() < 0.01) {
        await store.close();
        store = await database.open();
        figures.restarts += 1;
      }

      if (!schedulesStopped && t >= SCHEDULES_STOP_MS) {
        // Pausing deletes the pending runs: record them first, so their slots count as planned.
        schedulesStopped = true;
        const pending = await store.jobList({ states: ['pending'], queue, limit: 1000 });
        removedByPause.push(...pending.filter((job) => job.scheduleId !== null));
        for (const spec of schedules) await store.schedulePause({ now, id: spec.id });
      }

      if (t >= outageAt) {
        outageAt = Number.POSITIVE_INFINITY;
        figures.fleetOutages += 1;
        crashes.push({ from: t, to: t + outageMs });
        for (const worker of workers) {
          worker.generation += 1;
          worker.downUntil = Math.max(worker.downUntil, t + outageMs);
          worker.nextPollOwn = Number.NEGATIVE_INFINITY;
        }
        running = [];
      }

      for (const worker of workers) {
        if (t < worker.downUntil) continue;
        if (random() < 0.004) {
          // The whole worker crashes: its handlers never answer; it comes back under a new id.
          figures.workerCrashes += 1;
          worker.generation += 1;
          worker.downUntil = t + 5000 + Math.floor(random() * 20) * 1000;
          crashes.push({ from: t, to: worker.downUntil });
          worker.nextPollOwn = Number.NEGATIVE_INFINITY;
          running = running.filter((r) => r.worker !== worker);
          continue;
        }
        if (own(worker, t) < worker.nextPollOwn) continue;
        const claimed = await store.jobClaim({
          now,
          owner: `${worker.id}g${worker.generation}`,
          limit: Math.floor(random() * 4),
          leaseMs: LEASE_MS,
          queues: [queue],
        });
        // The repair sweep, as real workers run it every 30 s or so.
        if (!schedulesStopped && scheduleRandom() < 0.1) await store.scheduleRepair({ now });
        for (const job of claimed) {
          figures.claims += 1;
          if (job.scheduleId !== null) {
            recurringClaims.push({ jobId: job.id, token: job.token, claimedAtMs: now.getTime() });
          }
          const due = job.runAt.getTime() - BASE_MS;
          if (due > t) violate(`I4 job ${job.id} claimed at ${t} ms before its run_at ${due} ms`);
          const model = leases.get(job.id);
          if (model && !model.ended && model.leaseUntil > t) {
            violate(
              `I3 job ${job.id} claimed (token ${job.token}) at ${t} ms while token ${model.token} holds it until ${model.leaseUntil}`,
            );
          }
          if (model && job.token <= model.token)
            violate(`I3 job ${job.id} token went from ${model.token} to ${job.token}`);
          leases.set(job.id, { token: job.token, leaseUntil: job.leaseUntil.getTime() - BASE_MS, ended: false });
          const kind = kinds.get(job.id);
          const outcome: Outcome =
            kind === 'poison.crash'
              ? 'crash'
              : kind === 'poison.throw'
                ? 'fail'
                : choice(random, ['crash', 'fail', 'stall', 'ok', 'ok', 'ok', 'ok'] as const);
          running.push({
            job,
            worker,
            generation: worker.generation,
            outcome,
            finishAt: t + choice(random, [5, 20, 45]) * 1000,
            nextBeatOwn: own(worker, t) + HEARTBEAT_OWN_MS,
            lost: false,
          });
        }
        // Sleep until the next poll or until the next job is due, as this worker's clock reads it.
        const next = await store.jobNextRunAt({ now, queues: [queue] });
        const ownNow = own(worker, t);
        let wake = ownNow + worker.pollEveryMs;
        if (next !== null) {
          // A naive worker reads the database instant as a reading of its own clock, so a clock
          // running ahead wakes it early (and the store must still hand out nothing early); an
          // aware one corrects by its offset, as the real JobClaimer does with store.now().
          const dueMs = next.getTime() - BASE_MS;
          const believed = worker.naive ? dueMs : own(worker, dueMs);
          wake = Math.min(wake, Math.max(ownNow + 1000, believed));
          if (fromOwn(worker, wake) < dueMs) figures.earlyWakeUps += 1;
        }
        worker.nextPollOwn = wake;
      }

      for (const r of [...running]) {
        if (r.lost) continue;
        // Healthy handlers heartbeat on their worker's clock; crashing and stalling ones do not.
        if ((r.outcome === 'fail' || r.outcome === 'ok') && own(r.worker, t) >= r.nextBeatOwn) {
          r.nextBeatOwn += HEARTBEAT_OWN_MS;
          const until = await store.jobHeartbeat({ now, id: r.job.id, token: r.job.token, leaseMs: LEASE_MS });
          const model = leases.get(r.job.id);
          if (until === null) {
            figures.staleRefused += 1;
            r.lost = true;
            running = running.filter((x) => x !== r);
            continue;
          }
          if (model && model.token === r.job.token) model.leaseUntil = until.getTime() - BASE_MS;
        }
        if (t < r.finishAt) continue;
        running = running.filter((x) => x !== r);
        const model = leases.get(r.job.id);
        if (r.outcome === 'ok' || r.outcome === 'stall') {
          effects.set(r.job.id, (effects.get(r.job.id) ?? 0) + 1);
          const verdict = await store.jobComplete({ now, id: r.job.id, token: r.job.token });
          if (verdict === 'done') {
            figures.completions += 1;
            accepted.set(r.job.id, (accepted.get(r.job.id) ?? 0) + 1);
            if (model && model.token === r.job.token) model.ended = true;
          } else figures.staleRefused += 1;
        } else if (r.outcome === 'fail') {
          const decision = decideAfterFailure({
            attempts: r.job.attempts,
            maxAttempts: r.job.maxAttempts,
            policy: r.job.retryPolicy,
            random,
          });
          const outcome = await store.jobFail({
            now,
            id: r.job.id,
            token: r.job.token,
            error: { message: 'simulated failure', kind: 'thrown', detail: undefined },
            decision,
          });
          if (outcome.outcome === 'stale') figures.staleRefused += 1;
          else if (model && model.token === r.job.token) model.ended = true;
          if (outcome.outcome === 'retry') {
            const delayMs = outcome.runAt.getTime() - now.getTime();
            const band = backoffBand(r.job.retryPolicy, r.job.attempts);
            if (delayMs < band.minMs || delayMs >= band.maxMs + 1) {
              violate(
                `I6 job ${r.job.id}: retry after attempt ${r.job.attempts} in ${delayMs} ms, band [${band.minMs}, ${band.maxMs})`,
              );
            }
          }
        }
      }

      // Stop once nothing is live: ask the store (claims can park jobs the model never sees).
      if (running.length === 0) {
        const live = await store.jobList({ states: ['pending', 'running'], queue, limit: 1 });
        if (live.length === 0) break;
      }
      // Jump to the next instant anything can happen: a poll, a heartbeat, a finish, a restart.
      let nextT = Math.min(t + 60_000, outageAt);
      for (const worker of workers) {
        nextT = Math.min(nextT, t < worker.downUntil ? worker.downUntil : fromOwn(worker, worker.nextPollOwn));
      }
      for (const r of running) {
        nextT = Math.min(nextT, r.finishAt);
        if (r.outcome === 'fail' || r.outcome === 'ok') nextT = Math.min(nextT, fromOwn(r.worker, r.nextBeatOwn));
      }
      t = Math.max(t + 1, Math.ceil(nextT));
    }

    // I1 for every job of the queue, recurring runs included: nothing live is left.
    const live = await store.jobList({ states: ['pending', 'running'], queue, limit: 10 });
    for (const job of live) violate(`I1 job ${job.id} (${job.kind}) ended ${job.state}`);

    // I7: one job per slot, gaps only where the policy allows; recurring I4 against slot + offset.
    if (schedules.length > 0) {
      const rows = [
        ...(await store.jobList({ queue, limit: 1000 })),
        ...(await store.deadLetterList({ queue, limit: 1000 })),
      ];
      const verdict = checkScheduleSlots({
        schedules,
        jobs: rows,
        removedByPause,
        claims: recurringClaims,
        causeOf: (fromMs, toMs) =>
          crashes.some((c) => BASE_MS + c.from <= toMs && BASE_MS + c.to >= fromMs) ? 'worker crash' : 'poll cadence',
      });
      for (const line of verdict.violations) violate(line);
      figures.recurringRuns += verdict.slotsRun;
      figures.gaps += verdict.gaps;
      figures.missedSlots += verdict.missedSlots;
    }

    // I1, I2, I5: every job terminal; one accepted completion; poison parked after maxAttempts.
    for (const [id, kind] of kinds) {
      const job = await store.jobGet({ id });
      if (!job) {
        violate(`I1 job ${id} is missing`);
        continue;
      }
      if (job.state !== 'done' && job.state !== 'dead') violate(`I1 job ${id} ended ${job.state}`);
      if ((accepted.get(id) ?? 0) > 1) violate(`I2 job ${id}: ${accepted.get(id)} completions accepted`);
      if (job.state === 'done' && (effects.get(id) ?? 0) < 1)
        violate(`I2 job ${id} is done but its handler never finished`);
      if ((effects.get(id) ?? 0) > 1) figures.effectsTwice += 1;
      if (kind !== 'normal') {
        if (job.state !== 'dead') violate(`I5 poison job ${id} (${kind}) ended ${job.state}`);
        else if (job.attempts !== job.maxAttempts) violate(`I5 poison job ${id} parked after ${job.attempts} attempts`);
        else figures.poisonParked += 1;
      } else if (job.state === 'dead') figures.healthyParked += 1;
    }
  } finally {
    await store.close();
  }
  return { seed, figures, violations };
}
