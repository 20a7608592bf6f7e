/**
 * A backlog spread over many kinds or priorities (decision 0026): the PostgreSQL claim walks one
 * (queue, kind, priority) triple per distinct group of pending jobs, so a service with a hundred
 * job kinds, or jobs over many priority values, pays per group. Measured, for this tree and a
 * baseline checkout in alternating child processes (each loads one tree):
 *
 * - **drain**: `--jobs` no-op jobs already queued, spread round-robin over K kinds and P
 *   priorities (job i has kind i % K and priority (i × 7919) % P), drained by one default
 *   `docket.worker()` (every option default but a handler per kind): jobs/s, the store's claims,
 *   rows asked and got per claim, and a claim's mean round trip;
 * - **claim**: on the same backlog, freshly queued and analysed, 15 claims each of 10, 100 and
 *   500 jobs through the store (`includeLapsed: false`, every kind), the median round trip.
 *
 *   npx tsx bench/claim-many-groups.ts --baseline /tmp/base                        every shape, 3 rounds, PostgreSQL
 *   npx tsx bench/claim-many-groups.ts --baseline DIR --shapes 100x1,1x1000 --jobs 20000 --rounds 5
 *   npx tsx bench/claim-many-groups.ts --baseline DIR --store sqlite               the embedded store (a WAL file)
 *   npx tsx bench/claim-many-groups.ts --baseline . --store sqlite --shapes 1x1,1x10,1x10b   priorities spread or blocked
 *
 * A shape is `KxP`: K kinds by P priorities, each priority's jobs spread evenly through the
 * backlog as queued (job i's priority is (i × 7919) % P); `KxPb` queues them in blocks instead
 * (job i's priority is ⌊i × P / jobs⌋), so one priority's rows sit together in the table. On
 * SQLite the two drain at very different paces though their claims read the same rows: a claim
 * of one priority's rows, spread through the table, writes many more pages. Each child makes and drops its own scratch database
 * (PostgreSQL: bench/pg-admin.ts, BENCH_PG_URL's server; SQLite: a file in the temp directory).
 * Printed: each run, then per shape and measure the medians of both trees and their ratio this ÷
 * baseline.
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { ClaimedJob } from '../src/job/job.js';
import type { JobClaimParams } from '../src/store/store.js';
import { handledCountdown, importDocket, runCheckoutChild, THIS_CHECKOUT } from './checkouts.js';
import { dropDatabase, recreateDatabase, scratchName, withAdmin } from './pg-admin.js';
import { median } from './stats.js';

const CHILD = 'child';
const CLAIM_LIMITS = [10, 100, 500] as const;
const CLAIMS_PER_LIMIT = 15;
const SUBMIT_BATCH = 1000;
const DRAIN_TIMEOUT_MS = 300_000;

interface Shape {
  kinds: number;
  priorities: number;
  /** How a priority's jobs lie in the backlog as queued: spread evenly, or queued together. */
  layout: 'spread' | 'blocked';
}

/** The shape as written on the command line: `KxP`, or `KxPb` for blocked priorities. */
function shapeName(shape: Shape): string {
  return `${shape.kinds}x${shape.priorities}${shape.layout === 'blocked' ? 'b' : ''}`;
}

interface ChildResult {
  drainJobsPerSecond: number;
  claims: number;
  meanLimit: number;
  meanGot: number;
  meanClaimMs: number;
  /** Median claim round trip (ms) by claim limit. */
  claimMs: Record<string, number>;
}

type StoreName = 'postgres' | 'sqlite';

if (process.argv[2] === CHILD) {
  const [dir, jobs, shape, storeName] = process.argv.slice(3);
  const result = await runChild(
    dir ?? '',
    Number(jobs),
    parseShapes(shape ?? '')[0]!,
    storeName === 'sqlite' ? 'sqlite' : 'postgres',
  );
  console.log(JSON.stringify(result));
  process.exit(0);
} else {
  runParent();
}

