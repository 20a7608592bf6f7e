/**
 * Keeps one worker's record in the live worker registry (`Store.workerRegister`): registered on
 * start, refreshed every `refreshMs` (ttl/6, so five refreshes in a row may fail before the record
 * lapses), refreshed at once when the worker's kinds change, removed on graceful stop. A worker
 * killed without stopping simply stops refreshing; its record expires `ttlMs` after the last
 * refresh, by the database clock, and its kinds then count as unhandled.
 *
 * A registry failure never stops the worker: claims do not depend on the registry (it is what
 * `listWorkers()` and the unhandled counts read), so errors are reported and the next refresh
 * tries again.
 */
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import type { Clock, ClockTimer } from '../clock/clock.js';
import { systemClock } from '../clock/clock.js';
import type { Store, WorkerRegistration } from '../store/store.js';

/** The registration a worker sends; read again before each refresh, so changed kinds are published. */
export type RegistrationSource = () => WorkerRegistration;

/** Settings and callbacks for a {@link WorkerRegistrar}. */
export interface WorkerRegistrarOptions {
  ttlMs: number;
  refreshMs: number;
  registration: RegistrationSource;
  onError(error: unknown, operation: 'register' | 'deregister'): void;
  /** Told after every successful registration (the worker uses it to log a recovery). */
  onRegistered?: (() => void) | undefined;
  /** Paces the timer; the real clock when omitted. */
  clock?: Clock | undefined;
}

let cachedVersion: string | undefined;

/** This package's version from its package.json ('' when it cannot be read). */
export function docketVersion(): string {
  if (cachedVersion !== undefined) return cachedVersion;
  try {
    // src/worker/ and dist/worker/ are both two levels below the package root.
    const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
    const version = (JSON.parse(text) as { version?: unknown }).version;
    cachedVersion = typeof version === 'string' ? version : '';
  } catch {
    cachedVersion = '';
  }
  return cachedVersion;
}

/** What a local worker says about its process (host, pid, version). */
export function localProcessIdentity(): Pick<WorkerRegistration, 'host' | 'pid' | 'version' | 'origin'> {
  return { host: hostname(), pid: process.pid, version: docketVersion(), origin: 'local' };
}

/** Registers, refreshes and deregisters one worker. */
export class WorkerRegistrar {
  private running = false;
  private timer: ClockTimer | undefined;
  private inFlight: Promise<void> | undefined;
  private again = false;

  private readonly clock: Clock;

  constructor(
    private readonly store: Store,
    private readonly options: WorkerRegistrarOptions,
  ) {
    this.clock = options.clock ?? systemClock;
  }

  /** Registers now (errors are reported, not thrown) and starts refreshing. */
  async start(): Promise<void> {
    this.running = true;
    await this.refresh();
  }

  /** Registers again now, e.g. because the worker's kinds changed; a refresh in flight is followed by one more. */
  refresh(): Promise<void> {
    if (!this.running) return Promise.resolve();
    if (this.inFlight) {
      this.again = true;
      return this.inFlight;
    }
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.inFlight = this.register().finally(() => {
      this.inFlight = undefined;
      if (!this.running) return;
      if (this.again) {
        this.again = false;
        void this.refresh();
      } else this.arm();
    });
    return this.inFlight;
  }

  /** Stops refreshing, waits for a registration in flight, then removes the record. */
  async stop(): Promise<void> {
    this.running = false;
    this.again = false;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    // Deregistering before an in-flight refresh lands would let that refresh re-create the record.
    await this.inFlight;
    try {
      await this.store.workerDeregister({ id: this.options.registration().id });
    } catch (error) {
      this.options.onError(error, 'deregister');
    }
  }

  private async register(): Promise<void> {
    try {
      await this.store.workerRegister({ worker: this.options.registration(), ttlMs: this.options.ttlMs });
      this.options.onRegistered?.();
    } catch (error) {
      this.options.onError(error, 'register');
    }
  }

  private arm(): void {
    this.timer = this.clock.setTimeout(() => {
      this.timer = undefined;
      void this.refresh();
    }, this.options.refreshMs);
    // The registry alone never keeps a process alive; the claim loop's timers do that.
    this.timer.unref();
  }
}
