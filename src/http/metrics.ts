/**
 * Prometheus metrics for one Docket instance, in a private Registry (never prom-client's global
 * one, so two servers in one process, or a user's own metrics, do not collide). Counters follow
 * Docket's events for in-process workers and are fed directly by the remote-worker endpoints,
 * which act on the store without going through a local worker. Queue depth is read from the
 * store at scrape time, so it is exact for every process sharing the database.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Docket } from '../docket.js';
import type { ClaimedJob } from '../job/job.js';
import type {
  ClaimedEvent,
  CompletedEvent,
  FailedEvent,
  ParkedEvent,
  StaleEvent,
  StartedEvent,
  SubmittedEvent,
} from '../worker/docket-events.js';

/** Buckets (seconds) for lateness and handler duration: 1 ms to 10 minutes. */
const SECONDS_BUCKETS = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600];

/** The metrics of one Docket server; see the README for the list. */
export class DocketMetrics {
  /** The private registry `/metrics` renders. */
  readonly registry = new Registry();
  readonly submitted: Counter<'queue'>;
  readonly claimed: Counter<'queue'>;
  readonly completed: Counter<'queue'>;
  readonly failed: Counter<'queue'>;
  readonly parked: Counter<'queue'>;
  readonly stale: Counter<'operation'>;
  readonly leasesExpired: Counter<'queue'>;
  readonly lateness: Histogram<'queue'>;
  readonly duration: Histogram<'queue'>;
  readonly httpRequests: Counter<'method' | 'route' | 'status'>;
  /** Reports how many remote claims wait in a long poll; set by the claim routes. */
  longPollsWaiting: () => number = () => 0;
  private readonly detach: () => void;

  constructor(docket: Docket) {
    const registers = [this.registry];
    this.submitted = new Counter({
      name: 'docket_jobs_submitted_total',
      help: 'Jobs accepted by submit (new jobs only; idempotent repeats are not counted).',
      labelNames: ['queue'],
      registers,
    });
    this.claimed = new Counter({
      name: 'docket_jobs_claimed_total',
      help: 'Jobs leased by a worker (local or remote).',
      labelNames: ['queue'],
      registers,
    });
    this.completed = new Counter({
      name: 'docket_jobs_completed_total',
      help: 'Completions accepted.',
      labelNames: ['queue'],
      registers,
    });
    this.failed = new Counter({
      name: 'docket_jobs_failed_total',
      help: 'Failed attempts recorded (retried or parked).',
      labelNames: ['queue'],
      registers,
    });
    this.parked = new Counter({
      name: 'docket_jobs_parked_total',
      help: 'Jobs moved to the dead-letter table.',
      labelNames: ['queue'],
      registers,
    });
    this.stale = new Counter({
      name: 'docket_stale_results_total',
      help: 'Fenced writes refused because the lease had passed to another claim.',
      labelNames: ['operation'],
      registers,
    });
    this.leasesExpired = new Counter({
      name: 'docket_leases_expired_total',
      help: 'Leases that lapsed without a result (found when the job was claimed again).',
      labelNames: ['queue'],
      registers,
    });
    this.lateness = new Histogram({
      name: 'docket_job_lateness_seconds',
      help: 'Start minus run_at.',
      labelNames: ['queue'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.duration = new Histogram({
      name: 'docket_job_duration_seconds',
      help: 'Handler duration of completed attempts.',
      labelNames: ['queue'],
      buckets: SECONDS_BUCKETS,
      registers,
    });
    this.httpRequests = new Counter({
      name: 'docket_http_requests_total',
      help: 'HTTP requests served, by route pattern and status.',
      labelNames: ['method', 'route', 'status'],
      registers,
    });
    const metrics = this;
    new Gauge({
      name: 'docket_remote_claims_waiting',
      help: 'Remote-worker claims currently waiting in a long poll.',
      registers,
      collect() {
        this.set(metrics.longPollsWaiting());
      },
    });
    new Gauge({
      name: 'docket_queue_depth',
      help: 'Jobs by queue and state, read from the store at scrape time.',
      labelNames: ['queue', 'state'],
      registers,
      async collect() {
        const stats = await docket.queueStats();
        this.reset();
        for (const row of stats) {
          for (const state of ['scheduled', 'available', 'running', 'done', 'cancelled', 'dead'] as const) {
            this.set({ queue: row.queue, state }, row[state]);
          }
        }
      },
    });

    new Gauge({
      name: 'docket_workers',
      help: 'Live workers in the registry (every process sharing the store), by origin; read at scrape time.',
      labelNames: ['origin'],
      registers,
      async collect() {
        const workers = await docket.listWorkers();
        this.reset();
        this.set({ origin: 'local' }, workers.filter((w) => w.origin === 'local').length);
        this.set({ origin: 'remote' }, workers.filter((w) => w.origin === 'remote').length);
      },
    });
    new Gauge({
      name: 'docket_jobs_unhandled',
      help: 'Due pending jobs no live worker serves (no handler for their kind on their queue), read at scrape time.',
      labelNames: ['queue', 'kind'],
      registers,
      async collect() {
        const unhandled = await docket.unhandledJobs();
        this.reset();
        for (const row of unhandled) this.set({ queue: row.queue, kind: row.kind }, row.count);
      },
    });

    const onSubmitted = (e: SubmittedEvent) => {
      if (e.created) this.submitted.inc({ queue: e.queue });
    };
    const onClaimed = (e: ClaimedEvent) => this.observeClaim(e.job);
    const onStarted = (e: StartedEvent) => this.lateness.observe({ queue: e.job.queue }, e.latenessMs / 1000);
    const onCompleted = (e: CompletedEvent) => {
      this.completed.inc({ queue: e.job.queue });
      this.duration.observe({ queue: e.job.queue }, e.durationMs / 1000);
    };
    const onFailed = (e: FailedEvent) => this.failed.inc({ queue: e.job.queue });
    const onParked = (e: ParkedEvent) => this.parked.inc({ queue: e.job.queue });
    const onStale = (e: StaleEvent) => this.stale.inc({ operation: e.operation });
    const events = docket.events;
    events.on('submitted', onSubmitted);
    events.on('claimed', onClaimed);
    events.on('started', onStarted);
    events.on('completed', onCompleted);
    events.on('failed', onFailed);
    events.on('parked', onParked);
    events.on('stale', onStale);
    this.detach = () => {
      events.off('submitted', onSubmitted);
      events.off('claimed', onClaimed);
      events.off('started', onStarted);
      events.off('completed', onCompleted);
      events.off('failed', onFailed);
      events.off('parked', onParked);
      events.off('stale', onStale);
    };
  }

  /** Counts a claim, and the lapsed lease behind it when the claim found one. */
  observeClaim(job: ClaimedJob): void {
    this.claimed.inc({ queue: job.queue });
    const last = job.errors.at(-1);
    // The store records a lease_expired error for the previous attempt when it re-claims a job
    // whose lease lapsed; that is the one place a lapsed lease is known for certain.
    if (last?.kind === 'lease_expired' && last.attempt === job.attempts - 1) {
      this.leasesExpired.inc({ queue: job.queue });
    }
  }

  /** The exposition text for `/metrics`. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Stops following the Docket's events. */
  dispose(): void {
    this.detach();
  }
}
