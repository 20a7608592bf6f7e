/**
 * A worker's own CPU time for one drain, this tree against another checkout, alternating rounds:
 * the figure behind "no regression" claims on a shared machine. Throughput depends on how busy the
 * other cores are; the CPU a worker process spends per job much less so.
 *
 *   npx tsx bench/worker-cpu.ts --baseline /tmp/docket-main            20,000 jobs, prefetch 500, 8 rounds
 *   npx tsx bench/worker-cpu.ts --baseline DIR --jobs 10000 --prefetch 0 --rounds 5
 *
 * Each round, for each tree in turn: a fresh schema, `--jobs` no-op jobs submitted, then a child
 * process of that tree opens Docket, starts `docket.worker({ concurrency, prefetch })` (`--concurrency`,
 * default 10) and
 * reports `process.cpuUsage()`, wall time and the time spent in garbage collection (the `gc`
 * performance entries) from start until its handler ran every job, and (PostgreSQL) the CPU every
 * `postgres` process on this machine spent meanwhile, read from /proc: the database's share of the
 * drain, which a plan reading more rows than it writes shows first. Printed: each round, then the
 * medians and the ratios this ÷ baseline. `--prefetch auto` leaves the option
 * out (each tree's own default). `--store sqlite` drains a fresh SQLite file (in the temp folder)
 * instead of a PostgreSQL schema. `--fillfactor N` (PostgreSQL, this tree only) sets the jobs
 * table's fillfactor after Docket migrated it and before the jobs are submitted, so `--baseline .`
 * compares a table layout on the same code; each round then also prints the submit rate and the
 * jobs table's heap size after the drain, which the layout trades against. `--retention-ms N`
 * (this tree only) opens this tree's Docket with that retention, so `--baseline . --retention-ms 0`
 * compares completions that delete the row with completions that keep it (decision 0022). The baseline is a
 * checkout with node_modules (see
 * docs/benchmarks.md, "Before and after a change"), or `raw-sql`: the bench's raw-SQL reference
 * worker (bench/systems/raw-sql.ts: claims of 500, a fenced batch finish, nothing else) on the
 * same jobs, each round in a scratch database of its own, so the gap between Docket's worker and
 * the least a worker on its schema must do is read in CPU, not in a noisy rate.
 *
 * Each child loads the one tree it measures, and nothing of Docket's besides (the raw-SQL driver,
 * which brings this checkout's Docket with it, only in the raw-SQL child). A child that had loaded
 * this checkout's modules as well as the baseline's ran the same SQLite drain on 1.4x less CPU than
 * a child that had loaded one copy, in every round: the extra modules shifted when V8's young-
 * generation collections fell, and with them how many claimed jobs each one copied
 * (docs/benchmarks.md, "A/A runs").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { handledCountdown, importDocket, runCheckoutChild, THIS_CHECKOUT } from './checkouts.js';
import { postgresCpuByPid, postgresCpuSinceMs } from './host-cpu.js';
import { databaseUrl, dropDatabase, recreateDatabase, scratchName } from './pg-admin.js';
import { median } from './stats.js';

const CHILD = 'child';
/** The `--baseline` value that names the raw-SQL reference worker instead of a checkout. */
const RAW_SQL = 'raw-sql';
const KIND = 'bench.noop';
const url = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

if (process.argv[2] === CHILD) {
  await runChild(
    process.argv[3] ?? '',
    process.argv[4] ?? '',
    Number(process.argv[5]),
    process.argv[6] ?? 'auto',
    process.argv[7] === 'sqlite' ? 'sqlite' : 'postgres',
    Number(process.argv[8] ?? 10),
    process.argv[9] ?? 'none',
    process.argv[10] ?? 'none',
  );
} else {
  await runParent();
}

