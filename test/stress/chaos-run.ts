/**
 * The chaos run: real worker processes on a real database, a producer, and a seeded nemesis.
 *
 * Timeline: set up (own PostgreSQL cluster or a SQLite file), start the workers, then for
 * `faultMs` the producer submits one-off, delayed, failing, long and poison jobs while the
 * nemesis, every decision drawn from `seededRandom(seed)`, kills workers with SIGKILL, freezes
 * them with SIGSTOP past their lease, freezes the whole fleet for 3-9 s (once halfway, then now
 * and again), restarts PostgreSQL with `-m immediate`, terminates the LISTEN connection and other
 * backends, and hides the answer of committed statements through a proxy (ambiguous commits). Then it heals everything, lets the queue drain, stops the workers
 * and hands the history, the ledgers and the final rows to the checker.
 *
 * Bounded: the fault phase and the drain have fixed limits, and every child process is killed on
 * the way out, including when the run throws. Loopback only.
 *
 * Failover (`failover` option, `npm run chaos -- --failover`): the database is a Patroni cluster
 * (test/failover/patroni-cluster.ts) and everyone connects through HAProxy. The nemesis then
 * kills the leader (`kill -9` of its postmaster and its Patroni) and runs planned switchovers
 * instead of restarting a single PostgreSQL; after a leader kill it restarts the killed node's
 * Patroni so it rejoins as the synchronous standby, and no further failover is injected until the
 * cluster is healthy again (a second failover before the standby caught up is a double fault,
 * which synchronous replication does not cover). Each failover is recorded as a `restart` fault
 * (the database is unavailable meanwhile) and measured: time until a write through HAProxy
 * succeeds, until the first claim on the new leader, until the cluster is healthy again.
 *
 * Shards (`shards` option, `npm run chaos -- --shards`): the store is Docket's sharded store over
 * three throwaway PostgreSQL clusters (bench/capped-clusters.ts, ports 5491-5493), one schema each.
 * The nemesis's database restart becomes a shard restart: one shard's postmaster is stopped with
 * `-m immediate` or killed with `kill -9` (with every backend, as a crashed host), held down for
 * 0.5-4 s and started again (crash recovery), while the other shards keep serving. Terminated
 * backends hit a random shard; ambiguous commits are cut on the first shard, through which worker 0
 * and the producer reach it. Each shard restart is recorded as a `restart` fault.
 *
 * Recurring jobs: before the faults start the harness creates {@link CHAOS_SCHEDULES} (every one
 * or two seconds, one per misfire policy, with and without jitter, one whose runs fail once);
 * their runs go to the same faulty workers. Once the faults stop and everything is healed, the
 * pending runs are recorded and the schedules paused (pausing deletes those runs), so the queue
 * can drain; the checker then verifies I7 from the rows (schedule-slot-checker.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { CappedCluster } from '../../bench/capped-clusters.js';
import { Docket } from '../../src/docket.js';
import type { Job } from '../../src/job/job.js';
import type { SubmitInput } from '../../src/job/job-spec.js';
import { type Random, seededRandom } from '../../src/retry/random.js';
import type { Schedule, ScheduleInput } from '../../src/schedule/schedule.js';
import type { PatroniCluster } from '../failover/patroni-cluster.js';
import {
  type AmbiguousSubmit,
  type ChaosVerdict,
  checkChaosRun,
  type FaultEvent,
  type SubmittedJob,
} from './chaos-checker.js';
import { type ChaosCluster, ensureChaosCluster, restartChaosCluster, terminateBackends } from './chaos-cluster.js';
import type { ChaosWorkerConfig, LedgerEntry } from './chaos-worker.js';
import { type CommitCut, CommitCuttingProxy } from './commit-cutting-proxy.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const WORKER_SCRIPT = join(ROOT, 'test', 'stress', 'chaos-worker.ts');
/** The exit code of a worker killed by its own poison job (chaos-worker.ts). */
const POISON_EXIT_CODE = 17;

/** Every worker process alive right now, across runs: killed on any exit of this process. */
const liveChildren = new Set<ChildProcess>();
process.once('exit', () => {
  // 'exit' handlers must be synchronous; kill() is. A frozen (SIGSTOPped) child dies of SIGKILL too.
  for (const child of liveChildren) child.kill('SIGKILL');
});

const SCHEDULE_RETRY = { baseDelayMs: 100, factor: 2, maxDelayMs: 2000, jitterRatio: 0.2 };

/**
 * The harness's schedules: 6-field crons every one or two seconds, so a database restart or a
 * few frozen workers miss several slots; one per misfire policy with and without jitter (both
 * modes); one whose runs throw on their first attempt (a retried recurring run plans nothing).
 * catch_up's cap is small (5) or its window short (4 s), so a fleet freeze (3-9 s) meets both.
 */
