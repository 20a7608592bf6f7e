/**
 * The demo's timings. Leases and backoff are scaled down from the 30 s lease of docs/design.md and
 * 2/4/8/16 s retries so the whole story plays out in about 30 s (about 10 s with `--fast`), while
 * keeping its ratios: heartbeat at a quarter of the lease, retries doubling each time.
 */

/** Every timing the demo's workers and jobs use. */
export interface DemoSettings {
  /** Lease per claim and per heartbeat. */
  leaseMs: number;
  /** A quarter of the lease: a missed beat still leaves margin before the lease lapses. */
  heartbeatIntervalMs: number;
  pollIntervalMs: number;
  /** First retry delay is baseDelayMs * 2; then 4x, 8x, 16x. */
  retryBaseDelayMs: number;
  maxAttempts: number;
  /** How long job 1's handler runs: longer than one lease, so only heartbeats keep it. */
  longJobMs: number;
  /** How long a report job's handler runs. */
  reportJobMs: number;
  /** How far ahead job 2 is scheduled. */
  aheadMs: number;
  /** How long child A runs job 2 before the demo kills it. */
  killAfterMs: number;
}

/** The settings for a normal or a `--fast` run. */
export function demoSettings(fast: boolean): DemoSettings {
  if (fast) {
    return {
      leaseMs: 1000,
      heartbeatIntervalMs: 250,
      pollIntervalMs: 100,
      retryBaseDelayMs: 250,
      maxAttempts: 5,
      longJobMs: 1500,
      reportJobMs: 1000,
      aheadMs: 2000,
      killAfterMs: 300,
    };
  }
  return {
    leaseMs: 2000,
    heartbeatIntervalMs: 500,
    pollIntervalMs: 200,
    retryBaseDelayMs: 1000,
    maxAttempts: 5,
    longJobMs: 3000,
    reportJobMs: 2000,
    aheadMs: 4000,
    killAfterMs: 500,
  };
}

/** The nominal retry delays after attempts 1..maxAttempts-1 (2, 4, 8, 16 s by default). */
export function demoRetryDelaysMs(settings: DemoSettings): number[] {
  return Array.from({ length: settings.maxAttempts - 1 }, (_, i) => settings.retryBaseDelayMs * 2 ** (i + 1));
}

/** The demo's settings as one line for the header. */
export function describeDemoSettings(settings: DemoSettings): string {
  const delays = demoRetryDelaysMs(settings)
    .map((ms) => `${ms / 1000}`)
    .join(', ');
  return (
    `lease ${settings.leaseMs} ms, heartbeat every ${settings.heartbeatIntervalMs} ms, poll every ${settings.pollIntervalMs} ms; ` +
    `failures retry after ${delays} s (no jitter), parked after ${settings.maxAttempts} attempts`
  );
}
