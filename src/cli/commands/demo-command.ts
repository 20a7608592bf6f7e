/** `docket demo`: the live demo of leases, fencing, backoff and dead letters. */
import { Command } from '@commander-js/extra-typings';
import { failure } from '../cli-error.js';
import { DEMO_DEFAULT_URL, runDemo } from '../demo/run-demo.js';

/** Builds the `demo` command. */
export function demoCommand() {
  return new Command('demo')
    .description(
      'play the Docket story live: claims under leases, a worker killed mid-job, a stale completion refused, backoff into the dead-letter table (~30 s; --fast ~10 s)',
    )
    .option(
      '--db <url>',
      `store URL (default ${DEMO_DEFAULT_URL}); a SQLite store is deleted and recreated each run, so only one the demo created is accepted`,
    )
    .option('--force', 'use a --db the demo did not create (a SQLite file is deleted!)')
    .option('--fast', 'shorter leases and backoff (1 s lease, retries after 0.5, 1, 2, 4 s)')
    .action(async (options) => {
      const ok = await runDemo({ db: options.db, fast: options.fast ?? false, force: options.force ?? false });
      if (!ok) throw failure('the demo story did not play out as expected (see the checks above)');
    });
}