export const CHAOS_SCHEDULES: ScheduleInput[] = [
  { id: 'chaos.1s.skip', cron: '* * * * * *', job: { kind: 'chaos.sched', payload: { ms: 20 }, maxAttempts: 20 } },
  {
    id: 'chaos.2s.run-once',
    cron: '*/2 * * * * *',
    misfire: { policy: 'run_once' },
    job: { kind: 'chaos.sched', payload: { ms: 40 }, maxAttempts: 20 },
  },
  {
    id: 'chaos.1s.catch-up-cap5',
    cron: '* * * * * *',
    misfire: { policy: 'catch_up', catchUpWindowMs: 60_000, maxCatchUpRuns: 5 },
    job: { kind: 'chaos.sched', payload: { ms: 20 }, maxAttempts: 20 },
  },
  {
    id: 'chaos.2s.skip-jitter',
    cron: '*/2 * * * * *',
    jitterMs: 1500,
    jitterMode: 'per_occurrence',
    job: { kind: 'chaos.sched', payload: { ms: 30 }, maxAttempts: 20 },
  },
  {
    id: 'chaos.1s.catch-up-jitter',
    cron: '* * * * * *',
    jitterMs: 700,
    misfire: { policy: 'catch_up', catchUpWindowMs: 4000, maxCatchUpRuns: 20 },
    job: { kind: 'chaos.sched', payload: { ms: 20 }, maxAttempts: 20 },
  },
  {
    id: 'chaos.2s.run-once-failing',
    cron: '*/2 * * * * *',
    misfire: { policy: 'run_once' },
    job: { kind: 'chaos.sched.fail', payload: { ms: 10, failAttempts: 1 }, maxAttempts: 20, retry: SCHEDULE_RETRY },
  },
];

/** Settings of one chaos run. */
export interface ChaosOptions {
  store: 'postgres' | 'sqlite';
  seed: number;
  /** How long the producer and the nemesis run, ms. */
  faultMs: number;
  /** Longest wait for the queue to drain once faults stop, ms. */
  drainTimeoutMs: number;
  workers: number;
  concurrency: number;
  jobsPerSecond: number;
  /** Mean time between nemesis actions, ms. */
  faultIntervalMs: number;
  leaseMs: number;
  heartbeatIntervalMs: number;
  pollIntervalMs: number;
  /** Allowed on top of leaseMs + pollIntervalMs for a restart after a kill (process scheduling on a busy host). */
  recoverySlackMs: number;
  /** Run on a Patroni cluster behind HAProxy, whose leader the nemesis kills and switches over (postgres only). */
  failover?: ChaosFailover | undefined;
  /** Run on a sharded store over these clusters, whose shards the nemesis restarts (postgres only). */
  shards?: { clusters: readonly CappedCluster[] } | undefined;
  log: (line: string) => void;
}

/** A failover nemesis action. */
export type FailoverAction = 'leaderKill' | 'switchover';

/** The failover nemesis: the cluster it acts on and, optionally, a fixed plan. */
export interface ChaosFailover {
  cluster: PatroniCluster;
  /**
   * A fixed plan: exactly these actions, each at its offset from the start of the fault phase (a
   * later one waits until the cluster is healthy again), and no other fault. Omitted: the seeded
   * nemesis draws leader kills and switchovers among its usual faults.
   */
  plan?: { action: FailoverAction; atMs: number }[] | undefined;
}

/** What one failover took, host epoch ms and durations in ms. */
export interface FailoverFigure {
  action: FailoverAction;
  from: string;
  to: string;
  /** When the leader was killed, or the switchover command issued. */
  at: number;
  /** When the new leader was first seen as primary by its Patroni REST check. */
  newLeaderAt: number;
  /** From `at` until a write through HAProxy succeeded on the new leader. */
  writableAfterMs: number;
  /** From `at` until the first claim on the new leader (by the claim's database time), from the ledgers. */
  firstClaimAfterMs: number | null;
  /** From `at` until both nodes were back: a leader with a streaming synchronous standby. */
  healthyAfterMs: number;
}

/** Defaults: 2 s leases and 600 ms heartbeats so recoveries are quick. */
export const DEFAULT_CHAOS_OPTIONS: Omit<ChaosOptions, 'store' | 'seed' | 'log'> = {
  faultMs: 90_000,
  drainTimeoutMs: 90_000,
  workers: 4,
  concurrency: 16,
  jobsPerSecond: 40,
  faultIntervalMs: 2000,
  leaseMs: 2000,
  heartbeatIntervalMs: 600,
  pollIntervalMs: 500,
  recoverySlackMs: 1500,
};

/** What a run returns: its verdict plus how long each phase took. */
export interface ChaosResult extends ChaosVerdict {
  options: Omit<ChaosOptions, 'log'>;
  faultPhaseMs: number;
  drainMs: number;
  drained: boolean;
  submitRetries: number;
  unreadableLedgerLines: number;
  /** Worker processes that exited on their own (not killed by the nemesis, not a poison job): must be 0. */
  unexpectedWorkerExits: number;
  /** One entry per failover the nemesis injected (failover runs only). */
  failovers: FailoverFigure[];
  /** The shard clusters' ports (sharded runs only); their restarts count as database restarts. */
  shardPorts?: number[] | undefined;
}

interface WorkerSlot {
  index: number;
  generation: number;
  child: ChildProcess | undefined;
  pid: number | undefined;
  paused: boolean;
  ready: boolean;
  exited: Promise<void> | undefined;
  stderrTail: string;
}

/** Runs one chaos run end to end; never leaves a child process behind. */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const run = new ChaosRun(options);
  try {
    return await run.execute();
  } finally {
    await run.cleanup();
  }
}

