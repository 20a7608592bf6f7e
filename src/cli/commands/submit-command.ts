/**
 * `docket submit`: writes one job and prints its id. Flag values go to `docket.submit` as given
 * (number-like text as numbers): the library validates them, so the CLI refuses exactly what the
 * library and the HTTP API refuse, naming the same field with the same message.
 */
import { Command } from '@commander-js/extra-typings';
import { normalizeSubmit, type SubmitInput } from '../../job/job-spec.js';
import { databaseOption, jsonOption, withDocket } from '../open-cli-docket.js';
import { instantText, jsonFlag, numberText } from '../option-parsers.js';
import { printError, printJson, printLine } from '../output.js';

/** Builds the `submit` command. */
export function submitCommand() {
  const command = new Command('submit')
    .description('submit one job and print its id (stdout holds only the id unless --json)')
    .requiredOption('--kind <kind>', 'which handler runs it, e.g. email.send')
    .option('--payload <json>', 'the payload as JSON text', jsonFlag)
    .option(
      '--run-at <instant>',
      'earliest start: RFC 3339 with an offset (2030-01-01T09:00:00Z) or epoch milliseconds',
      instantText,
    )
    .option('--delay-ms <n>', 'start this many milliseconds after now (not with --run-at)', numberText)
    .option('--queue <name>', 'queue name (default: default)')
    .option('--priority <n>', 'lower runs first, -32768..32767 (default 0)', numberText)
    .option('--max-attempts <n>', 'claims before the job is parked, 1..1000 (default 5)', numberText)
    .option(
      '--idempotency-key <key>',
      'a repeat with the same key, queue and kind, while the first job is live, returns its id',
    )
    .option('--timeout-ms <n>', 'per-attempt time limit', numberText)
    .option('--jitter-ms <n>', 'spread the start uniformly over [runAt, runAt + n)', numberText)
    .addOption(databaseOption())
    .addOption(jsonOption());
  return command.action(async (options) => {
    const input: SubmitInput = {
      kind: options.kind,
      ...(options.payload !== undefined ? { payload: options.payload } : {}),
      ...(options.runAt !== undefined ? { runAt: options.runAt as never } : {}),
      ...(options.delayMs !== undefined ? { delayMs: options.delayMs as number } : {}),
      ...(options.queue !== undefined ? { queue: options.queue } : {}),
      ...(options.priority !== undefined ? { priority: options.priority as number } : {}),
      ...(options.maxAttempts !== undefined ? { maxAttempts: options.maxAttempts as number } : {}),
      ...(options.idempotencyKey !== undefined ? { idempotencyKey: options.idempotencyKey } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs as number } : {}),
      ...(options.jitterMs !== undefined ? { jitterMs: options.jitterMs as number } : {}),
    };
    // Validated before the store is opened, so bad input cannot even create an empty database.
    normalizeSubmit(input);
    const result = await withDocket(options as Record<string, unknown>, 'create', (docket) => docket.submit(input));
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
