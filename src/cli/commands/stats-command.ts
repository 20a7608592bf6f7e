/**
 * `docket stats`: job counts by queue and state, and how many due jobs no live worker can run
 * (`unhandled`: their queue and kind are served by no worker in the registry; they wait, pending,
 * for one). `--kinds` breaks the unhandled jobs down by kind. `--json` prints `docket.queueStats()`
 * as the library returns it; with `--kinds`, `{ queues, unhandled }` where `unhandled` is
 * `docket.unhandledJobs()` (queue, kind, count).
 */
import { Command } from '@commander-js/extra-typings';
import { databaseOption, jsonOption, type StoreFlags, withDocket } from '../open-cli-docket.js';
import { formatTable, printJson, printLine } from '../output.js';

/** Builds the `stats` command. */
export function statsCommand() {
  return new Command('stats')
    .description(
      'job counts by queue: scheduled, available (due), running, done, cancelled, dead, and unhandled (due, no live worker serves them)',
    )
    .option('--kinds', 'also list the unhandled jobs by queue and kind')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const { stats, unhandled } = await withDocket(options as StoreFlags, 'read', async (docket) => ({
        stats: await docket.queueStats(),
        unhandled: options.kinds ? await docket.unhandledJobs() : [],
      }));
      if (options.json) {
        printJson(options.kinds ? { queues: stats, unhandled } : stats);
        return;
      }
      if (stats.length === 0) {
        printLine('no jobs');
        return;
      }
      printLine(
        formatTable(
          ['QUEUE', 'SCHEDULED', 'AVAILABLE', 'RUNNING', 'DONE', 'CANCELLED', 'DEAD', 'UNHANDLED'],
          stats.map((row) => [
            `${row.queue}${row.paused ? ' (paused)' : ''}`,
            String(row.scheduled),
            String(row.available),
            String(row.running),
            String(row.done),
            String(row.cancelled),
            String(row.dead),
            String(row.unhandled),
          ]),
        ),
      );
      if (options.kinds) {
        printLine();
        printLine(
          unhandled.length === 0
            ? 'no unhandled jobs: every due job has a live worker for its queue and kind'
            : formatTable(
                ['QUEUE', 'KIND', 'UNHANDLED'],
                unhandled.map((row) => [row.queue, row.kind, String(row.count)]),
              ),
        );
      }
    });
}