class ChaosRun {
  private readonly nemesisRandom: Random;
  private readonly producerRandom: Random;
  private readonly respawnRandom: Random;
  private readonly dir = mkdtempSync(join(tmpdir(), 'docket-chaos-'));
  private cluster: ChaosCluster | undefined;
  /** The shard clusters of a sharded run, as the chaos helpers address clusters (by url and port). */
  private shardClusters: ChaosCluster[] = [];
  /** Shard URLs for the reader, the workers other than worker 0, and the producer and worker 0. */
  private shardUrls: { direct: string[]; worker: string[]; producer: string[] } | undefined;
  private schema: string | undefined;
  private directUrl = '';
  private workerProxy: CommitCuttingProxy | undefined;
  private producerProxy: CommitCuttingProxy | undefined;
  private workerProxyUrl = '';
  private producerUrl = '';
  private producer: Docket | undefined;
  private reader: Docket | undefined;
  private readonly slots: WorkerSlot[] = [];
  private readonly faults: FaultEvent[] = [];
  private readonly submitted: SubmittedJob[] = [];
  private readonly ambiguousSubmits: AmbiguousSubmit[] = [];
  private readonly pauseTimers = new Set<NodeJS.Timeout>();
  private keepWorkersAlive = true;
  private producing = true;
  private cutNextSubmit = false;
  private submitRetries = 0;
  private sequence = 0;
  private restarting: Promise<void> | undefined;
  private schedules: Schedule[] = [];
  /** Host epoch ms until which a fleet freeze holds every worker (respawns wait for it). */
  private frozenUntil = 0;
  private removedByPause: Job[] = [];
  private unexpectedWorkerExits = 0;
  private readonly failovers: FailoverFigure[] = [];

  constructor(private readonly options: ChaosOptions) {
    this.nemesisRandom = seededRandom(options.seed);
    this.producerRandom = seededRandom(options.seed ^ 0x5eed);
    this.respawnRandom = seededRandom(options.seed ^ 0xbeef);
  }

  async execute(): Promise<ChaosResult> {
    const o = this.options;
    await this.setUp();
    o.log(
      `chaos: seed ${o.seed}, store ${o.store}, ${o.workers} workers x ${o.concurrency}, ${o.jobsPerSecond} jobs/s, ` +
        `faults for ${Math.round(o.faultMs / 1000)} s, lease ${o.leaseMs} ms, heartbeat ${o.heartbeatIntervalMs} ms`,
    );
    await Promise.all(this.slots.map((slot) => this.spawnWorker(slot)));
    for (const input of CHAOS_SCHEDULES) {
      this.schedules.push((await (this.reader as Docket).schedule(input)).schedule);
    }

    const faultStart = Date.now();
    const faultEnd = faultStart + o.faultMs;
    const producing = this.produce(faultEnd);
    const progress = setInterval(() => {
      const counts = countBy(this.faults.map((f) => f.type));
      o.log(
        `chaos: ${Math.round((Date.now() - faultStart) / 1000)} s, ${this.submitted.length} submitted, faults ${JSON.stringify(counts)}`,
      );
    }, 30_000);
    try {
      await this.nemesis(faultEnd);
      await producing;
    } finally {
      clearInterval(progress);
    }
    const faultPhaseMs = Date.now() - faultStart;

    // Heal: no more arms, every frozen worker resumed, the database up, every slot running.
    this.workerProxy?.disarm();
    this.producerProxy?.disarm();
    await this.restarting;
    for (const timer of this.pauseTimers) clearTimeout(timer);
    this.pauseTimers.clear();
    for (const slot of this.slots) this.resume(slot);
    await this.stopSchedules();
    o.log(`chaos: faults stopped after ${Math.round(faultPhaseMs / 1000)} s; schedules paused; draining`);

    const drainStart = Date.now();
    const drained = await this.drain(drainStart + o.drainTimeoutMs);
    const drainMs = Date.now() - drainStart;
    o.log(`chaos: ${drained ? 'drained' : 'NOT drained'} in ${Math.round(drainMs / 1000)} s; stopping workers`);
    await this.stopWorkers();

    const jobs = await this.readAllJobs();
    const { entries, unreadable } = this.readLedgers();
    const verdict = checkChaosRun({
      leaseMs: o.leaseMs,
      pollIntervalMs: o.pollIntervalMs,
      recoverySlackMs: o.recoverySlackMs,
      pauseHoldsEveryWriter: o.store === 'sqlite',
      submitted: this.submitted,
      faults: this.faults,
      workerCuts: this.workerProxy?.cuts ?? [],
      ambiguousSubmits: this.ambiguousSubmits,
      ledger: entries,
      jobs,
      schedules: this.schedules,
      removedByPause: this.removedByPause,
    });
    for (const failover of this.failovers) failover.firstClaimAfterMs = firstClaimAfter(failover, entries);
    const { log: _log, failover: _failover, shards: _shards, ...printable } = o;
    return {
      ...verdict,
      options: printable,
      shardPorts: o.shards?.clusters.map((cluster) => cluster.port),
      unexpectedWorkerExits: this.unexpectedWorkerExits,
      failovers: this.failovers,
      faultPhaseMs,
      drainMs,
      drained,
      submitRetries: this.submitRetries,
      unreadableLedgerLines: unreadable,
    };
  }

