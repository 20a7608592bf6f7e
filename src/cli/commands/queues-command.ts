/**
 * `docket queues list|pause|resume`: pause a queue so claims skip it (its jobs wait, nothing is
 * lost), and resume it, through Docket's admin operations.
 */
import { Argument, Command } from '@commander-js/extra-typings';
import { databaseOption, jsonOption, type StoreFlags, withDocket } from '../open-cli-docket.js';
import { formatInstant, formatTable, printJson, printLine } from '../output.js';

const nameArgument = () => new Argument('<name>', 'queue name');

/** Builds the `queues` command group. */
export function queuesCommand() {
  const queues = new Command('queues').description('pause and resume queues');

  queues
    .command('list')
    .description('every queue with jobs or a pause state, with its counts and whether it is paused')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const { stats, states } = await withDocket(options as StoreFlags, 'read', async (docket) => ({
        stats: await docket.queueStats(),
        states: await docket.listQueues(),
      }));
      const byName = new Map(states.map((state) => [state.name, state]));
      const names = [...new Set([...stats.map((row) => row.queue), ...states.map((state) => state.name)])].sort();
      const rows = names.map((name) => {
        const counts = stats.find((row) => row.queue === name);
        const state = byName.get(name);
        return {
          name,
          paused: state?.paused ?? false,
          pausedAt: state?.pausedAt ?? null,
          available: counts?.available ?? 0,
          scheduled: counts?.scheduled ?? 0,
          running: counts?.running ?? 0,
        };
      });
      if (options.json) printJson(rows);
      else if (rows.length === 0) printLine('no queues');
      else
        printLine(
          formatTable(
            ['QUEUE', 'STATE', 'PAUSED AT', 'AVAILABLE', 'SCHEDULED', 'RUNNING'],
            rows.map((row) => [
              row.name,
              row.paused ? 'paused' : 'active',
              formatInstant(row.pausedAt),
              String(row.available),
              String(row.scheduled),
              String(row.running),
            ]),
          ),
        );
    });

  queues
    .command('pause')
    .description('claims skip this queue until it is resumed; its jobs wait')
    .addArgument(nameArgument())
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (name, options) => {
      const state = await withDocket(options as StoreFlags, 'write', (docket) => docket.pauseQueue(name));
      if (options.json) printJson(state);
      else printLine(`queue ${name} is paused (since ${formatInstant(state.pausedAt)})`);
    });

  queues
    .command('resume')
    .description('claims take this queue again; its due jobs start at once')
    .addArgument(nameArgument())
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (name, options) => {
      const state = await withDocket(options as StoreFlags, 'write', (docket) => docket.resumeQueue(name));
      if (options.json) printJson(state);
      else printLine(`queue ${name} is active`);
    });

  return queues;
}
