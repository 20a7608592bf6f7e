/**
 * The per-file setup the integration suites share, so each file reads as the behaviour it checks:
 * one fresh database per `describe.each(storeKinds())` block, dropped after it, plus either
 * in-process Dockets closed after every test ({@link useInProcessDockets}) or real worker
 * processes stopped after every test ({@link useChildWorkers}).
 *
 * Call these inside the describe callback: they register that block's beforeAll/afterEach/afterAll
 * hooks. What they hand back is read through getters, because the database only exists once
 * beforeAll has run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { Docket, seededRandom } from '../../../src/index.js';
import { createTestDatabase, type StoreKind, type TestDatabase } from '../../support/stores.js';
import { type ChildWorker, startChildWorker, stopChildWorker } from './child-worker.js';

/** The seed of a test file's random draws: DOCKET_SEED replays a run, otherwise it varies per run. */
export const SEED = Number(process.env.DOCKET_SEED ?? Date.now() % 100_000);

/** What {@link useInProcessDockets} gives a suite. */
export interface InProcessDockets {
  /** The block's database (valid inside tests). */
  readonly db: TestDatabase;
  /** Opens a Docket on the database with random seeded from {@link SEED}; it is closed after the test. */
  open(): Promise<Docket>;
  /** Closes `docket` (opened with other options) after the test too; returns it. */
  closeAfterTest(docket: Docket): Docket;
}

/**
 * One database of `kind` for the block, and Dockets on it closed after each test. `label` names
 * the suite in the seed line printed at the start, so a failing run can be replayed.
 */
export function useInProcessDockets(kind: StoreKind, label: string): InProcessDockets {
  let db: TestDatabase | undefined;
  const dockets: Docket[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    console.log(`${label} on ${kind}: seed ${SEED} (replay with DOCKET_SEED=${SEED})`);
  });

  afterEach(async () => {
    await Promise.all(dockets.splice(0).map((docket) => docket.close()));
  });

  afterAll(async () => {
    await db?.drop();
  });

  const fixture: InProcessDockets = {
    get db() {
      if (!db) throw new Error('the test database is used before beforeAll created it');
      return db;
    },
    async open() {
      // Each Docket of a test draws its own sequence, yet the whole file replays from one seed.
      return fixture.closeAfterTest(
        await Docket.open({ url: fixture.db.url, random: seededRandom(SEED + dockets.length) }),
      );
    },
    closeAfterTest(docket) {
      dockets.push(docket);
      return docket;
    },
  };
  return fixture;
}

/** What {@link useChildWorkers} gives a suite. */
export interface ChildWorkers {
  /** The block's database (valid inside tests). */
  readonly db: TestDatabase;
  /** A Docket on the database for submitting and inspecting, open for the whole block. */
  readonly docket: Docket;
  /** A temporary directory for the block's ledgers, removed after it. */
  readonly dir: string;
  /** Starts a fixture worker process on the database (`url` is filled in); it is stopped after the test. */
  spawn(config: Record<string, unknown>): Promise<ChildWorker>;
}

/**
 * One database of `kind` for the block with a Docket on it, a ledger directory named after
 * `dirPrefix`, and worker processes stopped after each test.
 */
export function useChildWorkers(kind: StoreKind, dirPrefix: string): ChildWorkers {
  let db: TestDatabase | undefined;
  let docket: Docket | undefined;
  let dir: string | undefined;
  const children: ChildWorker[] = [];

  beforeAll(async () => {
    db = await createTestDatabase(kind);
    docket = await Docket.open({ url: db.url });
    dir = mkdtempSync(join(tmpdir(), dirPrefix));
  });

  afterEach(async () => {
    await Promise.all(
      children.splice(0).map((child) => {
        // A child a test froze with SIGSTOP would never act on SIGTERM: let it run again first.
        child.process.kill('SIGCONT');
        return stopChildWorker(child);
      }),
    );
  });

  afterAll(async () => {
    await docket?.close();
    await db?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const ready = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the ${what} is used before beforeAll created it`);
    return value;
  };
  return {
    get db() {
      return ready(db, 'test database');
    },
    get docket() {
      return ready(docket, 'docket');
    },
    get dir() {
      return ready(dir, 'ledger directory');
    },
    async spawn(config) {
      const child = await startChildWorker({ url: ready(db, 'test database').url, ...config });
      children.push(child);
      return child;
    },
  };
}

/** Polls `read` until `accept` holds (a condition in the database, not a fixed sleep); rejects after `ms`. */
export async function eventually<T>(
  read: () => Promise<T>,
  accept: (value: T) => boolean,
  ms: number,
  what: string,
): Promise<T> {
  const deadline = Date.now() + ms;
  let last: T = await read();
  while (!accept(last)) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms; last seen ${JSON.stringify(last)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
    last = await read();
  }
  return last;
}
