/** `docket demo`: the live demo of leases, fencing, backoff and dead letters. */
import { Command } from '@commander-js/extra-typings';
import { failure } from '../cli-error.js';
import { DEMO_DEFAULT_URL, runDemo } from '../demo/run-demo.js';

/** Builds the `demo` command. */
export function demoCommand() {
  return new Command('demo')
    .description(
      'play the design story live: claims under leases, a worker killed mid-job, a stale completion refused, backoff into the dead-letter table (~30 s; --fast ~10 s)',
    )
    .option('--db <url>', `store URL (default ${DEMO_DEFAULT_URL}, deleted and recreated each run)`)
    .option('--fast', 'shorter leases and backoff (1 s lease, retries after 0.5, 1, 2, 4 s)')
    .action(async (options) => {
      const ok = await runDemo({ db: options.db, fast: options.fast ?? false });
      if (!ok) throw failure('the demo story did not play out as expected (see the checks above)');
    });
}
