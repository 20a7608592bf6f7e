/**
 * `npm run simulate`: the seeded simulator from the command line. Prints its figures and the
 * failing seeds (replay one with `--from <seed> --seeds 1`); exits 1 on any violation.
 *
 *   npm run simulate -- --seeds 5000 --store both
 */
import { Command } from 'commander';
import { formatSummary, runSimulation } from './simulation-runner.js';

const program = new Command()
  .name('simulate')
  .option('--seeds <n>', 'how many seeds', '200')
  .option('--from <n>', 'first seed', '0')
  .option('--store <store>', 'sqlite, postgres or both', 'sqlite');
program.parse();
const args = program.opts();
const stores = args.store === 'both' ? (['sqlite', 'postgres'] as const) : [args.store as 'sqlite' | 'postgres'];

let failed = false;
for (const store of stores) {
  const summary = await runSimulation(store, Number(args.from), Number(args.seeds));
  console.log(formatSummary(summary));
  for (const violation of summary.violations.slice(0, 50)) console.log(`VIOLATION ${violation}`);
  if (summary.violations.length > 0) failed = true;
}
console.log(`simulate: ${failed ? 'FAILED' : 'passed'}`);
process.exit(failed ? 1 : 0);