async function runParent(): Promise<void> {
  const { values } = parseArgs({
    options: {
      baseline: { type: 'string' },
      jobs: { type: 'string', default: '20000' },
      prefetch: { type: 'string', default: '500' },
      rounds: { type: 'string', default: '8' },
      store: { type: 'string', default: 'postgres' },
      concurrency: { type: 'string', default: '10' },
      fillfactor: { type: 'string' },
      'retention-ms': { type: 'string' },
    },
  });
  if (values.store !== 'postgres' && values.store !== 'sqlite') {
    throw new Error(`--store must be postgres or sqlite, got ${JSON.stringify(values.store)}`);
  }
  if (!/^[1-9]\d*$/.test(values.concurrency)) {
    throw new Error(`--concurrency must be a positive integer, got ${JSON.stringify(values.concurrency)}`);
  }
  const fillfactor = values.fillfactor ?? 'none';
  if (values.fillfactor !== undefined) {
    const percent = Number(values.fillfactor);
    // PostgreSQL's own bounds for a table's fillfactor.
    if (!Number.isInteger(percent) || percent < 10 || percent > 100) {
      throw new Error(`--fillfactor must be an integer from 10 to 100, got ${JSON.stringify(values.fillfactor)}`);
    }
    if (values.store !== 'postgres') throw new Error('--fillfactor applies to PostgreSQL only (--store postgres)');
  }
  const retentionMs = values['retention-ms'] ?? 'none';
  if (retentionMs !== 'none' && !/^\d+$/.test(retentionMs)) {
    throw new Error(`--retention-ms must be an integer of 0 or more, got ${JSON.stringify(retentionMs)}`);
  }
  if (!values.baseline) {
    throw new Error(`--baseline DIR (a checkout of Docket with node_modules) or --baseline ${RAW_SQL} is required`);
  }
  if (values.baseline === RAW_SQL && values.store !== 'postgres') {
    throw new Error(`--baseline ${RAW_SQL} runs on PostgreSQL only (--store postgres)`);
  }
  const trees = [
    { name: 'this', dir: THIS_CHECKOUT },
    { name: 'baseline', dir: values.baseline === RAW_SQL ? RAW_SQL : resolve(values.baseline) },
  ];
  const cpu: Record<string, number[]> = { this: [], baseline: [] };
  const wall: Record<string, number[]> = { this: [], baseline: [] };
  const gc: Record<string, number[]> = { this: [], baseline: [] };
  const db: Record<string, number[]> = { this: [], baseline: [] };
  const submitRate: Record<string, number[]> = { this: [], baseline: [] };
  const heap: Record<string, number[]> = { this: [], baseline: [] };
  for (let round = 1; round <= Number(values.rounds); round += 1) {
    for (const tree of round % 2 === 1 ? trees : [...trees].reverse()) {
      const schema = `cpu_${tree.name}_${process.pid}`;
      const result = runCheckoutChild<{
        cpuMs: number;
        wallMs: number;
        gcMs: number;
        dbCpuMs: number | null;
        submitPerSec: number;
        heapMiB: number | null;
      }>(
        fileURLToPath(import.meta.url),
        [
          CHILD,
          tree.dir,
          schema,
          values.jobs,
          values.prefetch,
          values.store,
          values.concurrency,
          tree.name === 'this' ? fillfactor : 'none',
          tree.name === 'this' ? retentionMs : 'none',
        ],
        tree.dir === RAW_SQL ? THIS_CHECKOUT : tree.dir,
        `${tree.name} round ${round}`,
      );
      cpu[tree.name]?.push(result.cpuMs);
      wall[tree.name]?.push(result.wallMs);
      gc[tree.name]?.push(result.gcMs);
      if (result.dbCpuMs !== null) db[tree.name]?.push(result.dbCpuMs);
      submitRate[tree.name]?.push(result.submitPerSec);
      if (result.heapMiB !== null) heap[tree.name]?.push(result.heapMiB);
      const dbPart = result.dbCpuMs === null ? '' : `, database ${result.dbCpuMs.toFixed(0)} ms`;
      const layoutPart =
        fillfactor === 'none'
          ? ''
          : `; submitted ${result.submitPerSec.toFixed(0)}/s${result.heapMiB === null ? '' : `, heap after ${result.heapMiB.toFixed(1)} MiB`}`;
      console.log(
        `round ${round} ${tree.name.padEnd(8)} cpu ${result.cpuMs.toFixed(0)} ms, gc ${result.gcMs.toFixed(0)} ms${dbPart}, wall ${result.wallMs.toFixed(0)} ms${layoutPart}`,
      );
    }
  }
  const [mine, theirs] = [median(cpu.this ?? []), median(cpu.baseline ?? [])];
  console.log(
    `worker CPU median: this ${mine.toFixed(0)} ms, baseline ${theirs.toFixed(0)} ms, ratio ${(mine / theirs).toFixed(2)}`,
  );
  const [mineGc, theirsGc] = [median(gc.this ?? []), median(gc.baseline ?? [])];
  console.log(
    `GC median: this ${mineGc.toFixed(0)} ms, baseline ${theirsGc.toFixed(0)} ms, ratio ${(mineGc / theirsGc).toFixed(2)}`,
  );
  if ((db.this ?? []).length > 0 && (db.baseline ?? []).length > 0) {
    const [mineDb, theirsDb] = [median(db.this ?? []), median(db.baseline ?? [])];
    const perJob = (ms: number) => ((ms * 1000) / Number(values.jobs)).toFixed(1);
    console.log(
      `database CPU median: this ${mineDb.toFixed(0)} ms (${perJob(mineDb)} us a job), baseline ${theirsDb.toFixed(0)} ms (${perJob(theirsDb)} us a job), ratio ${(mineDb / theirsDb).toFixed(2)}`,
    );
  }
  const [mineWall, theirsWall] = [median(wall.this ?? []), median(wall.baseline ?? [])];
  console.log(`wall median: this ${mineWall.toFixed(0)} ms, baseline ${theirsWall.toFixed(0)} ms (load-dependent)`);
  if (fillfactor !== 'none') {
    const [mineSubmit, theirsSubmit] = [median(submitRate.this ?? []), median(submitRate.baseline ?? [])];
    console.log(
      `submit median: this ${mineSubmit.toFixed(0)}/s, baseline ${theirsSubmit.toFixed(0)}/s, ratio ${(mineSubmit / theirsSubmit).toFixed(2)}`,
    );
    if ((heap.this ?? []).length > 0 && (heap.baseline ?? []).length > 0) {
      const [mineHeap, theirsHeap] = [median(heap.this ?? []), median(heap.baseline ?? [])];
      console.log(`jobs heap after the drain: this ${mineHeap.toFixed(1)} MiB, baseline ${theirsHeap.toFixed(1)} MiB`);
    }
  }
}

