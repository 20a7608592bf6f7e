/**
 * `docket shards list|drain|resume` for a sharded store (`--shards a,b,c`, docs/sharding.md):
 * list the shards with their numbers and live work; drain one before removing it (no new work is
 * routed to it, its schedules move to the other shards, its jobs run where they are) and, with
 * `--wait`, report when it is empty; resume undoes a drain.
 */
import { Argument, Command, Option } from '@commander-js/extra-typings';
import type { Docket } from '../../docket.js';
import { type ShardAdmin, shardAdminOf } from '../../store/open-store.js';
import { usageError } from '../cli-error.js';
import { databaseOption, jsonOption, type StoreFlags, withDocket } from '../open-cli-docket.js';
import { integerFlag } from '../option-parsers.js';
import { formatTable, printJson, printLine } from '../output.js';

const urlArgument = () => new Argument('<url>', 'the shard, as listed in --shards');

function shardedStoreOf(docket: Docket): ShardAdmin {
  const admin = shardAdminOf(docket.store);
  if (!admin) throw usageError('docket shards needs a sharded store: give --shards url1,url2,… (or DOCKET_SHARDS)');
  return admin;
}

/** Builds the `shards` command group. */
export function shardsCommand() {
  const shards = new Command('shards').description('list, drain and resume the shards of a sharded store');

  shards
    .command('list')
    .description('every shard with its number, state and live (pending or running) jobs')
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const rows = await withDocket(options as StoreFlags, 'read', async (docket) => {
        const store = shardedStoreOf(docket);
        return Promise.all(
          store.describeShards().map(async (shard) => ({ ...shard, ...(await store.shardLoad(shard.url)) })),
        );
      });
      if (options.json) printJson(rows);
      else
        printLine(
          formatTable(
            ['NUMBER', 'SHARD', 'STATE', 'LIVE JOBS', 'SCHEDULES'],
            rows.map((row) => [
              String(row.number),
              row.url,
              row.draining ? 'draining' : 'active',
              String(row.live),
              String(row.schedules),
            ]),
          ),
        );
    });

  shards
    .command('drain')
    .description('stop routing new work to a shard and move its schedules away; --wait reports when it is empty')
    .addArgument(urlArgument())
    .addOption(new Option('--wait', 'wait until the shard holds no live job, then say it can be removed'))
    .addOption(
      new Option('--poll-ms <ms>', 'how often --wait checks, ms').argParser(integerFlag(100, 3_600_000)).default(2000),
    )
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (url, options) => {
      const outcome = await withDocket(options as StoreFlags, 'write', async (docket) => {
        const store = shardedStoreOf(docket);
        const drained = await store.setDraining(url, true);
        let load = await store.shardLoad(url);
        if (!options.json) {
          printLine(
            `shard ${drained.number} is draining: no new jobs go to it; ${drained.schedulesMoved} schedule(s) moved; ${load.live} live job(s) left`,
          );
        }
        while (options.wait && load.live + load.schedules > 0) {
          await new Promise((resolve) => setTimeout(resolve, options.pollMs));
          load = await store.shardLoad(url);
          if (!options.json) printLine(`shard ${drained.number}: ${load.live} live job(s) left`);
        }
        return { ...drained, ...load };
      });
      if (options.json) printJson({ ...outcome, empty: outcome.live === 0 && outcome.schedules === 0 });
      else if (outcome.live === 0 && outcome.schedules === 0) {
        printLine(`shard ${outcome.number} is empty: remove it from the shard list of every process`);
      }
    });

  shards
    .command('resume')
    .description('route new work to a drained shard again')
    .addArgument(urlArgument())
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (url, options) => {
      const outcome = await withDocket(options as StoreFlags, 'write', (docket) =>
        shardedStoreOf(docket).setDraining(url, false),
      );
      if (options.json) printJson(outcome);
      else printLine(`shard ${outcome.number} takes new jobs again`);
    });

  return shards;
}
