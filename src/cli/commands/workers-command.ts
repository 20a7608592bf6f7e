/** `docket workers list`: the live worker registry, local and remote, through `docket.listWorkers()`. */
import { Command } from '@commander-js/extra-typings';
import { databaseOption, jsonOption, type StoreFlags, withDocket } from '../open-cli-docket.js';
import { formatInstant, formatTable, printJson, printLine } from '../output.js';

/** Builds the `workers` command group. */
export function workersCommand() {
  const workers = new Command('workers').description('the live workers sharing this store');

  workers
    .command('list')
    .description(
      'every live worker (local and remote) with its queues, kinds, concurrency and last heartbeat; expired ones are not listed',
    )
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const list = await withDocket(options as StoreFlags, 'read', (docket) => docket.listWorkers());
      if (options.json) printJson(list);
      else if (list.length === 0) printLine('no live workers');
      else
        printLine(
          formatTable(
            ['ID', 'ORIGIN', 'HOST', 'PID', 'QUEUES', 'KINDS', 'CONCURRENCY', 'STARTED AT', 'LAST SEEN'],
            list.map((worker) => [
              worker.id,
              worker.origin,
              worker.host || '-',
              worker.pid === null ? '-' : String(worker.pid),
              worker.queues === null ? 'all' : worker.queues.join(','),
              worker.kinds === null
                ? `all${worker.excludeKinds.length > 0 ? ` but ${worker.excludeKinds.join(',')}` : ''}`
                : worker.kinds.join(','),
              String(worker.concurrency),
              formatInstant(worker.startedAt),
              formatInstant(worker.lastSeenAt),
            ]),
          ),
        );
    });

  return workers;
}
