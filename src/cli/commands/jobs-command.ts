/** `docket jobs list|show|cancel`: read and cancel jobs through Docket's admin operations. */
import { Argument, Command } from '@commander-js/extra-typings';
import { failure } from '../cli-error.js';
import { databaseOption, jsonOption, type StoreFlags, withDocket } from '../open-cli-docket.js';
import { afterFlag, filterFlags, jobIdArgument, limitFlag, statesFlag } from '../option-parsers.js';
import { formatJob, formatTable, JOB_TABLE_HEADERS, jobRow, printJson, printLine } from '../output.js';

/** Builds the `jobs` command group. */
export function jobsCommand() {
  const jobs = new Command('jobs').description('list, show and cancel jobs');

  jobs
    .command('list')
    .description('list jobs ordered by id (page with --after <last id>)')
    .option('--state <states>', 'only these states, comma-separated: pending,running,done,cancelled,dead', statesFlag)
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
        docket.listJobs({
          states: options.state,
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
      else if (list.length === 0) printLine('no jobs');
      else printLine(formatTable(JOB_TABLE_HEADERS, list.map(jobRow)));
    });

  jobs
    .command('show')
    .description('show one job: its state, lease, token, payload and every attempt error')
    .addArgument(new Argument('<id>', 'job id').argParser(jobIdArgument))
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (id, options) => {
      const job = await withDocket(options as StoreFlags, 'read', (docket) => docket.getJob(id));
      if (job === null) throw failure(`job ${id} not found`);
      if (options.json) printJson(job);
      else printLine(formatJob(job));
    });

  jobs
    .command('cancel')
    .description('cancel a live job; a running one loses its lease, so its handler is aborted at the next heartbeat')
    .addArgument(new Argument('<id>', 'job id').argParser(jobIdArgument))
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (id, options) => {
      const outcome = await withDocket(options as StoreFlags, 'write', (docket) => docket.cancelJob(id));
      if (options.json) printJson({ id, outcome });
      if (outcome === 'not_found') throw failure(`job ${id} not found`);
      if (outcome === 'already_finished') throw failure(`job ${id} already finished; nothing to cancel`);
      if (!options.json) printLine(`cancelled job ${id}`);
    });

  return jobs;
}