  private async setUp(): Promise<void> {
    const o = this.options;
    let workerUrl: string;
    if (o.store === 'postgres' && o.shards) {
      await this.setUpShards(o.shards.clusters);
      return;
    }
    if (o.store === 'postgres') {
      const patroni = o.failover?.cluster;
      // Through HAProxy's write port, the one URL that follows the leader; its port is the cluster's.
      this.cluster = patroni
        ? {
            version: '15',
            name: 'patroni',
            port: Number(new URL(patroni.writeUrl).port),
            url: patroni.writeUrl,
            listenAddresses: [],
            trustNetworks: [],
            settings: {},
          }
        : await ensureChaosCluster();
      this.schema = `chaos_${o.seed}_${Date.now().toString(36)}`;
      this.directUrl = `${this.cluster.url}?schema=${this.schema}`;
      this.workerProxy = new CommitCuttingProxy('127.0.0.1', this.cluster.port);
      this.producerProxy = new CommitCuttingProxy('127.0.0.1', this.cluster.port);
      const workerPort = await this.workerProxy.listen();
      const producerPort = await this.producerProxy.listen();
      this.workerProxyUrl = `postgres://postgres@127.0.0.1:${workerPort}/postgres?schema=${this.schema}`;
      this.producerUrl = `postgres://postgres@127.0.0.1:${producerPort}/postgres?schema=${this.schema}`;
      workerUrl = this.directUrl;
    } else {
      this.directUrl = `sqlite:${join(this.dir, 'chaos.db')}`;
      this.producerUrl = this.directUrl;
      workerUrl = this.directUrl;
    }
    // Migrate once before anyone else opens the schema.
    this.reader = await Docket.open({ url: this.directUrl, poolSize: 2 });
    this.producer = await Docket.open({ url: this.producerUrl, poolSize: 2, random: seededRandom(o.seed + 1) });
    this.addSlots();
    this.workerUrlFor = (slot) => (slot.index === 0 && this.workerProxyUrl ? this.workerProxyUrl : workerUrl);
  }

  /**
   * The sharded set-up: one schema per shard cluster; worker 0 and the producer reach the first
   * shard through their commit-cutting proxies (the same shard order for everyone: a job's id
   * names its shard by position).
   */
  private async setUpShards(clusters: readonly CappedCluster[]): Promise<void> {
    const o = this.options;
    this.shardClusters = clusters.map((cluster) => ({
      version: '15',
      name: `shard-${cluster.port}`,
      port: cluster.port,
      url: cluster.url(),
      listenAddresses: [],
      trustNetworks: [],
      settings: {},
    }));
    this.schema = `chaos_${o.seed}_${Date.now().toString(36)}`;
    const schema = this.schema;
    const first = this.shardClusters[0];
    if (!first) throw new Error('a sharded chaos run needs at least one shard cluster');
    this.workerProxy = new CommitCuttingProxy('127.0.0.1', first.port);
    this.producerProxy = new CommitCuttingProxy('127.0.0.1', first.port);
    const workerPort = await this.workerProxy.listen();
    const producerPort = await this.producerProxy.listen();
    const direct = this.shardClusters.map((cluster) => `${cluster.url}?schema=${schema}`);
    const via = (port: number) => [
      `postgres://postgres@127.0.0.1:${port}/postgres?schema=${schema}`,
      ...direct.slice(1),
    ];
    this.shardUrls = { direct, worker: via(workerPort), producer: via(producerPort) };
    this.reader = await Docket.open({ shards: direct, poolSize: 2 });
    this.producer = await Docket.open({
      shards: this.shardUrls.producer,
      poolSize: 2,
      random: seededRandom(o.seed + 1),
    });
    this.addSlots();
  }

  private addSlots(): void {
    const o = this.options;
    for (let index = 0; index < o.workers; index += 1) {
      this.slots.push({
        index,
        generation: 0,
        child: undefined,
        pid: undefined,
        paused: false,
        ready: false,
        exited: undefined,
        stderrTail: '',
      });
    }
  }

  private workerUrlFor: (slot: WorkerSlot) => string = () => '';