function parseShapes(text: string): Shape[] {
  return text.split(',').map((part) => {
    const match = /^([1-9]\d*)x([1-9]\d*)(b?)$/.exec(part.trim());
    if (!match)
      throw new Error(
        `--shapes takes KxP pairs (kinds x priorities) like 100x1, or KxPb for priorities queued in blocks, got ${JSON.stringify(part)}`,
      );
    const shape: Shape = {
      kinds: Number(match[1]),
      priorities: Number(match[2]),
      layout: match[3] === 'b' ? 'blocked' : 'spread',
    };
    if (shape.priorities > 65_536) throw new Error(`at most 65,536 priorities (a smallint), got ${shape.priorities}`);
    return shape;
  });
}

function runParent(): void {
  const { values } = parseArgs({
    options: {
      baseline: { type: 'string' },
      jobs: { type: 'string', default: '50000' },
      rounds: { type: 'string', default: '3' },
      shapes: { type: 'string', default: '1x1,10x1,100x1,1000x1,1x10,1x1000' },
      store: { type: 'string', default: 'postgres' },
    },
  });
  if (values.store !== 'postgres' && values.store !== 'sqlite') {
    throw new Error(`--store must be postgres or sqlite, got ${JSON.stringify(values.store)}`);
  }
  if (!values.baseline) throw new Error('--baseline DIR (a checkout of Docket with node_modules) is required');
  for (const name of ['jobs', 'rounds'] as const) {
    if (!/^[1-9]\d*$/.test(values[name])) {
      throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(values[name])}`);
    }
  }
  const claimed = CLAIMS_PER_LIMIT * CLAIM_LIMITS.reduce((sum, limit) => sum + limit, 0);
  if (Number(values.jobs) < claimed) {
    throw new Error(
      `--jobs must be at least ${claimed} (the claims' ${CLAIMS_PER_LIMIT} of each limit), got ${values.jobs}`,
    );
  }
  const shapes = parseShapes(values.shapes);
  const trees = [
    { name: 'this', dir: THIS_CHECKOUT },
    { name: 'baseline', dir: resolve(values.baseline) },
  ];
  const results = new Map<string, ChildResult[]>();
  for (let round = 1; round <= Number(values.rounds); round += 1) {
    for (const shape of shapes) {
      for (const tree of round % 2 === 1 ? trees : [...trees].reverse()) {
        const label = `${shapeName(shape)} ${tree.name}`;
        const result = runCheckoutChild<ChildResult>(
          fileURLToPath(import.meta.url),
          [CHILD, tree.dir, values.jobs, shapeName(shape), values.store],
          tree.dir,
          `${label} round ${round}`,
        );
        results.set(label, [...(results.get(label) ?? []), result]);
        const claims = CLAIM_LIMITS.map((limit) => `${limit}: ${result.claimMs[limit]?.toFixed(2)} ms`).join(', ');
        console.log(
          `round ${round} ${label}: drain ${result.drainJobsPerSecond.toFixed(0)} jobs/s (${result.claims} claims, ` +
            `asked ${result.meanLimit.toFixed(0)}, got ${result.meanGot.toFixed(1)}, ${result.meanClaimMs.toFixed(1)} ms each); claim ${claims}`,
        );
      }
    }
  }
  console.log(`\nmedians of ${values.rounds} rounds, ${values.jobs} jobs, ${values.store} (this / baseline, ratio)`);
  const pair = (shape: Shape, pick: (result: ChildResult) => number, digits: number) => {
    const of = (name: string) => median((results.get(`${shapeName(shape)} ${name}`) ?? []).map(pick));
    const [mine, theirs] = [of('this'), of('baseline')];
    return `${mine.toFixed(digits)} / ${theirs.toFixed(digits)} (${(mine / theirs).toFixed(2)}x)`;
  };
  for (const shape of shapes) {
    const claims = CLAIM_LIMITS.map(
      (limit) => `claim of ${limit} ${pair(shape, (result) => result.claimMs[limit] ?? Number.NaN, 2)} ms`,
    ).join('; ');
    console.log(
      `${shape.kinds} kinds x ${shape.priorities} priorities${shape.layout === 'blocked' ? ' (blocked)' : ''}: drain ${pair(shape, (result) => result.drainJobsPerSecond, 0)} jobs/s; ${claims}`,
    );
  }
}

