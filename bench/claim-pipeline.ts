/**
 * How a default worker's claims line up on a deep backlog: this tree against another checkout,
 * alternating rounds. Each round, for each tree: a fresh schema, `--jobs` no-op jobs submitted,
 * then `docket.worker({ concurrency })` in this process (every other option default) drains them
 * while the store's `jobClaim` is timed. Printed per round: jobs/s from the worker's start until
 * its handler ran every job, the claims, their mean size, the most in flight at once, and the
 * share of the drain during which at least one claim was in flight ("claim loop busy": near 100 %
 * means the drain waits on its claims one after the other). Then medians and the ratio of rates.
 *
 *   npx tsx bench/claim-pipeline.ts --baseline /tmp/docket-main [--jobs 100000] [--rounds 3] [--concurrency 24]
 *
 * The baseline is a checkout with node_modules (docs/benchmarks.md, "Before and after a change").
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import type { ClaimedJob } from '../src/job/job.js';
import type { JobClaimParams } from '../src/store/store.js';
import { handledCountdown, importDocket, THIS_CHECKOUT } from './checkouts.js';
import { median } from './stats.js';

const KIND = 'bench.noop';
const url = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

interface RoundResult {
  jobsPerSec: number;
  claims: number;
  meanClaimSize: number;
  mostInFlight: number;
  busyShare: number;
}

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    jobs: { type: 'string', default: '100000' },
    rounds: { type: 'string', default: '3' },
    concurrency: { type: 'string', default: '24' },
  },
});
for (const name of ['jobs', 'rounds', 'concurrency'] as const) {
  if (!/^[1-9]\d*$/.test(values[name])) {
    throw new Error(`--${name} must be a positive integer, got ${JSON.stringify(values[name])}`);
  }
}
if (!values.baseline) throw new Error('--baseline DIR (a checkout of Docket with node_modules) is required');
const trees = [
  { name: 'this', dir: THIS_CHECKOUT },
  { name: 'baseline', dir: resolve(values.baseline) },
];
const results: Record<string, RoundResult[]> = { this: [], baseline: [] };
for (let round = 1; round <= Number(values.rounds); round += 1) {
  for (const tree of round % 2 === 1 ? trees : [...trees].reverse()) {
    const result = await drain(tree.dir, `pipeline_${tree.name}_${process.pid}`);
    results[tree.name]?.push(result);
    console.log(
      `round ${round} ${tree.name.padEnd(8)} ${Math.round(result.jobsPerSec)} jobs/s, ${result.claims} claims of ` +
        `${result.meanClaimSize.toFixed(0)} on average, at most ${result.mostInFlight} in flight, ` +
        `claim loop busy ${(result.busyShare * 100).toFixed(0)} %`,
    );
  }
}
const rate = (name: string) => median((results[name] ?? []).map((r) => r.jobsPerSec));
const busy = (name: string) => median((results[name] ?? []).map((r) => r.busyShare));
console.log(
  `median: this ${Math.round(rate('this'))} jobs/s (claim loop busy ${(busy('this') * 100).toFixed(0)} %), ` +
    `baseline ${Math.round(rate('baseline'))} jobs/s (${(busy('baseline') * 100).toFixed(0)} %), ratio ${(rate('this') / rate('baseline')).toFixed(2)}`,
);

async function drain(dir: string, schema: string): Promise<RoundResult> {
  const jobs = Number(values.jobs);
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  const Docket = await importDocket(dir);
  const docket = await Docket.open({ url, schema });
  try {
    for (let i = 0; i < jobs; i += 1000) {
      const size = Math.min(1000, jobs - i);
      await docket.submitMany(Array.from({ length: size }, (_, k) => ({ kind: KIND, payload: { i: i + k } })));
    }
    const { handled, done } = handledCountdown(jobs);
    docket.handle(KIND, async () => handled());
    // Time the store's claims: how many, how large, how many at once, and when any was in flight.
    const store = docket.store;
    const claim = store.jobClaim.bind(store);
    let claims = 0;
    let claimed = 0;
    let inFlight = 0;
    let mostInFlight = 0;
    let busySince = 0;
    let busyMs = 0;
    store.jobClaim = async (params: JobClaimParams): Promise<ClaimedJob[]> => {
      if (inFlight === 0) busySince = performance.now();
      inFlight += 1;
      mostInFlight = Math.max(mostInFlight, inFlight);
      try {
        const answer = await claim(params);
        claims += 1;
        claimed += answer.length;
        return answer;
      } finally {
        inFlight -= 1;
        if (inFlight === 0) busyMs += performance.now() - busySince;
      }
    };
    const startedAt = performance.now();
    const worker = docket.worker({ concurrency: Number(values.concurrency) });
    await worker.start();
    await done;
    const wallMs = performance.now() - startedAt;
    await worker.stop();
    return {
      jobsPerSec: (jobs * 1000) / wallMs,
      claims,
      meanClaimSize: claims > 0 ? claimed / claims : 0,
      mostInFlight,
      busyShare: Math.min(1, busyMs / wallMs),
    };
  } finally {
    await docket.close();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.end();
  }
}
