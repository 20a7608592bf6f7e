/** `docket dead list|retry|purge`: the dead-letter table, through Docket's admin operations. */
import { Argument, Command } from '@commander-js/extra-typings';
import { parseInstant } from '../../job/instant.js';
import { failure, usageError } from '../cli-error.js';
import { databaseOption, jsonOption, type StoreFlags, withDocket } from '../open-cli-docket.js';
import { afterFlag, collectJobIds, filterFlags, instantText, jobIdArgument, limitFlag } from '../option-parsers.js';
import { formatInstant, formatTable, printJson, printLine } from '../output.js';

/** Builds the `dead` command group. */
export function deadCommand() {
  const dead = new Command('dead').description('inspect, retry and purge parked (dead-letter) jobs');

  dead
    .command('list')
    .description('list parked jobs ordered by id, with their last error')
    .option('--queue <name>', 'only this queue')
    .option('--kind <kind>', 'only this kind')
    .option('--limit <n>', 'at most n jobs, 1 to 1000 (default 100)', limitFlag)
    .option('--after <id>', 'only jobs after this id in the list order', afterFlag)
    .option('--id-from <id>', 'only ids from this one (inclusive)', filterFlags.idFrom)
    .option('--id-to <id>', 'only ids up to this one (inclusive)', filterFlags.idTo)
    .option('--run-at-from <instant>', 'only run-at from this instant (RFC 3339 or epoch ms)', filterFlags.runAtFrom)
    .option('--run-at-to <instant>', 'only run-at before this instant', filterFlags.runAtTo)
    .option('--payload <filter>', 'one payload equality, e.g. "payload.customerId = 42"', filterFlags.payload)
    .option('--order <order>', 'asc (default, oldest first) or desc', filterFlags.order)
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const list = await withDocket(options as StoreFlags, 'read', (docket) =>
        docket.listDeadLetters({
          queue: options.queue,
          kind: options.kind,
          limit: options.limit,
          afterId: options.after,
          idFrom: options.idFrom,
          idTo: options.idTo,
          runAtFrom: options.runAtFrom,
          runAtTo: options.runAtTo,
          payload: options.payload,
          order: options.order,
        }),
      );
      if (options.json) printJson(list);
      else if (list.length === 0) printLine('no dead letters');
      else
        printLine(
          formatTable(
            ['ID', 'QUEUE', 'KIND', 'ATTEMPTS', 'PARKED AT', 'LAST ERROR'],
            list.map((job) => [
              job.id,
              job.queue,
              job.kind,
              `${job.attempts}/${job.maxAttempts}`,
              formatInstant(job.finishedAt),
              job.errors.at(-1)?.message ?? '-',
            ]),
          ),
        );
    });

  dead
    .command('retry')
    .description('move a parked job back to pending, due now, with fresh attempts (its id and error history kept)')
    .addArgument(new Argument('<id>', 'job id').argParser(jobIdArgument))
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (id, options) => {
      const job = await withDocket(options as StoreFlags, 'write', (docket) => docket.retryDeadLetter(id));
      if (job === null) throw failure(`job ${id} is not in the dead-letter table`);
      if (options.json) printJson(job);
      else printLine(`job ${id} is pending again, due ${formatInstant(job.runAt)}`);
    });

  dead
    .command('purge')
    .description('delete parked jobs for good: by id, or parked before a time (one of them is required)')
    .option('--id <ids>', 'purge these ids (repeatable, or comma-separated)', collectJobIds)
    .option(
      '--before <instant>',
      'purge every job parked before this instant: RFC 3339 with an offset, or epoch milliseconds',
      instantText,
    )
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      // Refused rather than "purge everything": an empty filter wiping the table is one typo away.
      if (options.id === undefined && options.before === undefined) throw usageError('give --id or --before');
      // Docket's one instant parser, as the library and POST /v1/dead-letters/purge use it.
      const parkedBefore = options.before === undefined ? undefined : parseInstant('parkedBefore', options.before);
      const purged = await withDocket(options as StoreFlags, 'write', (docket) =>
        docket.purgeDeadLetters({ ids: options.id, parkedBefore }),
      );
      if (options.json) printJson({ purged });
      else printLine(`purged ${purged} dead letter${purged === 1 ? '' : 's'}`);
    });

  return dead;
}
