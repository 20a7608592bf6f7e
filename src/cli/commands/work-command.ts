/**
 * `docket work`: runs one worker process with the handlers from a user's module until SIGTERM or
 * SIGINT, then stops gracefully: no new claims, running handlers get the grace period, the rest
 * are aborted and their leases released so another worker can take them at once.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { createCliLogger, LOG_LEVELS } from '../cli-logger.js';
import { loadHandlers } from '../load-handlers.js';
import { databaseOption, openCliDocket, resolveDatabaseUrl } from '../open-cli-docket.js';
import { integerFlag, listFlag } from '../option-parsers.js';
import { waitForStopSignal } from '../stop-signal.js';

/** Builds the `work` command. */
export function workCommand() {
  return new Command('work')
    .description('run a worker with the handlers a module exports; SIGTERM/SIGINT stop it gracefully (exit 0)')
    .requiredOption('--handlers <path>', 'module whose default export is {kind: handler} or (docket) => void')
    .option('--concurrency <n>', 'jobs run at once (default 10)', integerFlag(1, 10_000))
    .option('--queues <names>', 'comma-separated queues to serve (default: all queues)', listFlag)
    .option('--lease-ms <n>', 'lease length per claim (default 30000)', integerFlag(1))
    .option('--heartbeat-ms <n>', 'heartbeat interval, well inside the lease (default 10000)', integerFlag(1))
    .option('--poll-ms <n>', 'poll interval when idle (default 1000)', integerFlag(1))
    .option('--grace-ms <n>', 'on stop, how long running handlers may finish (default 10000)', integerFlag(0))
    .option('--id <worker-id>', 'worker id stored as lease owner (default: <host>-<pid>-<random>)')
    .addOption(new Option('--log-level <level>', 'stderr log level').choices(LOG_LEVELS).default('info' as const))
    .addOption(databaseOption())
    .action(async (options) => {
      const logger = createCliLogger(options.logLevel);
      const docket = await openCliDocket(options.db, logger);
      try {
        const kinds = await loadHandlers(docket, options.handlers);
        const worker = docket.worker({
          ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
          ...(options.queues !== undefined ? { queues: options.queues } : {}),
          ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
          ...(options.heartbeatMs !== undefined ? { heartbeatIntervalMs: options.heartbeatMs } : {}),
          ...(options.pollMs !== undefined ? { pollIntervalMs: options.pollMs } : {}),
          ...(options.graceMs !== undefined ? { shutdownGraceMs: options.graceMs } : {}),
          ...(options.id !== undefined ? { id: options.id } : {}),
        });
        const stopRequested = waitForStopSignal((signal) =>
          logger.warn('second signal: exiting without waiting; unfinished jobs come back when their leases lapse', {
            signal,
          }),
        );
        await worker.start();
        logger.info('worker started', {
          db: redactUrl(resolveDatabaseUrl(options.db)),
          handlers: options.handlers,
          kinds: kinds ?? 'registered by setup function',
          queues: options.queues ?? 'all',
        });
        const signal = await stopRequested;
        logger.info('stopping gracefully', { signal });
        await worker.stop();
        logger.info('worker stopped');
      } finally {
        await docket.close();
      }
    });
}

/** The URL without its password, for logs. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return url;
  }
}