  private spawnWorker(slot: WorkerSlot): Promise<void> {
    const o = this.options;
    slot.generation += 1;
    const id = `w${slot.index}g${slot.generation}`;
    const shards = this.shardUrls && (slot.index === 0 ? this.shardUrls.worker : this.shardUrls.direct);
    const config: ChaosWorkerConfig = {
      url: shards ? '' : this.workerUrlFor(slot),
      shards,
      id,
      ledger: join(this.dir, `${id}.jsonl`),
      leaseMs: o.leaseMs,
      heartbeatIntervalMs: o.heartbeatIntervalMs,
      pollIntervalMs: o.pollIntervalMs,
      concurrency: o.concurrency,
      shutdownGraceMs: 2000,
    };
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER_SCRIPT, JSON.stringify(config)], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    liveChildren.add(child);
    slot.child = child;
    slot.pid = child.pid;
    slot.paused = false;
    slot.ready = false;
    slot.stderrTail = '';
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      slot.stderrTail = (slot.stderrTail + chunk).slice(-2000);
      // The whole stderr too, beside the ledger, so a worker that dies on its own can be diagnosed.
      appendFileSync(join(this.dir, `${id}.stderr`), chunk);
    });
    const ready = new Promise<void>((resolve) => {
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        if (chunk.includes('ready')) {
          slot.ready = true;
          resolve();
        }
      });
      child.once('exit', () => resolve());
    });
    slot.exited = new Promise<void>((resolve) => {
      child.once('exit', (code, signal) => {
        liveChildren.delete(child);
        if (slot.child === child) {
          slot.child = undefined;
          slot.ready = false;
        }
        if (code === POISON_EXIT_CODE) this.faults.push({ type: 'poisonExit', at: Date.now(), pid: child.pid });
        else if (code !== 0 && signal !== 'SIGKILL') {
          this.unexpectedWorkerExits += 1;
          // pg's DatabaseError prints as `error: <message>`, so match any case.
          const reason = /^\S*error[^\n]*$/im.exec(slot.stderrTail)?.[0] ?? slot.stderrTail.trim().slice(-300);
          o.log(
            `chaos: worker ${id} exited with ${code ?? signal}: ${reason} (stderr: ${join(this.dir, `${id}.stderr`)})`,
          );
        }
        resolve();
        if (this.keepWorkersAlive) {
          // Respawn after a short, seeded delay so the pool stays at strength.
          // Not during a fleet freeze: a fresh worker would claim while "every worker" is frozen.
          const delay = Math.max(200 + Math.floor(this.respawnRandom() * 800), this.frozenUntil - Date.now());
          setTimeout(() => {
            if (this.keepWorkersAlive && !slot.child) void this.spawnWorker(slot);
          }, delay);
        }
      });
    });
    return ready;
  }

  private jobInput(): SubmitInput & { kind: string; maxAttempts: number } {
    const r = this.producerRandom;
    this.sequence += 1;
    const key = `c${this.options.seed}-${this.sequence}`;
    const delayMs = r() < 0.25 ? 50 + Math.floor(r() * 5000) : 0;
    const fastRetry = { baseDelayMs: 100, factor: 2, maxDelayMs: 2000, jitterRatio: 0.2 };
    const roll = r();
    if (roll < 0.0005) {
      return { kind: 'chaos.poison.exit', payload: null, maxAttempts: 3, retry: fastRetry, idempotencyKey: key };
    }
    if (roll < 0.0035) {
      return { kind: 'chaos.poison.throw', payload: null, maxAttempts: 3, retry: fastRetry, idempotencyKey: key };
    }
    if (roll < 0.0085) {
      return {
        kind: 'chaos.long',
        payload: { ms: this.options.leaseMs * 3 },
        maxAttempts: 20,
        idempotencyKey: key,
        delayMs,
      };
    }
    if (roll < 0.16) {
      return {
        kind: 'chaos.fail',
        payload: { ms: 10 + Math.floor(r() * 90), failAttempts: 1 + Math.floor(r() * 2) },
        maxAttempts: 20,
        retry: fastRetry,
        idempotencyKey: key,
        delayMs,
      };
    }
    return {
      kind: 'chaos.ok',
      payload: { ms: 5 + Math.floor(r() * 145) },
      maxAttempts: 20,
      idempotencyKey: key,
      delayMs,
    };
  }

  /** Submits batches every 100 ms until `faultEnd`, retrying a failed batch with the same keys. */
  private async produce(faultEnd: number): Promise<void> {
    const producer = this.producer;
    if (!producer) return;
    const perTick = this.options.jobsPerSecond / 10;
    let owed = 0;
    let nextTick = Date.now();
    while (Date.now() < faultEnd && this.producing) {
      owed += perTick;
      const count = Math.floor(owed);
      owed -= count;
      const inputs = Array.from({ length: count }, () => this.jobInput());
      let cut: Promise<CommitCut> | undefined;
      if (this.cutNextSubmit && this.producerProxy && inputs.length > 0) {
        this.cutNextSubmit = false;
        // Due in 3 s, so the jobs are still live when the retry comes and the key must match them.
        for (const input of inputs) input.delayMs = 3000;
        cut = this.producerProxy.arm((sql) => sql.includes('INSERT INTO'));
        void cut.then((c) => this.faults.push({ type: 'cut', at: c.at, detail: 'submit' }));
      }
      if (inputs.length > 0) await this.submitBatch(producer, inputs, cut);
      nextTick += 100;
      const wait = nextTick - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      else nextTick = Date.now();
    }
  }

  private async submitBatch(
    producer: Docket,
    inputs: (SubmitInput & { kind: string; maxAttempts: number })[],
    cut: Promise<CommitCut> | undefined,
  ): Promise<void> {
    let wasCut = false;
    if (cut) void cut.then(() => (wasCut = true));
    for (let attempt = 0; ; attempt += 1) {
      try {
        const results = await producer.submitMany(inputs);
        results.forEach((result, i) => {
          const input = inputs[i];
          if (!input) return;
          this.submitted.push({
            id: result.id,
            key: input.idempotencyKey ?? '',
            kind: input.kind,
            maxAttempts: input.maxAttempts,
          });
        });
        if (wasCut) {
          this.ambiguousSubmits.push({
            keys: inputs.map((input) => input.idempotencyKey ?? ''),
            ids: results.map((r) => r.id),
            created: results.map((r) => r.created),
          });
        }
        return;
      } catch {
        this.submitRetries += 1;
        // The batch may or may not have committed: the same idempotency keys make the retry safe.
        await new Promise((resolve) => setTimeout(resolve, Math.min(2000, 100 * 2 ** Math.min(attempt, 4))));
      }
    }
  }

  private liveSlots(): WorkerSlot[] {
    return this.slots.filter((slot) => slot.child && slot.ready);
  }

  private pick<T>(items: T[]): T | undefined {
    if (items.length === 0) return undefined;
    return items[Math.floor(this.nemesisRandom() * items.length)];
  }

  /** Injects faults until `faultEnd`; every choice comes from the seeded nemesis random. */
  private async nemesis(faultEnd: number): Promise<void> {
    const o = this.options;
    const plan = o.failover?.plan;
    if (plan) {
      await this.followPlan(plan, faultEnd);
      return;
    }
    const postgres = o.store === 'postgres';
    const weights: [string, number][] = o.shards
      ? [
          // A single PostgreSQL's restart is replaced by restarts of one shard at a time.
          ['kill', 0.3],
          ['pause', 0.24],
          ['shardRestart', 0.1],
          ['terminate', 0.1],
          ['cutComplete', 0.1],
          ['cutClaim', 0.05],
          ['cutSubmit', 0.1],
          ['freezeAll', 0.03],
        ]
      : o.failover
        ? [
            // A single PostgreSQL's restart is replaced by the cluster's failovers.
            ['kill', 0.3],
            ['pause', 0.24],
            ['leaderKill', 0.05],
            ['switchover', 0.05],
            ['terminate', 0.1],
            ['cutComplete', 0.1],
            ['cutClaim', 0.05],
            ['cutSubmit', 0.1],
            ['freezeAll', 0.03],
          ]
        : postgres
          ? [
              ['kill', 0.32],
              ['pause', 0.26],
              ['restart', 0.07],
              ['terminate', 0.1],
              ['cutComplete', 0.1],
              ['cutClaim', 0.05],
              ['cutSubmit', 0.1],
              ['freezeAll', 0.03],
            ]
          : [
              ['kill', 0.55],
              ['pause', 0.45],
              ['freezeAll', 0.03],
            ];
    const total = weights.reduce((sum, [, w]) => sum + w, 0);
    // One fleet freeze halfway through, whatever the draws: every run gets a stretch in which
    // no worker claims, so schedules miss slots and their misfire policies decide.
    const midFreezeAt = faultEnd - o.faultMs / 2;
    let midFreezeDone = false;
    while (Date.now() < faultEnd) {
      const wait = o.faultIntervalMs * (0.5 + this.nemesisRandom());
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(wait, faultEnd - Date.now()))));
      if (Date.now() >= faultEnd) break;
      let action = pickWeighted(weights, this.nemesisRandom() * total);
      if (!midFreezeDone && Date.now() >= midFreezeAt && Date.now() >= this.frozenUntil) {
        midFreezeDone = true;
        action = 'freezeAll';
      }
      const target = this.pick(this.liveSlots().filter((slot) => !slot.paused));
      const holdMs =
        action === 'freezeAll'
          ? 3000 + Math.floor(this.nemesisRandom() * 6000)
          : o.leaseMs + 300 + Math.floor(this.nemesisRandom() * 2500);
      try {
        await this.inject(action, target, holdMs);
      } catch (error) {
        o.log(`chaos: nemesis action ${action} failed: ${String(error)}`);
      }
    }
  }

  /** Runs a fixed failover plan: each action at its offset (once the cluster is healthy), nothing else. */
  private async followPlan(plan: { action: FailoverAction; atMs: number }[], faultEnd: number): Promise<void> {
    const start = faultEnd - this.options.faultMs;
    for (const step of plan) {
      await this.restarting;
      const wait = start + step.atMs - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      await this.inject(step.action, undefined, 0);
    }
    const rest = faultEnd - Date.now();
    if (rest > 0) await new Promise((resolve) => setTimeout(resolve, rest));
  }

  /**
   * One failover of the Patroni cluster: resolves once a write through HAProxy succeeds on the
   * new leader, while `this.restarting` holds until the cluster is healthy again (the killed node
   * restarted and caught up as the synchronous standby), so no second failover overlaps it.
   */
  private async failOver(action: FailoverAction): Promise<void> {
    const patroni = this.options.failover?.cluster;
    if (!patroni || this.restarting) return;
    const fault: FaultEvent = { type: 'restart', at: Date.now(), detail: `failover: ${action}` };
    let writable!: () => void;
    const becameWritable = new Promise<void>((resolve) => {
      writable = resolve;
    });
    this.restarting = (async () => {
      const before = await patroni.leader();
      const to = patroni.nodes.find((node) => node !== before);
      if (!to) throw new Error('the Patroni cluster has one node');
      this.faults.push(fault);
      if (action === 'leaderKill') fault.at = (await patroni.killLeader()).killedAt;
      else fault.at = (await patroni.switchover()).startedAt;
      await waitUntil(60_000, async () => (await patroni.roleOf(to)) === 'primary');
      const newLeaderAt = Date.now();
      await patroni.waitWritable(60_000);
      fault.until = Date.now();
      writable();
      const figure: FailoverFigure = {
        action,
        from: before.name,
        to: to.name,
        at: fault.at,
        newLeaderAt,
        writableAfterMs: fault.until - fault.at,
        firstClaimAfterMs: null,
        healthyAfterMs: 0,
      };
      if (action === 'leaderKill') await patroni.restartNode(before);
      await patroni.waitHealthy(120_000);
      figure.healthyAfterMs = Date.now() - fault.at;
      this.failovers.push(figure);
      this.options.log(
        `chaos: ${action} ${figure.from} -> ${figure.to}: writable after ${figure.writableAfterMs} ms, healthy after ${figure.healthyAfterMs} ms`,
      );
    })()
      .catch((error: unknown) => {
        fault.until ??= Date.now();
        this.options.log(`chaos: ${action} failed: ${String(error)}`);
      })
      .finally(() => {
        writable();
        this.restarting = undefined;
      });
    await becameWritable;
  }

  private async inject(action: string, target: WorkerSlot | undefined, holdMs: number): Promise<void> {
    const cluster = this.cluster;
    switch (action) {
      case 'leaderKill':
      case 'switchover': {
        await this.failOver(action);
        return;
      }
      case 'kill': {
        if (!target?.child) return;
        this.faults.push({ type: 'kill', at: Date.now(), pid: target.pid });
        target.child.kill('SIGKILL');
        return;
      }
      case 'pause': {
        if (!target?.child) return;
        const at = Date.now();
        target.child.kill('SIGSTOP');
        target.paused = true;
        this.faults.push({ type: 'pause', at, until: at + holdMs, pid: target.pid });
        const timer = setTimeout(() => {
          this.pauseTimers.delete(timer);
          this.resumeAfterFreeze(target);
        }, holdMs);
        this.pauseTimers.add(timer);
        return;
      }
      case 'freezeAll': {
        // Every worker process, ready or still starting: SIGSTOP for 3-9 s, then SIGCONT.
        // Workers already paused stay paused: their own resume waits for the freeze to end.
        const frozen = this.slots.filter((slot) => slot.child);
        if (frozen.length === 0 || Date.now() < this.frozenUntil) return;
        const at = Date.now();
        this.frozenUntil = at + holdMs;
        for (const slot of frozen) {
          if (slot.paused) continue;
          slot.child?.kill('SIGSTOP');
          slot.paused = true;
        }
        this.faults.push({ type: 'freezeAll', at, until: at + holdMs, detail: `${frozen.length} workers` });
        const timer = setTimeout(() => {
          this.pauseTimers.delete(timer);
          for (const slot of frozen) this.resume(slot);
        }, holdMs);
        this.pauseTimers.add(timer);
        return;
      }
      case 'restart': {
        if (!cluster || this.restarting) return;
        const at = Date.now();
        const fault: FaultEvent = { type: 'restart', at };
        this.faults.push(fault);
        this.restarting = restartChaosCluster(cluster).finally(() => {
          fault.until = Date.now();
          this.restarting = undefined;
        });
        await this.restarting;
        return;
      }
      case 'terminate': {
        const victim = this.shardClusters.length > 0 ? this.pick(this.shardClusters) : cluster;
        if (!victim) return;
        const count = await terminateBackends(victim, 'LISTEN%', 2);
        this.faults.push({ type: 'terminate', at: Date.now(), detail: `${count} backends on port ${victim.port}` });
        return;
      }
      case 'shardRestart': {
        const shards = this.options.shards?.clusters;
        if (!shards || this.restarting) return;
        const shard = this.pick([...shards]);
        if (!shard) return;
        const how = this.nemesisRandom() < 0.5 ? 'kill -9' : 'stop -m immediate';
        const downMs = 500 + Math.floor(this.nemesisRandom() * 3500);
        const fault: FaultEvent = { type: 'restart', at: Date.now(), detail: `shard ${shard.port}: ${how}` };
        this.faults.push(fault);
        this.restarting = (async () => {
          if (how === 'kill -9') await shard.kill9();
          else await shard.stop('immediate');
          await new Promise((resolve) => setTimeout(resolve, downMs));
          await shard.start();
        })()
          .catch((error: unknown) => {
            this.options.log(`chaos: shard ${shard.port} restart failed: ${String(error)}`);
          })
          .finally(() => {
            fault.until = Date.now();
            this.restarting = undefined;
          });
        await this.restarting;
        return;
      }
      case 'cutComplete': {
        void this.workerProxy
          ?.arm((sql) => sql.includes("SET state = 'done'") || /\."complete_jobs_[0-9a-f]{12}"\(/.test(sql))
          .then((cut) => this.faults.push({ type: 'cut', at: cut.at, detail: 'complete' }));
        return;
      }
      case 'cutClaim': {
        void this.workerProxy
          ?.arm(
            (sql) => sql.includes('token = j.token + 1') || /\."claim_(pending|searching)_[0-9a-f]{12}"\(/.test(sql),
          )
          .then((cut) => this.faults.push({ type: 'cut', at: cut.at, detail: 'claim' }));
        return;
      }
      case 'cutSubmit': {
        this.cutNextSubmit = true;
        return;
      }
    }
  }

  /**
   * Records each schedule's pending runs, then pauses it (which deletes them), so the queue can
   * drain. The record lets the checker count those slots as planned. Retries with backoff: the
   * database may still be coming back from the last restart.
   */
  private async stopSchedules(): Promise<void> {
    const reader = this.reader;
    if (!reader) return;
    for (const schedule of this.schedules) {
      for (let attempt = 0; ; attempt += 1) {
        try {
          const pending: Job[] = [];
          let afterId: string | undefined;
          for (;;) {
            const page = await reader.listJobs({ states: ['pending'], kind: schedule.job.kind, limit: 1000, afterId });
            pending.push(...page.filter((job) => job.scheduleId === schedule.id));
            if (page.length < 1000) break;
            afterId = page.at(-1)?.id;
          }
          await reader.pauseSchedule(schedule.id);
          this.removedByPause.push(...pending);
          break;
        } catch (error) {
          if (attempt >= 20) throw error;
          await new Promise((resolve) => setTimeout(resolve, 250 * Math.min(attempt + 1, 4)));
        }
      }
    }
  }

  /** Resumes a paused worker now, or when the fleet freeze holding every worker ends. */
  private resumeAfterFreeze(slot: WorkerSlot): void {
    const waitMs = this.frozenUntil - Date.now();
    if (waitMs <= 0) {
      this.resume(slot);
      return;
    }
    const timer = setTimeout(() => {
      this.pauseTimers.delete(timer);
      this.resume(slot);
    }, waitMs);
    this.pauseTimers.add(timer);
  }

  private resume(slot: WorkerSlot): void {
    if (!slot.paused) return;
    slot.paused = false;
    slot.child?.kill('SIGCONT');
  }

  /** Waits until no live job is left (or the deadline); true when drained. */
  private async drain(deadline: number): Promise<boolean> {
    const reader = this.reader;
    if (!reader) return false;
    for (;;) {
      try {
        const stats = await reader.queueStats();
        const live = stats.reduce((sum, q) => sum + q.scheduled + q.available + q.running, 0);
        if (live === 0) return true;
      } catch {
        // The database may still be coming back from the last restart.
      }
      if (Date.now() >= deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }

  private async stopWorkers(): Promise<void> {
    this.keepWorkersAlive = false;
    await Promise.all(
      this.slots.map(async (slot) => {
        const child = slot.child;
        if (!child) return;
        child.kill('SIGCONT');
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await slot.exited;
        clearTimeout(timer);
      }),
    );
  }

  private async readAllJobs(): Promise<Job[]> {
    const reader = this.reader;
    if (!reader) return [];
    const jobs: Job[] = [];
    let afterId: string | undefined;
    for (;;) {
      const page = await reader.listJobs({
        states: ['pending', 'running', 'done', 'cancelled'],
        limit: 1000,
        afterId,
      });
      jobs.push(...page);
      if (page.length < 1000) break;
      afterId = page.at(-1)?.id;
    }
    afterId = undefined;
    for (;;) {
      const page = await reader.listDeadLetters({ limit: 1000, afterId });
      jobs.push(...page);
      if (page.length < 1000) break;
      afterId = page.at(-1)?.id;
    }
    return jobs;
  }

  private readLedgers(): { entries: LedgerEntry[]; unreadable: number } {
    const entries: LedgerEntry[] = [];
    let unreadable = 0;
    for (const file of readdirSync(this.dir)) {
      if (!file.endsWith('.jsonl')) continue;
      for (const line of readFileSync(join(this.dir, file), 'utf8').split('\n')) {
        if (line === '') continue;
        try {
          entries.push(JSON.parse(line) as LedgerEntry);
        } catch {
          // A kill -9 can cut the last line of a ledger in half; it is counted, not trusted.
          unreadable += 1;
        }
      }
    }
    return { entries, unreadable };
  }

  /** Kills every child, closes connections, drops the schema and removes the files; never throws. */
  async cleanup(): Promise<void> {
    this.keepWorkersAlive = false;
    this.producing = false;
    for (const timer of this.pauseTimers) clearTimeout(timer);
    for (const slot of this.slots) {
      slot.child?.kill('SIGKILL');
    }
    await Promise.all(this.slots.map((slot) => slot.exited)).catch(() => {});
    await this.restarting?.catch(() => {});
    await this.producer?.close().catch(() => {});
    await this.reader?.close().catch(() => {});
    await this.workerProxy?.close().catch(() => {});
    await this.producerProxy?.close().catch(() => {});
    const clusters = this.cluster ? [this.cluster] : this.shardClusters;
    for (const cluster of this.schema && process.env.DOCKET_CHAOS_KEEP !== '1' ? clusters : []) {
      const client = new pg.Client({ connectionString: cluster.url });
      try {
        await client.connect();
        await client.query(`DROP SCHEMA IF EXISTS ${this.schema} CASCADE`);
      } catch {
        // Best effort: a leftover schema in a chaos cluster harms nobody.
      } finally {
        await client.end().catch(() => {});
      }
    }
    if (process.env.DOCKET_CHAOS_KEEP !== '1') rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls `check` every 100 ms until true; throws after `timeoutMs`. */
async function waitUntil(timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() >= deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Ms from a failover's start to the first claim on the new leader, by the claim instant the
 * ledgers record (database clock). After a leader kill any claim at or after the kill was served
 * by the new leader (the old one is dead); after a switchover, any claim at or after the new
 * leader was seen as primary (the old one is demoted before the new one is promoted).
 */
function firstClaimAfter(failover: FailoverFigure, entries: LedgerEntry[]): number | null {
  const from = failover.action === 'leaderKill' ? failover.at : failover.newLeaderAt;
  let first = Number.POSITIVE_INFINITY;
  for (const entry of entries) {
    if (entry.e === 'start' && entry.c !== undefined && entry.c >= from && entry.c < first) first = entry.c;
  }
  return Number.isFinite(first) ? first - failover.at : null;
}

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

/** The entry of `weights` that `roll` (uniform in [0, total)) lands on. */
function pickWeighted(weights: [string, number][], roll: number): string {
  let rest = roll;
  for (const [name, weight] of weights) {
    rest -= weight;
    if (rest < 0) return name;
  }
  return weights.at(-1)?.[0] ?? 'kill';
}
