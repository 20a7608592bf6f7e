/**
 * Small helpers the conformance suite shares: pinned instants, valid job specs, and a waiter for
 * events, so tests read as the behaviour they check rather than as setup.
 */

import { afterAll, beforeAll } from 'vitest';
import type { JobSpec, SubmitInput } from '../../src/job/job-spec.js';
import { normalizeSubmit } from '../../src/job/job-spec.js';
import type { RetryDecision } from '../../src/retry/backoff.js';
import type { Store } from '../../src/store/store.js';
import { createTestDatabase, type StoreKind, type TestDatabase } from '../support/stores.js';

/** A pinned instant `seconds` after the epoch, as the design's toy model counts time. */
export function t(seconds: number): Date {
  return new Date(seconds * 1000);
}

/** A validated job spec; jitter draws 0 so the spec is deterministic. */
export function spec(input: SubmitInput): JobSpec {
  return normalizeSubmit(input, () => 0);
}

/** Unique queue names, so tests sharing one database never see each other's jobs. */
export function queueNamer(prefix: string): () => string {
  let n = 0;
  return () => `${prefix}_${++n}`;
}

/** A retry decision with a fixed delay. */
export function retryIn(delayMs: number): RetryDecision {
  return { kind: 'retry', delayMs };
}

/** The park decision. */
export const PARK: RetryDecision = { kind: 'park' };

/** A handler error as a worker would report it. */
export function thrown(message: string): { message: string; kind: 'thrown'; detail?: string } {
  return { message, kind: 'thrown', detail: `Error: ${message}\n    at handler` };
}

/** Submits one job and returns its id, failing loudly if the store did not create it. */
export async function submitOne(store: Store, input: SubmitInput, now?: Date): Promise<string> {
  const [result] = await store.jobSubmit({ jobs: [spec(input)], now });
  if (!result?.created) throw new Error(`submit of ${JSON.stringify(input)} created no job: ${JSON.stringify(result)}`);
  return result.id;
}

/** Resolves as `promise` does, or rejects after `timeoutMs` naming what never happened. */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no ${what} within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** What {@link useConformanceDatabase} gives a conformance suite. */
export interface ConformanceHarness {
  /**
   * The suite's store. It is opened in beforeAll, after the suite body ran, so this is a stand-in
   * that forwards every call to the opened store: capture it at describe time and use it in tests.
   */
  store: Store;
  /** Unique queue names for this suite, so tests sharing the database never see each other's jobs. */
  nextQueue: () => string;
  /** Opens another store on the suite's database (multi-instance tests); the caller closes it. */
  openAnother(): Promise<Store>;
  /** Runs `fn` against a store on a database of its own, for operations that act on every queue. */
  withFreshStore(fn: (fresh: Store, freshDb: TestDatabase) => Promise<void>): Promise<void>;
}

/**
 * The shared conformance setup: one database of `kind` per suite (a PostgreSQL schema or a SQLite
 * file), opened before its tests and closed and dropped after them, with per-suite queue names.
 */
export function useConformanceDatabase(kind: StoreKind, queuePrefix: string): ConformanceHarness {
  let db: TestDatabase | undefined;
  let opened: Store | undefined;
  let setupError: unknown;
  beforeAll(async () => {
    // A setup failure (PostgreSQL or pgbouncer missing in CI) is rethrown by every test, so each
    // counts as failed with the real reason; a throwing beforeAll would report them as skipped.
    try {
      db = await createTestDatabase(kind);
      opened = await db.open();
    } catch (error) {
      setupError = error;
    }
  });
  afterAll(async () => {
    await opened?.close();
    await db?.drop();
  });
  const current = (): Store => {
    if (setupError !== undefined) throw setupError;
    if (!opened) throw new Error('the conformance store is used before beforeAll opened it');
    return opened;
  };
  const store = new Proxy({} as Store, {
    get(_target, key) {
      const target = current();
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return {
    store,
    nextQueue: queueNamer(`${queuePrefix}_${kind}`),
    openAnother: () => {
      if (!db) throw new Error('the conformance database is used before beforeAll created it');
      return db.open();
    },
    async withFreshStore(fn) {
      const freshDb = await createTestDatabase(kind);
      const fresh = await freshDb.open();
      try {
        await fn(fresh, freshDb);
      } finally {
        await fresh.close();
        await freshDb.drop();
      }
    },
  };
}
