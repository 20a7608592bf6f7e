/**
 * What the hot statements cost the client: CPU (`process.cpuUsage()`) and wall time of one
 * `submitMany` of 1,000 jobs and of one claim of 524 (a tuned worker's claim: concurrency 24 +
 * prefetch 500), through Docket's own API, this tree against another checkout, alternating call
 * by call on the same machine (decision 0012).
 *
 *   npx tsx bench/statement-costs.ts --baseline /tmp/docket-main            8 rounds of 10 calls each
 *   npx tsx bench/statement-costs.ts --baseline DIR --rounds 4 --calls 20
 *
 * Each round gives each tree a fresh schema with 20,000 pending jobs; the claims take 524 of them
 * at a time (`includeLapsed: false`, the statement a busy worker sends), the submits add more.
 * Printed: medians per tree and the ratio this ÷ baseline. The baseline is a checkout with
 * node_modules (docs/benchmarks.md, "Before and after a change").
 */
import { parseArgs } from 'node:util';
import pg from 'pg';
import { Docket } from '../src/docket.js';
import { importDocket } from './checkouts.js';
import { median } from './stats.js';

const url = process.env.DOCKET_BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const { values: args } = parseArgs({
  options: {
    baseline: { type: 'string' },
    rounds: { type: 'string', default: '8' },
    calls: { type: 'string', default: '10' },
  },
});
if (!args.baseline) throw new Error('--baseline DIR (a checkout of Docket with node_modules) is required');
const rounds = Number(args.rounds);
const calls = Number(args.calls);
const CLAIM = 524;
const BACKLOG = 20_000;

type DocketClass = Pick<typeof Docket, 'open'>;
const trees: { name: string; Docket: DocketClass; schema: string }[] = [
  { name: 'this', Docket, schema: 'stmt_cost_this' },
  {
    name: 'baseline',
    Docket: await importDocket(args.baseline),
    schema: 'stmt_cost_base',
  },
];

const admin = new pg.Client({ connectionString: url });
await admin.connect();
const jobs = (n: number, offset = 0) =>
  Array.from({ length: n }, (_, i) => ({ kind: 'bench.noop', payload: { i: offset + i, note: 'say "hi"' } }));
const samples = new Map<string, number[]>();
const record = (key: string, value: number) => {
  const values = samples.get(key) ?? [];
  values.push(value);
  samples.set(key, values);
};

/** Runs `operation`, recording its client CPU and wall time in ms under `what`. */
async function measure(tree: string, what: string, operation: () => Promise<unknown>): Promise<void> {
  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  await operation();
  const wallMs = performance.now() - startedAt;
  const cpu = process.cpuUsage(cpuBefore);
  record(`${what} cpu ${tree}`, (cpu.user + cpu.system) / 1000);
  record(`${what} wall ${tree}`, wallMs);
}

try {
  for (let round = 1; round <= rounds; round++) {
    const opened: Docket[] = [];
    for (const tree of trees) {
      await admin.query(`DROP SCHEMA IF EXISTS ${tree.schema} CASCADE`);
      const docket = (await tree.Docket.open({ url, schema: tree.schema })) as Docket;
      for (let i = 0; i < BACKLOG; i += 10_000) await docket.submitMany(jobs(10_000, i));
      opened.push(docket);
    }
    for (let call = 0; call < calls; call++) {
      // Alternate which tree goes first, so neither always meets the other's freshly dirtied pages.
      const order = call % 2 === 0 ? [0, 1] : [1, 0];
      for (const index of order) {
        const tree = trees[index]!;
        const docket = opened[index]!;
        await measure(tree.name, 'submitMany(1,000)', () => docket.submitMany(jobs(1_000)));
        await measure(tree.name, `claim(${CLAIM})`, async () => {
          const claimed = await docket.store.jobClaim({
            owner: 'statement-costs',
            limit: CLAIM,
            leaseMs: 60_000,
            includeLapsed: false,
          });
          if (claimed.length !== CLAIM) throw new Error(`claimed ${claimed.length}, expected ${CLAIM}`);
        });
      }
    }
    for (const docket of opened) await docket.close();
    process.stdout.write(`round ${round} done\n`);
  }
  const keys = [...new Set([...samples.keys()].map((key) => key.replace(/ (this|baseline)$/, '')))];
  for (const key of keys) {
    const mine = median(samples.get(`${key} this`)!);
    const theirs = median(samples.get(`${key} baseline`)!);
    console.log(
      `${key.padEnd(28)} this ${mine.toFixed(2)} ms, baseline ${theirs.toFixed(2)} ms, ratio ${(mine / theirs).toFixed(2)}`,
    );
  }
} finally {
  for (const tree of trees) await admin.query(`DROP SCHEMA IF EXISTS ${tree.schema} CASCADE`);
  await admin.end();
}
