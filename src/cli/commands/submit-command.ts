/** `docket submit`: writes one job and prints its id. */
import { Command, Option } from '@commander-js/extra-typings';
import { databaseOption, jsonOption, withDocket } from '../open-cli-docket.js';
import { instantFlag, integerFlag, jsonFlag } from '../option-parsers.js';
import { printError, printJson, printLine } from '../output.js';

/** Builds the `submit` command. */
export function submitCommand() {
  return new Command('submit')
    .description('submit one job and print its id (stdout holds only the id unless --json)')
    .requiredOption('--kind <kind>', 'which handler runs it, e.g. email.send')
    .option('--payload <json>', 'the payload as JSON text', jsonFlag)
    .addOption(
      new Option('--run-at <iso>', 'earliest start, ISO-8601 (e.g. 2030-01-01T09:00:00Z)')
        .argParser(instantFlag)
        .conflicts('delayMs'),
    )
    .option('--delay-ms <n>', 'start this many milliseconds after now', integerFlag(0))
    .option('--queue <name>', 'queue name (default: default)')
    .option('--priority <n>', 'lower runs first (default 0)', integerFlag(-32768, 32767))
    .option('--max-attempts <n>', 'claims before the job is parked (default 5)', integerFlag(1, 1000))
    .option('--idempotency-key <key>', 'a repeat with the same key, while the first job is live, returns its id')
    .option('--timeout-ms <n>', 'per-attempt time limit', integerFlag(1))
    .option('--jitter-ms <n>', 'spread the start uniformly over [runAt, runAt + n)', integerFlag(0))
    .addOption(databaseOption())
    .addOption(jsonOption())
    .action(async (options) => {
      const result = await withDocket(options.db, (docket) =>
        docket.submit({
          kind: options.kind,
          ...(options.payload !== undefined ? { payload: options.payload } : {}),
          ...(options.runAt !== undefined ? { runAt: options.runAt } : {}),
          ...(options.delayMs !== undefined ? { delayMs: options.delayMs } : {}),
          ...(options.queue !== undefined ? { queue: options.queue } : {}),
          ...(options.priority !== undefined ? { priority: options.priority } : {}),
          ...(options.maxAttempts !== undefined ? { maxAttempts: options.maxAttempts } : {}),
          ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
          ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
          ...(options.jitterMs !== undefined ? { jitterMs: options.jitterMs } : {}),
        }),
      );
      if (options.json) {
        printJson(result);
        return;
      }
      printLine(result.id);
      if (!result.created) {
        printError(`note: idempotency key matched live job ${result.id}; nothing new was written`);
      }
    });
}