async function runChild(
  dir: string,
  schema: string,
  jobs: number,
  prefetch: string,
  store: 'postgres' | 'sqlite',
  concurrency: number,
  fillfactor: string,
  retentionMs: string,
): Promise<void> {
  // The raw-SQL reference's statements name Docket's default schema: it gets a database of its own.
  const rawDatabase = dir === RAW_SQL ? scratchName('cpu_raw') : undefined;
  if (rawDatabase) await recreateDatabase(rawDatabase);
  const admin = store === 'postgres' && !rawDatabase ? new pg.Client({ connectionString: url }) : undefined;
  await admin?.connect();
  await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const sqliteDir = store === 'sqlite' ? mkdtempSync(join(tmpdir(), `docket-${schema}-`)) : undefined;
  const Docket = await importDocket(rawDatabase ? THIS_CHECKOUT : dir);
  const retention = retentionMs === 'none' ? {} : { retentionMs: Number(retentionMs) };
  const docket = await Docket.open(
    sqliteDir
      ? { url: `sqlite:${join(sqliteDir, 'docket.db')}`, ...retention }
      : rawDatabase
        ? { url: databaseUrl(rawDatabase) }
        : { url, schema, ...retention },
  );
  try {
    if (fillfactor !== 'none')
      await admin?.query(`ALTER TABLE ${schema}.jobs SET (fillfactor = ${Number(fillfactor)})`);
    const submitStartedAt = performance.now();
    for (let i = 0; i < jobs; i += 1000) {
      const size = Math.min(1000, jobs - i);
      await docket.submitMany(Array.from({ length: size }, (_, k) => ({ kind: KIND, payload: { i: i + k } })));
    }
    const submitPerSec = (jobs * 1000) / (performance.now() - submitStartedAt);
    const { handled: onStart, done } = handledCountdown(jobs);
    docket.handle(KIND, async () => onStart());
    // Collections are where a worker's per-job garbage costs it: summed from the gc entries.
    let gcMs = 0;
    const gcObserver = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) gcMs += entry.duration;
    });
    gcObserver.observe({ entryTypes: ['gc'] });
    const dbCpuBefore = store === 'postgres' ? postgresCpuByPid() : null;
    const cpuBefore = process.cpuUsage();
    const startedAt = performance.now();
    let worker: { stop(): Promise<void> };
    if (rawDatabase) {
      const config = { system: 'raw-sql', variant: 'tuned', concurrency, redisUrl: '', redisPrefix: '' } as const;
      const { rawSqlSystem } = await import('./systems/raw-sql.js');
      worker = await rawSqlSystem.startWorker({ ...config, databaseUrl: databaseUrl(rawDatabase) }, onStart);
    } else {
      const docketWorker = docket.worker(
        prefetch === 'auto' ? { concurrency } : { concurrency, prefetch: Number(prefetch) },
      );
      await docketWorker.start();
      worker = docketWorker;
    }
    await done;
    const wallMs = performance.now() - startedAt;
    const used = process.cpuUsage(cpuBefore);
    const dbCpuMs = dbCpuBefore === null ? null : postgresCpuSinceMs(dbCpuBefore, postgresCpuByPid());
    // Entries are delivered asynchronously: let the last ones arrive before reading the sum.
    await new Promise((resolveTick) => setImmediate(resolveTick));
    gcObserver.disconnect();
    await worker.stop();
    const heap = await admin?.query<{ bytes: string }>(`SELECT pg_relation_size('${schema}.jobs') AS bytes`);
    const heapMiB = heap ? Number(heap.rows[0]?.bytes) / 1048576 : null;
    console.log(
      JSON.stringify({ cpuMs: (used.user + used.system) / 1000, wallMs, gcMs, dbCpuMs, submitPerSec, heapMiB }),
    );
  } finally {
    await docket.close();
    await admin?.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin?.end();
    if (rawDatabase) await dropDatabase(rawDatabase);
    if (sqliteDir) rmSync(sqliteDir, { recursive: true, force: true });
  }
}
