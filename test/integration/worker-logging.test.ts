/**
 * What a worker logs, through a real pino instance passed straight to `Docket.open` (issue 11):
 * Docket's Logger takes pino's (fields, message) order, so every field survives. Every failed
 * attempt, park, lost lease and stale write is logged at warn or above, and so are the store
 * connection's loss and recovery as the worker sees them.
 */

import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Docket, type Store, type WorkerOptions } from '../../src/index.js';
import { createTestDatabase, storeKinds, type TestDatabase } from '../support/stores.js';
import { deferred, within } from './support/deferred.js';
import { withStallProofLease } from './support/stall-proof-lease.js';

const FAST_RETRY = { baseDelayMs: 10, factor: 2, maxDelayMs: 50, jitterRatio: 0 };
const QUICK: WorkerOptions = { leaseMs: 600, heartbeatIntervalMs: 200, pollIntervalMs: 100, shutdownGraceMs: 300 };
/** QUICK for the tests that count runs but are not about leases. */
const LONG_LEASE = withStallProofLease(QUICK);

interface LogLine {
  level: number;
  msg: string;
  [field: string]: unknown;
}

/** A real pino logger writing JSON lines into memory. */
function capturingPino(): { logger: pino.Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const logger = pino(
    { level: 'debug', base: { service: 'test' } },
    { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) },
  );
  return { logger, lines };
}

const WARN = 40;
const ERROR = 50;

