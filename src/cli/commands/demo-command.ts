/** `docket demo`: the live demo of leases, fencing, backoff and dead letters. */
import { Command } from '@commander-js/extra-typings';
import { failure, usageError } from '../cli-error.js';
import { DEMO_DEFAULT_URL, runDemo } from '../demo/run-demo.js';
import { waitForStopSignal } from '../stop-signal.js';

/** Builds the `demo` command. */
export function demoCommand() {
  return new Command('demo')
    .description(
      'play the Docket story live: claims under leases, a worker killed mid-job, a stale completion refused, backoff into the dead-letter table (~30 s; --fast ~10 s); with --serve, then open the dashboard over the story’s store',
    )
    .option(
      '--db <url>',
      `store URL (default ${DEMO_DEFAULT_URL}); a SQLite store is deleted and recreated each run, so only one the demo created is accepted`,
    )
    .option('--force', 'use a --db the demo did not create (a SQLite file is deleted!)')
    .option('--fast', 'shorter leases and backoff (1 s lease, retries after 0.5, 1, 2, 4 s)')
    .option(
      '--serve',
      'after the story, serve the dashboard and the HTTP API over the demo’s store on 127.0.0.1 until Ctrl-C',
    )
    .option('--port <port>', 'port of --serve (default 8080; 0 picks a free one)')
    .action(async (options) => {
      if (options.port !== undefined && !options.serve) throw usageError('--port applies to --serve only; add --serve');
      const ok = await runDemo({ db: options.db, fast: options.fast ?? false, force: options.force ?? false });
      if (options.serve) await serveDemoStore(options.db ?? DEMO_DEFAULT_URL, options.port);
      if (!ok) throw failure('the demo story did not play out as expected (see the checks above)');
    });
}

/**
 * Serves the dashboard over the demo's store: `docket serve`'s own configuration parser and
 * server, on loopback without tokens (the API's tokenless rules apply), no local workers.
 */
async function serveDemoStore(url: string, port: string | undefined): Promise<void> {
  const { loadServerConfig, startServer } = await import('../../http/server.js');
  // The URL carries a PostgreSQL ?schema=, as for the story itself.
  const config = loadServerConfig({
    flags: { db: url, host: '127.0.0.1', port: port ?? '8080', concurrency: '0', logLevel: 'warn' },
    env: {},
  });
  const stopRequested = waitForStopSignal();
  const server = await startServer({ config });
  process.stdout.write(
    `\nDashboard: ${server.url}/  (the story's jobs, the dead letter and its Retry button; Ctrl-C stops it)\n`,
  );
  await stopRequested;
  await server.close();
}