/** Queues `jobs` jobs of the shape into a fresh database and returns the open Docket and the kinds. */
async function queueBacklog(dir: string, url: string, jobs: number, shape: Shape) {
  const Docket = await importDocket(dir);
  const docket = await Docket.open({ url });
  const kinds = Array.from({ length: shape.kinds }, (_, k) => `bench.kind${k}`);
  for (let start = 0; start < jobs; start += SUBMIT_BATCH) {
    const batch = [];
    for (let i = start; i < Math.min(jobs, start + SUBMIT_BATCH); i += 1) {
      const priority =
        shape.layout === 'blocked' ? Math.floor((i * shape.priorities) / jobs) : (i * 7919) % shape.priorities;
      batch.push({ kind: kinds[i % shape.kinds]!, payload: { i }, priority });
    }
    await docket.submitMany(batch);
  }
  if (url.startsWith('postgres')) await withAdmin((client) => client.query('ANALYZE docket.jobs'), url);
  return { docket, kinds };
}

async function runChild(dir: string, jobs: number, shape: Shape, storeName: StoreName): Promise<ChildResult> {
  const name = scratchName(`groups_${shapeName(shape)}`);
  const sqlitePath = join(tmpdir(), `${name}.db`);
  const removeSqlite = () => {
    for (const suffix of ['', '-wal', '-shm']) rmSync(`${sqlitePath}${suffix}`, { force: true });
  };
  /** A fresh, empty database for this child. */
  const freshDatabase = async (): Promise<string> => {
    if (storeName === 'postgres') return recreateDatabase(name);
    removeSqlite();
    return `sqlite:${sqlitePath}`;
  };
  try {
    // The claims alone: no worker, the backlog as queued.
    const url = await freshDatabase();
    const claimMs: Record<string, number> = {};
    {
      const { docket, kinds } = await queueBacklog(dir, url, jobs, shape);
      for (const limit of CLAIM_LIMITS) {
        const times: number[] = [];
        for (let i = 0; i < CLAIMS_PER_LIMIT; i += 1) {
          const started = performance.now();
          await docket.store.jobClaim({ owner: 'bench', limit, leaseMs: 600_000, kinds, includeLapsed: false });
          times.push(performance.now() - started);
        }
        claimMs[limit] = median(times);
      }
      await docket.close();
    }
    // The drain: a fresh backlog, one default worker.
    const { docket, kinds } = await queueBacklog(dir, await freshDatabase(), jobs, shape);
    const store = docket.store;
    const claim = store.jobClaim.bind(store);
    let [claims, asked, got, claimTotalMs] = [0, 0, 0, 0];
    store.jobClaim = async (params: JobClaimParams): Promise<ClaimedJob[]> => {
      const started = performance.now();
      const claimed = await claim(params);
      claims += 1;
      asked += params.limit;
      got += claimed.length;
      claimTotalMs += performance.now() - started;
      return claimed;
    };
    const countdown = handledCountdown(jobs);
    for (const kind of kinds) docket.handle(kind, () => countdown.handled());
    const started = performance.now();
    const worker = docket.worker();
    await worker.start();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      countdown.done,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`drain not done in ${DRAIN_TIMEOUT_MS} ms`)), DRAIN_TIMEOUT_MS);
      }),
    ]);
    clearTimeout(timer);
    const seconds = (performance.now() - started) / 1000;
    await worker.stop();
    await docket.close();
    return {
      drainJobsPerSecond: jobs / seconds,
      claims,
      meanLimit: asked / claims,
      meanGot: got / claims,
      meanClaimMs: claimTotalMs / claims,
      claimMs,
    };
  } finally {
    if (storeName === 'postgres') await dropDatabase(name);
    else removeSqlite();
  }
}