describe.each(storeKinds())('worker logs through pino on %s', (kind) => {
  let db: TestDatabase;
  const dockets: Docket[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(kind);
  });

  afterEach(async () => {
    await Promise.all(dockets.splice(0).map((docket) => docket.close()));
  });

  afterAll(async () => {
    await db?.drop();
  });

  it('keeps pino fields and logs each failed attempt and the park, with the parked event showing state dead', async () => {
    const { logger, lines } = capturingPino();
    const docket = await Docket.open({ url: db.url, logger });
    dockets.push(docket);
    docket.handle('log.fails', () => {
      throw new Error('upstream said no');
    });
    const parked = deferred<string>();
    docket.events.on('parked', (event) => parked.resolve(event.job.state));
    await docket.worker({ ...LONG_LEASE, id: 'log-worker', queues: ['log-fail'] }).start();
    const { id } = await docket.submit({ kind: 'log.fails', queue: 'log-fail', maxAttempts: 2, retry: FAST_RETRY });
    expect(await within(parked.promise, 10_000, 'park')).toBe('dead');

    const started = lines.find((line) => line.msg === 'docket: worker started');
    expect(started).toMatchObject({
      service: 'test',
      workerId: 'log-worker',
      kinds: ['log.fails'],
      queues: ['log-fail'],
    });
    const failures = lines.filter((line) => line.jobId === id && /attempt failed/.test(line.msg));
    expect(failures.map((line) => [line.level, line.attempt, line.kind, line.error])).toEqual([
      [WARN, 1, 'log.fails', 'upstream said no'],
      [WARN, 2, 'log.fails', 'upstream said no'],
    ]);
    expect(failures[0]?.retryAt).toEqual(expect.any(String));
    expect(failures[1]?.retryAt).toBeNull();
    const park = lines.find((line) => line.jobId === id && /parked/.test(line.msg));
    expect(park).toMatchObject({
      level: ERROR,
      kind: 'log.fails',
      attempt: 2,
      queue: 'log-fail',
      workerId: 'log-worker',
    });
  });

  it('logs a lost lease and the stale heartbeat when a running job is cancelled', async () => {
    const { logger, lines } = capturingPino();
    const docket = await Docket.open({ url: db.url, logger });
    dockets.push(docket);
    const started = deferred<string>();
    docket.handle('log.cancelled', (_payload, ctx) => {
      started.resolve(ctx.jobId);
      return new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    });
    const lost = deferred<string>();
    docket.events.on('leaseLost', (event) => lost.resolve(event.reason));
    // A lease long enough that the refusal arrives before it runs out unconfirmed on a loaded
    // machine (with 600 ms, one slow heartbeat round trip reads as lease_unconfirmed; 1.5 s left
    // no room for a 1-2 s stall); heartbeats stay frequent, so the refusal comes soon.
    await docket.worker({ ...QUICK, leaseMs: 10_000, heartbeatIntervalMs: 250, queues: ['log-cancel'] }).start();
    const { id } = await docket.submit({ kind: 'log.cancelled', queue: 'log-cancel' });
    await within(started.promise, 10_000, 'handler start');
    expect(await docket.cancelJob(id)).toBe('cancelled');
    expect(await within(lost.promise, 10_000, 'lease loss')).toBe('heartbeat_refused');

    const stale = lines.find((line) => line.jobId === id && /stale heartbeat/.test(line.msg));
    expect(stale).toMatchObject({ level: WARN, operation: 'heartbeat', kind: 'log.cancelled', attempt: 1 });
    const leaseLost = lines.find((line) => line.jobId === id && /lease lost/.test(line.msg));
    expect(leaseLost).toMatchObject({ level: WARN, reason: 'heartbeat_refused', kind: 'log.cancelled' });
  });

  it('logs a lease presumed lost when no heartbeat reaches the database', async () => {
    const { logger, lines } = capturingPino();
    const docket = await Docket.open({ url: db.url, logger });
    dockets.push(docket);
    const started = deferred<string>();
    docket.handle('log.frozen', (_payload, ctx) => {
      started.resolve(ctx.jobId);
      return new Promise<void>((resolve) => ctx.signal.addEventListener('abort', () => resolve()));
    });
    const lost = deferred<string>();
    docket.events.on('leaseLost', (event) => lost.resolve(event.reason));
    const worker = docket.worker({ ...QUICK, queues: ['log-frozen'] });
    await worker.start();
    const { id } = await docket.submit({ kind: 'log.frozen', queue: 'log-frozen' });
    await within(started.promise, 10_000, 'handler start');
    worker.pauseHeartbeats(true);
    expect(await within(lost.promise, 10_000, 'lease loss')).toBe('lease_unconfirmed');
    const line = lines.find((entry) => entry.jobId === id && /lease lost/.test(entry.msg));
    expect(line).toMatchObject({ level: WARN, reason: 'lease_unconfirmed', kind: 'log.frozen' });
    worker.pauseHeartbeats(false);
  });

  it('logs the store connection lost once and recovered once', async () => {
    const { logger, lines } = capturingPino();
    const real = await db.open();
    // Fault injection around the real store: while `down`, claims fail as with a dropped connection.
    let down = false;
    const faulty = new Proxy(real, {
      get(target, property, receiver) {
        const value = Reflect.get(target, property, receiver) as unknown;
        if (property === 'jobClaim' || property === 'jobNextRunAt') {
          return (...args: unknown[]) => {
            if (down) return Promise.reject(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
            return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
          };
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Store;
    const docket = await Docket.open({ store: faulty, logger });
    dockets.push(docket);
    docket.handle('log.conn', async () => {});
    const errors: string[] = [];
    docket.events.on('error', (event) => errors.push(event.operation));
    await docket.worker({ ...QUICK, queues: ['log-conn'] }).start();
    down = true;
    const failedTwice = deferred();
    docket.events.on('error', () => {
      if (errors.filter((op) => op === 'claim').length >= 2) failedTwice.resolve();
    });
    await within(failedTwice.promise, 10_000, 'claims failing');
    down = false;
    const { id } = await docket.submit({ kind: 'log.conn', queue: 'log-conn' });
    const done = deferred();
    docket.events.on('completed', (event) => event.job.id === id && done.resolve());
    await within(done.promise, 10_000, 'completion after recovery');

    expect(lines.filter((line) => /store connection lost/.test(line.msg))).toEqual([
      expect.objectContaining({ level: WARN, operation: 'claim', error: 'connect ECONNREFUSED' }),
    ]);
    // Claims failed at least twice, but only the first is a warning: retries are not logged one by one.
    expect(errors.filter((op) => op === 'claim').length).toBeGreaterThanOrEqual(2);
    expect(lines.filter((line) => line.msg === 'docket: claim failed')).toEqual([
      expect.objectContaining({ level: WARN, operation: 'claim' }),
    ]);
    const recovered = lines.filter((line) => /store connection recovered/.test(line.msg));
    expect(recovered).toHaveLength(1);
    expect(recovered[0]?.downMs).toEqual(expect.any(Number));
    await docket.close();
    await real.close();
  });
});
