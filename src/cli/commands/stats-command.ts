/** `docket stats`: job counts by queue and state. */
import { Command } from '@commander-js/extra-typings';
import { databaseOption, jsonOption, withDocket } from '../open-cli-docket.js';
import { formatTable, printJson, printLine } from '../output.js';

/** Builds the `stats` command. */
export function statsCommand() {
  return new Command('stats')
    .description('job counts by queue: scheduled, available (due), running, done, cancelled, dead')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const stats = await withDocket(options.db, (docket) => docket.queueStats());
      if (options.json) {
        printJson(stats);
        return;
      }
      if (stats.length === 0) {
        printLine('no jobs');
        return;
      }
      printLine(
        formatTable(
          ['QUEUE', 'SCHEDULED', 'AVAILABLE', 'RUNNING', 'DONE', 'CANCELLED', 'DEAD'],
          stats.map((row) => [
            row.queue,
            String(row.scheduled),
            String(row.available),
            String(row.running),
            String(row.done),
            String(row.cancelled),
            String(row.dead),
          ]),
        ),
      );
    });
}
